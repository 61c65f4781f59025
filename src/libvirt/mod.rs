//! The libvirt backend, through the `virt` crate. The only part of trog that links libvirt.
//!
//! [`hypervisor::LibvirtHypervisor`] is the `crate::hypervisor::Hypervisor` of one hypervisor
//! and [`LibvirtObserver`] the `crate::hypervisor::observer::HypervisorObserver` of the fleet:
//! what the rest of trog reaches libvirt through. `workflow::open` is the one place that makes
//! them.

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
pub mod volume_use;

pub use connection::connect;
pub use error::LibvirtError;
pub use observe::LibvirtObserver;
