//! What `provision` hands a hypervisor and gets back from it, beside the [`super::Hypervisor`]
//! methods that carry out a plan's steps: the artifacts built on this machine beforehand, the
//! failure of a step, and a leased guest's pinned lease.

use crate::model::address_range::AddressRange;
use std::net::Ipv4Addr;
use std::path::Path;

/// What a plan's hypervisor steps need beyond the plan: the bytes built locally beforehand.
pub struct BuiltArtifacts<'a> {
    /// The guest's definition as trog rendered it (`render::domain_xml`).
    pub domain_xml: &'a str,
    pub seed_iso: &'a [u8],
    /// The verified base image on this machine, uploaded when the plan says so.
    pub base_image_file: &'a Path,
    /// The extra disks as the domain attaches them, for a disk attached to a defined guest.
    pub extra_disks: &'a [crate::render::domain_xml::ExtraDiskSpec],
}

/// A step of a guest's plan that the hypervisor did not carry out: which hypervisor, what was
/// being done, and the backend's own reason.
#[derive(Debug, thiserror::Error)]
#[error("{backend} on {hypervisor} could not {operation}")]
pub struct GuestResourceError {
    /// Which kind of hypervisor said no (`libvirt`).
    pub backend: &'static str,
    pub hypervisor: String,
    pub operation: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl crate::diagnose::Diagnose for GuestResourceError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Hypervisor
    }

    fn hint(&self) -> Option<String> {
        Some("run `trog preflight` against that hypervisor; rerunning `provision` continues from where this stopped".into())
    }
}

/// What else on a network must not be pinned to a leased guest: the ranges trog hands static
/// addresses from and the addresses its guests hold (both from `ips.db`).
#[derive(Debug, Clone, Default)]
pub struct KeptApart {
    pub ranges: Vec<AddressRange>,
    pub held: Vec<Ipv4Addr>,
}

/// A lease pinned for a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedLease {
    pub address: Ipv4Addr,
    /// True when this run made the reservation, false when it was there already.
    pub made: bool,
}
