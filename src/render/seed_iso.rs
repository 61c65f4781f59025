//! The cloud-init NoCloud seed: an ISO 9660 image labelled `cidata` holding `user-data`,
//! `meta-data`, `network-config` and, when given, `vendor-data`.
//!
//! cloud-init finds the seed by its volume label and reads the files by their exact names. The
//! primary ISO 9660 tree cannot spell them (it allows only upper-case 8.3 names such as
//! `USER_DAT.;1`), so the image carries Rock Ridge names — what Linux's iso9660 driver uses first —
//! and a Joliet tree for readers without Rock Ridge: the same layout `genisoimage -J -r -V cidata`
//! gives, which is what cloud-init documents.
//!
//! Built in-process with `hadris-iso` 3.0.0-rc.2 rather than a hand-written writer: it writes Rock
//! Ridge `NM`/`PX`/`TF` entries and Joliet, reads no clock (every date comes from the time passed
//! in), and lays out a tree in a fixed order, so one input gives one image byte for byte. The
//! tests read the image back with `xorriso` and `isoinfo`, the same tools a person would use.
//! (Earlier `hadris-iso` releases stamped the image with the current time, hence the exact pin.)

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use hadris_fs::{Content, DateTime, Node, Owner, Permissions, SetAttr, Tree};
use hadris_iso::{IsoId, IsoLevel, IsoOptions};
use sha2::{Digest, Sha256};

/// The volume label cloud-init's NoCloud datasource looks for.
pub const SEED_VOLUME_LABEL: &str = "cidata";

/// The time every date in the image carries unless another is passed in: the Unix epoch, so
/// the image says nothing about when it was built and its digest depends only on its files.
pub const SEED_DEFAULT_UNIX_SECONDS: i64 = 0;

/// Files are read-only on a CD anyway; 0444 and owner 0:0 are what `genisoimage -r` records,
/// so a guest sees the same modes whichever tool made its seed.
const SEED_FILE_MODE: u32 = 0o444;
const SEED_DIRECTORY_MODE: u32 = 0o555;

/// What goes on the seed, one field per file cloud-init reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFiles {
    pub user_data: Vec<u8>,
    pub meta_data: Vec<u8>,
    /// Left out, cloud-init configures the first interface with DHCP.
    pub network_config: Option<Vec<u8>>,
    pub vendor_data: Option<Vec<u8>>,
}

impl SeedFiles {
    /// The files by the names cloud-init reads, in the order they are stored.
    pub fn named_files(&self) -> Vec<(&'static str, &[u8])> {
        let mut files = vec![("meta-data", self.meta_data.as_slice())];
        if let Some(network_config) = &self.network_config {
            files.push(("network-config", network_config.as_slice()));
        }
        files.push(("user-data", self.user_data.as_slice()));
        if let Some(vendor_data) = &self.vendor_data {
            files.push(("vendor-data", vendor_data.as_slice()));
        }
        files
    }
}

/// A built seed image and the sha256 of its bytes (lower-case hex).
#[derive(Clone, PartialEq, Eq)]
pub struct SeedIso {
    pub bytes: Vec<u8>,
    pub sha256_hex: String,
}

impl std::fmt::Debug for SeedIso {
    // The bytes hold user-data, which may carry password hashes and keys: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedIso")
            .field("len", &self.bytes.len())
            .field("sha256_hex", &self.sha256_hex)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SeedIsoError {
    #[error("the seed's time {unix_seconds} (Unix seconds) cannot be stored in an ISO 9660 image")]
    Time { unix_seconds: i64 },
    #[error("could not add `{file}` to the seed image")]
    AddFile {
        file: &'static str,
        #[source]
        source: Box<hadris_fs::PathError>,
    },
    // Boxed: the library's error is large, and this one travels through every `?` above it.
    #[error("could not lay out the seed image")]
    Write {
        #[source]
        source: Box<hadris_fs::PathError>,
    },
}

impl Diagnose for SeedIsoError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            SeedIsoError::Time { .. } => "pass a time between 1970 and 2155".to_string(),
            SeedIsoError::AddFile { .. } | SeedIsoError::Write { .. } => {
                "the seed files were accepted earlier, so this is a bug in trog; please report it"
                    .to_string()
            }
        })
    }
}

/// Builds the seed with every date at [`SEED_DEFAULT_UNIX_SECONDS`].
pub fn build_seed_iso(files: &SeedFiles) -> Result<SeedIso, SeedIsoError> {
    build_seed_iso_at(files, SEED_DEFAULT_UNIX_SECONDS)
}

/// Builds the seed with every date in it (volume, directories, files) at `unix_seconds`.
pub fn build_seed_iso_at(files: &SeedFiles, unix_seconds: i64) -> Result<SeedIso, SeedIsoError> {
    let time = DateTime::from_unix_seconds(unix_seconds)
        .map_err(|_| SeedIsoError::Time { unix_seconds })?;
    // ISO 9660 directory dates count years from 1900 in one byte.
    if !(0..=5_868_719_999).contains(&unix_seconds) {
        return Err(SeedIsoError::Time { unix_seconds });
    }
    let attributes = |mode: u32| {
        SetAttr::new()
            .with_permissions(Permissions::new(mode))
            .with_owner(Owner::new(0, 0))
            .with_modified(time)
            .with_accessed(time)
            .with_created(time)
    };
    let mut tree = Tree::new();
    for (name, bytes) in files.named_files() {
        let node =
            Node::file(Content::bytes(bytes.to_vec())).with_attrs(attributes(SEED_FILE_MODE));
        tree.insert(name, node)
            .map_err(|source| SeedIsoError::AddFile {
                file: name,
                source: Box::new(source),
            })?;
    }
    // Replacing the root with a directory node is how the root gets its attributes.
    tree.replace("", Node::dir().with_attrs(attributes(SEED_DIRECTORY_MODE)))
        .map_err(|source| SeedIsoError::AddFile {
            file: "/",
            source: Box::new(source),
        })?;

    let options = IsoOptions::new()
        .with_id(IsoId::Volume, SEED_VOLUME_LABEL)
        .with_id(IsoId::System, "LINUX")
        .with_id(IsoId::Application, "TROG")
        .with_level(IsoLevel::L1)
        .with_joliet()
        .with_rock_ridge()
        .with_time(time);

    // A `Vec<u8>` is a block device that grows as the writer fills it.
    let mut bytes: Vec<u8> = Vec::new();
    hadris_iso::sync::write(&mut bytes, &tree, &options).map_err(|source| SeedIsoError::Write {
        source: Box::new(source),
    })?;
    let sha256_hex = hex::encode(Sha256::digest(&bytes));
    Ok(SeedIso { bytes, sha256_hex })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SeedFiles {
        SeedFiles {
            user_data: b"#cloud-config\nhostname: web\n".to_vec(),
            meta_data: b"instance-id: web.example.test\nlocal-hostname: web\n".to_vec(),
            network_config: Some(b"version: 2\n".to_vec()),
            vendor_data: None,
        }
    }

    #[test]
    fn two_builds_are_byte_identical() {
        let first = build_seed_iso(&sample()).unwrap();
        let second = build_seed_iso(&sample()).unwrap();
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(first.sha256_hex, second.sha256_hex);
        assert_eq!(first.sha256_hex.len(), 64);
    }

    #[test]
    fn contents_and_time_change_the_image() {
        let base = build_seed_iso(&sample()).unwrap();
        let mut changed = sample();
        changed.user_data.push(b'\n');
        assert_ne!(
            build_seed_iso(&changed).unwrap().sha256_hex,
            base.sha256_hex
        );
        assert_ne!(
            build_seed_iso_at(&sample(), 1_700_000_000)
                .unwrap()
                .sha256_hex,
            base.sha256_hex
        );
    }

    #[test]
    fn the_primary_volume_descriptor_carries_the_label() {
        let iso = build_seed_iso(&sample()).unwrap();
        // Sector 16 holds the primary volume descriptor; the volume id is at offset 40.
        let descriptor = &iso.bytes[16 * 2048..17 * 2048];
        assert_eq!(&descriptor[1..6], b"CD001");
        assert_eq!(&descriptor[40..46], b"cidata");
        assert!(descriptor[46..72].iter().all(|&byte| byte == b' '));
    }

    #[test]
    fn the_debug_form_hides_the_contents() {
        let iso = build_seed_iso(&sample()).unwrap();
        assert!(!format!("{iso:?}").contains("cloud-config"));
    }

    #[test]
    fn a_time_before_the_epoch_is_refused() {
        assert!(matches!(
            build_seed_iso_at(&sample(), -1),
            Err(SeedIsoError::Time { .. })
        ));
    }
}
