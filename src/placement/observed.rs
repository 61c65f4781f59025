//! What placement reads about the fleet: each hypervisor's settings and what it answered when
//! asked. The libvirt backend produces these; tests and benchmarks write them by hand.

use crate::config::hypervisors_conf::FleetSource;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::units::{Bytes, MiB};
use serde::Serialize;

/// A guest a hypervisor has defined, running or not: it holds its maximum memory and its
/// maximum vCPUs against the hypervisor whether or not it is using them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefinedGuest {
    pub name: String,
    pub max_memory: MiB,
    pub max_vcpus: u32,
    pub running: bool,
}

/// The storage pool named by the hypervisor's `pool_name`, as libvirt reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PoolState {
    /// Started: libvirt knows its sizes.
    Active {
        capacity: Bytes,
        allocation: Bytes,
        available: Bytes,
    },
    /// Defined but stopped: libvirt reports no sizes for a stopped pool.
    Inactive,
    /// Not defined yet: the first build creates it at `pool_path`.
    Absent,
}

/// What a hypervisor that answered has, and has promised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypervisorCapacity {
    pub physical_memory: MiB,
    pub physical_cpus: u32,
    pub guests: Vec<DefinedGuest>,
    pub pool: PoolState,
}

impl HypervisorCapacity {
    /// The sum of every defined guest's maximum memory.
    pub fn committed_memory(&self) -> MiB {
        self.guests.iter().map(|guest| guest.max_memory).sum()
    }

    /// The sum of every defined guest's maximum vCPUs.
    pub fn committed_vcpus(&self) -> u64 {
        self.guests
            .iter()
            .map(|guest| u64::from(guest.max_vcpus))
            .sum()
    }

    pub fn holds(&self, guest_name: &str) -> bool {
        self.guests.iter().any(|guest| guest.name == guest_name)
    }
}

/// A hypervisor's answer, or why there was none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Observation {
    Answered(HypervisorCapacity),
    Unreachable { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservedHypervisor {
    pub config: HypervisorConfig,
    pub observation: Observation,
}

impl ObservedHypervisor {
    pub fn capacity(&self) -> Option<&HypervisorCapacity> {
        match &self.observation {
            Observation::Answered(capacity) => Some(capacity),
            Observation::Unreachable { .. } => None,
        }
    }
}

/// Every hypervisor of the fleet with its answer, in the order of `hypervisors.conf`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetObservation {
    pub source: FleetSource,
    pub hypervisors: Vec<ObservedHypervisor>,
}
