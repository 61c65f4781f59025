//! The secret store: a KeePass database (`secrets.kdbx`) unlocked by the `keepass` passphrase.
//!
//! - Opening reads KDBX 3.1 and 4 files protected by a passphrase alone (what KeePassXC and
//!   `keepassxc-cli db-create` make). Saving always writes KDBX 4: a 3.1 file written by trog comes
//!   back as KDBX 4 with its cipher and KDF kept, which KeePassXC reads as before.
//! - When the file is absent, [`SecretStore::unlock`] creates it (asking for the new passphrase
//!   twice when it is typed) with Argon2id as the KDF ([`StoreKdf::RECOMMENDED`]), so a store trog
//!   made resists guessing as well as one KeePassXC made. [`SecretStore::unlock_with`] creates
//!   one only when told to ([`WhenAbsent::Create`]): a missing store is the installation's
//!   guests' keys lost, and whether a new one may be made is decided by the caller, which asks
//!   the fleet (`workflow::store_guard`). Only a path with nothing at it is absent: a link to a
//!   file that is gone, a folder or a pipe is refused, never replaced.
//! - Saving is atomic: the new file is written beside the old one, synced, renamed over it, and
//!   the directory synced; a crash leaves the old store or the new one, never half of one. The file
//!   is always mode 0600. A store reached through a symbolic link is written beside the link's
//!   target, and the link stays.
//! - Entries are addressed by [`EntryPath`] (`Group/Sub/Entry`) and [`FieldName`]; names match
//!   exactly, and two groups or entries of the same name in one place are an error rather than a
//!   guess.
//!
//! - A key file (KeePassXC's format, named by the `keepass_key_file` setting) unlocks the store
//!   instead of the passphrase, or together with it: a passphrase is part of the key only when one
//!   is handed in, or asked for after the key file alone did not open an existing store. So a run
//!   with a key file and nothing on standard input needs no one. A key file others can read is
//!   refused: it is the whole key.
//! - [`SecretStore::open_existing`] opens the store only when it exists, for verbs that change
//!   nothing and so must not create it.
//! - Runs overlap: every change is made by [`SecretStore::update`], which takes the store's
//!   writer lock (`locks/secret-store.lock` beside the file, see [`crate::lock`]), re-reads the
//!   file, applies the change and saves before letting go, so two runs adding keys never lose
//!   one. Creating the store is done under the same lock.

use super::error::{SecretsError, UnlockKey};
use super::reference::{EntryPath, FieldName, SecretReference};
pub use super::store_file::MAX_STORE_BYTES;
use super::store_file::{
    is_wrong_passphrase, read_key_file, read_store_file, store_presence, write_atomically,
    StorePresence,
};
use crate::credentials::{CredentialName, CredentialSource, CredentialsError, Prompter, Secret};
use crate::lock::{lock_dir_for_store, Locks, Subject, DEFAULT_LOCK_WAIT};
use keepass::config::{DatabaseVersion, KdfConfig};
use keepass::db::{GroupId, Value};
use keepass::{Database, DatabaseKey};
use std::path::{Path, PathBuf};

/// The key derivation a new store is made with. Every open and every save runs it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreKdf {
    pub memory_mib: u64,
    pub iterations: u64,
    pub parallelism: u32,
}

impl StoreKdf {
    /// Argon2id with 64 MiB, as KeePassXC's own default, and enough passes to take a fraction of a
    /// second here: each guess at the passphrase costs an attacker as much, while a run that opens
    /// and saves the store a few times spends a second or two on it.
    pub const RECOMMENDED: StoreKdf = StoreKdf {
        memory_mib: 64,
        iterations: 10,
        parallelism: 2,
    };

    fn to_kdf_config(self) -> KdfConfig {
        KdfConfig::Argon2id {
            iterations: self.iterations,
            memory: self.memory_mib * 1024 * 1024,
            parallelism: self.parallelism,
            version: argon2::Version::Version13,
        }
    }
}

/// Whether a field's value is kept encrypted in memory and marked protected in the file (KeePassXC
/// then hides it). Secrets are protected; names, public keys and notes need not be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    Protected,
    Plain,
}

/// What [`SecretStore::unlock_with`] does when there is no store at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenAbsent {
    /// Refuse ([`SecretsError::StoreMissing`]): the verb may not decide that a new store is right.
    Refuse,
    /// Make a new store with this key derivation.
    Create(StoreKdf),
}

/// KDBX 4.1, the version new files and upgraded 3.1 files are written in.
const KDBX4_MINOR_VERSION: u16 = 1;

/// An unlocked secret store.
pub struct SecretStore {
    path: PathBuf,
    database: Database,
    key: StoreKey,
    /// The writer lock's place and wait.
    locks: Locks,
}

/// What the store is encrypted with: a passphrase, a key file's contents, or both.
#[derive(Clone)]
struct StoreKey {
    passphrase: Option<Secret>,
    key_file: Option<zeroize::Zeroizing<Vec<u8>>>,
}

impl StoreKey {
    fn database_key(&self) -> DatabaseKey {
        let mut key = DatabaseKey::new();
        if let Some(passphrase) = &self.passphrase {
            key = key.with_password(passphrase.expose());
        }
        if let Some(contents) = &self.key_file {
            key = key
                .with_keyfile(&mut contents.as_slice())
                .expect("reading a key file from memory cannot fail");
        }
        key
    }
}

/// Shows the file only: the database's own Debug would print every unprotected field.
impl std::fmt::Debug for SecretStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SecretStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SecretStore {
    /// Opens the store at `path`, creating it when there is no file: the passphrase comes from
    /// `credentials` (handed in, or asked for, twice for a new store). A wrong passphrase typed on
    /// a terminal is asked for again, up to three times; a handed-in one is refused at once.
    pub fn unlock<P: Prompter>(
        path: &Path,
        credentials: &mut CredentialSource<P>,
        kdf_for_a_new_store: StoreKdf,
    ) -> Result<SecretStore, SecretsError> {
        let locks = default_locks(path);
        let when_absent = WhenAbsent::Create(kdf_for_a_new_store);
        SecretStore::unlock_with(path, None, credentials, when_absent, &locks)
    }

    /// [`unlock`](SecretStore::unlock), with the installation's key file when it names one and
    /// the run's `locks`: creating the store and every later [`update`](SecretStore::update)
    /// wait for another writer as long as the run's `--wait` says, no longer. A missing store is
    /// created only when `when_absent` says so.
    pub fn unlock_with<P: Prompter>(
        path: &Path,
        key_file: Option<&Path>,
        credentials: &mut CredentialSource<P>,
        when_absent: WhenAbsent,
        locks: &Locks,
    ) -> Result<SecretStore, SecretsError> {
        let presence = store_presence(path)?;
        let key_file = key_file
            .map(|file| read_key_file(file).map(|bytes| (file.to_path_buf(), bytes)))
            .transpose()?;
        if presence == StorePresence::Absent {
            let WhenAbsent::Create(kdf_for_a_new_store) = when_absent else {
                return Err(SecretsError::StoreMissing { path: path.into() });
            };
            let purpose = format!("to create the new secret store {}", path.display());
            let passphrase = match key_file {
                Some(_) if !credentials.was_handed_in(CredentialName::Keepass) => None,
                _ => {
                    credentials.get(CredentialName::Keepass, &purpose)?;
                    credentials.confirm(CredentialName::Keepass, &purpose)?;
                    Some(credentials.get(CredentialName::Keepass, &purpose)?.clone())
                }
            };
            let key = StoreKey {
                passphrase,
                key_file: key_file.as_ref().map(|(_, bytes)| bytes.clone()),
            };
            match SecretStore::create_with(path, key, kdf_for_a_new_store, locks.clone()) {
                // Another run made it meanwhile: open that one.
                Err(SecretsError::StoreExists { .. }) => {}
                result => return result,
            }
        }
        let mut store = SecretStore::unlock_file(path, key_file, credentials)?;
        store.use_locks(locks.clone());
        Ok(store)
    }

    /// Opens the store when its file exists, and creates nothing when it does not: for verbs that
    /// change nothing.
    pub fn open_existing<P: Prompter>(
        path: &Path,
        key_file: Option<&Path>,
        credentials: &mut CredentialSource<P>,
    ) -> Result<Option<SecretStore>, SecretsError> {
        let presence = store_presence(path)?;
        let key_file = key_file
            .map(|file| read_key_file(file).map(|bytes| (file.to_path_buf(), bytes)))
            .transpose()?;
        if presence == StorePresence::Absent {
            return Ok(None);
        }
        SecretStore::unlock_file(path, key_file, credentials).map(Some)
    }

    /// Unlocks the existing file: with the key file alone first when there is one and no
    /// passphrase was handed in, then with the passphrase (and the key file), asked again after a
    /// wrong one typed on a terminal, up to three times.
    fn unlock_file<P: Prompter>(
        path: &Path,
        key_file: Option<(PathBuf, zeroize::Zeroizing<Vec<u8>>)>,
        credentials: &mut CredentialSource<P>,
    ) -> Result<SecretStore, SecretsError> {
        const ATTEMPTS: usize = 3;
        let (key_file_path, key_file) = key_file.unzip();
        let mut key_file_alone_failed = false;
        if key_file.is_some() && !credentials.was_handed_in(CredentialName::Keepass) {
            let key = StoreKey {
                passphrase: None,
                key_file: key_file.clone(),
            };
            match SecretStore::open_with(path, key) {
                Err(SecretsError::WrongKey { .. }) => key_file_alone_failed = true,
                result => return result,
            }
        }
        let purpose = format!("to unlock {}", path.display());
        let mut attempt = 1;
        loop {
            let passphrase = match credentials.get(CredentialName::Keepass, &purpose) {
                Ok(passphrase) => passphrase.clone(),
                // Nobody can type a passphrase: what failed is the key file, so say that.
                Err(CredentialsError::NoTerminal { .. }) if key_file_alone_failed => {
                    return Err(SecretsError::WrongKey {
                        path: path.into(),
                        used: UnlockKey::KeyFile {
                            key_file: key_file_path.unwrap_or_default(),
                        },
                    })
                }
                Err(error) => return Err(error.into()),
            };
            let handed_in = credentials.was_handed_in(CredentialName::Keepass);
            let key = StoreKey {
                passphrase: Some(passphrase),
                key_file: key_file.clone(),
            };
            match SecretStore::open_with(path, key) {
                Err(SecretsError::WrongKey { path, .. }) => {
                    credentials.forget(CredentialName::Keepass);
                    if handed_in || attempt == ATTEMPTS {
                        let used = match &key_file_path {
                            Some(key_file) => UnlockKey::Both {
                                key_file: key_file.clone(),
                                handed_in,
                            },
                            None => UnlockKey::Passphrase { handed_in },
                        };
                        return Err(SecretsError::WrongKey { path, used });
                    }
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Opens the store at `path` with `passphrase`.
    pub fn open(path: &Path, passphrase: &Secret) -> Result<SecretStore, SecretsError> {
        let key = StoreKey {
            passphrase: Some(passphrase.clone()),
            key_file: None,
        };
        SecretStore::open_with(path, key)
    }

    fn open_with(path: &Path, key: StoreKey) -> Result<SecretStore, SecretsError> {
        let bytes = read_store_file(path)?;
        let database = Database::parse(&bytes, key.database_key()).map_err(|source| {
            if is_wrong_passphrase(&source, &bytes) {
                // Which key was used is filled in by the caller, which knows.
                SecretsError::WrongKey {
                    path: path.into(),
                    used: UnlockKey::Passphrase { handed_in: false },
                }
            } else {
                SecretsError::OpenStore {
                    path: path.into(),
                    source,
                }
            }
        })?;
        Ok(SecretStore {
            path: path.into(),
            database,
            key,
            locks: default_locks(path),
        })
    }

    /// Creates a new, empty store at `path` and writes it at once; refuses when a file is there.
    pub fn create(
        path: &Path,
        passphrase: &Secret,
        kdf: StoreKdf,
    ) -> Result<SecretStore, SecretsError> {
        let key = StoreKey {
            passphrase: Some(passphrase.clone()),
            key_file: None,
        };
        SecretStore::create_with(path, key, kdf, default_locks(path))
    }

    fn create_with(
        path: &Path,
        key: StoreKey,
        kdf: StoreKdf,
        locks: Locks,
    ) -> Result<SecretStore, SecretsError> {
        let _writer = locks.acquire(&Subject::SecretStore, &mut announce)?;
        if store_presence(path)? == StorePresence::Present {
            return Err(SecretsError::StoreExists { path: path.into() });
        }
        let mut database = Database::new();
        database.config.version = DatabaseVersion::KDB4(KDBX4_MINOR_VERSION);
        database.config.kdf_config = kdf.to_kdf_config();
        database.meta.database_name = Some("trog".to_string());
        database.root_mut().name = "Root".to_string();
        let store = SecretStore {
            path: path.into(),
            database,
            key,
            locks,
        };
        store.save()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the writer lock is and how long to wait for it (the run's `--wait`).
    pub fn use_locks(&mut self, locks: Locks) {
        self.locks = locks;
    }

    /// Makes a change and saves it, as one writer: under the store's writer lock, `change` is
    /// applied to the store as it is on disk now (re-read, so what another run saved meanwhile is
    /// kept), and the result saved before the lock is let go.
    pub fn update<T>(
        &mut self,
        change: impl FnOnce(&mut SecretStore) -> Result<T, SecretsError>,
    ) -> Result<T, SecretsError> {
        let _writer = self.locks.acquire(&Subject::SecretStore, &mut announce)?;
        self.database = SecretStore::open_with(&self.path, self.key.clone())?.database;
        let result = change(self)?;
        self.save()?;
        Ok(result)
    }

    /// The value of `field` of the entry at `entry`.
    pub fn get(&self, entry: &EntryPath, field: &FieldName) -> Result<Secret, SecretsError> {
        self.resolve(&SecretReference::new(entry.clone(), field.clone()))
    }

    /// The value a `secret:` reference points at.
    pub fn resolve(&self, reference: &SecretReference) -> Result<Secret, SecretsError> {
        let shown = reference.to_string();
        let group = self.find_group(reference.entry.groups(), &shown)?;
        let entry_ids = self.entries_titled(group, reference.entry.title());
        let entry_id = match entry_ids.as_slice() {
            [] => {
                return Err(SecretsError::EntryMissing {
                    reference: shown,
                    entry: reference.entry.to_string(),
                });
            }
            [only] => *only,
            several => {
                return Err(SecretsError::Ambiguous {
                    reference: shown,
                    kind: "entries",
                    name: reference.entry.title().to_string(),
                    count: several.len(),
                });
            }
        };
        let entry = self
            .database
            .entry(entry_id)
            .expect("the id was just found in the database");
        match entry.fields.get(reference.field.as_str()) {
            Some(value) => Ok(Secret::new(value.get().clone())),
            None => {
                let mut fields_present: Vec<String> = entry.fields.keys().cloned().collect();
                fields_present.sort();
                Err(SecretsError::FieldMissing {
                    reference: shown,
                    field: reference.field.to_string(),
                    fields_present,
                })
            }
        }
    }

    /// Sets `field` of the entry at `entry` to `value`, making the groups and the entry when they
    /// are missing. A changed value of an existing entry goes into the entry's history first, as
    /// KeePassXC does. Nothing is written until [`save`](Self::save).
    pub fn put(
        &mut self,
        entry: &EntryPath,
        field: &FieldName,
        value: &Secret,
        protection: Protection,
    ) -> Result<(), SecretsError> {
        let shown = SecretReference::new(entry.clone(), field.clone()).to_string();
        let group_id = self.make_groups(entry.groups(), &shown)?;
        let new_value = match protection {
            Protection::Protected => Value::protected(value.expose()),
            Protection::Plain => Value::unprotected(value.expose()),
        };
        match self.entries_titled(group_id, entry.title()).as_slice() {
            [] => {
                let mut group = self
                    .database
                    .group_mut(group_id)
                    .expect("the group was just found or made");
                let mut new_entry = group.add_entry();
                new_entry.set_unprotected(FieldName::Title.as_str(), entry.title());
                new_entry.set(field.as_str(), new_value);
            }
            [only] => {
                let mut existing = self
                    .database
                    .entry_mut(*only)
                    .expect("the id was just found in the database");
                if existing.fields.get(field.as_str()) != Some(&new_value) {
                    existing.edit_tracking(|tracked| tracked.set(field.as_str(), new_value));
                }
            }
            several => {
                return Err(SecretsError::Ambiguous {
                    reference: shown,
                    kind: "entries",
                    name: entry.title().to_string(),
                    count: several.len(),
                });
            }
        }
        Ok(())
    }

    /// Removes `field` from the entry at `entry`, the entry's value before going into its
    /// history (as [`put`](Self::put) keeps a changed one); whether the field was there. Nothing
    /// is written until [`save`](Self::save).
    pub fn remove_field(
        &mut self,
        entry: &EntryPath,
        field: &FieldName,
    ) -> Result<bool, SecretsError> {
        let shown = entry.to_string();
        let group = match self.find_group(entry.groups(), &shown) {
            Ok(group) => group,
            Err(SecretsError::GroupMissing { .. }) => return Ok(false),
            Err(error) => return Err(error),
        };
        let mut removed = false;
        for id in self.entries_titled(group, entry.title()) {
            let mut existing = self
                .database
                .entry_mut(id)
                .expect("the id was just found in the database");
            if existing.fields.contains_key(field.as_str()) {
                existing.edit_tracking(|tracked| {
                    tracked.edit(|tracked| {
                        tracked.fields.remove(field.as_str());
                    });
                });
                removed = true;
            }
        }
        Ok(removed)
    }

    /// Removes the entry at `entry` (every one of that title there); whether there was one.
    /// Nothing is written until [`save`](Self::save).
    pub fn remove_entry(&mut self, entry: &EntryPath) -> Result<bool, SecretsError> {
        let shown = entry.to_string();
        let group = match self.find_group(entry.groups(), &shown) {
            Ok(group) => group,
            Err(SecretsError::GroupMissing { .. }) => return Ok(false),
            Err(error) => return Err(error),
        };
        let ids = self.entries_titled(group, entry.title());
        for id in &ids {
            self.database
                .entry_mut(*id)
                .expect("the id was just found in the database")
                .remove();
        }
        Ok(!ids.is_empty())
    }

    /// Deletes the store's file when, as it is on disk now, it holds no entry at all; whether it
    /// did. Under the writer lock, so an entry another run is adding is never lost.
    pub fn delete_if_empty(self) -> Result<bool, SecretsError> {
        let _writer = self.locks.acquire(&Subject::SecretStore, &mut announce)?;
        let on_disk = SecretStore::open_with(&self.path, self.key.clone())?;
        if on_disk.database.num_entries() > 0 {
            return Ok(false);
        }
        std::fs::remove_file(&self.path).map_err(|source| SecretsError::WriteStore {
            path: self.path.clone(),
            source,
        })?;
        Ok(true)
    }

    /// Writes the store to its file, atomically, mode 0600.
    pub fn save(&self) -> Result<(), SecretsError> {
        let mut database = self.database.clone();
        database.config.version = DatabaseVersion::KDB4(KDBX4_MINOR_VERSION);
        let mut encrypted = Vec::new();
        database
            .save(&mut encrypted, self.key.database_key())
            .map_err(|source| SecretsError::EncryptStore {
                path: self.path.clone(),
                source,
            })?;
        write_atomically(&self.path, &encrypted).map_err(|source| SecretsError::WriteStore {
            path: self.path.clone(),
            source,
        })
    }

    /// The group at `names` under the root, refusing a missing or ambiguous one.
    fn find_group(&self, names: &[String], shown: &str) -> Result<GroupId, SecretsError> {
        let mut current = self.database.root().id();
        for name in names {
            current = match self.subgroups_named(current, name).as_slice() {
                [] => {
                    return Err(SecretsError::GroupMissing {
                        reference: shown.to_string(),
                        group: name.clone(),
                    })
                }
                [only] => *only,
                several => {
                    return Err(SecretsError::Ambiguous {
                        reference: shown.to_string(),
                        kind: "groups",
                        name: name.clone(),
                        count: several.len(),
                    })
                }
            };
        }
        Ok(current)
    }

    /// The group at `names` under the root, making the missing ones.
    fn make_groups(&mut self, names: &[String], shown: &str) -> Result<GroupId, SecretsError> {
        let mut current = self.database.root().id();
        for name in names {
            current = match self.subgroups_named(current, name).as_slice() {
                [] => {
                    let mut parent = self
                        .database
                        .group_mut(current)
                        .expect("the group was just found or made");
                    let mut group = parent.add_group();
                    group.name = name.clone();
                    group.id()
                }
                [only] => *only,
                several => {
                    return Err(SecretsError::Ambiguous {
                        reference: shown.to_string(),
                        kind: "groups",
                        name: name.clone(),
                        count: several.len(),
                    })
                }
            };
        }
        Ok(current)
    }

    fn subgroups_named(&self, parent: GroupId, name: &str) -> Vec<GroupId> {
        let parent = self
            .database
            .group(parent)
            .expect("group ids come from this database");
        parent
            .groups()
            .filter(|group| group.name == name)
            .map(|group| group.id())
            .collect()
    }

    fn entries_titled(&self, group: GroupId, title: &str) -> Vec<keepass::db::EntryId> {
        let group = self
            .database
            .group(group)
            .expect("group ids come from this database");
        group
            .entries()
            .filter(|entry| entry.get(FieldName::Title.as_str()) == Some(title))
            .map(|entry| entry.id())
            .collect()
    }
}

/// The writer lock beside the store, with the default wait, until the run says otherwise.
fn default_locks(path: &Path) -> Locks {
    Locks::new(lock_dir_for_store(path), DEFAULT_LOCK_WAIT, "provision")
}

/// Says on stderr what a run waits for: a wait is never silent.
fn announce(text: &str) {
    eprintln!("{text}");
}
