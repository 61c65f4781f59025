//! `image prune`: the baked images in this machine's image cache that no guest of the
//! installation resolves to. A guest whose configuration cannot be read stops it: what it would
//! use is unknown, so nothing is removed.

use crate::config::guest::load_guest_with_recipe_settings;
use crate::config::load::list_domains;
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::diagnose::Failure;
use crate::generate::bake_inputs::bake_inputs;
use crate::generate::recipe_settings;
use crate::images::baked::{all_records, prunable, remove, BakedRecord};
use std::collections::BTreeSet;
use std::path::Path;

/// The keys of the baked images the installation's guests resolve to now.
pub fn keys_in_use(paths: &InstallationPaths) -> Result<BTreeSet<String>, Failure> {
    let cookbook = load_cookbook(&recipes_dir()?)?;
    let settings = recipe_settings(&cookbook);
    let mut keys = BTreeSet::new();
    for domain in list_domains(paths)? {
        let config = load_guest_with_recipe_settings(paths, &domain, &settings)?;
        if let Some(inputs) = bake_inputs(&config, &cookbook)? {
            keys.insert(inputs.key());
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
    let in_use = keys_in_use(paths)?;
    let records = all_records(image_cache)?;
    let unused: Vec<BakedRecord> = prunable(&records, &in_use).into_iter().cloned().collect();
    if !dry_run {
        for record in &unused {
            remove(image_cache, record)?;
        }
    }
    Ok(unused)
}
