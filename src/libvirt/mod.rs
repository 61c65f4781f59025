//! The libvirt backend, through the `virt` crate. The only part of trog that links libvirt.
//!
//! Observation (what each hypervisor has and has promised) sits behind [`HypervisorObserver`] so
//! the fake beside it can stand in for a fleet in benchmarks and fast tests; [`ask_fleet`] asks
//! every hypervisor at once, each within a bounded time.

pub mod base_image_copies;
pub mod concurrent;
pub mod connection;
pub mod debug_boot;
pub mod domain_stats;
pub mod error;
pub mod facts;
pub mod guest_address;
pub mod guest_resources;
pub mod guest_state;
pub mod hypervisor;
pub mod lease_pin;
pub mod network_filter;
pub mod network_leases;
pub mod observe;
pub mod reservation;
pub mod seed;
pub mod site;
pub mod snapshot;
pub mod trog_tag;

pub use concurrent::{
    ask_fleet, find_guest, observe_fleet, observe_for_placement, GuestWhereabouts,
    DEFAULT_ANSWER_TIMEOUT,
};
pub use connection::{connect, LibvirtConnection};
pub use error::LibvirtError;
pub use observe::{FakeObserver, HypervisorObserver, LibvirtObserver};
