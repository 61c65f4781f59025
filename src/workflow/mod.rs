//! The workflow every verb that acts on an existing guest shares (destroy, snapshot, restore,
//! backup, status, debug_boot): read the fleet, locate the guest across it, take its lock, open
//! its hypervisor (through the [`crate::hypervisor::Hypervisor`] trait, and the hypervisor's own
//! system with sudo settled when the verb needs it), act. [`session::GuestSession::open`] is that
//! order, in one place.
//!
//! Taking the guest's lock is a step of this sequence: after locating the guest (and before
//! observing or changing anything of it), a verb that changes the guest holds its lock until it
//! is done, so two runs never act on one guest at once. Every verb that changes a guest does,
//! `provision` too (assign_ip, which changes only ips.db, takes the installation's lock alone). The lock is the installation's and the hypervisor's, so runs from
//! other installations are kept apart too. A run that finds the lock held waits up to `--wait`
//! seconds, saying for whom, then ends with exit status 10 naming the holder.
//!
//! Commands only parse and print; they call this layer, which calls the backends, and tell the
//! user what it reports while it works through [`reporter::Reporter`]. Provisioning,
//! which places a guest instead of finding it, has its own workflow beside this one in
//! `provision/`.

pub mod addresses;
pub mod backup;
pub mod debug_boot;
pub mod debug_boot_console;
pub mod debug_boot_disk;
pub mod destroy;
#[cfg(test)]
pub mod fake_fleet;
pub mod fleet;
pub mod host;
#[cfg(test)]
mod layering_tests;
pub mod locate;
pub mod lock;
pub mod open;
pub mod preflight;
pub mod reporter;
pub mod restore;
pub mod session;
pub mod site;
pub mod site_status;
pub mod snapshot;
pub mod status;

pub use locate::{fleet_for_guest, locate_guest, LocateError};
pub use open::{open_hypervisor, HypervisorAccess, OpenedHypervisor};
