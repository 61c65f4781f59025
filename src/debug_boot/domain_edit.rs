//! The changes `debug_boot` makes to a domain's XML, and taking them back. They are edits of the
//! XML libvirt itself wrote (`--inactive`), line by line: libvirt writes the same XML again for
//! the same definition, so taking every change back gives the provisioned definition byte for
//! byte.
//!
//! - `--console`: the serial port's log goes to a capture file, emptied at each start
//!   (`append='off'`), and the firmware (SeaBIOS) writes to the serial port too
//!   (`<bios useserial='yes'/>`), so the capture starts at the first line of firmware.
//! - `--hold`: the firmware's boot menu, waiting [`BOOT_MENU_TIMEOUT_MS`] for a key.

/// How long the firmware's boot menu waits for a key: long enough for a person to see the screen
/// (or a script to see the console) and answer, even under software emulation; SeaBIOS takes at
/// most 65535 ms.
pub const BOOT_MENU_TIMEOUT_MS: u32 = 60_000;

const SERIAL_FIRMWARE: &str = "<bios useserial='yes'/>";

/// Where `--console` points a guest's serial port: beside the log provision gives it.
pub fn console_capture_path(domain: &str) -> String {
    format!("/var/log/libvirt/qemu/{domain}-debug-console.log")
}

fn log_element(path: &str, append: &str) -> String {
    format!("<log file='{path}' append='{append}'/>")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("the domain's serial port does not log to {expected} as provision made it")]
    SerialNotAsProvisioned { expected: String },
    #[error("the domain's XML has no <os> element")]
    NoOs,
}

/// A debug change found in a domain's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DebugChange {
    /// `--console`: the serial port logs to the capture file, the firmware writes to it.
    ConsoleCapture,
    /// `--hold`: the firmware's boot menu waits for a key.
    BootMenu,
    /// `--single`: the guest's GRUB configuration puts `single` on the kernel command line.
    SingleUser,
}

impl std::fmt::Display for DebugChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DebugChange::ConsoleCapture => {
                "the serial port writes to the capture file, and the firmware writes to it too"
            }
            DebugChange::BootMenu => "the firmware's boot menu is on",
            DebugChange::SingleUser => {
                "the guest's GRUB configuration boots the kernel with `single` (rescue mode)"
            }
        })
    }
}

/// Which debug changes `xml` carries.
pub fn debug_changes(xml: &str, capture: &str) -> Vec<DebugChange> {
    let mut changes = Vec::new();
    if xml.contains(&format!("<log file='{capture}'")) || xml.contains(SERIAL_FIRMWARE) {
        changes.push(DebugChange::ConsoleCapture);
    }
    if xml.contains("<bootmenu ") {
        changes.push(DebugChange::BootMenu);
    }
    changes
}

fn insert_in_os(xml: &str, element: &str) -> Result<String, EditError> {
    let at = xml.find("</os>").ok_or(EditError::NoOs)?;
    let line_start = xml[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent = &xml[line_start..at];
    Ok(format!("{}  {element}\n{indent}{}", &xml[..at], &xml[at..]))
}

/// `xml` with the serial port logging to `capture` (emptied at each start) and the firmware on the
/// serial port. Applying it twice changes nothing more.
pub fn with_console_capture(
    xml: &str,
    provisioned_log: &str,
    capture: &str,
) -> Result<String, EditError> {
    let provisioned = log_element(provisioned_log, "on");
    let captured = log_element(capture, "off");
    if !xml.contains(&provisioned) && !xml.contains(&captured) {
        return Err(EditError::SerialNotAsProvisioned {
            expected: provisioned_log.to_string(),
        });
    }
    let xml = xml.replace(&provisioned, &captured);
    if xml.contains(SERIAL_FIRMWARE) {
        Ok(xml)
    } else {
        insert_in_os(&xml, SERIAL_FIRMWARE)
    }
}

/// `xml` with the firmware's boot menu on.
pub fn with_boot_menu(xml: &str) -> Result<String, EditError> {
    if xml.contains("<bootmenu ") {
        return Ok(xml.to_string());
    }
    insert_in_os(
        xml,
        &format!("<bootmenu enable='yes' timeout='{BOOT_MENU_TIMEOUT_MS}'/>"),
    )
}

/// `xml` with every debug change taken back.
pub fn as_provisioned(xml: &str, provisioned_log: &str, capture: &str) -> String {
    let xml = xml.replace(
        &log_element(capture, "off"),
        &log_element(provisioned_log, "on"),
    );
    let mut out = String::with_capacity(xml.len());
    for line in xml.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed == SERIAL_FIRMWARE || trimmed.starts_with("<bootmenu ") {
            continue;
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVISIONED: &str = "<domain type='qemu'>
  <os>
    <type arch='x86_64' machine='pc-q35-10.0'>hvm</type>
  </os>
  <devices>
    <serial type='pty'>
      <log file='/var/log/libvirt/qemu/g.test-serial.log' append='on'/>
      <target type='isa-serial' port='0'/>
    </serial>
    <console type='pty'>
      <log file='/var/log/libvirt/qemu/g.test-serial.log' append='on'/>
      <target type='serial' port='0'/>
    </console>
  </devices>
</domain>
";
    const LOG: &str = "/var/log/libvirt/qemu/g.test-serial.log";

    #[test]
    fn console_and_boot_menu_are_added_and_taken_back_exactly() {
        let capture = console_capture_path("g.test");
        let console = with_console_capture(PROVISIONED, LOG, &capture).unwrap();
        assert!(console.contains(
            "    <type arch='x86_64' machine='pc-q35-10.0'>hvm</type>\n    <bios useserial='yes'/>\n  </os>"
        ));
        assert_eq!(
            console
                .matches("g.test-debug-console.log' append='off'")
                .count(),
            2
        );
        assert_eq!(
            with_console_capture(&console, LOG, &capture).unwrap(),
            console
        );
        let held = with_boot_menu(&console).unwrap();
        assert!(held.contains("<bootmenu enable='yes' timeout='60000'/>"));
        assert_eq!(with_boot_menu(&held).unwrap(), held);
        assert_eq!(
            debug_changes(&held, &capture),
            [DebugChange::ConsoleCapture, DebugChange::BootMenu]
        );
        assert_eq!(as_provisioned(&held, LOG, &capture), PROVISIONED);
        assert!(debug_changes(PROVISIONED, &capture).is_empty());
    }

    #[test]
    fn a_serial_port_provision_did_not_make_is_not_touched() {
        let other = PROVISIONED.replace(LOG, "/elsewhere.log");
        assert!(matches!(
            with_console_capture(&other, LOG, &console_capture_path("g.test")),
            Err(EditError::SerialNotAsProvisioned { .. })
        ));
    }
}
