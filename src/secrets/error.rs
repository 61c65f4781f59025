//! What can go wrong with the secret store and the keys kept in it. Messages name files, addresses
//! (`secret:Group/Entry/Field`) and domains — never a value, a passphrase or a key.

use crate::credentials::CredentialsError;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),

    #[error(transparent)]
    Locked(#[from] crate::lock::LockError),

    #[error("cannot read the secret store {}", .path.display())]
    ReadStore {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("the secret store {} is not a KeePass database trog can read", .path.display())]
    OpenStore {
        path: PathBuf,
        #[source]
        source: keepass::db::DatabaseOpenError,
    },

    #[error("the secret store {} is not a file", .path.display())]
    NotAFile { path: PathBuf },

    #[error("the secret store {} is a link to {}, which is not there", .path.display(), .target.display())]
    DanglingLink { path: PathBuf, target: PathBuf },

    #[error("the secret store {} does not exist", .path.display())]
    StoreMissing { path: PathBuf },

    #[error("the secret store {} is larger than {} MiB, far more than any store trog writes", .path.display(), .limit / (1024 * 1024))]
    TooLarge { path: PathBuf, limit: u64 },

    #[error("cannot read the secret store's key file {}", .path.display())]
    ReadKeyFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("the secret store's key file {} may be read by others (mode {mode:o})", .path.display())]
    KeyFileNotPrivate { path: PathBuf, mode: u32 },

    #[error("{} does not unlock the secret store {}", .used, .path.display())]
    WrongKey { path: PathBuf, used: UnlockKey },

    #[error("cannot create the secret store {}: a file is there already", .path.display())]
    StoreExists { path: PathBuf },

    #[error("cannot encrypt the secret store {}", .path.display())]
    EncryptStore {
        path: PathBuf,
        #[source]
        source: keepass::db::DatabaseSaveError,
    },

    #[error("cannot write the secret store {}", .path.display())]
    WriteStore {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("`{reference}`: the secret store has no group `{group}`")]
    GroupMissing { reference: String, group: String },

    #[error("`{reference}`: the secret store has no entry `{entry}`")]
    EntryMissing { reference: String, entry: String },

    #[error("`{reference}`: the secret store has {count} {kind} named `{name}` in one place, so it is ambiguous")]
    Ambiguous {
        reference: String,
        kind: &'static str,
        name: String,
        count: usize,
    },

    #[error("`{reference}`: the entry has no field `{field}`")]
    FieldMissing {
        reference: String,
        field: String,
        fields_present: Vec<String>,
    },

    #[error("cannot make an SSH key pair for {domain}")]
    GenerateKeypair {
        domain: String,
        #[source]
        source: ssh_key::Error,
    },

    #[error("the SSH key pair of {domain} kept in the secret store at `{entry}` is not readable")]
    StoredKeypairUnreadable {
        domain: String,
        entry: String,
        #[source]
        source: ssh_key::Error,
    },

    #[error("the SSH key pair of {domain} at `{entry}`: the public key does not belong to the private key")]
    StoredKeypairMismatch { domain: String, entry: String },

    #[error("cannot hand the private key of {domain} to OpenSSH in {}", .path.display())]
    WriteKeyFile {
        domain: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Diagnose for SecretsError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            SecretsError::Credentials(error) => error.exit_status(),
            SecretsError::Locked(error) => error.exit_status(),
            SecretsError::WrongKey { .. }
            | SecretsError::ReadKeyFile { .. }
            | SecretsError::KeyFileNotPrivate { .. } => ExitStatus::Credentials,
            SecretsError::GroupMissing { .. }
            | SecretsError::EntryMissing { .. }
            | SecretsError::Ambiguous { .. }
            | SecretsError::FieldMissing { .. } => ExitStatus::Configuration,
            SecretsError::OpenStore { .. }
            | SecretsError::NotAFile { .. }
            | SecretsError::DanglingLink { .. }
            | SecretsError::StoreMissing { .. }
            | SecretsError::TooLarge { .. } => ExitStatus::DamagedStore,
            SecretsError::ReadStore { .. }
            | SecretsError::StoreExists { .. }
            | SecretsError::EncryptStore { .. }
            | SecretsError::WriteStore { .. }
            | SecretsError::GenerateKeypair { .. }
            | SecretsError::StoredKeypairUnreadable { .. }
            | SecretsError::StoredKeypairMismatch { .. }
            | SecretsError::WriteKeyFile { .. } => ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            SecretsError::Credentials(error) => error.hint(),
            SecretsError::Locked(error) => error.hint(),
            SecretsError::ReadKeyFile { .. } => Some(
                "the `keepass_key_file` setting (in `_global` of recipes.yaml or of the guest's \
                 file in recipes.d) names it, relative to the configuration directory; check the \
                 path, that it is a regular file (not a pipe or a device) and that this user may \
                 read it"
                    .to_string(),
            ),
            SecretsError::KeyFileNotPrivate { path, .. } => Some(format!(
                "it alone may unlock the store: `chmod 600 {}` (owned by the user trog runs as)",
                path.display()
            )),
            SecretsError::WrongKey { path, used } => Some(used.hint(path)),
            SecretsError::OpenStore { path, .. } => Some(format!(
                "see what `keepassxc-cli db-info {}` says about it; trog reads KDBX 3.1 and 4 files \
                 protected by a passphrase, a key file or both. Restore it from a backup; if it is \
                 truly lost, move it away and make a new store with `trog provision \
                 --new-secret-store DOMAIN` (the guests' SSH keys in it are then lost)",
                path.display()
            )),
            SecretsError::NotAFile { path } | SecretsError::TooLarge { path, .. } => Some(format!(
                "{} must be the KeePass file trog writes; restore it from a backup (trog never \
                 replaces it); if the store is truly lost, move it away and make a new one with \
                 `trog provision --new-secret-store DOMAIN` (every guest then gets a new key)",
                path.display()
            )),
            SecretsError::DanglingLink { path, target } => Some(format!(
                "put the store back at {} (a disk not mounted?), or point {} at where it is now",
                target.display(),
                path.display()
            )),
            SecretsError::StoreMissing { path } => Some(format!(
                "restore {} from a backup, or check that TROG_PROVISIONER_CONFIG names this \
                 installation; if the store is truly lost, `trog provision --new-secret-store \
                 DOMAIN` makes a new one (every guest then gets a new key); an installation \
                 without guests yet gets its store from its first `trog provision DOMAIN`, or \
                 from `trog new_config --new-secret-store DOMAIN`",
                path.display()
            )),
            SecretsError::StoreExists { path } => {
                Some(format!("open it instead, or move {} away to start a new store", path.display()))
            }
            SecretsError::ReadStore { .. } | SecretsError::WriteStore { .. } => {
                Some("check the file's and its directory's permissions and free space".to_string())
            }
            SecretsError::GroupMissing { reference, .. } | SecretsError::EntryMissing { reference, .. } => Some(
                format!("add it with KeePassXC (or keepassxc-cli add), or correct `{reference}` in the recipe arguments"),
            ),
            SecretsError::Ambiguous { .. } => {
                Some("rename one of them in KeePassXC, or move it into another group".to_string())
            }
            SecretsError::FieldMissing { field, fields_present, .. } => {
                let close = fields_present.iter().find(|present| present.eq_ignore_ascii_case(field));
                match close {
                    Some(present) => Some(format!("did you mean `{present}`? Field names are case-sensitive")),
                    None => Some(format!("the entry's fields are: {}", fields_present.join(", "))),
                }
            }
            SecretsError::StoredKeypairUnreadable { entry, .. } | SecretsError::StoredKeypairMismatch { entry, .. } => {
                Some(format!(
                    "the entry `{entry}` was edited by hand; restore it from the store's history in KeePassXC, \
                     or delete the entry to have a new key pair made (the guest must then get the new public key)"
                ))
            }
            SecretsError::WriteKeyFile { .. } => Some("check the temporary directory's permissions and free space".to_string()),
            SecretsError::EncryptStore { .. } | SecretsError::GenerateKeypair { .. } => None,
        }
    }
}

/// What was tried on a store that did not open, so the error names it rather than always blaming
/// a passphrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockKey {
    /// A passphrase alone: handed in with --credentials, or typed on a terminal.
    Passphrase { handed_in: bool },
    /// The key file alone (no passphrase was handed in, and no terminal could ask for one).
    KeyFile { key_file: PathBuf },
    /// The key file together with a passphrase.
    Both { key_file: PathBuf, handed_in: bool },
}

impl std::fmt::Display for UnlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnlockKey::Passphrase { .. } => write!(f, "the passphrase"),
            UnlockKey::KeyFile { key_file } => {
                write!(f, "the key file {} alone", key_file.display())
            }
            UnlockKey::Both { key_file, .. } => {
                write!(
                    f,
                    "the passphrase together with the key file {}",
                    key_file.display()
                )
            }
        }
    }
}

impl UnlockKey {
    fn hint(&self, store: &Path) -> String {
        let store = store.display();
        let damaged = "if KeePassXC cannot open it either with the right key, the file is damaged";
        match self {
            UnlockKey::Passphrase { handed_in: true } => format!(
                "the `keepass` line handed in with --credentials is not this store's passphrase; \
                 try it with `keepassxc-cli ls {store}` ({damaged})"
            ),
            UnlockKey::Passphrase { handed_in: false } => format!(
                "check the passphrase (try it with `keepassxc-cli ls {store}`) and run again; {damaged}"
            ),
            UnlockKey::KeyFile { key_file } => format!(
                "if the store also needs a passphrase, hand it in on standard input with \
                 --credentials (a line `keepass: …`); otherwise check that `keepass_key_file` in \
                 recipes.yaml names this store's key file (try `keepassxc-cli ls --no-password \
                 --key-file {} {store}`)",
                key_file.display()
            ),
            UnlockKey::Both { key_file, handed_in } => format!(
                "{}check that `keepass_key_file` in recipes.yaml names this store's key file; try \
                 both with `keepassxc-cli ls --key-file {} {store}` ({damaged})",
                if *handed_in {
                    "the `keepass` line handed in with --credentials may be wrong, or "
                } else {
                    "the passphrase may be mistyped, or "
                },
                key_file.display()
            ),
        }
    }
}
