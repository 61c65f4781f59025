//! Differences the planner will not close on its own, and the flags that resolve them.
//!
//! Three tiers: a plain run never resolves a conflict; `--force` runs the lossless resolutions
//! (adopting a same-named resource by tagging it); `--destroy-data` runs the destructive ones.

use serde::Serialize;
use std::fmt;

/// The resolutions the user allowed for this run, and whether a new definition may wait for the
/// guest's next start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Resolution {
    /// Adopt same-named resources trog did not create.
    pub force: bool,
    /// Replace resources whose contents would be lost (an unusable data volume, a foreign disk).
    pub destroy_data: bool,
    /// Apply a new domain definition of a running guest at its next start instead of
    /// restarting it now (`--restart-later`). A new root disk still restarts it.
    pub restart_later: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conflict {
    /// A domain of the guest's name that trog did not create.
    ForeignDomain { domain: String },
    /// A root disk or seed of the guest's name with no trog domain claiming it.
    ForeignVolume { volume: String },
    /// A data volume of the guest's name that no trog domain claims.
    ForeignDataVolume { volume: String },
    /// The root disk is to be replaced (new boot inputs) but the guest has snapshots, whose
    /// states live in it.
    SnapshotsOfReplacedRoot {
        volume: String,
        snapshots: Vec<String>,
    },
    /// The data volume is smaller than declared; shrinking the declaration or recreating the
    /// volume empty are the only ways forward.
    DataVolumeTooSmall {
        volume: String,
        observed_gib: u64,
        declared_gib: u64,
    },
    /// The data volume is bigger than declared: it is never shrunk (its filesystem and files
    /// fill it), so keeping it would leave the declaration saying what is not there.
    DataVolumeShrunk {
        volume: String,
        observed: crate::model::units::Bytes,
        declared: crate::model::units::Bytes,
        declared_at: Option<String>,
    },
    /// The guest's definition keeps its disks in another pool than its hypervisor's `pool_name`
    /// now names: trog looks for its volumes in the new pool only, and would make them there anew
    /// (an empty data volume among them), so only the declaration can change.
    PoolRenamed {
        defined_in: Vec<String>,
        declared: String,
    },
    /// An extra disk's volume is of another size than declared: never shrunk, and not grown
    /// (yet), so only the declaration can change.
    ExtraDiskResized {
        disk: String,
        volume: String,
        observed: crate::model::units::Bytes,
        declared: crate::model::units::Bytes,
        declared_at: Option<String>,
    },
}

impl Conflict {
    /// The flag that resolves it, as the message names it.
    pub fn resolving_flag(&self) -> &'static str {
        match self {
            Conflict::ForeignDomain { .. }
            | Conflict::ForeignDataVolume { .. }
            | Conflict::SnapshotsOfReplacedRoot { .. } => "--force",
            Conflict::ForeignVolume { .. }
            | Conflict::DataVolumeTooSmall { .. }
            | Conflict::DataVolumeShrunk { .. } => "--destroy-data",
            Conflict::ExtraDiskResized { .. } | Conflict::PoolRenamed { .. } => {
                "no flag: a change of the declaration"
            }
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::ForeignDomain { domain } => write!(
                f,
                "domain {domain} exists but trog did not create it; --force adopts it as it is"
            ),
            Conflict::ForeignVolume { volume } => write!(
                f,
                "volume {volume} exists but no domain of trog's claims it; --destroy-data replaces it"
            ),
            Conflict::ForeignDataVolume { volume } => write!(
                f,
                "data volume {volume} exists but no domain of trog's claims it; --force adopts it with its contents, --destroy-data recreates it empty"
            ),
            Conflict::SnapshotsOfReplacedRoot { volume, snapshots } => write!(
                f,
                "the boot inputs changed, so root disk {volume} is replaced, and the guest's snapshots ({}) go with it; --force deletes them and goes on",
                snapshots.join(", ")
            ),
            Conflict::DataVolumeTooSmall { volume, observed_gib, declared_gib } => write!(
                f,
                "data volume {volume} holds {observed_gib}GB but {declared_gib}GB is declared; declare {observed_gib}GB, or --destroy-data recreates it empty"
            ),
            Conflict::DataVolumeShrunk { volume, observed, declared, declared_at } => {
                let at = declared_at.as_deref().map(|at| format!(" at {at}")).unwrap_or_default();
                let as_it_is = written_as_data_volume_size(*observed).map_or_else(
                    || format!("declare {observed} again"),
                    |written| format!("declare `data_volume_size: {written}` again"),
                );
                write!(
                    f,
                    "data volume {volume} holds {observed} but {declared} is declared{at}; a data volume is never shrunk (its filesystem and files fill it): {as_it_is}, or back up what it holds (`trog backup`) and --destroy-data recreates it empty at {declared}"
                )
            }
            Conflict::PoolRenamed { defined_in, declared } => write!(
                f,
                "the guest's disks are in pool {}, but hypervisors.conf's pool_name now says {declared}; trog does not move a guest's volumes between pools, and would make them anew in {declared}, its data volume empty; set pool_name back to {}, or, to move the guest, back it up (`trog backup`), copy what its data volume and extra disks hold, and `trog destroy` it before provisioning it again",
                defined_in.join(", "),
                defined_in[0]
            ),
            Conflict::ExtraDiskResized { disk, volume, observed, declared, declared_at } => {
                let at = declared_at.as_deref().map(|at| format!(" at {at}")).unwrap_or_default();
                let why = if declared < observed {
                    "a disk is never shrunk (its filesystem and files fill it)"
                } else {
                    "growing a disk is not supported: add another disk for more room"
                };
                write!(
                    f,
                    "disk {disk} ({volume}) holds {observed} but {declared} is declared{at}; {why}; declare {observed}"
                )
            }
        }
    }
}

/// `size` as `data_volume_size` takes it (a number with `G` or `M`), when it is a whole number of
/// either: the size to write back for a volume that keeps its own.
fn written_as_data_volume_size(size: crate::model::units::Bytes) -> Option<String> {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    match size.0 {
        0 => None,
        bytes if bytes % GIB == 0 => Some(format!("{}G", bytes / GIB)),
        bytes if bytes % MIB == 0 => Some(format!("{}M", bytes / MIB)),
        _ => None,
    }
}

/// Every conflict a plan ran into; a plan is refused whole when any remains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{domain} cannot be converged without a decision:{}", list(.conflicts))]
pub struct Conflicts {
    pub domain: String,
    pub conflicts: Vec<Conflict>,
}

fn list(conflicts: &[Conflict]) -> String {
    conflicts
        .iter()
        .map(|conflict| format!("\n  - {conflict}"))
        .collect()
}

impl crate::diagnose::Diagnose for Conflicts {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Conflict
    }

    fn hint(&self) -> Option<String> {
        Some(
            "a plain run never resolves a conflict: rerun with the flag named above, or change the \
             declaration to match what is there"
                .into(),
        )
    }
}
