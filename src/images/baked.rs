//! Baked images: a guest's base image built with the packages its recipes install already in it
//! (`bake_packages: true`), so a new root disk is finished without unpacking and configuring
//! them again. Guests whose package sets are equal share one image.
//!
//! An image is filed in the image cache under its sha256 like any built image; beside it,
//! `baked-<key>.json` records what it was built from and when. The key is a digest of exactly
//! what determines the image: the distribution, release, mirrors, each listed package with the
//! version the mirror offers it at now (`package_versions`), and the builder (its script and
//! base package list). A new version of a listed package makes a new key; the packages the
//! listed ones pull in are not resolved, which is why an image's age is still bounded
//! (`baked_image_max_age_days`), and the guest's own finish still runs apt.

use crate::images::build::{build_image, builder_digest, ImageBuildError, ImageRecipe};
use crate::images::package_versions::VersionsUnresolved;
use crate::machine::Machine;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The first line of the key's encoding: changing the encoding on purpose changes every key.
const KEY_ENCODING_VERSION: &str = "trog-baked-image-v2";

/// What a baked image is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BakeInputs {
    pub distro: String,
    pub release: String,
    pub mirror: String,
    pub security_mirror: String,
    /// Sorted, each once.
    pub packages: Vec<String>,
    /// Asked in order when `mirror` (`security_mirror`) fails a request: the same archive, so
    /// not part of the key.
    pub fallback_mirrors: Vec<String>,
    pub fallback_security_mirrors: Vec<String>,
}

impl BakeInputs {
    pub fn new(
        distro: &str,
        release: &str,
        mirror: &str,
        security_mirror: &str,
        packages: &[String],
    ) -> BakeInputs {
        let packages: BTreeSet<String> = packages.iter().cloned().collect();
        BakeInputs {
            distro: distro.to_string(),
            release: release.to_string(),
            mirror: mirror.trim_end_matches('/').to_string(),
            security_mirror: security_mirror.trim_end_matches('/').to_string(),
            packages: packages.into_iter().collect(),
            fallback_mirrors: Vec::new(),
            fallback_security_mirrors: Vec::new(),
        }
    }

    /// These inputs with the versions their packages resolve to (`package_versions`).
    pub fn resolved(self, versions: BTreeMap<String, String>) -> ResolvedBake {
        ResolvedBake {
            inputs: self,
            versions,
        }
    }
}

/// Bake inputs with the version each listed package resolves to on the mirror now: what an
/// image's key is made of. A package no index holds has no version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBake {
    pub inputs: BakeInputs,
    pub versions: BTreeMap<String, String>,
}

impl ResolvedBake {
    /// The key of the image these inputs make with the builder whose digest is `builder`.
    pub fn key_with_builder(&self, builder: &str) -> String {
        let inputs = &self.inputs;
        let mut encoding = format!("{KEY_ENCODING_VERSION}\n");
        let mut push = |name: &str, value: &str| {
            // The length makes the encoding unambiguous whatever the values hold.
            encoding.push_str(&format!("{name}:{}:{value}\n", value.len()));
        };
        push("distro", &inputs.distro);
        push("release", &inputs.release);
        push("mirror", &inputs.mirror);
        push("security_mirror", &inputs.security_mirror);
        push("builder", builder);
        for package in &inputs.packages {
            match self.versions.get(package) {
                Some(version) => push("package", &format!("{package}={version}")),
                None => push("package", package),
            }
        }
        hex::encode(Sha256::digest(encoding.as_bytes()))
    }

    /// The key with this trog's builder.
    pub fn key(&self) -> String {
        self.key_with_builder(&builder_digest())
    }
}

/// What `baked-<key>.json` records of one image.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BakedRecord {
    pub key: String,
    /// Seconds since the epoch, UTC.
    pub built_at: u64,
    pub distro: String,
    pub release: String,
    pub mirror: String,
    pub security_mirror: String,
    pub packages: Vec<String>,
    /// The version each listed package resolved to when the key was made (none for an image
    /// recorded before versions were part of the key).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, String>,
    /// The builder's digest ([`builder_digest`]).
    pub builder: String,
    /// The image's sha256: it is `sha256-<hex>.img` in the cache.
    pub image_sha256: String,
}

impl BakedRecord {
    pub fn image_path(&self, cache_dir: &Path) -> PathBuf {
        cache_dir.join(format!("sha256-{}.img", self.image_sha256))
    }

    pub fn short_key(&self) -> &str {
        short(&self.key)
    }
}

pub fn short(key: &str) -> &str {
    &key[..key.len().min(12)]
}

fn record_path(cache_dir: &Path, key: &str) -> PathBuf {
    cache_dir.join(format!("baked-{key}.json"))
}

/// Which image a guest that asks for a baked one gets, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BakeChoice {
    /// A baked image for its package set, within the age bound.
    Fresh {
        record: BakedRecord,
        age_seconds: u64,
    },
    /// None for its package set yet: the next run that makes a root disk builds one.
    Missing { key: String, packages: usize },
    /// None for its package set at the versions the mirror offers now, but one for an earlier
    /// version of some of them (`previous`): the next run that makes a root disk builds one.
    Outdated {
        key: String,
        previous: BakedRecord,
        /// Each package whose version moved.
        changed: Vec<VersionChange>,
    },
    /// One older than the bound: the next run that makes a root disk builds a new one.
    Stale {
        record: BakedRecord,
        age_seconds: u64,
        max_age_days: u32,
    },
    /// trog cannot build one of this guest's distribution: it gets its declared image.
    Unbuildable { distro: String },
    /// The mirror did not say which versions the packages would get, so which image is unknown:
    /// a plan shows the declared image, and a run that would make a root disk stops before it.
    Unresolved { error: VersionsUnresolved },
}

const DAY: u64 = 24 * 3600;

/// Whether trog builds images of `distro`: a guest of another one keeps its declared image even
/// with `bake_packages`, and installs its packages on first boot as any other guest does.
pub fn can_bake(distro: &str) -> bool {
    crate::images::build::BUILDABLE_DISTROS.contains(&distro)
}

/// Picks the image from what the cache holds (`record`) at `now` (seconds since the epoch).
pub fn choose(
    inputs: &BakeInputs,
    key: &str,
    record: Option<BakedRecord>,
    now: u64,
    max_age_days: u32,
) -> BakeChoice {
    if !can_bake(&inputs.distro) {
        return BakeChoice::Unbuildable {
            distro: inputs.distro.clone(),
        };
    }
    match record {
        None => BakeChoice::Missing {
            key: key.to_string(),
            packages: inputs.packages.len(),
        },
        Some(record) => {
            let age_seconds = now.saturating_sub(record.built_at);
            if age_seconds > u64::from(max_age_days) * DAY {
                BakeChoice::Stale {
                    record,
                    age_seconds,
                    max_age_days,
                }
            } else {
                BakeChoice::Fresh {
                    record,
                    age_seconds,
                }
            }
        }
    }
}

impl BakeChoice {
    /// The image the guest's root disk is made over, when there is one to use now.
    pub fn fresh(&self) -> Option<&BakedRecord> {
        match self {
            BakeChoice::Fresh { record, .. } => Some(record),
            _ => None,
        }
    }

    /// Whether a run that makes a root disk builds a baked image first.
    pub fn needs_build(&self) -> bool {
        matches!(
            self,
            BakeChoice::Missing { .. } | BakeChoice::Outdated { .. } | BakeChoice::Stale { .. }
        )
    }
}

impl BakeChoice {
    /// Why a run builds an image, for the plan of the run that built it.
    pub fn why_built(&self) -> Option<String> {
        match self {
            BakeChoice::Missing { .. } => Some("there was none for this package set".into()),
            BakeChoice::Outdated { changed, .. } => {
                Some(format!("the mirror has new versions: {}", changes(changed)))
            }
            BakeChoice::Stale {
                record,
                max_age_days,
                ..
            } => Some(format!(
                "the one built {} was older than {max_age_days}d",
                crate::lock::utc_timestamp(record.built_at)
            )),
            BakeChoice::Fresh { .. }
            | BakeChoice::Unbuildable { .. }
            | BakeChoice::Unresolved { .. } => None,
        }
    }
}

impl std::fmt::Display for BakeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BakeChoice::Fresh { record, .. } => write!(
                f,
                "baked image {} built {}, holds {} package{} of its recipes",
                record.short_key(),
                crate::lock::utc_timestamp(record.built_at),
                record.packages.len(),
                if record.packages.len() == 1 { "" } else { "s" }
            ),
            BakeChoice::Missing { key, packages } => write!(
                f,
                "building a baked image {} first: none for this package set ({packages} package{})",
                short(key),
                if *packages == 1 { "" } else { "s" }
            ),
            BakeChoice::Outdated {
                key,
                previous,
                changed,
            } => write!(
                f,
                "building a baked image {} first: the mirror has new versions of its packages since the one built {}: {}",
                short(key),
                crate::lock::utc_timestamp(previous.built_at),
                changes(changed)
            ),
            BakeChoice::Stale {
                record,
                age_seconds,
                max_age_days,
            } => write!(
                f,
                "building a baked image {} first: the one built {} is {} day{} old, older than {max_age_days}d (baked_image_max_age_days)",
                record.short_key(),
                crate::lock::utc_timestamp(record.built_at),
                age_seconds / DAY,
                if age_seconds / DAY == 1 { "" } else { "s" }
            ),
            BakeChoice::Unbuildable { distro } => write!(
                f,
                "its declared base image: trog builds images of {} only, not of {distro}",
                crate::images::build::BUILDABLE_DISTROS.join(", ")
            ),
            BakeChoice::Unresolved { error } => write!(
                f,
                "unknown, {error}; a provision stops here and changes nothing"
            ),
        }
    }
}

/// A listed package whose version on the mirror is not the one an earlier image holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChange {
    pub package: String,
    /// The earlier image's version (`none`: the mirror had none then).
    pub was: String,
    /// The mirror's now (`none`: it has none now).
    pub now: String,
}

/// `nginx 1.22.1-9+deb12u1 (was 1.22.1-9), …`
fn changes(changed: &[VersionChange]) -> String {
    changed
        .iter()
        .map(|change| format!("{} {} (was {})", change.package, change.now, change.was))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Of `records`, the newest built from the same inputs as `resolved` (and by the same
/// `builder`) at other versions of its packages, with each package whose version moved: why a
/// new image is built when there is none for `resolved`'s key. Records made before versions
/// were part of the key hold none to compare with, and are not taken.
pub fn superseded(
    resolved: &ResolvedBake,
    builder: &str,
    records: &[BakedRecord],
) -> Option<(BakedRecord, Vec<VersionChange>)> {
    let inputs = &resolved.inputs;
    let previous = records
        .iter()
        .filter(|record| {
            record.distro == inputs.distro
                && record.release == inputs.release
                && record.mirror == inputs.mirror
                && record.security_mirror == inputs.security_mirror
                && record.packages == inputs.packages
                && record.builder == builder
                && !record.versions.is_empty()
        })
        .max_by_key(|record| record.built_at)?;
    let absent = || "none".to_string();
    let changed: Vec<VersionChange> = inputs
        .packages
        .iter()
        .filter(|name| previous.versions.get(*name) != resolved.versions.get(*name))
        .map(|name| VersionChange {
            package: name.clone(),
            was: previous.versions.get(name).cloned().unwrap_or_else(absent),
            now: resolved.versions.get(name).cloned().unwrap_or_else(absent),
        })
        .collect();
    (!changed.is_empty()).then(|| (previous.clone(), changed))
}

#[derive(Debug, thiserror::Error)]
pub enum BakedError {
    #[error("cannot read the baked image record {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot keep the baked image record in {}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove {}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::diagnose::Diagnose for BakedError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        match self {
            BakedError::Read { path, .. } => Some(format!(
                "delete {} (and its image): the next provision that makes a root disk builds it again",
                path.display()
            )),
            BakedError::Write { .. } | BakedError::Remove { .. } => {
                Some("set XDG_CACHE_HOME to a writable directory".into())
            }
        }
    }
}

/// The record of `key` in the cache, if it is there with its image.
pub fn read_record(cache_dir: &Path, key: &str) -> Result<Option<BakedRecord>, BakedError> {
    let path = record_path(cache_dir, key);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(BakedError::Read {
                path,
                source: Box::new(error),
            })
        }
    };
    let record: BakedRecord = serde_json::from_str(&text).map_err(|error| BakedError::Read {
        path: path.clone(),
        source: Box::new(error),
    })?;
    // A record whose image is gone counts as no image: it is built again.
    Ok(record.image_path(cache_dir).exists().then_some(record))
}

/// Every record in the cache, in key order.
pub fn all_records(cache_dir: &Path) -> Result<Vec<BakedRecord>, BakedError> {
    let entries = match std::fs::read_dir(cache_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(BakedError::Read {
                path: cache_dir.to_path_buf(),
                source: Box::new(error),
            })
        }
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(key) = name
            .strip_prefix("baked-")
            .and_then(|rest| rest.strip_suffix(".json"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).map_err(|error| BakedError::Read {
            path: entry.path(),
            source: Box::new(error),
        })?;
        let record: BakedRecord =
            serde_json::from_str(&text).map_err(|error| BakedError::Read {
                path: entry.path(),
                source: Box::new(error),
            })?;
        if record.key == key {
            records.push(record);
        }
    }
    records.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(records)
}

/// Either failure of a bake.
#[derive(Debug, thiserror::Error)]
pub enum BakeError {
    #[error("cannot build the baked image {}", short(key))]
    Build {
        key: String,
        #[source]
        source: ImageBuildError,
    },
    #[error(transparent)]
    Record(#[from] BakedError),
}

impl crate::diagnose::Diagnose for BakeError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            BakeError::Build { source, .. } => source.exit_status(),
            BakeError::Record(error) => error.exit_status(),
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            BakeError::Build { source, .. } => source
                .hint()
                .map(|hint| format!("{hint}; or set `bake_packages: false` for the guest")),
            BakeError::Record(error) => error.hint(),
        }
    }
}

/// Builds the image of `inputs` on `machine` (this one: the cache is local), files it in
/// `cache_dir` with its record, and removes the image the record replaces (a guest's root disk
/// is made over the copy in its hypervisor's pool, never over this file). Builds of one key
/// wait for each other: a run that waited takes the image the other built, when it is within
/// `max_age_days`.
pub fn bake(
    machine: &dyn Machine,
    resolved: &ResolvedBake,
    cache_dir: &Path,
    now: u64,
    max_age_days: u32,
) -> Result<BakedRecord, BakeError> {
    let inputs = &resolved.inputs;
    let key = resolved.key();
    let write_error = |source| BakedError::Write {
        dir: cache_dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(cache_dir).map_err(write_error)?;
    let lock =
        std::fs::File::create(cache_dir.join(format!("baked-{key}.lock"))).map_err(write_error)?;
    // Released when `lock` is closed, at the end of this function or of the process.
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; it touches no memory.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(write_error(std::io::Error::last_os_error()).into());
    }
    let replaced = read_record(cache_dir, &key)?;
    if let Some(record) = replaced.clone().and_then(|record| {
        choose(inputs, &key, Some(record), now, max_age_days)
            .fresh()
            .cloned()
    }) {
        return Ok(record);
    }
    let recipe = ImageRecipe {
        distro: inputs.distro.clone(),
        release: inputs.release.clone(),
        mirror: inputs.mirror.clone(),
        fallback_mirrors: inputs.fallback_mirrors.clone(),
        security_mirror: inputs.security_mirror.clone(),
        fallback_security_mirrors: inputs.fallback_security_mirrors.clone(),
        extra_packages: inputs.packages.clone(),
        overlay: None,
    };
    let built = build_image(machine, &recipe, cache_dir).map_err(|source| BakeError::Build {
        key: key.clone(),
        source,
    })?;
    let record = BakedRecord {
        key: key.clone(),
        built_at: now,
        distro: inputs.distro.clone(),
        release: inputs.release.clone(),
        mirror: inputs.mirror.clone(),
        security_mirror: inputs.security_mirror.clone(),
        packages: inputs.packages.clone(),
        versions: resolved.versions.clone(),
        builder: builder_digest(),
        image_sha256: built.sha256.clone(),
    };
    write_record(cache_dir, &record)?;
    if let Some(old) = replaced.filter(|old| old.image_sha256 != record.image_sha256) {
        remove_image(cache_dir, &old)?;
    }
    Ok(record)
}

fn write_record(cache_dir: &Path, record: &BakedRecord) -> Result<(), BakedError> {
    let write_error = |source| BakedError::Write {
        dir: cache_dir.to_path_buf(),
        source,
    };
    let mut file = tempfile::NamedTempFile::new_in(cache_dir).map_err(write_error)?;
    let text = serde_json::to_string_pretty(record).expect("a record serialises");
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(write_error)?;
    file.persist(record_path(cache_dir, &record.key))
        .map_err(|error| write_error(error.error))?;
    Ok(())
}

/// Removes a record's image and package list (not the record).
pub fn remove_image(cache_dir: &Path, record: &BakedRecord) -> Result<(), BakedError> {
    for path in [
        record.image_path(cache_dir),
        cache_dir.join(format!("sha256-{}.packages", record.image_sha256)),
    ] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(BakedError::Remove { path, source }),
        }
    }
    Ok(())
}

/// The records no guest's package set resolves to (`in_use`: the keys that guests resolve to),
/// which `image prune` removes.
pub fn prunable<'a>(records: &'a [BakedRecord], in_use: &BTreeSet<String>) -> Vec<&'a BakedRecord> {
    records
        .iter()
        .filter(|record| !in_use.contains(&record.key))
        .collect()
}

/// Removes a record and its image.
pub fn remove(cache_dir: &Path, record: &BakedRecord) -> Result<(), BakedError> {
    remove_image(cache_dir, record)?;
    let path = record_path(cache_dir, &record.key);
    std::fs::remove_file(&path).map_err(|source| BakedError::Remove { path, source })
}

#[cfg(test)]
#[path = "baked_tests.rs"]
mod tests;
