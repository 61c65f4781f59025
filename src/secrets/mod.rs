//! The secret store (KeePass KDBX4) and the guests' SSH key pairs kept in it.
//!
//! - [`store`]: open, create, read and write `secrets.kdbx`, atomically (its file on disk in
//!   `store_file`: read with a size limit, replaced atomically, through a link to its target;
//!   [`store_presence`] tells a missing store from one that cannot be looked at).
//! - [`reference`]: `secret:Group/Entry/Field` references and entry addresses (pure).
//! - [`keypair`]: each guest's Ed25519 key pair, made once and kept in the store.
//! - [`key_file`]: the private key in a private file for OpenSSH, for as long as a run needs it.
//!
//! Architecture Invariant: no value from the store reaches a message. Values come out as
//! [`Secret`](crate::credentials::Secret); errors name files, addresses and domains only.

mod error;
pub mod key_file;
pub mod keypair;
pub mod reference;
pub mod store;
mod store_file;

pub use error::{SecretsError, UnlockKey};
pub use key_file::{host_key_alias, PrivateKeyFile};
pub use keypair::{
    forget_adopted_host_key, guest_keypair, guest_keypair_entry, record_adopted_host_key,
    stored_keypair, unsaved_guest_keypair, GuestHostKey, GuestKeypair, KeypairOrigin,
};
pub use reference::{EntryPath, FieldName, ReferenceError, SecretReference};
pub use store::{Protection, SecretStore, StoreKdf, WhenAbsent};
pub use store_file::{store_presence, StorePresence, MAX_KEY_FILE_BYTES};
