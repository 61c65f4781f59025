//! What `new_config` and `provision` both do first, before any hypervisor is asked anything: read the installation, the cookbook and the
//! guest's configuration, unlock the secret store, and generate the guest's artifacts.

use crate::addresses::settle::{settle_addresses, AddressPolicy};
use crate::config::changeme::refuse_changeme;
use crate::config::guest::{load_guest_with_recipe_settings, GuestConfig};
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir, Cookbook};
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::generate::{
    generate, load_site_files, recipe_settings, resolve_guest_recipes, GeneratedGuest,
    SecretLookup, SiteFiles,
};
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::secrets::{guest_keypair, EntryPath, FieldName, GuestKeypair, SecretStore, StoreKdf};

/// A guest's configuration and everything generated from it.
pub struct GuestInputs {
    pub paths: InstallationPaths,
    pub cookbook: Cookbook,
    pub config: GuestConfig,
    pub keypair: GuestKeypair,
    pub generated: GeneratedGuest,
}

/// Looks up a recipe's `secret:` references in the unlocked store.
struct StoreLookup<'a>(&'a SecretStore);

impl SecretLookup for StoreLookup<'_> {
    fn resolve(
        &mut self,
        reference: &crate::cookbook::args_schema::SecretReference,
    ) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        let entry = EntryPath::new(reference.group.split('/'), reference.entry.clone());
        let secret = self.0.get(&entry, &FieldName::parse(&reference.field))?;
        Ok(secret.expose().to_string())
    }
}

/// Parses the domain name the command line gave.
pub fn domain_argument(text: &str) -> Result<DomainName, Failure> {
    DomainName::parse(text).map_err(|error| {
        Failure::new(
            error,
            crate::exit_status::ExitStatus::Usage,
            Some(
                "name the guest in full, as its file in recipes.d is named (`www.example.test`)"
                    .into(),
            ),
        )
    })
}

/// A guest's configuration, read and checked with everything that needs no secret: what a run
/// refuses before the store is unlocked (or created).
pub struct GuestConfigured {
    pub paths: InstallationPaths,
    pub cookbook: Cookbook,
    pub config: GuestConfig,
    site: SiteFiles,
}

/// Reads and checks `domain`'s configuration, recipes and site files.
pub fn load_guest_configured(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<GuestConfigured, Failure> {
    let paths = paths.clone();
    let cookbook = load_cookbook(&recipes_dir())?;
    let config = load_guest_with_recipe_settings(&paths, domain, &recipe_settings(&cookbook))?;
    for deprecated in &config.deprecations {
        eprintln!(
            "warning: {} ({}): {}",
            deprecated.key, deprecated.origin, deprecated.advice
        );
    }
    refuse_changeme(&config)?;
    // Everything that can be refused without the store is, before it is unlocked: a first run
    // would otherwise create the store and a key for a configuration that is then refused.
    resolve_guest_recipes(&config, &cookbook)?;
    let site = load_site_files(&paths, domain)?;
    Ok(GuestConfigured {
        paths,
        cookbook,
        config,
        site,
    })
}

/// Unlocks the store (`credentials` supplies its passphrase), takes the guest's key pair from it
/// (made and saved, under the store's writer lock from `locks`, when it has none) and generates
/// the guest's artifacts.
pub fn generate_guest_inputs(
    configured: GuestConfigured,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    addresses: AddressPolicy,
) -> Result<GuestInputs, Failure> {
    let GuestConfigured {
        paths,
        cookbook,
        mut config,
        site,
    } = configured;
    // Before generating: the address settled here is written into the seed as a static one. It
    // comes after placement, so a refused run records no address in ips.db.
    settle_addresses(&paths.ips_db, &mut config, addresses)?;
    let mut store = SecretStore::unlock(&paths.secrets_kdbx, credentials, StoreKdf::RECOMMENDED)?;
    store.use_locks(locks.clone());
    let keypair = guest_keypair(&mut store, &config.domain, &mut rand::rngs::OsRng)?;
    let generated = generate(
        &config,
        &cookbook,
        &site,
        keypair.public_key_openssh(),
        &mut StoreLookup(&store),
    )?;
    Ok(GuestInputs {
        paths,
        cookbook,
        config,
        keypair,
        generated,
    })
}

/// Reads and generates everything for `domain`; `credentials` supplies the store's passphrase,
/// and `locks` the secret store's writer lock for a key made now. `addresses` says whether the
/// guest's address may be recorded in ips.db (handed out, or its hand-written `ips` checked and
/// recorded) or only read from it.
pub fn load_guest_inputs(
    paths: &InstallationPaths,
    domain: &DomainName,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    addresses: AddressPolicy,
) -> Result<GuestInputs, Failure> {
    generate_guest_inputs(
        load_guest_configured(paths, domain)?,
        credentials,
        locks,
        addresses,
    )
}
