//! The actions a plan is made of, and the numbered plan `provision --dry-run` prints.
//!
//! Actions carry names and digests only: the seed's user-data and every secret stay out of a
//! plan, so printing one can never leak them.

use crate::model::units::Bytes;
use crate::plan::desired::GuestTag;
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    DefinePool {
        name: String,
        path: String,
    },
    StartPool {
        name: String,
    },
    /// Deletes what an interrupted upload left behind.
    RemovePartialBaseImage {
        volume: String,
    },
    /// Copies the verified base image into the pool (on a real hypervisor through its own
    /// system, `HypervisorOp::PlaceInPool`; never a libvirt stream there).
    UploadBaseImage {
        volume: String,
        source: String,
        /// The pinned digest (hex) it is verified against.
        digest: String,
    },
    /// Defines the domain from the rendered XML (or redefines it), carrying `tag`.
    DefineDomain {
        tag: GuestTag,
        redefine: bool,
        /// `--restart-later`: a running guest is redefined without a restart and keeps its
        /// current definition until it is next started; the plan says so.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        until_next_start: bool,
    },
    /// Reads the guest's backed-up paths over SSH into a new archive on this machine, before
    /// anything of a finished guest's root disk is changed: the new root disk gets the guest's
    /// files as they are now, not as an older backup had them.
    BackUpBeforeRebuild,
    /// Asks the guest to shut down, and forces it off when it does not within a grace period.
    StopDomain,
    /// Forces the guest off at once: its root disk and seed are deleted next and it has no other
    /// disk or shared folder, so nothing a clean shutdown would write is kept (its files were
    /// backed up first).
    PowerOffDomain,
    /// `--force`: deletes the guest's snapshots before its root disk is replaced (their states
    /// live in that disk).
    DeleteSnapshots {
        names: Vec<String>,
    },
    /// Deletes a root disk or seed that is about to be rebuilt (never a data volume unless the
    /// run was given `--destroy-data`).
    DeleteVolume {
        volume: String,
        why: String,
    },
    CreateDataVolume {
        volume: String,
        capacity: Bytes,
    },
    /// Makes the volume of an extra disk (empty; the finish formats it).
    CreateExtraDisk {
        disk: String,
        volume: String,
        capacity: Bytes,
    },
    /// Attaches an extra disk the guest does not have yet: to the running guest (hot-plugged,
    /// so the finish can format and mount it without a restart) and to the domain's definition,
    /// each where it is missing.
    AttachExtraDisk {
        disk: String,
        volume: String,
        to_running: bool,
        to_definition: bool,
    },
    /// Takes an extra disk no longer declared out of the domain's definition. The volume stays
    /// in the pool with its contents, and a running guest keeps the disk until it is next
    /// started (pulling a mounted disk out of a running guest loses what it has not written).
    DetachExtraDisk {
        volume: String,
        pool: String,
    },
    CreateRootVolume {
        volume: String,
        backing_volume: String,
        capacity: Bytes,
    },
    UploadSeed {
        volume: String,
        sha256: String,
    },
    /// Once the guest's first boot is over (SSH answered, cloud-init done): pins cloud-init in
    /// the guest to the datasource it booted from, detaches the seed from the domain (live and
    /// in its definition) and deletes its volume, which holds the guest's host private key.
    RetireSeed {
        volume: String,
    },
    SetAutostart,
    StartDomain,
    /// Finds the guest's address and waits until SSH answers.
    WaitForSsh,
    /// Puts the guest's newest backup (an archive on this machine) back on a guest whose root
    /// disk is new, before it is finished.
    RestoreBackup {
        archive: String,
    },
    /// Puts the backup [`Action::BackUpBeforeRebuild`] took in this run back on the new root disk.
    RestoreFreshBackup,
    /// Sends the payload, runs the Makefile's default target and the recipes' tests, and
    /// records the payload digest in the tag.
    Finish {
        payload_digest: String,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::DefinePool { name, path } => write!(f, "define storage pool {name} at {path}"),
            Action::StartPool { name } => write!(f, "start storage pool {name}"),
            Action::RemovePartialBaseImage { volume } => {
                write!(f, "delete {volume}, left by an interrupted upload")
            }
            Action::UploadBaseImage {
                volume,
                source,
                digest,
            } => {
                write!(
                    f,
                    "upload base image {volume} from {source} (digest {})",
                    short(digest)
                )
            }
            Action::DefineDomain {
                tag,
                redefine,
                until_next_start,
            } => {
                write!(
                    f,
                    "{} the domain (boot {}, shape {})",
                    if *redefine { "redefine" } else { "define" },
                    short(&tag.boot_fingerprint),
                    short(&tag.shape_fingerprint)
                )?;
                if *until_next_start {
                    write!(
                        f,
                        "; the running guest keeps its current definition until it is next started (--restart-later)"
                    )?;
                }
                Ok(())
            }
            Action::BackUpBeforeRebuild => write!(
                f,
                "back up the guest's files over SSH (its root disk is replaced below)"
            ),
            Action::StopDomain => write!(f, "stop the guest"),
            Action::PowerOffDomain => write!(
                f,
                "power the guest off (its root disk is replaced below; it has no other disk or shared folder)"
            ),
            Action::DeleteSnapshots { names } => write!(
                f,
                "delete snapshots {} (they hold the root disk being replaced; --force)",
                names.join(", ")
            ),
            Action::DeleteVolume { volume, why } => write!(f, "delete volume {volume} ({why})"),
            Action::CreateDataVolume { volume, capacity } => {
                write!(f, "create data volume {volume} of {capacity}")
            }
            Action::CreateExtraDisk {
                disk,
                volume,
                capacity,
            } => write!(f, "create disk {disk}: volume {volume} of {capacity}"),
            Action::AttachExtraDisk {
                disk,
                volume,
                to_running,
                to_definition,
            } => {
                let to = match (to_running, to_definition) {
                    (true, true) => "the running guest and its definition",
                    (true, false) => "the running guest",
                    _ => "the guest's definition",
                };
                write!(f, "attach disk {disk} ({volume}) to {to}")
            }
            Action::DetachExtraDisk { volume, pool } => write!(
                f,
                "detach volume {volume} from the guest's definition: no longer declared (a running guest keeps it until it is next started); the volume and its files stay in pool {pool} (`trog destroy --purge` deletes it with the guest, `virsh vol-delete --pool {pool} {volume}` alone)"
            ),
            Action::CreateRootVolume {
                volume,
                backing_volume,
                capacity,
            } => {
                write!(
                    f,
                    "create root disk {volume} of {capacity} over {backing_volume}"
                )
            }
            Action::UploadSeed { volume, sha256 } => {
                write!(
                    f,
                    "upload cloud-init seed {volume} (sha256 {})",
                    short(sha256)
                )
            }
            Action::RetireSeed { volume } => write!(
                f,
                "retire cloud-init seed {volume}: detach it and delete it, the first boot is over"
            ),
            Action::SetAutostart => write!(f, "start the guest with the hypervisor"),
            Action::StartDomain => write!(f, "start the guest"),
            Action::WaitForSsh => write!(f, "wait for the guest's address and SSH"),
            Action::RestoreBackup { archive } => {
                write!(
                    f,
                    "restore the newest backup {archive} (the root disk is new)"
                )
            }
            Action::RestoreFreshBackup => {
                write!(f, "restore the backup taken above onto the new root disk")
            }
            Action::Finish { payload_digest } => {
                write!(
                    f,
                    "finish over SSH: payload {}, Makefile, tests",
                    short(payload_digest)
                )
            }
        }
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// The ordered actions that converge one guest on one hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub domain: String,
    pub actions: Vec<Action>,
}

impl Plan {
    /// Nothing to do: the guest is the realization of its declaration.
    pub fn is_converged(&self) -> bool {
        self.actions.is_empty()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_converged() {
            return writeln!(f, "{}: converged, nothing to do", self.domain);
        }
        writeln!(
            f,
            "{}: {} step{}",
            self.domain,
            self.actions.len(),
            if self.actions.len() == 1 { "" } else { "s" }
        )?;
        for (index, action) in self.actions.iter().enumerate() {
            writeln!(f, "  {:>2}. {action}", index + 1)?;
        }
        Ok(())
    }
}
