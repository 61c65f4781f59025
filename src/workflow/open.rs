//! Opening a hypervisor: the one place outside `libvirt/` that names the backend. Everything
//! else reaches a hypervisor through what this returns: a [`Hypervisor`] for one hypervisor, a
//! [`HypervisorObserver`] for asking the whole fleet. A second backend would be chosen here, by
//! the hypervisor's kind in `hypervisors.conf` (ARCHITECTURE.md).
//!
//! `provision` opens its hypervisor with [`open_hypervisor`] (with its own system, sudo settled
//! before anything is done there); the verbs acting on an existing guest through
//! `workflow::session`, which calls [`connect_hypervisor`].

use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::hypervisor::observer::HypervisorObserver;
use crate::hypervisor::Hypervisor;
use crate::libvirt::hypervisor::LibvirtHypervisor;
use crate::libvirt::LibvirtObserver;
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::workflow::hypervisor_machine::open_hypervisor_machine;
use std::rc::Rc;
use std::sync::Arc;

/// Whether a verb works on the hypervisor's own system too, or through libvirt alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HypervisorAccess {
    /// libvirt only (`status`, `destroy`): no sudo, nothing asked. (A verb that changes the guest
    /// still logs in there, as the login alone, for the guest's lock: `workflow::lock`.)
    LibvirtOnly,
    /// libvirt and the hypervisor's system, with sudo settled first.
    WithSystem,
}

/// What asks every hypervisor of the fleet at once (placement, locating a guest, the site's
/// verbs, preflight).
pub fn fleet_observer() -> Arc<dyn HypervisorObserver> {
    Arc::new(LibvirtObserver)
}

/// Connects to `hypervisor`, for a verb acting on an existing guest.
pub fn connect_hypervisor(hypervisor: &HypervisorConfig) -> Result<Box<dyn Hypervisor>, Failure> {
    Ok(Box::new(LibvirtHypervisor::connect(hypervisor)?))
}

/// A hypervisor ready for `provision` to build a guest on.
pub struct OpenedHypervisor {
    pub config: HypervisorConfig,
    pub hypervisor: Box<dyn Hypervisor>,
    /// The hypervisor's own system (the hypervisor writes into its pool through it too); `None`
    /// with [`HypervisorAccess::LibvirtOnly`] and for libvirt's test driver, which has none.
    pub machine: Option<Rc<HypervisorMachine>>,
}

/// Connects to `hypervisor`'s libvirt and, with [`HypervisorAccess::WithSystem`], opens its own
/// system with sudo settled (a password handed in, asked once on a terminal, or the NOPASSWD
/// error at once).
pub fn open_hypervisor(
    hypervisor: &HypervisorConfig,
    access: HypervisorAccess,
    credentials: &mut CredentialSource<TerminalPrompter>,
) -> Result<OpenedHypervisor, Failure> {
    let machine = match access {
        HypervisorAccess::LibvirtOnly => None,
        HypervisorAccess::WithSystem => {
            open_hypervisor_machine(&hypervisor.libvirt_uri, credentials)?.map(Rc::new)
        }
    };
    let opened = LibvirtHypervisor::connect(hypervisor)?.with_system(machine.clone());
    Ok(OpenedHypervisor {
        config: hypervisor.clone(),
        hypervisor: Box::new(opened),
        machine,
    })
}
