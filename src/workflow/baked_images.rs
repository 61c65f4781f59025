//! Baked images (`bake_packages`) as the verbs see them: which one a guest's new root disk is
//! made over (`provision`, `status`), and `image prune`: the baked images in this machine's
//! image cache that no guest of the installation resolves to. A guest whose configuration
//! cannot be read, or whose packages' versions the mirror does not give, stops a prune: what it
//! would use is unknown, so nothing is removed.

use crate::config::guest::load_guest_with_recipe_settings;
use crate::config::load::list_domains;
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::diagnose::Failure;
use crate::generate::bake_inputs::bake_inputs;
use crate::generate::recipe_settings;
use crate::images::baked::{
    all_records, choose, prunable, read_record, remove, BakeChoice, BakedRecord, ResolvedBake,
};
use crate::images::build::BUILDABLE_DISTROS;
use crate::images::package_versions::PackageVersions;
use crate::workflow::inputs::GuestInputs;
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
    Ok(Some((
        choose(&resolved.inputs, &key, record, now, max_age_days),
        Some(resolved),
    )))
}

/// The keys of the baked images the installation's guests resolve to now.
pub fn keys_in_use(
    paths: &InstallationPaths,
    versions: &PackageVersions,
) -> Result<BTreeSet<String>, Failure> {
    let cookbook = load_cookbook(&recipes_dir()?)?;
    let settings = recipe_settings(&cookbook);
    let mut keys = BTreeSet::new();
    for domain in list_domains(paths)? {
        let config = load_guest_with_recipe_settings(paths, &domain, &settings)?;
        if let Some(inputs) = bake_inputs(&config, &cookbook)? {
            if !BUILDABLE_DISTROS.contains(&inputs.distro.as_str()) {
                continue;
            }
            let found = versions.resolve(&inputs)?;
            keys.insert(inputs.resolved(found).key());
        }
    }
    Ok(keys)
}

/// The baked images no guest uses; removed unless `dry_run`.
pub fn prune(
    paths: &InstallationPaths,
    image_cache: &Path,
    dry_run: bool,
) -> Result<Vec<BakedRecord>, Failure> {
    let in_use = keys_in_use(paths, &PackageVersions::default())?;
    let records = all_records(image_cache)?;
    let unused: Vec<BakedRecord> = prunable(&records, &in_use).into_iter().cloned().collect();
    if !dry_run {
        for record in &unused {
            remove(image_cache, record)?;
        }
    }
    Ok(unused)
}

/// Now, in seconds since the epoch: what an image's age is measured against.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
