//! Baked images (`bake_packages`) as the verbs see them: which one a guest's new root disk is
//! made over (`provision`, `status`), and `image prune`: the baked images in this machine's
//! image cache that no guest of the installation resolves to, and their copies in the
//! hypervisors' pools that nothing is layered over. A guest whose configuration cannot be read,
//! or whose packages' versions the mirror does not give, stops a prune: what it would use is
//! unknown, so nothing is removed.

use crate::config::guest::load_guest_with_recipe_settings;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::load::list_domains;
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::diagnose::Failure;
use crate::generate::bake_inputs::bake_inputs;
use crate::generate::recipe_settings;
use crate::hypervisor::{Hypervisor, VolumeUse};
use crate::images::baked::{
    all_records, choose, prunable, read_record, remove, remove_image, superseded, BakeChoice,
    BakedRecord, ResolvedBake,
};
use crate::images::build::{builder_digest, BUILDABLE_DISTROS};
use crate::images::package_versions::PackageVersions;
use crate::lock::Locks;
use crate::model::hypervisor::HypervisorConfig;
use crate::plan::resource_names::{self, base_image_volume};
use crate::plan::{Action, DesiredGuest, Plan};
use crate::workflow::inputs::GuestInputs;
use crate::workflow::lock::take_base_image_upload_lock;
use crate::workflow::open::connect_hypervisor;
use std::collections::BTreeSet;
use std::path::Path;

/// Which image a guest with `bake_packages` gets, from the mirror's versions of its packages
/// (read once per run through `versions`) and what the image cache holds; `None` for a guest
/// that does not ask for one. With the choice, the resolved inputs a build of it takes. Reads;
/// builds nothing. A mirror that cannot be read is the choice [`BakeChoice::Unresolved`], for
/// the caller to show (a plan) or refuse (a run).
pub fn bake_choice(
    guest: &GuestInputs,
    versions: &PackageVersions,
    image_cache: &Path,
    now: u64,
) -> Result<Option<(BakeChoice, Option<ResolvedBake>)>, Failure> {
    let Some(inputs) = bake_inputs(&guest.config, &guest.cookbook)? else {
        return Ok(None);
    };
    let max_age_days = guest.config.settings.baked_image_max_age_days;
    if !BUILDABLE_DISTROS.contains(&inputs.distro.as_str()) {
        // Nothing to resolve: the guest keeps its declared image.
        let key = String::new();
        return Ok(Some((choose(&inputs, &key, None, now, max_age_days), None)));
    }
    let resolved = match versions.resolve(&inputs) {
        Ok(found) => inputs.resolved(found),
        Err(error) => return Ok(Some((BakeChoice::Unresolved { error }, None))),
    };
    let key = resolved.key();
    let record = read_record(image_cache, &key)?;
    let mut choice = choose(&resolved.inputs, &key, record, now, max_age_days);
    // None for these versions: say which package moved, when an image of earlier ones is there.
    if let BakeChoice::Missing { .. } = choice {
        if let Some((previous, changed)) =
            superseded(&resolved, &builder_digest(), &all_records(image_cache)?)
        {
            choice = BakeChoice::Outdated {
                key,
                previous,
                changed,
            };
        }
    }
    Ok(Some((choice, Some(resolved))))
}

/// What the installation's guests that ask for a baked image resolve to now, with their
/// packages' versions (`versions` reads each suite once).
pub fn resolved_inputs(
    paths: &InstallationPaths,
    versions: &PackageVersions,
) -> Result<Vec<ResolvedBake>, Failure> {
    let cookbook = load_cookbook(&recipes_dir()?)?;
    let settings = recipe_settings(&cookbook);
    let mut resolved = Vec::new();
    for domain in list_domains(paths)? {
        let config = load_guest_with_recipe_settings(paths, &domain, &settings)?;
        if let Some(inputs) = bake_inputs(&config, &cookbook)? {
            if !BUILDABLE_DISTROS.contains(&inputs.distro.as_str()) {
                continue;
            }
            let found = versions.resolve(&inputs)?;
            resolved.push(inputs.resolved(found));
        }
    }
    Ok(resolved)
}

/// The keys of the baked images the installation's guests resolve to now.
pub fn keys_in_use(
    paths: &InstallationPaths,
    versions: &PackageVersions,
) -> Result<BTreeSet<String>, Failure> {
    Ok(resolved_inputs(paths, versions)?
        .iter()
        .map(ResolvedBake::key)
        .collect())
}

/// What became of a pruned image's copy in one hypervisor's pool (in a dry run: what would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyOutcome {
    /// Nothing used it: removed.
    Removed,
    /// Kept: what is layered over it, or the domains whose disk it is.
    Kept { by: Vec<String> },
    /// The hypervisor could not be asked, or the copy not removed: why.
    Unasked { why: String },
}

/// One baked image's copy in one hypervisor's pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCopy {
    pub hypervisor: String,
    pub pool: String,
    pub volume: String,
    pub outcome: CopyOutcome,
}

/// A baked image no guest uses, with its copies in the installation's hypervisors' pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedImage {
    pub record: BakedRecord,
    /// Its copies (pools without one are not listed).
    pub copies: Vec<PoolCopy>,
}

impl PrunedImage {
    /// Whether its record stays in the cache (its image file goes all the same): a copy is still
    /// in a pool, so a later prune can find and remove it once nothing uses it.
    pub fn record_kept(&self) -> bool {
        self.copies
            .iter()
            .any(|copy| copy.outcome != CopyOutcome::Removed)
    }
}

/// The baked images no guest uses, removed unless `dry_run`: from this machine's cache, and
/// their copies from the pool of every hypervisor of the installation where nothing is layered
/// over them and no domain uses them, each under the lock the copy's upload takes. A copy left
/// in a pool (used, or on a hypervisor that could not be asked) keeps the image's record, and
/// the next prune tries again.
pub fn prune(
    paths: &InstallationPaths,
    image_cache: &Path,
    locks: &Locks,
    dry_run: bool,
) -> Result<Vec<PrunedImage>, Failure> {
    let in_use = keys_in_use(paths, &PackageVersions::default())?;
    let records = all_records(image_cache)?;
    let mut pruned: Vec<PrunedImage> = prunable(&records, &in_use)
        .into_iter()
        .map(|record| PrunedImage {
            record: record.clone(),
            copies: Vec::new(),
        })
        .collect();
    if pruned.is_empty() {
        return Ok(pruned);
    }
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        None,
    );
    for hypervisor in &fleet.fleet.hypervisors {
        let connected = connect_hypervisor(hypervisor);
        for image in &mut pruned {
            let volume = base_image_volume(&image.record.image_sha256);
            let outcome = match &connected {
                Ok(opened) => prune_copy(opened.as_ref(), hypervisor, &volume, locks, dry_run),
                Err(failure) => Some(CopyOutcome::Unasked {
                    why: failure.chain().join(": "),
                }),
            };
            if let Some(outcome) = outcome {
                image.copies.push(PoolCopy {
                    hypervisor: hypervisor.name.to_string(),
                    pool: hypervisor.pool_name.clone(),
                    volume,
                    outcome,
                });
            }
        }
    }
    if !dry_run {
        for image in &pruned {
            if image.record_kept() {
                remove_image(image_cache, &image.record)?;
            } else {
                remove(image_cache, &image.record)?;
            }
        }
    }
    Ok(pruned)
}

/// The copy `volume` in `hypervisor`'s pool: removed (unless `dry_run`) when nothing uses it;
/// `None` when there is none.
pub(crate) fn prune_copy(
    opened: &dyn Hypervisor,
    hypervisor: &HypervisorConfig,
    volume: &str,
    locks: &Locks,
    dry_run: bool,
) -> Option<CopyOutcome> {
    let pool = hypervisor.pool_name.as_str();
    let unasked = |why: String| Some(CopyOutcome::Unasked { why });
    // A provision uploading this image waits, and one that finds it there has the lock after.
    let _lock = if dry_run {
        None
    } else {
        match take_base_image_upload_lock(locks, hypervisor, pool, volume, &mut |text| {
            locks.tell_wait(text)
        }) {
            Ok(held) => Some(held),
            Err(error) => return unasked(error.to_string()),
        }
    };
    match opened.volume_use(pool, volume) {
        Err(error) => unasked(error.to_string()),
        Ok(VolumeUse::Absent) => None,
        Ok(VolumeUse::Used { by }) => Some(CopyOutcome::Kept { by }),
        Ok(VolumeUse::Unused) if dry_run => Some(CopyOutcome::Removed),
        Ok(VolumeUse::Unused) => match remove_with_boot_files(opened, pool, volume) {
            Ok(()) => Some(CopyOutcome::Removed),
            Err(error) => unasked(error.to_string()),
        },
    }
}

/// Removes the base image `volume` and the boot files kept beside it, those first: a removal
/// that fails leaves the image, so the next prune finds it and tries again.
fn remove_with_boot_files(
    opened: &dyn Hypervisor,
    pool: &str,
    volume: &str,
) -> Result<(), crate::hypervisor::HypervisorFault> {
    // The boot files were written beside the image by a root program, not through libvirt: the
    // pool's listing names them once it is refreshed.
    opened.refresh_pool(pool)?;
    for kept in resource_names::kept_beside_base_image(volume) {
        opened.delete_volume(pool, &kept)?;
    }
    opened.delete_volume(pool, volume)?;
    Ok(())
}

/// Makes the root disk over the baked image: its volume in the pool is named by its digest like
/// any base image's, and uploaded from the cache the same way, under the same lock. The guest's
/// fingerprint keeps its declared image, so a baked image built anew rebuilds no guest: only a
/// root disk made afterwards is made over it.
pub fn over_baked_image(desired: &mut DesiredGuest, record: &BakedRecord, image_cache: &Path) {
    desired.base_image_volume = resource_names::base_image_volume(&record.image_sha256);
    desired.base_image_digest = record.image_sha256.clone();
    desired.partial_base_image_volume =
        resource_names::partial_base_image_volume(&record.image_sha256, &crate::lock::host_name());
    desired.base_image_source = format!("file://{}", record.image_path(image_cache).display());
}

/// Whether the plan makes a new root disk, the only time a base image is used.
pub fn makes_root_disk(plan: &Plan) -> bool {
    plan.actions
        .iter()
        .any(|action| matches!(action, Action::CreateRootVolume { .. }))
}

/// Now, in seconds since the epoch: what an image's age is measured against.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
#[path = "baked_images_tests.rs"]
mod tests;
