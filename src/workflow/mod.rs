//! The workflow every verb that acts on an existing guest shares (destroy, status, and each verb
//! that finds a guest and acts on its hypervisor): read the fleet, locate the guest across it,
//! open its hypervisor (libvirt, and the hypervisor's own system with sudo settled), act.
//!
//! Taking the guest's lock is a step of this sequence: after locating the guest (and before
//! observing or changing anything of it), a verb that changes the guest calls
//! [`lock::take_guest_lock`] and holds what it returns until it is done, so two runs never act
//! on one guest at once. `destroy` and `provision` do; so must every verb added here that changes
//! a guest (snapshot, restore, debug_boot; assign_ip, which changes only ips.db, takes the
//! installation's lock alone). The lock is the installation's and the hypervisor's, so runs from
//! other installations are kept apart too. A run that finds the lock held waits up to `--wait`
//! seconds, saying for whom, then ends with exit status 10 naming the holder.
//!
//! Commands only parse and print; they call this layer, which calls the backends. Provisioning,
//! which places a guest instead of finding it, has its own workflow beside this one in
//! `provision/`.

pub mod addresses;
pub mod backup;
pub mod debug_boot;
pub mod debug_boot_console;
pub mod debug_boot_disk;
pub mod destroy;
pub mod fleet;
pub mod locate;
pub mod lock;
pub mod open;
pub mod preflight;
pub mod restore;
pub mod site;
pub mod site_status;
pub mod snapshot;
pub mod status;

pub use locate::{fleet_for_guest, locate_guest, LocateError};
pub use open::{open_hypervisor, HypervisorAccess, OpenedHypervisor};
