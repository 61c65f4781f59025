//! What a guest's baked image is built from (`bake_packages`): its release and mirrors, and every
//! package cloud-init and the finish install for it. Read from the configuration and the
//! cookbook alone (no secret), so `image prune` finds every guest's image as `provision` does.

use crate::config::guest::GuestConfig;
use crate::cookbook::load::Cookbook;
use crate::generate::{resolve_guest_recipes, seed_packages, GenerateError};
use crate::images::baked::BakeInputs;
use crate::images::build::{default_security_mirror, DEBIAN_ARCHIVE};

/// The inputs of `config`'s baked image; `None` when the guest does not ask for one.
pub fn bake_inputs(
    config: &GuestConfig,
    cookbook: &Cookbook,
) -> Result<Option<BakeInputs>, GenerateError> {
    let settings = &config.settings;
    if !settings.bake_packages {
        return Ok(None);
    }
    let resolved = resolve_guest_recipes(config, cookbook)?;
    let first_boot = cookbook
        .get_str(resolved.distro.as_str())
        .and_then(|recipe| recipe.manifest.distro.as_ref())
        .map(|distro| distro.first_boot.packages.clone())
        .unwrap_or_default();
    let mut packages = seed_packages(&first_boot, &resolved.packages);
    for extra in &settings.packages {
        if !packages.contains(extra) {
            packages.push(extra.clone());
        }
    }
    let mirror = settings
        .mirror
        .clone()
        .unwrap_or_else(|| DEBIAN_ARCHIVE.to_string());
    let security_mirror = settings
        .security_mirror
        .clone()
        .unwrap_or_else(|| default_security_mirror(&mirror));
    let mut inputs = BakeInputs::new(
        settings.distro.as_str(),
        &resolved.release,
        &mirror,
        &security_mirror,
        &packages,
    );
    inputs.fallback_mirrors = settings.fallback_mirrors.clone();
    // Without its own fallbacks, the security suite falls back as the main archive's do.
    inputs.fallback_security_mirrors = if settings.fallback_security_mirrors.is_empty() {
        settings
            .fallback_mirrors
            .iter()
            .map(|fallback| default_security_mirror(fallback))
            .collect()
    } else {
        settings.fallback_security_mirrors.clone()
    };
    Ok(Some(inputs))
}
