//! What `debug_boot` asks of libvirt: a trog guest's domain (a domain trog did not make is
//! refused), its definition as libvirt keeps it, redefining it, restarting it, its screen, its
//! keyboard, and its VNC display, opened to a password of its own for a while.

use crate::debug_boot::guest_disk::{DiskFile, DomainDisk};
use crate::libvirt::trog_tag::is_trogs;
use std::io::Read;
use std::time::Duration;
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::ErrorNumber;

/// How long `debug_boot` waits for a guest it stopped to be gone before starting it again.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// How long the password `--vnc` gives out lets a viewer in: time to start one and type it. A
/// connection made meanwhile stays open after it expires; a later one needs `--vnc` again.
pub const VNC_PASSWORD_LIFETIME: Duration = Duration::from_secs(600);

/// The characters of a display password: VNC's authentication reads eight, and no more.
const VNC_PASSWORD_LENGTH: usize = 8;

/// The guest's display, open to `password` until `valid_until` (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VncDisplay {
    pub listen: String,
    pub port: u16,
    pub password: String,
    pub valid_until: String,
}

/// How large a screenshot may be: a 4K screen as PPM is 25 MB; more is not a screen.
const SCREENSHOT_LIMIT: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DebugDomainError {
    #[error("{domain} is not defined on {hypervisor}")]
    NotFound { domain: String, hypervisor: String },
    #[error("domain {domain} on {hypervisor} was not created by trog; debug_boot leaves it alone")]
    Foreign { domain: String, hypervisor: String },
    #[error("libvirt on {hypervisor} cannot {operation} {domain}: {message}")]
    Libvirt {
        domain: String,
        hypervisor: String,
        operation: &'static str,
        message: String,
    },
    #[error("{domain} on {hypervisor} has no VNC display")]
    NoVnc { domain: String, hypervisor: String },
}

impl crate::diagnose::Diagnose for DebugDomainError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        use crate::exit_status::ExitStatus;
        match self {
            DebugDomainError::NotFound { .. } => ExitStatus::Failure,
            DebugDomainError::Foreign { .. } => ExitStatus::Conflict,
            DebugDomainError::Libvirt { .. } | DebugDomainError::NoVnc { .. } => {
                ExitStatus::Hypervisor
            }
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DebugDomainError::NotFound { .. } => {
                Some("check the name; `trog fleet` lists every hypervisor's guests".into())
            }
            DebugDomainError::Foreign { .. } => {
                Some("look at it with the tools that made it (virsh console, virt-viewer)".into())
            }
            DebugDomainError::NoVnc { .. } => {
                Some("start the guest first; its display exists only while it runs".into())
            }
            DebugDomainError::Libvirt { .. } => Some(
                "check libvirtd's log on that hypervisor; the operation can be tried with virsh"
                    .into(),
            ),
        }
    }
}

/// A domain trog made, as `debug_boot` acts on it.
pub struct DebugDomain {
    domain: Domain,
    name: String,
    hypervisor: String,
}

impl DebugDomain {
    /// The domain `name` on `connection`, refused unless it carries trog's tag.
    pub fn open(
        connection: &Connect,
        hypervisor: &str,
        name: &str,
    ) -> Result<DebugDomain, DebugDomainError> {
        let domain = match connection.lookup_domain_by_name(name) {
            Ok(domain) => domain,
            Err(error) if error.code().is(ErrorNumber::NoDomain) => {
                return Err(DebugDomainError::NotFound {
                    domain: name.to_string(),
                    hypervisor: hypervisor.to_string(),
                })
            }
            Err(error) => {
                return Err(DebugDomainError::Libvirt {
                    domain: name.to_string(),
                    hypervisor: hypervisor.to_string(),
                    operation: "look up",
                    message: error.message().to_string(),
                })
            }
        };
        let tagged = is_trogs(&domain);
        if !tagged {
            return Err(DebugDomainError::Foreign {
                domain: name.to_string(),
                hypervisor: hypervisor.to_string(),
            });
        }
        Ok(DebugDomain {
            domain,
            name: name.to_string(),
            hypervisor: hypervisor.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn failed(&self, operation: &'static str, error: virt::error::Error) -> DebugDomainError {
        DebugDomainError::Libvirt {
            domain: self.name.clone(),
            hypervisor: self.hypervisor.clone(),
            operation,
            message: error.message().to_string(),
        }
    }

    /// The definition libvirt keeps (what the next start uses), whole: with the display's
    /// password, which libvirt leaves out unless asked (`VIR_DOMAIN_XML_SECURE`). A definition
    /// read without it and defined again would give the guest a display without a password, open
    /// to every local user, which `--vnc` then cannot give a password to either.
    pub fn definition(&self) -> Result<String, DebugDomainError> {
        self.domain
            .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE | virt::sys::VIR_DOMAIN_XML_SECURE)
            .map_err(|error| self.failed("read the definition of", error))
    }

    /// Replaces the definition with `xml` (the same domain: name and UUID unchanged).
    pub fn redefine(&self, connection: &Connect, xml: &str) -> Result<(), DebugDomainError> {
        connection
            .define_domain_xml(xml)
            .map(|_| ())
            .map_err(|error| self.failed("redefine", error))
    }

    pub fn is_running(&self) -> Result<bool, DebugDomainError> {
        self.domain
            .is_active()
            .map_err(|error| self.failed("ask the state of", error))
    }

    /// The id libvirt gave the running domain; a new id means a new start.
    pub fn run_id(&self) -> Option<u32> {
        self.domain.id()
    }

    /// Starts the guest from its definition, after forcing it off if it runs: a guest being
    /// debugged may not answer a shutdown, and nothing of it is expected to be kept.
    pub fn restart(&self) -> Result<(), DebugDomainError> {
        if self.is_running()? {
            self.domain
                .destroy()
                .map_err(|error| self.failed("stop", error))?;
            let deadline = std::time::Instant::now() + STOP_WAIT;
            while self.is_running()? && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        self.domain
            .create()
            .map_err(|error| self.failed("start", error))
    }

    /// The files of the domain's disks on the hypervisor, with the format libvirt reads each in.
    pub fn disk_files(
        &self,
        connection: &Connect,
        disks: &[DomainDisk],
    ) -> Result<Vec<DiskFile>, DebugDomainError> {
        disks
            .iter()
            .map(|disk| {
                let path = connection
                    .lookup_storage_pool_by_name(&disk.pool)
                    .and_then(|pool| pool.lookup_storage_vol_by_name(&disk.volume))
                    .and_then(|volume| volume.path())
                    .map_err(|error| self.failed("find the disk files of", error))?;
                Ok(DiskFile {
                    path,
                    format: disk.format.clone(),
                })
            })
            .collect()
    }

    /// Starts the guest if it is off.
    pub fn start(&self) -> Result<(), DebugDomainError> {
        if self.is_running()? {
            return Ok(());
        }
        self.domain
            .create()
            .map_err(|error| self.failed("start", error))
    }

    /// The screen as it is now, in the format libvirt hands over (QEMU: PPM, or PNG in newer
    /// versions).
    pub fn screenshot(&self, connection: &Connect) -> Result<Vec<u8>, DebugDomainError> {
        let stream = virt::stream::Stream::new(connection, 0)
            .map_err(|error| self.failed("open a stream for the screen of", error))?;
        self.domain
            .screenshot(&stream, 0, 0)
            .map_err(|error| self.failed("take a screenshot of", error))?;
        let mut bytes = Vec::new();
        let mut reader = StreamReader(&stream);
        let read = (&mut reader)
            .take(SCREENSHOT_LIMIT as u64 + 1)
            .read_to_end(&mut bytes);
        if let Err(error) = read {
            let _ = stream.abort();
            return Err(DebugDomainError::Libvirt {
                domain: self.name.clone(),
                hypervisor: self.hypervisor.clone(),
                operation: "receive the screenshot of",
                message: error.to_string(),
            });
        }
        stream
            .finish()
            .map_err(|error| self.failed("finish the screenshot of", error))?;
        Ok(bytes)
    }

    /// Presses each event's keys together, one event after the other.
    pub fn send_keys(&self, events: &[Vec<u32>]) -> Result<(), DebugDomainError> {
        // How long each key is held, in ms: long enough for firmware that polls the keyboard.
        const HOLD_MS: u32 = 50;
        for codes in events {
            let mut codes = codes.clone();
            self.domain
                .send_key(
                    virt::sys::VIR_KEYCODE_SET_LINUX,
                    HOLD_MS,
                    codes.as_mut_ptr(),
                    codes.len() as i32,
                    0,
                )
                .map_err(|error| self.failed("send keys to", error))?;
            // Events sent back to back can merge in the guest's keyboard buffer; a pause keeps
            // them separate keystrokes.
            std::thread::sleep(Duration::from_millis(150));
        }
        Ok(())
    }

    /// Opens the running guest's VNC display to a new password until [`VNC_PASSWORD_LIFETIME`]
    /// after `now_unix`; returns where it listens and the password. The display every guest is
    /// defined with has a password that expired in 1970 (templates/domain.xml.j2): no one can
    /// connect until someone allowed to change the domain in libvirt asks for a password here.
    pub fn open_vnc_display(&self, now_unix: u64) -> Result<VncDisplay, DebugDomainError> {
        let xml = self
            .domain
            .xml_desc(0)
            .map_err(|error| self.failed("read the display of", error))?;
        let (listen, port) = vnc_display_in(&xml).ok_or_else(|| DebugDomainError::NoVnc {
            domain: self.name.clone(),
            hypervisor: self.hypervisor.clone(),
        })?;
        let password = new_vnc_password();
        let valid_until = libvirt_utc(now_unix + VNC_PASSWORD_LIFETIME.as_secs());
        self.domain
            .update_device_flags(
                &vnc_password_update(&listen, port, &password, &valid_until),
                virt::sys::VIR_DOMAIN_AFFECT_LIVE,
            )
            .map_err(|error| self.failed("give a password to the display of", error))?;
        Ok(VncDisplay {
            listen,
            port,
            password,
            valid_until,
        })
    }
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
