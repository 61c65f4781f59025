//! The thin part: reading recipes.yaml and recipes.d from disk. Everything it reads goes
//! straight to the pure parsers in `recipes_file.rs` and `guest.rs`.

use crate::config::bounded_read::read_text_bounded;
use crate::config::error::GuestConfigError;
use crate::config::guest::{resolve_guest_on_machine, GuestConfig};
use crate::config::paths::InstallationPaths;
use crate::config::recipes_file::{parse_domain_file, parse_recipes_yaml, DomainFile, RecipesYaml};
use crate::config::yaml::Node;
use crate::model::names::DomainName;
use std::path::Path;

fn read(path: &Path) -> Result<String, GuestConfigError> {
    read_text_bounded(path).map_err(|source| GuestConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the installation's recipes.yaml (`_base`).
pub fn load_recipes_yaml(paths: &InstallationPaths) -> Result<RecipesYaml, GuestConfigError> {
    parse_recipes_yaml(&paths.recipes_yaml, &read(&paths.recipes_yaml)?)
}

/// Reads recipes.d/<domain>.yaml.
pub fn load_domain_file(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<DomainFile, GuestConfigError> {
    let path = paths.domain_file(domain);
    let text = read_text_bounded(&path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => GuestConfigError::NoDomainFile {
            domain: domain.clone(),
            path: path.clone(),
        },
        _ => GuestConfigError::Read {
            path: path.clone(),
            source,
        },
    })?;
    parse_domain_file(&path, domain, &text)
}

/// Reads and merges one guest's configuration. It does not refuse `CHANGEME`: callers that
/// generate or provision call [`crate::config::changeme::refuse_changeme`] on the result.
pub fn load_guest(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<GuestConfig, GuestConfigError> {
    load_guest_with_recipe_settings(paths, domain, &[])
}

/// [`load_guest`], also accepting in `_global` the keys the distro and machine recipes declare
/// (their values are the cookbook's to check).
pub fn load_guest_with_recipe_settings(
    paths: &InstallationPaths,
    domain: &DomainName,
    recipe_settings: &[String],
) -> Result<GuestConfig, GuestConfigError> {
    let recipes_yaml = load_recipes_yaml(paths)?;
    // A file in recipes.d that can never be a guest is an error of the installation, said on
    // every run rather than passed over: it is usually a guest someone meant to have.
    if let Err(
        error @ (GuestConfigError::DomainFileName { .. }
        | GuestConfigError::GuestFileExtension { .. }),
    ) = list_domains(paths)
    {
        return Err(error);
    }
    let domain_file = load_domain_file(paths, domain)?;
    let machine_file = machine_file_of(paths, &domain_file)?;
    resolve_guest_on_machine(
        &recipes_yaml,
        &domain_file,
        machine_file.as_ref(),
        recipe_settings,
    )
}

/// The file of the domain at the end of `file`'s `depends_on` chain: the machine the domain's
/// recipes run on. `None` for a domain with a machine of its own, and for a chain that cannot be
/// followed (a domain without a file, a cycle), which the site's graph refuses with the lines
/// of its `depends_on`s before any machine is asked anything. A machine's file that cannot be
/// read or parsed is the dependent's error too: its recipes would run with that file's settings.
fn machine_file_of(
    paths: &InstallationPaths,
    file: &DomainFile,
) -> Result<Option<DomainFile>, GuestConfigError> {
    let mut followed = vec![file.domain.clone()];
    let mut machine = None;
    let mut next = depends_on_in(file);
    while let Some(wanted) = next {
        if followed.contains(&wanted) {
            return Ok(None);
        }
        let wanted_file = match load_domain_file(paths, &wanted) {
            Ok(wanted_file) => wanted_file,
            Err(GuestConfigError::NoDomainFile { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        followed.push(wanted);
        next = depends_on_in(&wanted_file);
        machine = Some(wanted_file);
    }
    Ok(machine)
}

/// The domain a file's own `depends_on` names, when it names one.
fn depends_on_in(file: &DomainFile) -> Option<DomainName> {
    match &file.section.global.get("depends_on")?.value.value {
        Node::String(name) => DomainName::parse(name).ok(),
        _ => None,
    }
}

/// Every guest the installation describes: each `<fqdn>.yaml` in recipes.d, sorted. Other
/// files (site folders, editor backups) are passed over; a `.yaml` or `.yml` file whose name is
/// not `<fqdn>.yaml` is an error, since it would never be built.
pub fn list_domains(paths: &InstallationPaths) -> Result<Vec<DomainName>, GuestConfigError> {
    let listing_error = |source| GuestConfigError::ListDomains {
        path: paths.recipes_d.clone(),
        source,
    };
    let mut domains = Vec::new();
    for entry in std::fs::read_dir(&paths.recipes_d).map_err(listing_error)? {
        let entry = entry.map_err(listing_error)?;
        let path = entry.path();
        let is_yml = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(".yml"));
        if is_yml && entry.file_type().map_err(listing_error)?.is_file() {
            return Err(GuestConfigError::GuestFileExtension { path });
        }
        let Some(stem) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".yaml"))
        else {
            continue;
        };
        if !entry.file_type().map_err(listing_error)?.is_file() {
            continue;
        }
        let domain = DomainName::parse(stem)
            .map_err(|source| GuestConfigError::DomainFileName { path, source })?;
        domains.push(domain);
    }
    domains.sort();
    Ok(domains)
}
