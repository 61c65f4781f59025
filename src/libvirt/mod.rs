//! The libvirt backend, through the `virt` crate. The only part of trog that links libvirt.
pub mod destroy;
pub mod guest_address;
pub mod guest_resources;
