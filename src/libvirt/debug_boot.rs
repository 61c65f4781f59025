//! What `debug_boot` asks of libvirt, for `LibvirtHypervisor`'s methods of the `Hypervisor`
//! trait: a domain's definition as libvirt keeps it, redefining it, starting it, its screen, its
//! keyboard, its VNC display opened to a password of its own for a while, and the files of its
//! disks. The sequence (which domain, refusing one trog did not make, what is taken back when a
//! step fails) is `workflow::debug_boot`'s.

use crate::debug_boot::guest_disk::{domain_disks, DiskFile, GuestPathError};
use crate::hypervisor::{HypervisorFault, VncDisplay};
use std::io::Read;
use std::time::Duration;
use virt::connect::Connect;
use virt::domain::Domain;

/// How long the password `--vnc` gives out lets a viewer in: time to start one and type it. A
/// connection made meanwhile stays open after it expires; a later one needs `--vnc` again.
pub const VNC_PASSWORD_LIFETIME: Duration = Duration::from_secs(600);

/// The characters of a display password: VNC's authentication reads eight, and no more.
const VNC_PASSWORD_LENGTH: usize = 8;

/// How large a screenshot may be: a 4K screen as PPM is 25 MB; more is not a screen.
const SCREENSHOT_LIMIT: usize = 64 << 20;

/// libvirt's own words for a failure, without its codes: the verb's error says what was done.
fn fault(error: virt::error::Error) -> HypervisorFault {
    HypervisorFault::new(error.message().to_string())
}

/// The definition libvirt keeps (what the next start uses), whole: with the display's password,
/// which libvirt leaves out unless asked (`VIR_DOMAIN_XML_SECURE`). A definition read without it
/// and defined again would give the guest a display without a password, open to every local
/// user, which `--vnc` then cannot give a password to either.
pub fn definition(domain: &Domain) -> Result<String, HypervisorFault> {
    domain
        .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE | virt::sys::VIR_DOMAIN_XML_SECURE)
        .map_err(fault)
}

/// Replaces a domain's definition with `xml` (the same domain: name and UUID unchanged).
pub fn redefine(connection: &Connect, xml: &str) -> Result<(), HypervisorFault> {
    connection.define_domain_xml(xml).map(|_| ()).map_err(fault)
}

pub fn start(domain: &Domain) -> Result<(), HypervisorFault> {
    domain.create().map(|_| ()).map_err(fault)
}

/// The files of the domain's disks on the hypervisor, with the format libvirt reads each in;
/// none when its definition names no disk of a storage pool.
pub fn disk_files(connection: &Connect, domain: &Domain) -> Result<Vec<DiskFile>, HypervisorFault> {
    let disks = match domain_disks(&definition(domain)?) {
        Ok(disks) => disks,
        Err(GuestPathError::NoDisk) => return Ok(Vec::new()),
        Err(other) => return Err(HypervisorFault::new(other)),
    };
    disks
        .iter()
        .map(|disk| {
            let path = connection
                .lookup_storage_pool_by_name(&disk.pool)
                .and_then(|pool| pool.lookup_storage_vol_by_name(&disk.volume))
                .and_then(|volume| volume.path())
                .map_err(fault)?;
            Ok(DiskFile {
                path,
                format: disk.format.clone(),
            })
        })
        .collect()
}

/// The screen as it is now, in the format libvirt hands over (QEMU: PPM, or PNG in newer
/// versions).
pub fn screenshot(connection: &Connect, domain: &Domain) -> Result<Vec<u8>, HypervisorFault> {
    let stream = virt::stream::Stream::new(connection, 0).map_err(fault)?;
    domain.screenshot(&stream, 0, 0).map_err(fault)?;
    let mut bytes = Vec::new();
    let mut reader = StreamReader(&stream);
    let read = (&mut reader)
        .take(SCREENSHOT_LIMIT as u64 + 1)
        .read_to_end(&mut bytes);
    if let Err(error) = read {
        let _ = stream.abort();
        return Err(HypervisorFault::new(error));
    }
    stream.finish().map_err(fault)?;
    Ok(bytes)
}

/// Presses `codes` together, held long enough for firmware that polls the keyboard.
pub fn press_keys(domain: &Domain, codes: &[u32]) -> Result<(), HypervisorFault> {
    const HOLD_MS: u32 = 50;
    let mut codes = codes.to_vec();
    domain
        .send_key(
            virt::sys::VIR_KEYCODE_SET_LINUX,
            HOLD_MS,
            codes.as_mut_ptr(),
            codes.len() as i32,
            0,
        )
        .map(|_| ())
        .map_err(fault)
}

/// Opens the running guest's VNC display to a new password until [`VNC_PASSWORD_LIFETIME`]
/// after `now_unix`; returns where it listens and the password, or `None` when it has no VNC
/// display. The display every guest is defined with has a password that expired in 1970
/// (templates/domain.xml.j2): no one can connect until someone allowed to change the domain in
/// libvirt asks for a password here.
pub fn open_vnc_display(
    domain: &Domain,
    now_unix: u64,
) -> Result<Option<VncDisplay>, HypervisorFault> {
    let xml = domain.xml_desc(0).map_err(fault)?;
    let Some((listen, port)) = vnc_display_in(&xml) else {
        return Ok(None);
    };
    let password = new_vnc_password();
    let valid_until = libvirt_utc(now_unix + VNC_PASSWORD_LIFETIME.as_secs());
    domain
        .update_device_flags(
            &vnc_password_update(&listen, port, &password, &valid_until),
            virt::sys::VIR_DOMAIN_AFFECT_LIVE,
        )
        .map_err(fault)?;
    Ok(Some(VncDisplay {
        listen,
        port,
        password,
        valid_until,
    }))
}

/// A new display password: letters and digits (what every viewer lets one type), from the
/// operating system's random source.
fn new_vnc_password() -> String {
    use rand::Rng;
    rand::rngs::OsRng
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(VNC_PASSWORD_LENGTH)
        .map(char::from)
        .collect()
}

/// `seconds` since the epoch as libvirt's `passwdValidTo` writes a time: `YYYY-MM-DDTHH:MM:SS`,
/// UTC.
fn libvirt_utc(seconds: u64) -> String {
    // `20261204T120000Z`, taken apart.
    let compact = crate::snapshot::utc_compact(seconds as i64);
    let part = |range: std::ops::Range<usize>| &compact[range];
    format!(
        "{}-{}-{}T{}:{}:{}",
        part(0..4),
        part(4..6),
        part(6..8),
        part(9..11),
        part(11..13),
        part(13..15)
    )
}

/// The `<graphics>` device a live update gives a new password: the listen address and port as
/// they are (libvirt refuses to change those of a running display), the password and its end.
fn vnc_password_update(listen: &str, port: u16, password: &str, valid_until: &str) -> String {
    format!(
        "<graphics type='vnc' port='{port}' autoport='yes' listen='{listen}' passwd='{password}' \
         passwdValidTo='{valid_until}'><listen type='address' address='{listen}'/></graphics>"
    )
}

/// The VNC listen address and port in a running domain's XML.
fn vnc_display_in(xml: &str) -> Option<(String, u16)> {
    let document = roxmltree::Document::parse(xml).ok()?;
    let graphics = document
        .descendants()
        .find(|node| node.has_tag_name("graphics") && node.attribute("type") == Some("vnc"))?;
    let port: i32 = graphics.attribute("port")?.parse().ok()?;
    let port = u16::try_from(port).ok()?;
    let listen = graphics
        .attribute("listen")
        .unwrap_or("127.0.0.1")
        .to_string();
    Some((listen, port))
}

/// A libvirt stream as `Read`.
struct StreamReader<'s>(&'s virt::stream::Stream);

impl Read for StreamReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self.0.recv(buffer) {
            Ok(count) if count >= 0 => Ok(count as usize),
            Ok(_) => Err(std::io::Error::other("the stream failed")),
            Err(error) => Err(std::io::Error::other(error.message().to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_display_password_is_new_each_time_and_what_vnc_reads() {
        let first = new_vnc_password();
        assert_eq!(first.len(), VNC_PASSWORD_LENGTH);
        assert!(first.bytes().all(|byte| byte.is_ascii_alphanumeric()));
        assert_ne!(first, new_vnc_password());
    }

    #[test]
    fn the_password_update_keeps_the_display_where_it_is_until_its_end() {
        assert_eq!(libvirt_utc(0), "1970-01-01T00:00:00");
        assert_eq!(libvirt_utc(1_796_385_600), "2026-12-04T12:00:00");
        let update = vnc_password_update("127.0.0.1", 5901, "Ab3dE6gH", "2026-12-04T12:00:00");
        let document = roxmltree::Document::parse(&update).unwrap();
        let graphics = document.root_element();
        assert_eq!(graphics.attribute("port"), Some("5901"));
        assert_eq!(graphics.attribute("listen"), Some("127.0.0.1"));
        assert_eq!(graphics.attribute("passwd"), Some("Ab3dE6gH"));
        assert_eq!(
            graphics.attribute("passwdValidTo"),
            Some("2026-12-04T12:00:00")
        );
    }

    #[test]
    fn the_vnc_port_is_read_from_the_running_definition() {
        let xml = "<domain><devices><graphics type='vnc' port='5901' autoport='yes' listen='127.0.0.1'><listen type='address' address='127.0.0.1'/></graphics></devices></domain>";
        assert_eq!(vnc_display_in(xml), Some(("127.0.0.1".into(), 5901)));
        assert_eq!(
            vnc_display_in("<domain><devices><graphics type='vnc' port='-1'/></devices></domain>"),
            None
        );
    }
}
