//! What a guest asks of a hypervisor, from its settings.

use crate::model::names::{DomainName, HypervisorName};
use crate::model::units::{Bytes, MiB};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestDemand {
    pub domain: DomainName,
    pub memory: MiB,
    pub vcpus: u32,
    /// The guest's `size`: its disk, taken from the pool in full.
    pub disk: Bytes,
    /// The guest's `hypervisor=` setting: it must go there, and fit there.
    pub pinned_to: Option<HypervisorName>,
}
