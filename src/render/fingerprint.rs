//! The provision fingerprint: what a guest was booted from, in one digest that trog records in the
//! domain's metadata and compares on the next run.
//!
//! What is in it, and why:
//! - the **root disk inputs**, whose change means "replace the root disk" (the data volume and
//!   the address are kept): the base image's sha256, the distro and release (they pick the
//!   recipes' packages and the seed's contents, and a release upgrade in place is not what a
//!   changed declaration means), the seed ISO's sha256 (every cloud-init input: users, keys,
//!   hostname, network; cloud-init applies most of it only on first boot, so a new seed needs a
//!   new disk), and the root disk's size;
//! - the **shape**, whose change means "redefine and restart": memory, vCPUs, the declared
//!   `cpu_mode`, the `tenant` when one is set (it names the network filter the interface
//!   carries), and the machine's definition ([`MachineDefinition`]: machine type, firmware, disk
//!   bus, cache and discard, network or bridge) where it differs from the `vm` recipe's
//!   defaults; the cgroup partition of the hypervisor block is added by
//!   [`shape_on_hypervisor`]. What is at its default adds nothing, so a guest built before a
//!   setting was fingerprinted keeps the fingerprint it was recorded with.
//!
//! Both go into [`ProvisionFingerprint::value`], the digest a converged guest matches; the root
//! disk part is also kept alone in [`ProvisionFingerprint::root_disk`], so that a planner seeing a
//! different value can tell which kind of change it is from the recorded metadata alone.
//!
//! Not in it: the payload (the Makefile, files and site data). A payload change means "finish
//! again" and has its own digest ([`super::payload::Payload::sha256_hex`]). The hypervisor, the
//! placement, the MAC and paths are not declared boot inputs either.
//!
//! The encoding is canonical: a version line, then one `name:length:value` line per input in a
//! fixed order, values in one spelling (lower-case hex digests without a `sha256:` prefix, sizes
//! in bytes and MiB, distro lower-case). Changing the encoding changes every fingerprint, which
//! would replace every guest's disk: bump [`FINGERPRINT_ENCODING_VERSION`] only on purpose.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::digest::ImageDigest;
use crate::model::units::{Bytes, MiB};
use crate::render::domain_xml::CpuMode;
use crate::render::machine_definition::MachineDefinition;
use sha2::{Digest, Sha256};

/// The first line of the encoding; part of every fingerprint.
pub const FINGERPRINT_ENCODING_VERSION: &str = "trog-provision-fingerprint-v1";

/// The declared inputs a guest is booted from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootInputs {
    /// The base image's digest, as pinned.
    pub image_digest: ImageDigest,
    pub distro: String,
    pub release: String,
    /// The sha256 of the seed ISO's bytes ([`super::seed_iso::SeedIso::sha256_hex`]).
    pub seed_iso_sha256: String,
    pub memory: MiB,
    pub vcpus: u32,
    pub cpu_mode: CpuMode,
    pub disk_size: Bytes,
    /// The guest's tenant, which picks its interface's network filter.
    pub tenant: Option<String>,
    /// Machine type, firmware, disks' bus, cache and discard, network attachment.
    pub machine: MachineDefinition,
}

/// Two sha256 digests in lower-case hex: the whole fingerprint, and its root disk part.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ProvisionFingerprint {
    /// Over every boot input: equal means converged.
    pub value: String,
    /// Over the root disk inputs only: different means the root disk must be replaced.
    pub root_disk: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    #[error("the {what} `{value}` is not a sha256 digest (64 hexadecimal digits)")]
    Digest { what: &'static str, value: String },
    #[error("the {what} is empty")]
    Empty { what: &'static str },
}

impl Diagnose for FingerprintError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            FingerprintError::Digest { .. } => {
                "write the image's sha256 as 64 hexadecimal digits, as `sha256sum` prints it"
                    .to_string()
            }
            FingerprintError::Empty { what } => format!("set the guest's {what}"),
        })
    }
}

/// A sha256 digest in its one spelling: lower-case hex, no prefix.
fn canonical_digest(what: &'static str, value: &str) -> Result<String, FingerprintError> {
    let trimmed = value.trim();
    let bare = trimmed.strip_prefix("sha256:").unwrap_or(trimmed);
    if bare.len() != 64 || !bare.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(FingerprintError::Digest {
            what,
            value: value.to_string(),
        });
    }
    Ok(bare.to_ascii_lowercase())
}

fn canonical_word(what: &'static str, value: &str) -> Result<String, FingerprintError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(FingerprintError::Empty { what });
    }
    Ok(trimmed.to_string())
}

/// Appends one input; the length makes every encoding unambiguous whatever the values hold.
fn push_field(encoding: &mut String, name: &str, value: &str) {
    encoding.push_str(&format!("{name}:{}:{value}\n", value.len()));
}

/// The canonical encodings of the root disk inputs and of the shape.
fn canonical_encodings(inputs: &BootInputs) -> Result<(String, String), FingerprintError> {
    let mut root_disk = format!("{FINGERPRINT_ENCODING_VERSION}\n");
    // Named by algorithm, so a sha256 pin encodes exactly as before sha512 pins existed.
    push_field(
        &mut root_disk,
        &format!("image_{}", inputs.image_digest.algorithm.name()),
        &inputs.image_digest.hex,
    );
    push_field(
        &mut root_disk,
        "distro",
        &canonical_word("distro", &inputs.distro)?.to_ascii_lowercase(),
    );
    push_field(
        &mut root_disk,
        "release",
        &canonical_word("release", &inputs.release)?,
    );
    push_field(
        &mut root_disk,
        "seed_iso_sha256",
        &canonical_digest("seed ISO sha256", &inputs.seed_iso_sha256)?,
    );
    push_field(
        &mut root_disk,
        "disk_size_bytes",
        &inputs.disk_size.0.to_string(),
    );

    let mut shape = String::new();
    push_field(&mut shape, "memory_mib", &inputs.memory.0.to_string());
    push_field(&mut shape, "vcpus", &inputs.vcpus.to_string());
    push_field(&mut shape, "cpu_mode", inputs.cpu_mode.as_declared());
    if let Some(tenant) = &inputs.tenant {
        push_field(&mut shape, "tenant", tenant);
    }
    for (name, value) in inputs.machine.fingerprint_fields() {
        push_field(&mut shape, name, &value);
    }
    Ok((root_disk, shape))
}

/// The fingerprint of `inputs`. Pure: the same inputs give the same fingerprint on any machine.
pub fn provision_fingerprint(
    inputs: &BootInputs,
) -> Result<ProvisionFingerprint, FingerprintError> {
    let (root_disk, shape) = canonical_encodings(inputs)?;
    Ok(ProvisionFingerprint {
        value: hex::encode(Sha256::digest(format!("{root_disk}{shape}").as_bytes())),
        root_disk: hex::encode(Sha256::digest(root_disk.as_bytes())),
    })
}

/// The whole fingerprint's value with what the hypervisor block adds to the definition: its
/// cgroup partition. Without one it is `value` unchanged, so guests on blocks without a partition
/// keep the fingerprints they had; with one, a partition set, changed or removed in
/// hypervisors.conf is a new shape.
pub fn shape_on_hypervisor(value: &str, partition: Option<&str>) -> String {
    match partition {
        None => value.to_string(),
        Some(partition) => {
            let mut encoding = format!("{value}\n");
            push_field(&mut encoding, "partition", partition);
            hex::encode(Sha256::digest(encoding.as_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha256(hex: &str) -> ImageDigest {
        ImageDigest::parse(crate::model::digest::DigestAlgorithm::Sha256, hex).unwrap()
    }

    fn inputs() -> BootInputs {
        BootInputs {
            image_digest: sha256(&"a".repeat(64)),
            distro: "debian".to_string(),
            release: "bookworm".to_string(),
            seed_iso_sha256: "b".repeat(64),
            memory: MiB(2048),
            vcpus: 2,
            cpu_mode: CpuMode::HostPassthrough,
            disk_size: Bytes::from_gib(10),
            tenant: None,
            machine: MachineDefinition::default(),
        }
    }

    fn fingerprint(inputs: &BootInputs) -> ProvisionFingerprint {
        provision_fingerprint(inputs).unwrap()
    }

    #[test]
    fn every_root_disk_input_changes_both_digests() {
        let base = fingerprint(&inputs());
        let changes: Vec<fn(&mut BootInputs)> = vec![
            |i| i.image_digest = sha256(&"c".repeat(64)),
            |i| {
                i.image_digest = ImageDigest::parse(
                    crate::model::digest::DigestAlgorithm::Sha512,
                    &"a".repeat(128),
                )
                .unwrap()
            },
            |i| i.distro = "ubuntu".to_string(),
            |i| i.release = "trixie".to_string(),
            |i| i.seed_iso_sha256 = "c".repeat(64),
            |i| i.disk_size = Bytes::from_gib(11),
        ];
        for change in changes {
            let mut changed = inputs();
            change(&mut changed);
            let other = fingerprint(&changed);
            assert_ne!(other.value, base.value, "{changed:?}");
            assert_ne!(other.root_disk, base.root_disk, "{changed:?}");
        }
    }

    #[test]
    fn every_shape_input_changes_the_value_but_not_the_root_disk_part() {
        let base = fingerprint(&inputs());
        let changes: Vec<fn(&mut BootInputs)> = vec![
            |i| i.memory = MiB(4096),
            |i| i.vcpus = 4,
            |i| i.cpu_mode = CpuMode::HostModel,
            |i| i.cpu_mode = CpuMode::Named("Skylake-Client".to_string()),
            |i| i.tenant = Some("shop".to_string()),
            |i| i.machine.machine_type = "pc".to_string(),
            |i| i.machine.firmware = crate::render::domain_xml::Firmware::Uefi,
            |i| i.machine.disk_bus = crate::render::domain_xml::DiskBus::Scsi,
            |i| i.machine.disk_cache = Some(crate::render::domain_xml::DiskCache::Writeback),
            |i| i.machine.disk_cache = None,
            |i| i.machine.disk_discard_unmap = false,
            |i| {
                i.machine.network =
                    crate::render::domain_xml::NetworkAttachment::Network("lab".to_string())
            },
            |i| {
                i.machine.network =
                    crate::render::domain_xml::NetworkAttachment::Bridge("br0".to_string())
            },
        ];
        for change in changes {
            let mut changed = inputs();
            change(&mut changed);
            let other = fingerprint(&changed);
            assert_ne!(other.value, base.value, "{changed:?}");
            assert_eq!(other.root_disk, base.root_disk, "{changed:?}");
        }
    }

    #[test]
    fn a_partition_changes_the_shape_and_none_keeps_the_value() {
        let value = fingerprint(&inputs()).value;
        assert_eq!(shape_on_hypervisor(&value, None), value);
        let runner = shape_on_hypervisor(&value, Some("/machine/runner"));
        assert_ne!(runner, value);
        assert_ne!(shape_on_hypervisor(&value, Some("/machine/other")), runner);
    }

    #[test]
    fn spelling_of_the_same_inputs_does_not_matter() {
        let base = fingerprint(&inputs());
        let mut respelled = inputs();
        respelled.image_digest = sha256(&format!("sha256:{}", "A".repeat(64)));
        respelled.seed_iso_sha256 = format!(" {} ", "B".repeat(64));
        respelled.distro = "Debian".to_string();
        respelled.release = "bookworm\n".to_string();
        assert_eq!(fingerprint(&respelled), base);
    }

    #[test]
    fn values_cannot_run_into_each_other() {
        // Without lengths, `release = "x\nseed…"` could imitate another field.
        let mut sneaky = inputs();
        sneaky.release = format!("bookworm\nseed_iso_sha256:64:{}", "b".repeat(64));
        assert_ne!(fingerprint(&sneaky), fingerprint(&inputs()));
    }

    #[test]
    fn the_encoding_is_pinned() {
        // A change here changes every recorded fingerprint and replaces every guest's disk.
        let root_disk_encoding = format!(
            "trog-provision-fingerprint-v1\nimage_sha256:64:{}\ndistro:6:debian\nrelease:8:bookworm\n\
             seed_iso_sha256:64:{}\ndisk_size_bytes:11:10737418240\n",
            "a".repeat(64),
            "b".repeat(64)
        );
        let shape_encoding = "memory_mib:4:2048\nvcpus:1:2\ncpu_mode:16:host-passthrough\n";
        let expected = ProvisionFingerprint {
            value: hex::encode(Sha256::digest(
                format!("{root_disk_encoding}{shape_encoding}").as_bytes(),
            )),
            root_disk: hex::encode(Sha256::digest(root_disk_encoding.as_bytes())),
        };
        assert_eq!(fingerprint(&inputs()), expected);
        insta::assert_snapshot!(fingerprint(&inputs()).value, @"86282bac4279b34ddc20440b2df19e4c88034916648316584a96c03698a1894a");
    }

    #[test]
    fn malformed_digests_and_empty_words_are_refused() {
        let mut short = inputs();
        short.seed_iso_sha256 = "abc".to_string();
        assert!(matches!(
            provision_fingerprint(&short),
            Err(FingerprintError::Digest {
                what: "seed ISO sha256",
                ..
            })
        ));
        let mut empty = inputs();
        empty.release = " ".to_string();
        assert!(matches!(
            provision_fingerprint(&empty),
            Err(FingerprintError::Empty { what: "release" })
        ));
    }
}
