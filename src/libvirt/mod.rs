//! The libvirt backend, through the `virt` crate. The only part of trog that links libvirt.
pub mod guest_resources;
pub mod tag;
pub mod destroy;
pub mod guest_address;
