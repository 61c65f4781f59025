//! What `new_config` and `provision` both do first, before any hypervisor is asked anything: read the installation, the cookbook and the
//! guest's configuration, unlock the secret store, and generate the guest's artifacts.

use crate::addresses::settle::{settle_addresses, AddressPolicy};
use crate::config::changeme::refuse_changeme;
use crate::config::guest::{load_guest_with_recipe_settings, GuestConfig};
use crate::config::installation_id::{installation_id, read_installation_id, InstallationId};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::cookbook::load::{load_cookbook, recipes_dir, Cookbook};
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::generate::{
    generate, load_site_files, recipe_settings, resolve_guest_recipes, GeneratedGuest,
    SecretLookup, SiteFiles,
};
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::secrets::{
    guest_keypair, guest_keypair_entry, store_presence, stored_keypair, unsaved_guest_keypair,
    EntryPath, FieldName, GuestKeypair, KeypairOrigin, SecretStore, SecretsError, StoreKdf,
    StorePresence, WhenAbsent,
};
use crate::workflow::reporter::Reporter;
use crate::workflow::store_guard::NewStorePermit;
use std::path::{Path, PathBuf};

/// Whether the verb may write the secret store (a guest's key in it, or a new store), under the
/// store's writer lock. Verbs that change nothing (`status`, `provision --dry-run`) write nothing;
/// a guest without a key is then generated with one kept nowhere
/// ([`KeypairOrigin::Unsaved`](crate::secrets::KeypairOrigin)).
#[derive(Debug, Clone, Copy)]
pub enum StoreUse<'a> {
    /// Write into the store that is there; a missing one is refused.
    Write(&'a Locks),
    /// Write, making the store first when there is none: only with the permit
    /// [`check_store`](crate::workflow::store_guard::check_store) gives after asking the fleet
    /// (or when the user asked for a new store).
    WriteOrCreate(&'a Locks, NewStorePermit),
    ReadOnly,
}

impl<'a> StoreUse<'a> {
    /// The writer lock's place and wait, when the store may be written.
    fn writer_locks(self) -> Option<&'a Locks> {
        match self {
            StoreUse::Write(locks) | StoreUse::WriteOrCreate(locks, _) => Some(locks),
            StoreUse::ReadOnly => None,
        }
    }
}

/// A guest's configuration and everything generated from it.
pub struct GuestInputs {
    pub paths: InstallationPaths,
    pub cookbook: Cookbook,
    pub config: GuestConfig,
    pub keypair: GuestKeypair,
    pub generated: GeneratedGuest,
    /// What this run added to the secret store for this guest.
    pub store_additions: StoreAdditions,
    /// The unlocked store, kept for what a run records in it later: a host key adopted with
    /// `provision --adopt-host-key`. `None` for verbs that write nothing.
    pub store: std::sync::Mutex<Option<SecretStore>>,
    /// The installation's identity, written into the tag of the guest's domain: made on the
    /// installation's first run that may write, only read (and `None` before then) otherwise.
    pub installation: Option<InstallationId>,
}

/// What a run added to the secret store. A run refused before it built anything with them takes
/// them back ([`take_back`]): a refused first run leaves no store and no key behind.
#[derive(Debug, Clone, Default)]
pub struct StoreAdditions {
    /// This run made the store's file.
    pub made_store: bool,
    /// The guest this run made a key pair for.
    pub key_of: Option<DomainName>,
}

/// Takes back what `additions` added: the guests' new keys, and the store when this run made it
/// and, as it is on disk now, nothing else is in it (another run's key keeps it).
pub fn take_back(
    paths: &InstallationPaths,
    key_file: Option<&Path>,
    locks: &Locks,
    credentials: &mut CredentialSource<TerminalPrompter>,
    additions: &[&StoreAdditions],
) -> Result<(), SecretsError> {
    let keys: Vec<&DomainName> = additions
        .iter()
        .filter_map(|added| added.key_of.as_ref())
        .collect();
    let made_store = additions.iter().any(|added| added.made_store);
    if keys.is_empty() && !made_store {
        return Ok(());
    }
    let Some(mut store) = SecretStore::open_existing(&paths.secrets_kdbx, key_file, credentials)?
    else {
        return Ok(());
    };
    store.use_locks(locks.clone());
    if !keys.is_empty() {
        store.update(|store| {
            for domain in &keys {
                store.remove_entry(&guest_keypair_entry(domain))?;
            }
            Ok(())
        })?;
    }
    if made_store {
        store.delete_if_empty()?;
    }
    Ok(())
}

/// The store's key file named by `config`, for [`take_back`].
pub fn store_key_file(paths: &InstallationPaths, config: &GuestConfig) -> Option<PathBuf> {
    key_file(paths, config)
}

/// Looks up a recipe's `secret:` references in the unlocked store (none yet: every reference is
/// missing).
struct StoreLookup<'a> {
    store: Option<&'a SecretStore>,
    path: &'a std::path::Path,
}

#[derive(Debug, thiserror::Error)]
#[error("the secret store {} does not exist yet", .0.display())]
struct NoStoreYet(PathBuf);

impl SecretLookup for StoreLookup<'_> {
    fn resolve(
        &mut self,
        reference: &crate::cookbook::args_schema::SecretReference,
    ) -> Result<crate::credentials::Secret, Box<dyn std::error::Error + Send + Sync>> {
        let Some(store) = self.store else {
            return Err(Box::new(NoStoreYet(self.path.to_path_buf())));
        };
        let entry = EntryPath::new(reference.group.split('/'), reference.entry.clone());
        let secret = store.get(&entry, &FieldName::parse(&reference.field))?;
        Ok(secret)
    }
}

/// The installation's key file for the store, when `keepass_key_file` names one.
fn key_file(paths: &InstallationPaths, config: &GuestConfig) -> Option<PathBuf> {
    config
        .settings
        .keepass_key_file
        .as_deref()
        .map(|written| paths.dir.join(written))
}

/// The store and the guest's key: made and saved when `store_use` allows, looked up otherwise.
fn store_and_keypair(
    paths: &InstallationPaths,
    config: &GuestConfig,
    credentials: &mut CredentialSource<TerminalPrompter>,
    store_use: StoreUse,
) -> Result<(Option<SecretStore>, GuestKeypair, StoreAdditions), SecretsError> {
    let key_file = key_file(paths, config);
    let domain = &config.domain;
    let when_absent = match store_use {
        StoreUse::WriteOrCreate(..) => WhenAbsent::Create(StoreKdf::RECOMMENDED),
        StoreUse::Write(_) | StoreUse::ReadOnly => WhenAbsent::Refuse,
    };
    match store_use.writer_locks() {
        Some(locks) => {
            let store_was_there = store_presence(&paths.secrets_kdbx)? == StorePresence::Present;
            let mut store = SecretStore::unlock_with(
                &paths.secrets_kdbx,
                key_file.as_deref(),
                credentials,
                when_absent,
                locks,
            )?;
            let keypair = guest_keypair(&mut store, domain, &mut rand::rngs::OsRng)?;
            let added = StoreAdditions {
                made_store: !store_was_there,
                key_of: (keypair.origin() == KeypairOrigin::Created).then(|| domain.clone()),
            };
            Ok((Some(store), keypair, added))
        }
        None => {
            let store =
                SecretStore::open_existing(&paths.secrets_kdbx, key_file.as_deref(), credentials)?;
            let stored = match &store {
                Some(store) => stored_keypair(store, domain)?,
                None => None,
            };
            let keypair = match stored {
                Some(keypair) => keypair,
                None => unsaved_guest_keypair(domain, &mut rand::rngs::OsRng)?,
            };
            Ok((store, keypair, StoreAdditions::default()))
        }
    }
}

/// A guest's configuration, read and checked with everything that needs no secret: what a run
/// refuses before the store is unlocked (or created).
pub struct GuestConfigured {
    pub paths: InstallationPaths,
    pub cookbook: Cookbook,
    pub config: GuestConfig,
    site: SiteFiles,
}

/// Reads and checks `domain`'s configuration, recipes and site files; a deprecated setting is
/// told to `reporter` as a warning.
pub fn load_guest_configured(
    paths: &InstallationPaths,
    domain: &DomainName,
    reporter: &dyn Reporter,
) -> Result<GuestConfigured, Failure> {
    let paths = paths.clone();
    let cookbook = load_cookbook(&recipes_dir()?)?;
    let config = load_guest_with_recipe_settings(&paths, domain, &recipe_settings(&cookbook))?;
    for deprecated in &config.deprecations {
        reporter.say(&format!(
            "warning: {} ({}): {}",
            deprecated.key, deprecated.origin, deprecated.advice
        ));
    }
    refuse_changeme(&config)?;
    // Everything that can be refused without the store is, before it is unlocked: a first run
    // would otherwise create the store and a key for a configuration that is then refused.
    resolve_guest_recipes(&config, &cookbook)?;
    let site = load_site_files(&paths, domain, &config.settings.admin_user)?;
    Ok(GuestConfigured {
        paths,
        cookbook,
        config,
        site,
    })
}

/// Unlocks the store (`credentials` supplies its passphrase), takes the guest's key pair from it
/// (made and saved, under the store's writer lock, when it has none and `store_use` allows) and
/// generates the guest's artifacts.
pub fn generate_guest_inputs(
    configured: GuestConfigured,
    credentials: &mut CredentialSource<TerminalPrompter>,
    store_use: StoreUse,
    addresses: AddressPolicy,
    reporter: &dyn Reporter,
) -> Result<GuestInputs, Failure> {
    let GuestConfigured {
        paths,
        cookbook,
        mut config,
        site,
    } = configured;
    let runs_on = config.settings.runs_on();
    // Before generating: the address settled here is written into the seed as a static one. It
    // comes after placement, so a refused run records no address in ips.db. A domain without a
    // guest of its own is given none: it is reached at its machine's.
    if runs_on == RunsOn::OwnGuest {
        settle_addresses(&paths.ips_db, &mut config, addresses)?;
    }
    // A dependent logs in with its machine's key: it is given none of its own, and the store is
    // only read for its recipes' secrets.
    let store_use = match runs_on {
        RunsOn::DependsOn(_) => StoreUse::ReadOnly,
        _ => store_use,
    };
    let (store, keypair, store_additions) =
        store_and_keypair(&paths, &config, credentials, store_use)?;
    let generated = generate(
        &config,
        &cookbook,
        &site,
        keypair.public_key_openssh(),
        Some(crate::render::cloud_init::SeedHostKey {
            private_key_openssh: keypair.host_key().private_key_openssh.clone(),
            public_key_openssh: keypair.host_key().public_key_openssh.clone(),
        }),
        &mut StoreLookup {
            store: store.as_ref(),
            path: &paths.secrets_kdbx,
        },
    );
    let store = match store_use.writer_locks() {
        Some(_) => store,
        None => None,
    };
    let generated = match (generated, store_use.writer_locks()) {
        (Ok(generated), _) => generated,
        (Err(error), None) => return Err(error.into()),
        (Err(error), Some(locks)) => {
            // Refused: what this run put in the store for the guest goes again.
            let key_file = key_file(&paths, &config);
            if let Err(undo) = take_back(
                &paths,
                key_file.as_deref(),
                locks,
                credentials,
                &[&store_additions],
            ) {
                reporter.say(&format!(
                    "warning: what this run added to the secret store stays: {undo}"
                ));
            }
            return Err(error.into());
        }
    };
    // Last, once everything that can refuse the run here did not: a refused first run leaves no
    // identity behind, as it leaves no store.
    let installation = match (store_use.writer_locks(), &runs_on) {
        (Some(_), RunsOn::OwnGuest) => Some(installation_id(&paths.dir, rand::random())?),
        // Only the tag of a domain this run defines needs it: a verb that changes nothing plans
        // without one when it cannot be read, and `status --all`, which does need it, says why.
        _ => read_installation_id(&paths.dir).ok().flatten(),
    };
    Ok(GuestInputs {
        paths,
        cookbook,
        config,
        keypair,
        generated,
        store_additions,
        store: std::sync::Mutex::new(store),
        installation,
    })
}

/// Reads and generates everything for `domain`; `credentials` supplies the store's passphrase,
/// and `store_use` says whether the store may be written (under which lock). `addresses` says whether the
/// guest's address may be recorded in ips.db (handed out, or its hand-written `ips` checked and
/// recorded) or only read from it.
pub fn load_guest_inputs(
    paths: &InstallationPaths,
    domain: &DomainName,
    credentials: &mut CredentialSource<TerminalPrompter>,
    store_use: StoreUse,
    addresses: AddressPolicy,
    reporter: &dyn Reporter,
) -> Result<GuestInputs, Failure> {
    generate_guest_inputs(
        load_guest_configured(paths, domain, reporter)?,
        credentials,
        store_use,
        addresses,
        reporter,
    )
}

/// `domain`'s login key from the store, made and saved (under the store's writer lock) when it
/// has none and `store_use` allows: what `authorized-key` prints for an existing host's admin to
/// authorize.
pub fn login_keypair(
    paths: &InstallationPaths,
    config: &GuestConfig,
    credentials: &mut CredentialSource<TerminalPrompter>,
    store_use: StoreUse,
) -> Result<GuestKeypair, SecretsError> {
    store_and_keypair(paths, config, credentials, store_use).map(|(_, keypair, _)| keypair)
}

#[cfg(test)]
#[path = "inputs_tests.rs"]
mod tests;
