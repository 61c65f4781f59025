//! What the declaration wants a guest to be, reduced to what the planner compares.

use crate::model::hypervisor::DomainType;
use crate::model::names::DomainName;
use crate::model::units::Bytes;
use serde::Serialize;

/// What trog records in a domain it owns (in the domain's `<metadata>`, trog's namespace).
///
/// Three digests, because three kinds of change call for three different actions: new boot
/// inputs replace the root disk, a new shape redefines and restarts, a new payload only finishes
/// again. The payload digest is recorded only once a finish has succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestTag {
    /// Digest of the declared boot inputs: image digest, distro, release, seed contents.
    pub boot_fingerprint: String,
    /// Digest of the declared shape: memory, vCPUs, CPU mode, disk size, machine knobs.
    pub shape_fingerprint: String,
    /// Digest of the payload last finished successfully on this guest.
    pub payload_digest: Option<String>,
}

/// A volume the guest needs, by name and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DesiredVolume {
    pub name: String,
    pub capacity: Bytes,
    /// Where its size was written (`file:line:column`), for a conflict to point at: the data
    /// volume's `data_volume_size`; `None` for the root disk, which no conflict names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_at: Option<String>,
}

/// An extra disk the guest needs: its volume, and the name the plan calls it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DesiredDisk {
    /// The name the guest's file gives it.
    pub name: String,
    pub volume: String,
    pub capacity: Bytes,
    /// The bus it is attached on, as libvirt's `<target bus>` says it (`virtio`, `scsi`).
    pub bus: String,
    /// Where its size was written (`file:line:column`), for a refusal to shrink it.
    pub declared_at: Option<String>,
}

/// The declaration of one guest, as the planner needs it. Everything here was built locally
/// before the plan is made; the plan refers to it by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DesiredGuest {
    pub domain: DomainName,
    pub pool_name: String,
    pub pool_path: String,
    /// The base image's volume name (named by digest) and its pinned digest (hex, sha256 or
    /// sha512).
    pub base_image_volume: String,
    pub base_image_digest: String,
    /// Where this machine uploads the base image before it is whole
    /// ([`partial_base_image_volume`](crate::plan::resource_names::partial_base_image_volume)).
    pub partial_base_image_volume: String,
    /// Where the base image comes from, for the plan's text.
    pub base_image_source: String,
    pub root_volume: DesiredVolume,
    pub seed_volume: String,
    /// sha256 of the seed ISO bytes; the observed seed is compared against it.
    pub seed_sha256: String,
    /// sha256 of the seeds an observed seed may also have and be kept: the same seed without the
    /// guest's host key (a guest built before trog made host keys), or with or without
    /// cloud-init's package pass (a guest built before `bake_packages` was turned on or off).
    /// Replacing it would restart the guest for nothing: a seed is read on a root disk's first
    /// boot only.
    pub equivalent_seed_sha256s: Vec<String>,
    pub data_volume: Option<DesiredVolume>,
    /// Extra disks, in their declared order; like the data volume they outlive root disks.
    pub extra_disks: Vec<DesiredDisk>,
    pub boot_fingerprint: String,
    pub shape_fingerprint: String,
    /// The virtualisation its hypervisor runs guests with (hypervisors.conf's `domain_type`): a
    /// domain defined with another is defined again, and restarted to take it.
    pub domain_type: DomainType,
    pub payload_digest: String,
    /// The installation converging it (`config::installation_id`), written into its tag; `None`
    /// for a run that changes nothing and finds no identity made yet.
    pub installation: Option<String>,
}

impl DesiredGuest {
    /// The tag a domain defined for this declaration carries before its first finish.
    pub fn tag_before_finish(&self) -> GuestTag {
        GuestTag {
            boot_fingerprint: self.boot_fingerprint.clone(),
            shape_fingerprint: self.shape_fingerprint.clone(),
            payload_digest: None,
        }
    }
}
