//! A guest's domain as `debug_boot` acts on it, through the [`Hypervisor`] trait: one trog made
//! (a domain trog did not make is refused), its definition, restarting it, its screen, its
//! keyboard, its display and the files of its disks, each failure said with what was being done.

use crate::debug_boot::guest_disk::DiskFile;
use crate::hypervisor::{Hypervisor, HypervisorFault, Presence, VncDisplay};
use std::time::{Duration, Instant};

/// How long `debug_boot` waits for a guest it stopped to be gone before starting it again.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// How often a guest being stopped is asked whether it is gone.
const STOP_POLL: Duration = Duration::from_millis(200);

/// The pause between two keystrokes: events sent back to back can merge in the guest's keyboard
/// buffer; a pause keeps them separate keystrokes.
const KEY_PAUSE: Duration = Duration::from_millis(150);

#[derive(Debug, thiserror::Error)]
pub enum DebugDomainError {
    #[error("{domain} is not defined on {hypervisor}")]
    NotFound { domain: String, hypervisor: String },
    #[error("domain {domain} on {hypervisor} was not created by trog; debug_boot leaves it alone")]
    Foreign { domain: String, hypervisor: String },
    /// The backend's own words follow the colon: they are the message, not a cause of it.
    #[error("{backend} on {hypervisor} cannot {operation} {domain}: {fault}")]
    Backend {
        backend: &'static str,
        domain: String,
        hypervisor: String,
        operation: &'static str,
        fault: HypervisorFault,
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
            DebugDomainError::Backend { .. } | DebugDomainError::NoVnc { .. } => {
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
            DebugDomainError::Backend { backend, .. } => Some(match *backend {
                "libvirt" => "check libvirtd's log on that hypervisor; the operation can be tried \
                              with virsh"
                    .to_string(),
                other => format!("check {other}'s log on that hypervisor"),
            }),
        }
    }
}

/// A domain trog made, on the hypervisor `debug_boot` opened.
pub struct DebugDomain<'h> {
    hypervisor: &'h dyn Hypervisor,
    name: String,
}

impl<'h> DebugDomain<'h> {
    /// The domain `name` on `hypervisor`, refused unless it is there and trog's.
    pub fn open(
        hypervisor: &'h dyn Hypervisor,
        name: &str,
    ) -> Result<DebugDomain<'h>, DebugDomainError> {
        let domain = DebugDomain {
            hypervisor,
            name: name.to_string(),
        };
        match hypervisor
            .presence(name)
            .map_err(|fault| domain.failed("look up", fault))?
        {
            Presence::Trogs => Ok(domain),
            Presence::Absent => Err(DebugDomainError::NotFound {
                domain: name.to_string(),
                hypervisor: hypervisor.name().to_string(),
            }),
            Presence::Foreign => Err(DebugDomainError::Foreign {
                domain: name.to_string(),
                hypervisor: hypervisor.name().to_string(),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hypervisor the domain is on.
    pub fn hypervisor(&self) -> &'h dyn Hypervisor {
        self.hypervisor
    }

    fn failed(&self, operation: &'static str, fault: HypervisorFault) -> DebugDomainError {
        DebugDomainError::Backend {
            backend: self.hypervisor.backend(),
            domain: self.name.clone(),
            hypervisor: self.hypervisor.name().to_string(),
            operation,
            fault,
        }
    }

    /// The definition the hypervisor keeps (what the next start uses), whole.
    pub fn definition(&self) -> Result<String, DebugDomainError> {
        self.hypervisor
            .definition(&self.name)
            .map_err(|fault| self.failed("read the definition of", fault))
    }

    /// Replaces the definition (the same domain: name and identity unchanged).
    pub fn redefine(&self, definition: &str) -> Result<(), DebugDomainError> {
        self.hypervisor
            .redefine(&self.name, definition)
            .map_err(|fault| self.failed("redefine", fault))
    }

    pub fn is_running(&self) -> Result<bool, DebugDomainError> {
        self.hypervisor
            .is_running(&self.name)
            .map_err(|fault| self.failed("ask the state of", fault))
    }

    /// Starts the guest from its definition, after forcing it off if it runs: a guest being
    /// debugged may not answer a shutdown, and nothing of it is expected to be kept.
    pub fn restart(&self) -> Result<(), DebugDomainError> {
        if self.is_running()? {
            self.hypervisor
                .force_off(&self.name)
                .map_err(|fault| self.failed("stop", fault))?;
            let deadline = Instant::now() + STOP_WAIT;
            while self.is_running()? && Instant::now() < deadline {
                std::thread::sleep(STOP_POLL);
            }
        }
        self.hypervisor
            .start(&self.name)
            .map_err(|fault| self.failed("start", fault))
    }

    /// Starts the guest if it is off.
    pub fn start(&self) -> Result<(), DebugDomainError> {
        if self.is_running()? {
            return Ok(());
        }
        self.hypervisor
            .start(&self.name)
            .map_err(|fault| self.failed("start", fault))
    }

    /// The screen as it is now, as the hypervisor hands it over.
    pub fn screenshot(&self) -> Result<Vec<u8>, DebugDomainError> {
        self.hypervisor
            .screenshot(&self.name)
            .map_err(|fault| self.failed("take a screenshot of", fault))
    }

    /// Presses each event's keys together, one event after the other.
    pub fn send_keys(&self, events: &[Vec<u32>]) -> Result<(), DebugDomainError> {
        for codes in events {
            self.hypervisor
                .press_keys(&self.name, codes)
                .map_err(|fault| self.failed("send keys to", fault))?;
            std::thread::sleep(KEY_PAUSE);
        }
        Ok(())
    }

    /// Opens the running guest's display to a new password for a while.
    pub fn open_vnc_display(&self, now_unix: u64) -> Result<VncDisplay, DebugDomainError> {
        self.hypervisor
            .open_vnc_display(&self.name, now_unix)
            .map_err(|fault| self.failed("give a password to the display of", fault))?
            .ok_or_else(|| DebugDomainError::NoVnc {
                domain: self.name.clone(),
                hypervisor: self.hypervisor.name().to_string(),
            })
    }

    /// The files of the domain's disks on the hypervisor, with the format each is read in.
    pub fn disk_files(&self) -> Result<Vec<DiskFile>, DebugDomainError> {
        self.hypervisor
            .disk_files(&self.name)
            .map_err(|fault| self.failed("find the disk files of", fault))
    }
}
