//! Sizes with their unit in the type, so a MiB is never added to a byte count.
//!
//! Configuration writes sizes as a number with an optional binary suffix (`K`, `M`, `G`, `T`,
//! optionally followed by `iB` or `B`; both mean powers of 1024 as in libvirt and qemu-img).
//! A bare number is read in the unit each setting documents: MiB for memory, GiB for disk.

use serde::{Deserialize, Serialize};
use std::fmt;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
const TIB: u64 = 1024 * GIB;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a size: {why}")]
pub struct SizeError {
    pub text: String,
    pub why: String,
}

/// Parses `text` into bytes; a bare number is multiplied by `bare_unit_bytes`.
fn parse_bytes(text: &str, bare_unit_bytes: u64) -> Result<u64, SizeError> {
    let refuse = |why: &str| SizeError {
        text: text.to_string(),
        why: why.to_string(),
    };
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(refuse(
            "it does not start with a number (write e.g. `4096`, `4G` or `20GiB`)",
        ));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| refuse("the number is too large"))?;
    let unit = match suffix.trim().to_ascii_uppercase().as_str() {
        "" => bare_unit_bytes,
        "B" => 1,
        "K" | "KB" | "KIB" => KIB,
        "M" | "MB" | "MIB" => MIB,
        "G" | "GB" | "GIB" => GIB,
        "T" | "TB" | "TIB" => TIB,
        _ => return Err(refuse("the unit is not one of K, M, G or T")),
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| refuse("it is too large"))
}

/// An amount of memory in mebibytes, the unit libvirt and `hypervisors.conf` count memory in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct MiB(pub u64);

impl MiB {
    /// Reads a memory size; a bare number is MiB.
    pub fn parse(text: &str) -> Result<MiB, SizeError> {
        let bytes = parse_bytes(text, MIB)?;
        if bytes % MIB != 0 {
            return Err(SizeError {
                text: text.to_string(),
                why: "memory is counted in whole MiB".into(),
            });
        }
        Ok(MiB(bytes / MIB))
    }

    pub fn from_kib(kib: u64) -> MiB {
        MiB(kib / 1024)
    }

    pub fn kib(self) -> u64 {
        self.0 * 1024
    }

    pub fn saturating_sub(self, other: MiB) -> MiB {
        MiB(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for MiB {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}MB", self.0)
    }
}

impl std::ops::Add for MiB {
    type Output = MiB;
    fn add(self, other: MiB) -> MiB {
        MiB(self.0 + other.0)
    }
}

impl std::iter::Sum for MiB {
    fn sum<I: Iterator<Item = MiB>>(iter: I) -> MiB {
        MiB(iter.map(|m| m.0).sum())
    }
}

/// An amount of storage in bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Reads a disk size; a bare number is GiB.
    pub fn parse_disk(text: &str) -> Result<Bytes, SizeError> {
        parse_bytes(text, GIB).map(Bytes)
    }

    pub fn from_gib(gib: u64) -> Bytes {
        Bytes(gib * GIB)
    }

    /// Whole GiB, rounded down, for messages.
    pub fn whole_gib(self) -> u64 {
        self.0 / GIB
    }

    pub fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }
}

/// Disk sizes print in whole GB when they are whole, as the specification's messages do.
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % GIB == 0 {
            write!(f, "{}GB", self.0 / GIB)
        } else if self.0 % MIB == 0 {
            write!(f, "{}MB", self.0 / MIB)
        } else {
            write!(f, "{}B", self.0)
        }
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;
    fn add(self, other: Bytes) -> Bytes {
        Bytes(self.0 + other.0)
    }
}

/// The least memory a guest is given: the Debian and Ubuntu cloud images trog boots do not come
/// up in less (the kernel, initramfs and cloud-init need it before anything of a recipe runs).
pub const GUEST_MIN_MEMORY: MiB = MiB(128);
/// The smallest root disk: less does not hold a cloud image's root file system.
pub const GUEST_MIN_DISK: Bytes = Bytes(GIB);
/// The most virtual CPUs one guest gets: beyond 255, QEMU needs an emulated IOMMU with interrupt
/// remapping, which the domain trog writes does not have.
pub const GUEST_MAX_CPUS: u32 = 255;

/// Why a guest cannot have `memory`, if it cannot.
pub fn guest_memory_problem(memory: MiB) -> Option<String> {
    (memory < GUEST_MIN_MEMORY)
        .then(|| format!("{memory} is less than a guest boots in (at least {GUEST_MIN_MEMORY})"))
}

/// Why a guest cannot have a root disk of `size`, if it cannot.
pub fn guest_disk_problem(size: Bytes) -> Option<String> {
    (size < GUEST_MIN_DISK)
        .then(|| format!("{size} is less than a root disk holds (at least {GUEST_MIN_DISK})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes() {
        assert_eq!(MiB::parse("4096").unwrap(), MiB(4096));
        assert_eq!(MiB::parse("4G").unwrap(), MiB(4096));
        assert_eq!(MiB::parse("4GiB").unwrap(), MiB(4096));
        assert_eq!(MiB::parse("512M").unwrap(), MiB(512));
        assert!(MiB::parse("1K").is_err());
        assert!(MiB::parse("lots").is_err());
        assert!(MiB::parse("4X").is_err());
    }

    #[test]
    fn disk_sizes() {
        assert_eq!(Bytes::parse_disk("20").unwrap(), Bytes::from_gib(20));
        assert_eq!(Bytes::parse_disk("20G").unwrap(), Bytes::from_gib(20));
        assert_eq!(Bytes::parse_disk("1T").unwrap(), Bytes::from_gib(1024));
        assert_eq!(Bytes::from_gib(500).to_string(), "500GB");
    }

    #[test]
    fn guests_have_a_least_memory_and_disk() {
        assert!(guest_memory_problem(MiB(0)).is_some());
        assert!(guest_memory_problem(MiB(127)).is_some());
        assert!(guest_memory_problem(MiB(128)).is_none());
        assert!(guest_disk_problem(Bytes(0)).is_some());
        assert!(guest_disk_problem(Bytes::from_gib(1)).is_none());
    }
}
