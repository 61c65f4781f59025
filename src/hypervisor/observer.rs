//! What the whole fleet is asked before a guest's hypervisor is opened: each hypervisor's
//! capacity for placement, whether it holds a guest, every domain it holds (the site's verbs),
//! the names of trog's domains there (who else's guests share a store), and what `preflight`
//! checks. One [`HypervisorObserver`] answers for every hypervisor, from threads of their own
//! (`hypervisor::fleet` asks them all at once); `workflow::open` says which backend's.

use crate::hypervisor::HypervisorFault;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::placement::observed::HypervisorCapacity;
use crate::preflight::LibvirtFacts;
pub use crate::render::domain_xml::metadata::Maker;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// One hypervisor's answers. Implementations are shared between threads, one per hypervisor.
pub trait HypervisorObserver: Send + Sync + 'static {
    /// Memory, CPUs, every defined guest (running or not) and the storage pool.
    fn capacity(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<HypervisorCapacity, HypervisorFault>;
    /// Whether a guest of this name is defined there.
    fn holds_guest(
        &self,
        hypervisor: &HypervisorConfig,
        guest: &DomainName,
    ) -> Result<bool, HypervisorFault>;
    /// Every domain defined there, running or not, sorted by name.
    fn held_domains(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<HeldDomain>, HypervisorFault>;
    /// The names of the domains defined there that carry trog's tag, for any installation.
    fn tagged_domain_names(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<String>, HypervisorFault>;
    /// What `preflight` checks of the hypervisor's daemon and its storage pool.
    fn preflight_facts(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<LibvirtFacts, HypervisorFault>;
    /// The version of the backend's client library this process uses (0 when it cannot say).
    fn client_version(&self) -> u32;
}

/// One domain defined on a hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldDomain {
    pub name: String,
    /// Who made it, as its tag says: not trog, or trog and by which installation.
    pub maker: Maker,
    /// The IPv4 addresses its network's DHCP server leased it, newest first; empty for a guest
    /// of static addresses, one that is shut off, or a driver without leases.
    pub leased: Vec<String>,
}

/// A stand-in fleet: fixed capacities by hypervisor name, each given after a fixed delay, so the
/// concurrency of [`crate::hypervisor::fleet::ask_fleet`] can be measured and tested without a
/// hypervisor. A hypervisor it has no answer for is reported as refusing the connection; the
/// questions beyond capacity are refused, as it has no domains to list.
#[derive(Debug, Clone, Default)]
pub struct FakeObserver {
    pub answers: HashMap<String, HypervisorCapacity>,
    pub delay: Duration,
}

impl FakeObserver {
    fn refused(hypervisor: &HypervisorConfig, what: &str) -> HypervisorFault {
        HypervisorFault::new(format!(
            "cannot connect to {}: the fake fleet {what}",
            hypervisor.libvirt_uri.uri
        ))
    }
}

impl HypervisorObserver for FakeObserver {
    fn capacity(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<HypervisorCapacity, HypervisorFault> {
        std::thread::sleep(self.delay);
        self.answers
            .get(hypervisor.name.as_str())
            .cloned()
            .ok_or_else(|| FakeObserver::refused(hypervisor, "has no such hypervisor"))
    }

    fn holds_guest(
        &self,
        hypervisor: &HypervisorConfig,
        guest: &DomainName,
    ) -> Result<bool, HypervisorFault> {
        self.capacity(hypervisor)
            .map(|capacity| capacity.holds(guest.as_str()))
    }

    fn held_domains(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<HeldDomain>, HypervisorFault> {
        Err(FakeObserver::refused(hypervisor, "lists no domains"))
    }

    fn tagged_domain_names(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<String>, HypervisorFault> {
        Err(FakeObserver::refused(hypervisor, "lists no domains"))
    }

    fn preflight_facts(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<LibvirtFacts, HypervisorFault> {
        Err(FakeObserver::refused(hypervisor, "has no daemon to check"))
    }

    fn client_version(&self) -> u32 {
        0
    }
}
