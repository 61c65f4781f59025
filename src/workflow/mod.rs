//! The workflow every verb that acts on an existing guest shares (destroy, status, and each verb
//! that finds a guest and acts on its hypervisor): read the fleet, locate the guest across it,
//! open its hypervisor (libvirt, and the hypervisor's own system with sudo settled), act.
//!
//! Commands only parse and print; they call this layer, which calls the backends. Provisioning,
//! which places a guest instead of finding it, has its own workflow beside this one in
//! `provision/`.

pub mod destroy;
pub mod locate;
pub mod open;
pub mod status;

pub use locate::{fleet_for_guest, locate_guest, LocateError};
pub use open::{open_hypervisor, HypervisorAccess, OpenedHypervisor};
