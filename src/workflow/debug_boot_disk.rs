//! `debug_boot`'s actions on a guest's disks, through libguestfs on its hypervisor: `--cat` and
//! `--ls` read a shut-off guest, `--single` puts `single` on the kernel command line of its own
//! GRUB configuration (keeping the replaced file beside it) and starts it, and `--restore` moves
//! the kept file back.
//!
//! The guest must be shut off for all of them: a running guest's filesystem is changing under a
//! reader, and its newest writes may still sit in its own page cache, so what libguestfs saw
//! would be neither the past nor the present; writing under a running guest would corrupt it.

use crate::debug_boot::guest_disk::{
    guest_path, read_answer, with_single, GuestPathError, ReadAnswer, GRUB_CONFIG,
    GRUB_CONFIG_BEFORE_SINGLE,
};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::machine::hypervisor_ops::{GuestDisks, HypervisorMachine, HypervisorOp};
use crate::machine::MachineError;
use crate::model::hypervisor::{DomainType, HypervisorConfig};
use crate::workflow::debug_domain::DebugDomain;

/// The actions that still work without libguestfs, for the message that says it is missing.
const WITHOUT_LIBGUESTFS: &str =
    "--console, --fetch, --shot, --hold, --keys, --vnc and --restore (of the definition)";

#[derive(Debug, thiserror::Error)]
pub enum DebugDiskError {
    #[error("libguestfs (guestfish) is not installed on {hypervisor}; debug_boot cannot read or change a guest's disk there")]
    NoLibguestfs { hypervisor: String },
    #[error("{domain} is running; debug_boot reads and changes the disks of a shut-off guest only, and nothing was read or written")]
    Running { domain: String },
    #[error("{domain} has no {what} {path}")]
    Missing {
        domain: String,
        what: &'static str,
        path: String,
    },
    #[error("{domain}'s disk cannot be used")]
    Path {
        domain: String,
        #[source]
        source: GuestPathError,
    },
    #[error("libguestfs on {hypervisor} failed on the disks of {domain}")]
    Guestfs {
        domain: String,
        hypervisor: String,
        #[source]
        source: Box<MachineError>,
    },
}

impl Diagnose for DebugDiskError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            DebugDiskError::NoLibguestfs { .. } | DebugDiskError::Guestfs { .. } => {
                ExitStatus::Hypervisor
            }
            DebugDiskError::Running { .. } => ExitStatus::Conflict,
            DebugDiskError::Missing { .. } => ExitStatus::Failure,
            DebugDiskError::Path { source, .. } => match source {
                GuestPathError::NotAbsolute { .. } => ExitStatus::Usage,
                GuestPathError::NoDisk | GuestPathError::NoKernelLine { .. } => ExitStatus::Failure,
            },
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DebugDiskError::NoLibguestfs { hypervisor } => Some(format!(
                "install libguestfs on {hypervisor} (Debian: apt-get install libguestfs-tools); without it debug_boot still has {WITHOUT_LIBGUESTFS}"
            )),
            DebugDiskError::Running { domain } => Some(format!(
                "shut it off first (virsh shutdown {domain}, or virsh destroy {domain} when it does not answer), then run debug_boot again"
            )),
            DebugDiskError::Missing { domain, path, .. } => {
                let parent = match path.rfind('/') {
                    Some(0) | None => "/",
                    Some(end) => &path[..end],
                };
                Some(format!(
                    "see what is there: trog debug_boot --ls {parent} {domain}"
                ))
            }
            DebugDiskError::Path { source, .. } => match source {
                GuestPathError::NotAbsolute { .. } => {
                    Some("give the path from the guest's root, e.g. --cat /etc/fstab".into())
                }
                GuestPathError::NoKernelLine { .. } => Some(
                    "the guest boots without GRUB's configuration file; --console shows how it boots".into(),
                ),
                GuestPathError::NoDisk => None,
            },
            DebugDiskError::Guestfs { source, .. } => Some(
                source
                    .hint()
                    .unwrap_or_else(|| "libguestfs-test-tool on the hypervisor says what its appliance lacks".into()),
            ),
        }
    }
}

/// A shut-off guest's disks, opened for libguestfs on its hypervisor.
pub struct GuestOnDisk<'a> {
    machine: &'a HypervisorMachine,
    guest: GuestDisks,
    domain: String,
    hypervisor: String,
}

impl<'a> GuestOnDisk<'a> {
    /// The disks of `domain`, once libguestfs is known to be there and the guest to be off.
    pub fn open(
        config: &HypervisorConfig,
        machine: &'a HypervisorMachine,
        domain: &DebugDomain,
    ) -> Result<GuestOnDisk<'a>, Failure> {
        let hypervisor = config.name.to_string();
        let name = domain.name().to_string();
        if !machine.holds(&HypervisorOp::Libguestfs) {
            return Err(DebugDiskError::NoLibguestfs { hypervisor }.into());
        }
        if domain.is_running()? {
            return Err(DebugDiskError::Running { domain: name }.into());
        }
        let disks = domain.disk_files()?;
        if disks.is_empty() {
            return Err(DebugDiskError::Path {
                domain: name,
                source: GuestPathError::NoDisk,
            }
            .into());
        }
        Ok(GuestOnDisk {
            machine,
            guest: GuestDisks {
                disks,
                software_only: config.domain_type == DomainType::Qemu,
            },
            domain: name,
            hypervisor,
        })
    }

    fn run(&self, op: &HypervisorOp) -> Result<crate::machine::CommandOutput, DebugDiskError> {
        self.machine
            .run(op)
            .map_err(|source| DebugDiskError::Guestfs {
                domain: self.domain.clone(),
                hypervisor: self.hypervisor.clone(),
                source: Box::new(source),
            })
    }

    fn failed(&self, output: crate::machine::CommandOutput) -> DebugDiskError {
        let source = output
            .success()
            .err()
            .unwrap_or_else(|| MachineError::Failed {
                host: self.hypervisor.clone(),
                command: "guestfish".into(),
                status: None,
                stderr: "libguestfs gave no answer".into(),
            });
        DebugDiskError::Guestfs {
            domain: self.domain.clone(),
            hypervisor: self.hypervisor.clone(),
            source: Box::new(source),
        }
    }

    fn path(&self, path: &str) -> Result<String, DebugDiskError> {
        guest_path(path).map_err(|source| DebugDiskError::Path {
            domain: self.domain.clone(),
            source,
        })
    }

    fn answer(
        &self,
        op: HypervisorOp,
        what: &'static str,
        path: &str,
    ) -> Result<Vec<u8>, DebugDiskError> {
        let output = self.run(&op)?;
        match read_answer(&output.stdout) {
            ReadAnswer::Found(bytes) if output.status == Some(0) => Ok(bytes),
            ReadAnswer::Missing => Err(DebugDiskError::Missing {
                domain: self.domain.clone(),
                what,
                path: path.to_string(),
            }),
            _ => Err(self.failed(output)),
        }
    }

    /// The bytes of the file `path` in the guest.
    pub fn cat(&self, path: &str) -> Result<Vec<u8>, DebugDiskError> {
        let path = self.path(path)?;
        let op = HypervisorOp::GuestCat {
            guest: self.guest.clone(),
            path: path.clone(),
        };
        self.answer(op, "file", &path)
    }

    /// The names in the directory `path` in the guest.
    pub fn ls(&self, path: &str) -> Result<Vec<String>, DebugDiskError> {
        let path = self.path(path)?;
        let op = HypervisorOp::GuestLs {
            guest: self.guest.clone(),
            path: path.clone(),
        };
        let listing = self.answer(op, "directory", &path)?;
        Ok(String::from_utf8_lossy(&listing)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// `single` on every kernel line of the guest's GRUB configuration, the replaced file kept
    /// beside it; `false` when every line had it already (nothing written).
    pub fn write_single(&self) -> Result<bool, DebugDiskError> {
        let config = self.cat(GRUB_CONFIG)?;
        let config = String::from_utf8_lossy(&config);
        let single = with_single(&config).map_err(|source| DebugDiskError::Path {
            domain: self.domain.clone(),
            source,
        })?;
        let Some(single) = single else {
            return Ok(false);
        };
        let op = HypervisorOp::GuestReplace {
            guest: self.guest.clone(),
            path: GRUB_CONFIG.into(),
            keep_at: GRUB_CONFIG_BEFORE_SINGLE.into(),
        };
        let output = self
            .machine
            .run_with_input(&op, single.into_bytes())
            .map_err(|source| DebugDiskError::Guestfs {
                domain: self.domain.clone(),
                hypervisor: self.hypervisor.clone(),
                source: Box::new(source),
            })?;
        if output.status != Some(0) {
            return Err(self.failed(output));
        }
        Ok(true)
    }

    /// The GRUB configuration `--single` replaced, moved back byte for byte; `false` when there
    /// was none to put back.
    pub fn put_back_grub(&self) -> Result<bool, DebugDiskError> {
        let output = self.run(&HypervisorOp::GuestPutBack {
            guest: self.guest.clone(),
            path: GRUB_CONFIG.into(),
            kept_at: GRUB_CONFIG_BEFORE_SINGLE.into(),
        })?;
        match read_answer(&output.stdout) {
            ReadAnswer::Found(_) if output.status == Some(0) => Ok(true),
            ReadAnswer::Missing => Ok(false),
            _ => Err(self.failed(output)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_libguestfs_the_error_says_what_to_install_and_what_still_works() {
        let error = DebugDiskError::NoLibguestfs {
            hypervisor: "hv1".into(),
        };
        assert_eq!(error.exit_status(), ExitStatus::Hypervisor);
        let hint = error.hint().unwrap();
        assert!(hint.contains("apt-get install libguestfs-tools"), "{hint}");
        for action in [
            "--console",
            "--fetch",
            "--shot",
            "--hold",
            "--keys",
            "--vnc",
        ] {
            assert!(hint.contains(action), "{hint}");
        }
    }

    #[test]
    fn a_missing_path_is_named_and_its_parent_offered_to_list() {
        let error = DebugDiskError::Missing {
            domain: "g.test".into(),
            what: "file",
            path: "/etc/nope".into(),
        };
        assert_eq!(error.to_string(), "g.test has no file /etc/nope");
        assert_eq!(
            error.hint().unwrap(),
            "see what is there: trog debug_boot --ls /etc g.test"
        );
        let top = DebugDiskError::Missing {
            domain: "g.test".into(),
            what: "directory",
            path: "/nope".into(),
        };
        assert!(top.hint().unwrap().ends_with("--ls / g.test"));
    }

    #[test]
    fn a_running_guest_is_refused_with_how_to_shut_it_off() {
        let error = DebugDiskError::Running {
            domain: "g.test".into(),
        };
        assert_eq!(error.exit_status(), ExitStatus::Conflict);
        assert!(error.to_string().contains("nothing was read or written"));
        assert!(error.hint().unwrap().contains("virsh shutdown g.test"));
    }
}
