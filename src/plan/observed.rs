//! What a hypervisor has of one guest, as the libvirt backend reports it.

use crate::model::hypervisor::DomainType;
use crate::model::units::Bytes;
use crate::plan::desired::GuestTag;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolState {
    Absent,
    Inactive,
    Active,
}

/// A domain of the guest's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservedDomain {
    /// trog's tag from the domain's metadata; `None` means trog did not create it.
    pub tag: Option<GuestTag>,
    pub running: bool,
    pub autostart: bool,
    /// The names of its snapshots, oldest first. Their states live inside the guest's disks,
    /// so a root disk replaced takes them with it.
    pub snapshots: Vec<String>,
    /// Whether its definition attaches the guest's seed. A guest's seed is detached (and its
    /// volume deleted) once its first boot is over: a domain without it whose root disk is there
    /// has retired its seed, and needs none.
    pub seed_attached: bool,
    /// Whether it mounts a folder of its hypervisor (`<filesystem>`), as defined or as it runs:
    /// what it writes there outlives it, so it is shut down cleanly before its disks change.
    pub shares_folders: bool,
    /// The storage pools its definition's disks are volumes of, each once, sorted.
    pub disk_pools: Vec<String>,
    /// The virtualisation its definition asks for (`<domain type>`); `None` for one trog does
    /// not write.
    pub domain_type: Option<DomainType>,
}

/// A volume of one of the guest's names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservedVolume {
    pub capacity: Bytes,
    /// sha256 of the contents, read only where that is cheap (the seed ISO).
    pub sha256: Option<String>,
}

/// Everything the planner needs to know about one guest on its hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservedGuest {
    pub pool: PoolState,
    /// The base image under its digest name (only complete uploads carry that name).
    pub base_image_present: bool,
    /// A leftover interrupted upload of the base image.
    pub partial_base_image_present: bool,
    pub domain: Option<ObservedDomain>,
    pub root_volume: Option<ObservedVolume>,
    pub seed_volume: Option<ObservedVolume>,
    pub data_volume: Option<ObservedVolume>,
    pub extra_disks: ObservedExtraDisks,
}

/// The guest's extra disks as the hypervisor has them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ObservedExtraDisks {
    /// The volumes of the declared disks that are in the pool, by volume name.
    pub volumes: BTreeMap<String, ObservedVolume>,
    /// The extra-disk volumes (trog's `<domain>-disk-*` names) the domain's definition attaches,
    /// declared or not, with the bus each is on.
    pub defined: BTreeMap<String, String>,
    /// The same in the running guest (empty when it does not run).
    pub running: Vec<String>,
}

impl ObservedGuest {
    /// A hypervisor that has nothing of this guest, and no pool yet.
    pub fn nothing() -> ObservedGuest {
        ObservedGuest {
            pool: PoolState::Absent,
            base_image_present: false,
            partial_base_image_present: false,
            domain: None,
            root_volume: None,
            seed_volume: None,
            data_volume: None,
            extra_disks: ObservedExtraDisks::default(),
        }
    }
}
