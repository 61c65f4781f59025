//! Generating everything one guest needs from the installation's configuration: the resolved
//! recipes, the cloud-init seed (files and ISO), the rendered files and Makefile, the payload
//! archive, and the fingerprints the planner compares.
//!
//! [`generate`] is pure: the configuration, the cookbook, the site's files, the guest's public
//! key and the secrets its recipes reference are handed in. [`site_files`] is the thin loader.

pub mod bake_inputs;
pub mod desired;
mod site;

pub use site::{load_site_files, SiteFiles, SiteFilesError};

use crate::config::guest::GuestConfig;
use crate::cookbook::args_schema::SecretReference;
use crate::cookbook::load::Cookbook;
use crate::cookbook::manifest::RecipeKind;
use crate::cookbook::resolve::{
    resolve_recipes, GuestRecipes, ResolveError, ResolvedRecipes, MACHINE_RECIPE,
};
use crate::images::baked::can_bake;
use crate::model::digest::{DigestAlgorithm, ImageDigest};
use crate::render::cloud_init::{
    render_seed, CloudInitError, SeedFiles, SeedHostKey, SeedInput, SeedRevision,
};
use crate::render::domain_xml::DiskBus;
use crate::render::domain_xml::{mac_address_for, CpuMode, DomainXmlError, MacAddress};
use crate::render::extra_disks::{extra_disks, mount_problem, DiskProblem, ExtraDisk};
use crate::render::files::{render_files_with_secrets, RenderedFile};
use crate::render::fingerprint::{
    provision_fingerprint, BootInputs, FingerprintError, ProvisionFingerprint,
};
use crate::render::machine_definition::MachineDefinition;
use crate::render::makefile::render_makefile_with_secrets;
use crate::render::payload::{build_payload, Payload, PayloadEntry, PayloadError};
use crate::render::seed_iso::{build_seed_iso, SeedIso, SeedIsoError};
use crate::render::shared_folders::SharedFolderError;
use crate::render::templates::{template_environment, GuestFacts, ResolvedSecrets};
use serde_json::Value;

/// Where the site's archive sits in the payload; the `data` recipe unpacks it from there.
pub const SITE_ARCHIVE_IN_PAYLOAD: &str = "data.tar.gz";

/// Everything built for one guest, before any hypervisor is touched. Its rendered files and
/// Makefile may carry secrets: Debug shows the Makefile's size, not its text.
pub struct GeneratedGuest {
    pub resolved: ResolvedRecipes,
    pub seed: SeedFiles,
    pub seed_iso: SeedIso,
    /// The sha256 of the seed ISO as it is without the guest's host key, with cloud-init's
    /// package pass and at the seed's first revision ([`SeedRevision::IDENTITY`]): the seed's
    /// identity in the provision fingerprint. Neither the host key, nor whether the root disk is
    /// made over a baked image (`bake_packages`), nor the seed's revision makes a new root disk.
    pub seed_identity_sha256: String,
    /// The other seeds that are this one in all a root disk already made cares about: the
    /// same without the host key (what a guest built before trog made host keys carries), the
    /// same with or without cloud-init's package pass (the finish installs the packages either
    /// way), and the same at another revision. A guest whose attached seed is one of them keeps
    /// it.
    pub equivalent_seed_sha256s: Vec<String>,
    pub files: Vec<RenderedFile>,
    pub makefile: String,
    pub payload: Payload,
    /// The base image to boot from: the guest's own `image`, or the distro recipe's.
    pub image_url: String,
    pub image_digest: ImageDigest,
    pub mac_address: MacAddress,
    pub cpu_mode: CpuMode,
    pub fingerprint: ProvisionFingerprint,
    /// The `vm` recipe's effective arguments (firmware, disk knobs, data volume).
    pub machine: Value,
    /// The machine's definition read from them and `_global`: what the domain is defined with
    /// and the fingerprint covers.
    pub machine_definition: MachineDefinition,
    /// The extra disks the `vm` recipe declares, checked: volumes of their own, kept across
    /// root-disk rebuilds, attached by serial and mounted by the finish.
    pub extra_disks: Vec<ExtraDisk>,
    /// Where `data_volume_size` was written (`file:line:column`), when it was.
    pub data_volume_declared_at: Option<String>,
}

impl std::fmt::Debug for GeneratedGuest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GeneratedGuest")
            .field("resolved", &self.resolved)
            .field("seed", &self.seed)
            .field("seed_iso", &self.seed_iso)
            .field("files", &self.files)
            .field("makefile", &format_args!("<{} bytes>", self.makefile.len()))
            .field("payload", &self.payload)
            .field("image_url", &self.image_url)
            .field("image_digest", &self.image_digest)
            .field("mac_address", &self.mac_address)
            .field("cpu_mode", &self.cpu_mode)
            .field("fingerprint", &self.fingerprint)
            .field("machine", &self.machine)
            .field("machine_definition", &self.machine_definition)
            .field("extra_disks", &self.extra_disks)
            .field("data_volume_declared_at", &self.data_volume_declared_at)
            .finish()
    }
}

/// The secrets a generation needs, looked up by the caller (from the secret store).
pub trait SecretLookup {
    /// The value a recipe argument's `secret:Group/Entry/Field` reference names.
    fn resolve(
        &mut self,
        reference: &SecretReference,
    ) -> Result<crate::credentials::Secret, Box<dyn std::error::Error + Send + Sync>>;
}

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("cannot resolve {reference} for recipe {recipe}")]
    Secret {
        recipe: String,
        reference: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot render the recipes of {domain}")]
    Render {
        domain: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    CloudInit(#[from] CloudInitError),
    #[error(transparent)]
    SeedIso(#[from] SeedIsoError),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    #[error(transparent)]
    DomainXml(#[from] DomainXmlError),
    /// A `cpu_mode` that is none of the modes nor a model's name, where it was written.
    #[error("{at}: `_global.cpu_mode`: {problem}")]
    CpuMode {
        /// Where it was written (`file:line:column`), or the guest's file.
        at: String,
        problem: DomainXmlError,
    },
    #[error("{at}: {source}")]
    SharedFolder {
        /// Where the entry was written (`file:line:column`), or the guest's file.
        at: String,
        #[source]
        source: SharedFolderError,
    },
    /// A `data_mount` the data volume cannot be mounted at, where it was written.
    #[error("{at}: `_global.data_mount`: {why}")]
    DataMount {
        /// Where it was written (`file:line:column`), or the guest's file.
        at: String,
        why: String,
    },
    #[error("the extra disks of {domain} cannot be made as written:{}", located_list(.problems))]
    Disks {
        domain: String,
        /// Each problem with where it was written (`file:line:column`), when that is known.
        problems: Vec<(Option<String>, DiskProblem)>,
    },
}

/// A JSON pointer as the files are read: `/disks/1/mount` is `disks[1].mount`.
fn pointer_as_path(pointer: &str) -> String {
    let mut path = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment.chars().all(|c| c.is_ascii_digit()) && !segment.is_empty() {
            path.push_str(&format!("[{segment}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(segment);
        }
    }
    path
}

fn located_list(problems: &[(Option<String>, DiskProblem)]) -> String {
    problems
        .iter()
        .map(|(at, problem)| {
            let at = at.as_deref().unwrap_or("_global");
            format!(
                "\n  {at}: `_global.{}`: {}",
                pointer_as_path(&problem.pointer),
                problem.why
            )
        })
        .collect()
}

impl crate::diagnose::Diagnose for GenerateError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            GenerateError::Resolve(error) => error.exit_status(),
            GenerateError::Secret { .. } => crate::exit_status::ExitStatus::Credentials,
            _ => crate::exit_status::ExitStatus::Configuration,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            GenerateError::Resolve(error) => error.hint(),
            GenerateError::Secret { .. } => Some(
                "add the entry to secrets.kdbx (keepassxc-cli add …), or correct the reference"
                    .into(),
            ),
            GenerateError::Render { .. } => {
                Some("the message above names the template and what it could not find".into())
            }
            GenerateError::SharedFolder { .. } => Some(
                "give each shared folder a name and a mount point of its own, outside the guest's system directories (/etc, /usr, /var, …)"
                    .into(),
            ),
            GenerateError::DataMount { .. } => Some(
                "set `data_mount` to a directory of the site's own, such as the default /srv/data or /var/lib/<service>"
                    .into(),
            ),
            GenerateError::Disks { .. } => Some(
                "correct each `disks` entry at the line named (`trog recipes vm` shows what an entry takes)"
                    .into(),
            ),
            GenerateError::DomainXml(error) => error.hint(),
            GenerateError::CpuMode { problem, .. } => problem.hint(),
            _ => None,
        }
    }
}

/// The `_global` keys the distro and machine recipes take as their arguments: the configuration
/// loader accepts them beside the declared settings.
pub fn recipe_settings(cookbook: &Cookbook) -> Vec<String> {
    let mut names: Vec<String> = cookbook
        .of_kind(RecipeKind::Distro)
        .chain(cookbook.of_kind(RecipeKind::Machine))
        .filter_map(|recipe| {
            recipe
                .manifest
                .args
                .get("properties")
                .and_then(Value::as_object)
        })
        .flat_map(|properties| properties.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The arguments a distro or machine recipe takes out of `_global`.
fn args_from_global(
    cookbook: &Cookbook,
    recipe: &str,
    global: &serde_json::Map<String, Value>,
) -> Value {
    let declared = cookbook
        .get_str(recipe)
        .and_then(|recipe| {
            recipe
                .manifest
                .args
                .get("properties")
                .and_then(Value::as_object)
                .cloned()
        })
        .unwrap_or_default();
    Value::Object(
        global
            .iter()
            .filter(|(key, _)| declared.contains_key(*key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    )
}

/// The recipes `config` names, resolved and their arguments checked against their schemas: what
/// [`generate`] does first, for a caller to refuse a wrong configuration before it unlocks (or
/// creates) the secret store and makes the guest a key.
pub fn resolve_guest_recipes(
    config: &GuestConfig,
    cookbook: &Cookbook,
) -> Result<ResolvedRecipes, GenerateError> {
    let settings = &config.settings;
    let distro = settings.distro.as_str().to_string();
    let guest_recipes = GuestRecipes {
        recipes: config.recipes.clone(),
        distro: distro.clone(),
        release: settings.release.clone(),
        distro_args: args_from_global(cookbook, &distro, &config.global_as_written),
        machine_args: args_from_global(cookbook, MACHINE_RECIPE, &config.global_as_written),
        on_own_vm: settings.runs_on() == crate::config::settings::RunsOn::OwnGuest,
    };
    let resolved = resolve_recipes(cookbook, &guest_recipes).map_err(|error| {
        let error = locate_arg_problems(config, &distro, error);
        // A recipe the guest names (here or in `_base`) is pointed at where it was written; one
        // only a recipe's `requires` names is not the guest's doing.
        let place = error
            .named_recipe()
            .filter(|name| config.recipes.keys().any(|named| named.as_str() == *name))
            .and_then(|name| config.origins.locate_recipe_arg(name, ""))
            .or_else(|| {
                error
                    .named_setting()
                    .and_then(|setting| config.origins.locate_setting(setting))
            });
        GenerateError::Resolve(match place {
            Some(place) => error.written_at(place.to_string()),
            None => error,
        })
    })?;
    // What the machine recipe's schema cannot say is refused here too, before any store is
    // unlocked.
    let definition = machine_definition(config, &resolved)?;
    declared_disks(config, &machine_args(&resolved), definition.disk_bus)?;
    check_data_mount(config, &machine_args(&resolved))?;
    cpu_mode_of(config, &machine_args(&resolved))?;
    Ok(resolved)
}

/// Refuses a `data_mount` that is no place for a disk, by the rule of the extra disks' mount
/// points: the data volume is mounted by the same finish, over whatever is there. It is checked
/// without a data volume too: the value is wrong either way, and a volume declared later would
/// otherwise find it out on a built guest.
fn check_data_mount(config: &GuestConfig, machine: &Value) -> Result<(), GenerateError> {
    let Some(mount) = machine.get("data_mount").and_then(Value::as_str) else {
        return Ok(());
    };
    match mount_problem(mount) {
        None => Ok(()),
        Some(why) => Err(GenerateError::DataMount {
            at: config.origins.locate_setting("data_mount").map_or_else(
                || config.domain_file.display().to_string(),
                ToString::to_string,
            ),
            why,
        }),
    }
}

/// The guest's `cpu_mode` (the machine recipe's argument, else the setting), or where it was
/// written and why it is not one.
fn cpu_mode_of(config: &GuestConfig, machine: &Value) -> Result<CpuMode, GenerateError> {
    let declared = machine
        .get("cpu_mode")
        .and_then(Value::as_str)
        .unwrap_or(&config.settings.cpu_mode);
    CpuMode::parse(declared).map_err(|problem| GenerateError::CpuMode {
        at: config.origins.locate_setting("cpu_mode").map_or_else(
            || config.domain_file.display().to_string(),
            ToString::to_string,
        ),
        problem,
    })
}

/// The `vm` recipe's effective arguments, `Null` when the guest runs none.
fn machine_args(resolved: &ResolvedRecipes) -> Value {
    resolved
        .get(MACHINE_RECIPE)
        .map(|recipe| recipe.args.value.clone())
        .unwrap_or(Value::Null)
}

/// How the guest's machine is defined, from the machine recipe's effective arguments; a shared
/// folder the schema let through but a guest cannot have is pointed at where it was written.
fn machine_definition(
    config: &GuestConfig,
    resolved: &ResolvedRecipes,
) -> Result<MachineDefinition, GenerateError> {
    let settings = &config.settings;
    MachineDefinition::from_declaration(
        &machine_args(resolved),
        settings.bridge.as_deref(),
        &settings.network,
    )
    .map_err(|source| {
        let entry = format!("/shared_folders/{}", source.entry());
        let at = config
            .origins
            .locate_recipe_arg(MACHINE_RECIPE, &entry)
            .or_else(|| config.origins.locate(&format!("/_global{entry}")))
            .map_or_else(
                || config.domain_file.display().to_string(),
                ToString::to_string,
            );
        GenerateError::SharedFolder { at, source }
    })
}

/// The extra disks `machine` declares, checked, or every problem with the file and line it was
/// written at.
fn declared_disks(
    config: &GuestConfig,
    machine: &Value,
    disk_bus: DiskBus,
) -> Result<Vec<ExtraDisk>, GenerateError> {
    let data_mount = machine
        .get("data_volume_size")
        .and_then(Value::as_str)
        .and_then(|_| machine.get("data_mount").and_then(Value::as_str));
    let located = |pointer: &str| {
        config
            .origins
            .locate(&format!("/_global{pointer}"))
            .map(ToString::to_string)
    };
    let disks =
        extra_disks(machine, disk_bus, data_mount).map_err(|problems| GenerateError::Disks {
            domain: config.domain.to_string(),
            problems: problems
                .into_iter()
                .map(|problem| (located(&problem.pointer), problem))
                .collect(),
        })?;
    Ok(disks
        .into_iter()
        .map(|disk| ExtraDisk {
            written_at: located(&format!("{}/size", disk.pointer)),
            ..disk
        })
        .collect())
}

/// Points every argument problem at the file and line it was written at: the guest's recipe
/// arguments live under the recipe's name, the distro's and the machine's in `_global`.
fn locate_arg_problems(config: &GuestConfig, distro: &str, error: ResolveError) -> ResolveError {
    let ResolveError::Args { mut errors } = error else {
        return error;
    };
    for error in &mut errors {
        if let crate::cookbook::args_schema::ArgsError::Invalid { recipe, problems } = error {
            let in_global = recipe.as_str() == distro || recipe.as_str() == MACHINE_RECIPE;
            for problem in problems.iter_mut() {
                let origin = if in_global {
                    config.origins.locate_setting(&problem.argument)
                } else {
                    config
                        .origins
                        .locate_recipe_arg(recipe.as_str(), &problem.path)
                };
                problem.written_at = origin.map(ToString::to_string);
            }
        }
    }
    ResolveError::Args { errors }
}

/// The packages cloud-init installs on first boot: what finishing itself needs first, then every
/// recipe's packages for the guest's distribution (conflicts already removed). They are part of
/// the seed, so a guest's package list is one of its boot inputs; the Makefile's distro target
/// installs the same list again, which costs nothing once they are there.
pub(crate) fn seed_packages(first_boot: &[String], recipes: &[String]) -> Vec<String> {
    let mut packages: Vec<String> = Vec::new();
    for package in first_boot.iter().chain(recipes) {
        if !packages.contains(package) {
            packages.push(package.clone());
        }
    }
    packages
}

fn seed_iso_of(seed: &SeedFiles, user_data: &str) -> Result<SeedIso, SeedIsoError> {
    build_seed_iso(&crate::render::seed_iso::SeedFiles {
        user_data: user_data.as_bytes().to_vec(),
        meta_data: seed.meta_data.clone().into_bytes(),
        network_config: Some(seed.network_config.clone().into_bytes()),
        vendor_data: None,
    })
}

/// The seed's identity and the seeds equivalent to the one rendered from `input` and uploaded
/// as `uploaded`: see [`GeneratedGuest::seed_identity_sha256`] and
/// [`GeneratedGuest::equivalent_seed_sha256s`].
fn seed_identities(
    input: &SeedInput,
    uploaded: &str,
) -> Result<(String, Vec<String>), GenerateError> {
    let mut identity = None;
    let mut equivalent = Vec::new();
    // Every rendering of these inputs: with and without cloud-init's package pass, at every
    // revision, with and without the host key.
    for packages_in_image in [false, true] {
        for revision in SeedRevision::ALL {
            let variant = render_seed(&SeedInput {
                packages_in_image,
                revision,
                ..input.clone()
            })?;
            if !packages_in_image && revision == SeedRevision::IDENTITY {
                identity =
                    Some(seed_iso_of(&variant, &variant.user_data_without_host_key)?.sha256_hex);
            }
            for user_data in [&variant.user_data, &variant.user_data_without_host_key] {
                let digest = seed_iso_of(&variant, user_data)?.sha256_hex;
                if digest != uploaded && !equivalent.contains(&digest) {
                    equivalent.push(digest);
                }
            }
        }
    }
    let identity = identity.expect("SeedRevision::ALL holds SeedRevision::IDENTITY");
    Ok((identity, equivalent))
}

/// Builds everything the guest of `config` needs.
pub fn generate(
    config: &GuestConfig,
    cookbook: &Cookbook,
    site: &SiteFiles,
    public_key: &str,
    host_key: Option<SeedHostKey>,
    lookup: &mut dyn SecretLookup,
) -> Result<GeneratedGuest, GenerateError> {
    let settings = &config.settings;
    let distro = settings.distro.as_str().to_string();
    let mut resolved = resolve_guest_recipes(config, cookbook)?;
    for extra in &settings.packages {
        if !resolved.packages.contains(extra) {
            resolved.packages.push(extra.clone());
        }
    }
    // The secrets' values go only into `secrets` (each a `Secret`); the recipes' arguments keep
    // their `secret:` references, so nothing that prints or serialises them can show a value.
    let mut secrets = ResolvedSecrets::none();
    for recipe in &resolved.recipes {
        for reference in &recipe.args.secrets {
            let text = format!(
                "secret:{}/{}/{}",
                reference.group, reference.entry, reference.field
            );
            let value = lookup
                .resolve(reference)
                .map_err(|source| GenerateError::Secret {
                    recipe: recipe.name.to_string(),
                    reference: text,
                    source,
                })?;
            secrets.insert(&recipe.name, &reference.pointer, value);
        }
    }

    let facts = GuestFacts {
        domain: config.domain.clone(),
        global: Value::Object(config.global_as_written.clone()),
    };
    let environment = template_environment();
    let render_error = |source: Box<dyn std::error::Error + Send + Sync>| GenerateError::Render {
        domain: config.domain.to_string(),
        source,
    };
    let files = render_files_with_secrets(&environment, &facts, &resolved, &secrets)
        .map_err(|error| render_error(Box::new(error)))?;
    let makefile = render_makefile_with_secrets(&environment, &facts, &resolved, &files, &secrets)
        .map_err(|error| render_error(Box::new(error)))?;

    let mut entries = vec![PayloadEntry::file(
        "Makefile",
        0o644,
        makefile.clone().into_bytes(),
    )];
    for file in &files {
        entries.push(PayloadEntry::file(
            file.payload_path(),
            0o600,
            file.contents.clone(),
        ));
    }
    if let Some(archive) = &site.data_archive {
        entries.push(PayloadEntry::file(
            SITE_ARCHIVE_IN_PAYLOAD,
            0o600,
            archive.clone(),
        ));
    }
    let payload = build_payload(&entries)?;

    let mac_address = mac_address_for(&config.domain, 0);
    let first_boot = cookbook
        .get_str(resolved.distro.as_str())
        .and_then(|recipe| recipe.manifest.distro.as_ref())
        .map(|distro| distro.first_boot.clone())
        .unwrap_or_default();
    let seed_input = SeedInput {
        fqdn: config.domain.to_string(),
        hostname: config.domain.host_label().to_string(),
        admin_user: settings.admin_user.clone(),
        admin_authorized_keys: vec![public_key.trim().to_string()],
        extra_users: site.users.clone(),
        packages: seed_packages(&first_boot.packages, &resolved.packages),
        // A new root disk of such a guest is always made over its baked image, which holds
        // every one of them (`generate::bake_inputs` lists the same packages).
        packages_in_image: settings.bake_packages && can_bake(settings.distro.as_str()),
        first_boot_commands: first_boot.commands.clone(),
        revision: SeedRevision::CURRENT,
        contact_email: settings.contact_email.clone(),
        timezone: settings.timezone.clone(),
        apt_mirror: settings.mirror.clone(),
        apt_security_mirror: settings.security_mirror.clone(),
        apt_fallback_mirrors: settings.fallback_mirrors.clone(),
        apt_fallback_security_mirrors: settings.fallback_security_mirrors.clone(),
        distro: settings.distro.to_string(),
        apt_sources: first_boot.apt_sources.clone(),
        mac_address: mac_address.to_string(),
        addresses: settings.ips.iter().map(ToString::to_string).collect(),
        gateway: settings.gateway.map(|gateway| gateway.to_string()),
        resolvers: settings.resolvers.iter().map(ToString::to_string).collect(),
        search_domains: settings.search_domains.clone(),
        host_key,
    };
    let seed = render_seed(&seed_input)?;
    let seed_iso = seed_iso_of(&seed, &seed.user_data)?;
    let (seed_identity_sha256, equivalent_seed_sha256s) =
        seed_identities(&seed_input, &seed_iso.sha256_hex)?;

    let (image_url, image_digest) = match &settings.image {
        Some(image) => (
            image.url.clone(),
            ImageDigest::parse(DigestAlgorithm::Sha256, &image.sha256)
                .expect("the configuration checked the digest"),
        ),
        None => (
            resolved.image.url.clone(),
            resolved
                .image
                .digest()
                .expect("the cookbook checked the digest"),
        ),
    };
    let machine = machine_args(&resolved);
    let cpu_mode = cpu_mode_of(config, &machine)?;
    let machine_definition = machine_definition(config, &resolved)?;
    let extra_disks = declared_disks(config, &machine, machine_definition.disk_bus)?;
    let fingerprint = provision_fingerprint(&BootInputs {
        image_digest: image_digest.clone(),
        distro,
        release: resolved.release.clone(),
        seed_iso_sha256: seed_identity_sha256.clone(),
        memory: settings.memory,
        vcpus: settings.cpus,
        cpu_mode: cpu_mode.clone(),
        disk_size: settings.size,
        tenant: settings.tenant.as_ref().map(ToString::to_string),
        machine: machine_definition.clone(),
    })?;
    Ok(GeneratedGuest {
        resolved,
        seed,
        seed_iso,
        seed_identity_sha256,
        equivalent_seed_sha256s,
        files,
        makefile,
        payload,
        image_url,
        image_digest,
        mac_address,
        cpu_mode,
        fingerprint,
        machine,
        machine_definition,
        extra_disks,
        data_volume_declared_at: config
            .origins
            .locate_setting("data_volume_size")
            .map(ToString::to_string),
    })
}

#[cfg(test)]
#[path = "convergence_tests.rs"]
mod convergence_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::guest::resolve_guest;
    use crate::config::recipes_file::{parse_domain_file, parse_recipes_yaml};
    use crate::cookbook::load::Cookbook;
    use crate::cookbook::test_support::{recipe, DEBIAN, VM};
    use crate::credentials::Secret;
    use crate::model::names::DomainName;
    use std::path::Path;

    const PLANTED: &str = "planted-4711";

    struct Store;

    impl SecretLookup for Store {
        fn resolve(
            &mut self,
            reference: &SecretReference,
        ) -> Result<Secret, Box<dyn std::error::Error + Send + Sync>> {
            assert_eq!(reference.entry, "root");
            Ok(Secret::new(PLANTED))
        }
    }

    #[test]
    fn a_resolved_secret_reaches_the_files_and_nothing_that_prints_or_serialises() {
        let db = "description: db\nkind: guest\nargs:\n  type: object\n  properties:\n    root_pw: {type: string}\nfiles:\n  - {template: my.cnf.j2, path: /etc/my.cnf}\nmakefile: db.mk\n";
        let cookbook = Cookbook::from_recipes([
            recipe("debian", DEBIAN, &[]),
            recipe("vm", VM, &[]),
            recipe(
                "db",
                db,
                &[
                    ("my.cnf.j2", "password={{ args.root_pw }}\n"),
                    ("db.mk", "db:\n\techo {{ recipes.db.root_pw }} >/dev/null\n"),
                ],
            ),
        ])
        .unwrap();
        let domain = DomainName::parse("db.example.test").unwrap();
        let base = "_base:\n  _global:\n    admin_user: someadmin\n    contact_email: ops@example.test\n    distro: debian\n";
        let own = "db.example.test:\n  db:\n    root_pw: \"secret:Sites/root/password\"\n";
        let config = resolve_guest(
            &parse_recipes_yaml(Path::new("recipes.yaml"), base).unwrap(),
            &parse_domain_file(Path::new("db.example.test.yaml"), &domain, own).unwrap(),
            &recipe_settings(&cookbook),
        )
        .unwrap();
        let generated = generate(
            &config,
            &cookbook,
            &SiteFiles::default(),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH4 test",
            None,
            &mut Store,
        )
        .unwrap();
        let file = &generated.files[0];
        assert_eq!(file.contents, format!("password={PLANTED}\n").into_bytes());
        assert!(generated.makefile.contains(PLANTED));
        let db = generated.resolved.get("db").unwrap();
        for shown in [
            format!("{generated:?}"),
            serde_json::to_string(&db.args).unwrap(),
            db.args.value.to_string(),
        ] {
            assert!(!shown.contains(PLANTED), "{shown}");
        }
        assert_eq!(db.args.value["root_pw"], "secret:Sites/root/password");
    }
}
