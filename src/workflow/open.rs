//! A located guest's hypervisor, opened for a verb: the libvirt connection, and when the verb
//! needs it the hypervisor's own system with sudo settled before anything is done there. The
//! verbs written against the `Hypervisor` trait open it through `workflow::session`; this
//! connection itself is for `provision`, whose steps are libvirt's.

use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::libvirt::LibvirtConnection;
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::workflow::hypervisor_machine::open_hypervisor_machine;

/// Whether a verb works on the hypervisor's own system too, or through libvirt alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HypervisorAccess {
    /// libvirt only (`status`, `destroy`): no sudo, nothing asked. (A verb that changes the guest
    /// still logs in there, as the login alone, for the guest's lock: `workflow::lock`.)
    LibvirtOnly,
    /// libvirt and the hypervisor's system, with sudo settled first.
    WithSystem,
}

/// A hypervisor ready for a verb to act on.
pub struct OpenedHypervisor {
    pub config: HypervisorConfig,
    pub connection: LibvirtConnection,
    /// The hypervisor's own system; `None` with [`HypervisorAccess::LibvirtOnly`] and for
    /// libvirt's test driver, which has none.
    pub machine: Option<HypervisorMachine>,
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
            open_hypervisor_machine(&hypervisor.libvirt_uri, credentials)?
        }
    };
    let connection = LibvirtConnection::open(&hypervisor.libvirt_uri)?;
    Ok(OpenedHypervisor {
        config: hypervisor.clone(),
        connection,
        machine,
    })
}
