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
//! which places a guest instead of finding it, has its own workflow in `provision/`, over what
//! this layer shares with every verb: the guest's inputs (`inputs`, `store_guard`, `desired`,
//! `guest_plan`), its hypervisor's system with sudo settled (`hypervisor_machine`), its lock
//! (`lock`) and reaching it (`reach`). Nothing here imports `provision/`.

pub mod addresses;
pub mod backup;
pub mod baked_images;
pub mod debug_boot;
pub mod debug_boot_console;
pub mod debug_boot_disk;
pub mod debug_domain;
pub mod destroy;
#[cfg(test)]
pub mod fake_fleet;
pub mod fleet;
pub mod guest_plan;
pub mod host;
pub mod hypervisor_machine;
pub mod inputs;
#[cfg(test)]
mod layering_tests;
pub mod locate;
pub mod lock;
pub mod machine_login;
pub mod open;
pub mod preflight;
pub mod progress;
pub mod reach;
pub mod reporter;
pub mod restore;
pub mod session;
pub mod site;
pub mod site_status;
pub mod snapshot;
pub mod status;
pub mod store_guard;

pub use locate::{fleet_for_guest, locate_guest, LocateError};
pub use open::{open_hypervisor, HypervisorAccess, OpenedHypervisor};
