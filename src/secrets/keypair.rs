//! The SSH key pair trog logs into a guest with: Ed25519, made in this process, kept in the secret
//! store and nowhere else.
//!
//! One entry per guest: group `trog/guests`, entry titled with the guest's fully qualified name,
//! its protected field `PrivateKey` holding the private key in OpenSSH's format, its field
//! `PublicKey` the `authorized_keys` line (`ssh-ed25519 AAAA… trog@<fqdn>`). The pair is made the
//! first time it is asked for and the store saved at once, so a second run gets the same key.
//!
//! This module writes the private key nowhere but the store; the one way to hand it to OpenSSH is
//! [`PrivateKeyFile`](super::key_file::PrivateKeyFile), which holds it in a private directory of
//! the run's for as long as it is needed.
//!
//! The same entry holds the guest's own **host key**, made by trog too (fields `HostPrivateKey`,
//! protected, and `HostPublicKey`): the seed installs it as the guest's SSH host key, and every
//! later connection accepts that key and no other, so whoever else answers at the guest's address
//! gets nothing. A guest built before trog made host keys answers with one its image or cloud-init
//! made; `provision --adopt-host-key` takes that key once, explicitly, into `AdoptedHostKey`, and
//! it is accepted beside trog's own until the guest's next root disk, which boots with trog's:
//! once a provision has made that disk and the guest answered on it, the adopted key is dropped
//! from the store ([`forget_adopted_host_key`]).

use super::error::SecretsError;
use super::reference::{EntryPath, FieldName};
use super::store::{Protection, SecretStore};
use crate::credentials::Secret;
use crate::model::names::DomainName;
use ssh_key::rand_core::CryptoRngCore;
use ssh_key::{Algorithm, LineEnding, PrivateKey, PublicKey};

/// The group under the store's root that holds one entry per guest.
pub const GUEST_KEYS_GROUP: [&str; 2] = ["trog", "guests"];
/// The protected field of a guest's entry holding its private key.
pub const PRIVATE_KEY_FIELD: &str = "PrivateKey";
/// The field of a guest's entry holding its public key, as an `authorized_keys` line.
pub const PUBLIC_KEY_FIELD: &str = "PublicKey";
/// The protected field of a guest's entry holding the private half of its SSH host key.
pub const HOST_PRIVATE_KEY_FIELD: &str = "HostPrivateKey";
/// The field of a guest's entry holding its host key's public half (`ssh-ed25519 AAAA…`).
pub const HOST_PUBLIC_KEY_FIELD: &str = "HostPublicKey";
/// The field of a guest's entry holding the host key a guest built before trog made host keys
/// answered with, taken once by `provision --adopt-host-key`.
pub const ADOPTED_HOST_KEY_FIELD: &str = "AdoptedHostKey";

/// Whether [`guest_keypair`] found the pair in the store or made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeypairOrigin {
    Stored,
    Created,
    /// Made for a verb that changes nothing and kept nowhere ([`unsaved_guest_keypair`]): the
    /// guest has no key yet, and the first run that builds it makes the real one.
    Unsaved,
}

/// A guest's SSH host key, made by trog: the seed installs it, and connections accept it.
#[derive(Debug, Clone)]
pub struct GuestHostKey {
    /// In OpenSSH's format, unencrypted: what cloud-init's `ssh_keys` installs.
    pub private_key_openssh: Secret,
    /// `ssh-ed25519 AAAA…`, without a comment: a known_hosts line's key.
    pub public_key_openssh: String,
}

/// A guest's key pair, as kept in the store, with the host keys its connections accept.
#[derive(Debug, Clone)]
pub struct GuestKeypair {
    domain: DomainName,
    private_key_openssh: Secret,
    public_key_openssh: String,
    origin: KeypairOrigin,
    host_key: GuestHostKey,
    adopted_host_key: Option<String>,
}

impl GuestKeypair {
    pub fn domain(&self) -> &DomainName {
        &self.domain
    }

    /// The line for the guest's `authorized_keys` (and cloud-init's `ssh_authorized_keys`).
    pub fn public_key_openssh(&self) -> &str {
        &self.public_key_openssh
    }

    /// The private key in OpenSSH's format, unencrypted.
    pub fn private_key_openssh(&self) -> &Secret {
        &self.private_key_openssh
    }

    pub fn origin(&self) -> KeypairOrigin {
        self.origin
    }

    /// The host key trog made for the guest, which its seed installs.
    pub fn host_key(&self) -> &GuestHostKey {
        &self.host_key
    }

    /// The host key a guest built before trog made host keys answered with, once adopted.
    pub fn adopted_host_key(&self) -> Option<&str> {
        self.adopted_host_key.as_deref()
    }

    /// Every host key a connection to the guest accepts: trog's own, then an adopted one.
    pub fn accepted_host_keys(&self) -> Vec<&str> {
        std::iter::once(self.host_key.public_key_openssh.as_str())
            .chain(self.adopted_host_key.as_deref())
            .collect()
    }
}

/// Where the store keeps `domain`'s key pair.
pub fn guest_keypair_entry(domain: &DomainName) -> EntryPath {
    EntryPath::new(GUEST_KEYS_GROUP, domain.as_str())
}

/// The comment of `domain`'s key, which names who holds it and for what.
pub fn guest_key_comment(domain: &DomainName) -> String {
    format!("trog@{}", domain.as_str())
}

/// `domain`'s key pair from the store, made with `rng` and saved in the store when it has none yet.
pub fn guest_keypair(
    store: &mut SecretStore,
    domain: &DomainName,
    rng: &mut impl CryptoRngCore,
) -> Result<GuestKeypair, SecretsError> {
    if let Some(stored) = stored_keypair(store, domain)? {
        if stored.origin == KeypairOrigin::Stored {
            return Ok(stored);
        }
    }
    // Under the store's writer lock, on the store as it is on disk now: another run may have
    // made this guest's key (or another guest's) since the store was opened.
    store.update(|store| {
        let entry = guest_keypair_entry(domain);
        match stored_keypair(store, domain)? {
            Some(stored) if stored.origin == KeypairOrigin::Stored => Ok(stored),
            // An entry from before trog made host keys: its login key stays, a host key is added
            // (the guest receives it with its next root disk).
            Some(mut stored) => {
                stored.host_key = generate_host_key(domain, rng)?;
                store_host_key(store, &entry, &stored.host_key)?;
                stored.origin = KeypairOrigin::Stored;
                Ok(stored)
            }
            None => {
                let keypair = generate(domain, rng)?;
                store_keypair(store, &entry, &keypair)?;
                Ok(keypair)
            }
        }
    })
}

/// Records `host_key` (a `type base64` public key) as the one `domain` answered with when it
/// was adopted, replacing an earlier adoption.
pub fn record_adopted_host_key(
    store: &mut SecretStore,
    domain: &DomainName,
    host_key: &str,
) -> Result<(), SecretsError> {
    let entry = guest_keypair_entry(domain);
    store.update(|store| {
        store.put(
            &entry,
            &FieldName::Custom(ADOPTED_HOST_KEY_FIELD.to_string()),
            &Secret::new(host_key.to_string()),
            Protection::Plain,
        )
    })
}

/// Drops the host key adopted for `domain`, once the guest answered from a root disk whose seed
/// installed trog's own host key and deleted the others: the adopted key then belongs to no disk
/// of the guest's, and accepting it still would trust whoever kept a copy of the old one. Whether
/// there was one; a store without one is not written.
pub fn forget_adopted_host_key(
    store: &mut SecretStore,
    domain: &DomainName,
) -> Result<bool, SecretsError> {
    let entry = guest_keypair_entry(domain);
    let field = FieldName::Custom(ADOPTED_HOST_KEY_FIELD.to_string());
    match store.get(&entry, &field) {
        Ok(_) => {}
        Err(
            SecretsError::GroupMissing { .. }
            | SecretsError::EntryMissing { .. }
            | SecretsError::FieldMissing { .. },
        ) => return Ok(false),
        Err(other) => return Err(other),
    }
    // Under the store's writer lock, on the store as it is on disk now: other guests' keys made
    // by runs beside this one stay.
    store.update(|store| store.remove_field(&entry, &field))
}

/// A stand-in pair for a guest that has none yet, kept nowhere: what a dry run or `status`
/// generates the guest's artifacts with, without writing the store.
pub fn unsaved_guest_keypair(
    domain: &DomainName,
    rng: &mut impl CryptoRngCore,
) -> Result<GuestKeypair, SecretsError> {
    let mut keypair = generate(domain, rng)?;
    keypair.origin = KeypairOrigin::Unsaved;
    Ok(keypair)
}

/// `domain`'s key pair when the store has one, checked to be a pair; changes nothing. An entry
/// from before trog made host keys comes with a stand-in host key kept nowhere, and the origin
/// [`KeypairOrigin::Unsaved`] ([`guest_keypair`] stores a real one).
pub fn stored_keypair(
    store: &SecretStore,
    domain: &DomainName,
) -> Result<Option<GuestKeypair>, SecretsError> {
    let entry = guest_keypair_entry(domain);
    let field = |name: &str| FieldName::Custom(name.to_string());
    match store.get(&entry, &field(PRIVATE_KEY_FIELD)) {
        Ok(private_key_openssh) => {
            let public_key_openssh = store.get(&entry, &field(PUBLIC_KEY_FIELD))?;
            check_stored_pair(
                domain,
                &entry,
                &private_key_openssh,
                public_key_openssh.expose(),
            )?;
            let optional = |name: &str| match store.get(&entry, &field(name)) {
                Ok(value) => Ok(Some(value)),
                Err(SecretsError::FieldMissing { .. }) => Ok(None),
                Err(other) => Err(other),
            };
            let (host_key, origin) = match (
                optional(HOST_PRIVATE_KEY_FIELD)?,
                optional(HOST_PUBLIC_KEY_FIELD)?,
            ) {
                (Some(private), Some(public)) => {
                    check_stored_pair(domain, &entry, &private, public.expose())?;
                    let host_key = GuestHostKey {
                        private_key_openssh: private,
                        public_key_openssh: public.expose().trim().to_string(),
                    };
                    (host_key, KeypairOrigin::Stored)
                }
                _ => (
                    generate_host_key(domain, &mut rand::rngs::OsRng)?,
                    KeypairOrigin::Unsaved,
                ),
            };
            Ok(Some(GuestKeypair {
                domain: domain.clone(),
                private_key_openssh,
                public_key_openssh: public_key_openssh.expose().to_string(),
                origin,
                host_key,
                adopted_host_key: optional(ADOPTED_HOST_KEY_FIELD)?
                    .map(|key| key.expose().trim().to_string()),
            }))
        }
        Err(SecretsError::GroupMissing { .. } | SecretsError::EntryMissing { .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

fn generate(
    domain: &DomainName,
    rng: &mut impl CryptoRngCore,
) -> Result<GuestKeypair, SecretsError> {
    let failed = |source| SecretsError::GenerateKeypair {
        domain: domain.to_string(),
        source,
    };
    let mut private_key = PrivateKey::random(rng, Algorithm::Ed25519).map_err(failed)?;
    private_key.set_comment(guest_key_comment(domain));
    let private_key_openssh = Secret::from(private_key.to_openssh(LineEnding::LF).map_err(failed)?);
    let public_key_openssh = private_key.public_key().to_openssh().map_err(failed)?;
    Ok(GuestKeypair {
        domain: domain.clone(),
        private_key_openssh,
        public_key_openssh,
        origin: KeypairOrigin::Created,
        host_key: generate_host_key(domain, rng)?,
        adopted_host_key: None,
    })
}

/// A new Ed25519 host key for `domain`. Its public half carries no comment: it is compared as
/// `type base64`, which is what a known_hosts line and sshd's answer hold.
fn generate_host_key(
    domain: &DomainName,
    rng: &mut impl CryptoRngCore,
) -> Result<GuestHostKey, SecretsError> {
    let failed = |source| SecretsError::GenerateKeypair {
        domain: domain.to_string(),
        source,
    };
    let mut private_key = PrivateKey::random(rng, Algorithm::Ed25519).map_err(failed)?;
    private_key.set_comment(format!("host key of {}", domain.as_str()));
    let private_key_openssh = Secret::from(private_key.to_openssh(LineEnding::LF).map_err(failed)?);
    let mut public_key = private_key.public_key().clone();
    public_key.set_comment("");
    Ok(GuestHostKey {
        private_key_openssh,
        public_key_openssh: public_key.to_openssh().map_err(failed)?.trim().to_string(),
    })
}

fn store_host_key(
    store: &mut SecretStore,
    entry: &EntryPath,
    host_key: &GuestHostKey,
) -> Result<(), SecretsError> {
    store.put(
        entry,
        &FieldName::Custom(HOST_PUBLIC_KEY_FIELD.to_string()),
        &Secret::new(host_key.public_key_openssh.clone()),
        Protection::Plain,
    )?;
    store.put(
        entry,
        &FieldName::Custom(HOST_PRIVATE_KEY_FIELD.to_string()),
        &host_key.private_key_openssh,
        Protection::Protected,
    )
}

fn store_keypair(
    store: &mut SecretStore,
    entry: &EntryPath,
    keypair: &GuestKeypair,
) -> Result<(), SecretsError> {
    let notes = format!(
        "The SSH key pair trog logs into {} with; its public key is in the guest's authorized_keys. \
         The host key pair is the guest's own SSH host key, which trog accepts and no other. \
         Made by trog: do not edit.",
        keypair.domain.as_str()
    );
    store.put(
        entry,
        &FieldName::Notes,
        &Secret::new(notes),
        Protection::Plain,
    )?;
    store.put(
        entry,
        &FieldName::Custom(PUBLIC_KEY_FIELD.to_string()),
        &Secret::new(keypair.public_key_openssh.clone()),
        Protection::Plain,
    )?;
    store.put(
        entry,
        &FieldName::Custom(PRIVATE_KEY_FIELD.to_string()),
        &keypair.private_key_openssh,
        Protection::Protected,
    )?;
    store_host_key(store, entry, &keypair.host_key)
}

/// Refuses a stored pair whose halves do not belong together (an entry edited by hand): handing a
/// guest one public key while logging in with another private key fails only much later.
fn check_stored_pair(
    domain: &DomainName,
    entry: &EntryPath,
    private_key_openssh: &Secret,
    public_key_openssh: &str,
) -> Result<(), SecretsError> {
    let unreadable = |source| SecretsError::StoredKeypairUnreadable {
        domain: domain.to_string(),
        entry: entry.to_string(),
        source,
    };
    let private_key = PrivateKey::from_openssh(private_key_openssh.expose()).map_err(unreadable)?;
    let public_key = PublicKey::from_openssh(public_key_openssh).map_err(unreadable)?;
    if private_key.is_encrypted() || private_key.public_key().key_data() != public_key.key_data() {
        return Err(SecretsError::StoredKeypairMismatch {
            domain: domain.to_string(),
            entry: entry.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::store::StoreKdf;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// Small enough to keep unit tests quick; the integration tests use the real parameters.
    const QUICK_KDF: StoreKdf = StoreKdf {
        memory_mib: 1,
        iterations: 1,
        parallelism: 1,
    };

    fn new_store(directory: &tempfile::TempDir) -> SecretStore {
        SecretStore::create(
            &directory.path().join("secrets.kdbx"),
            &Secret::new("pass"),
            QUICK_KDF,
        )
        .unwrap()
    }

    #[test]
    fn a_new_pair_is_ed25519_with_the_guest_in_its_comment() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let domain = DomainName::parse("www.example.test").unwrap();
        let keypair = guest_keypair(&mut store, &domain, &mut StdRng::seed_from_u64(1)).unwrap();
        assert_eq!(keypair.origin(), KeypairOrigin::Created);
        assert!(keypair.public_key_openssh().starts_with("ssh-ed25519 AAAA"));
        assert!(keypair
            .public_key_openssh()
            .ends_with(" trog@www.example.test"));
        assert!(keypair
            .private_key_openssh()
            .expose()
            .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
        assert_eq!(
            format!("{keypair:?}").matches("PRIVATE KEY").count(),
            0,
            "Debug shows no private key"
        );
    }

    #[test]
    fn the_second_call_returns_the_same_pair_and_different_guests_get_different_pairs() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let db = DomainName::parse("db.example.test").unwrap();
        let first = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        let again = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(2)).unwrap();
        assert_eq!(again.origin(), KeypairOrigin::Stored);
        assert_eq!(again.public_key_openssh(), first.public_key_openssh());
        assert_eq!(again.private_key_openssh(), first.private_key_openssh());
        let other = guest_keypair(&mut store, &db, &mut StdRng::seed_from_u64(2)).unwrap();
        assert_ne!(other.public_key_openssh(), first.public_key_openssh());
    }

    #[test]
    fn every_new_guest_gets_a_host_key_of_its_own_kept_with_its_login_key() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let db = DomainName::parse("db.example.test").unwrap();
        let first = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        let host = first.host_key();
        assert!(host.public_key_openssh.starts_with("ssh-ed25519 AAAA"));
        assert_eq!(host.public_key_openssh.split(' ').count(), 2, "no comment");
        assert_ne!(host.public_key_openssh, first.public_key_openssh());
        assert_eq!(
            first.accepted_host_keys(),
            [host.public_key_openssh.as_str()]
        );
        let again = stored_keypair(&store, &www).unwrap().unwrap();
        assert_eq!(again.origin(), KeypairOrigin::Stored);
        assert_eq!(again.host_key().public_key_openssh, host.public_key_openssh);
        assert_eq!(
            again.host_key().private_key_openssh,
            host.private_key_openssh
        );
        let other = guest_keypair(&mut store, &db, &mut StdRng::seed_from_u64(2)).unwrap();
        assert_ne!(other.host_key().public_key_openssh, host.public_key_openssh);
        assert!(!format!("{again:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn an_entry_from_before_host_keys_keeps_its_login_key_and_gains_a_host_key_once() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let made = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        // What a store written before host keys holds: the login key pair alone.
        let entry = guest_keypair_entry(&www);
        store.remove_entry(&entry).unwrap();
        let field = |name: &str| FieldName::Custom(name.to_string());
        store
            .put(
                &entry,
                &field(PUBLIC_KEY_FIELD),
                &Secret::new(made.public_key_openssh().to_string()),
                Protection::Plain,
            )
            .unwrap();
        store
            .put(
                &entry,
                &field(PRIVATE_KEY_FIELD),
                made.private_key_openssh(),
                Protection::Protected,
            )
            .unwrap();
        store.save().unwrap();

        // A verb that writes nothing makes a stand-in and says so.
        let read_only = stored_keypair(&store, &www).unwrap().unwrap();
        assert_eq!(read_only.origin(), KeypairOrigin::Unsaved);
        assert_eq!(read_only.public_key_openssh(), made.public_key_openssh());

        let upgraded = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(5)).unwrap();
        assert_eq!(upgraded.origin(), KeypairOrigin::Stored);
        assert_eq!(upgraded.public_key_openssh(), made.public_key_openssh());
        assert_eq!(upgraded.private_key_openssh(), made.private_key_openssh());
        let kept = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(6)).unwrap();
        assert_eq!(
            kept.host_key().public_key_openssh,
            upgraded.host_key().public_key_openssh,
            "made once"
        );
    }

    #[test]
    fn an_adopted_host_key_is_accepted_beside_trogs_own() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let made = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        record_adopted_host_key(&mut store, &www, "ssh-ed25519 AAAAadopted").unwrap();
        let read = stored_keypair(&store, &www).unwrap().unwrap();
        assert_eq!(read.adopted_host_key(), Some("ssh-ed25519 AAAAadopted"));
        assert_eq!(
            read.accepted_host_keys(),
            [
                made.host_key().public_key_openssh.as_str(),
                "ssh-ed25519 AAAAadopted"
            ]
        );
    }

    #[test]
    fn forgetting_the_adopted_host_key_keeps_trogs_own_and_what_another_run_saved_meanwhile() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let db = DomainName::parse("db.example.test").unwrap();
        let made = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        record_adopted_host_key(&mut store, &www, "ssh-ed25519 AAAAadopted").unwrap();
        // Another run, with its own copy of the store, makes another guest's key meanwhile.
        let mut other_run =
            SecretStore::open(&directory.path().join("secrets.kdbx"), &Secret::new("pass"))
                .unwrap();
        let other = guest_keypair(&mut other_run, &db, &mut StdRng::seed_from_u64(2)).unwrap();

        assert!(forget_adopted_host_key(&mut store, &www).unwrap());

        let on_disk =
            SecretStore::open(&directory.path().join("secrets.kdbx"), &Secret::new("pass"))
                .unwrap();
        let read = stored_keypair(&on_disk, &www).unwrap().unwrap();
        assert_eq!(read.adopted_host_key(), None);
        assert_eq!(
            read.accepted_host_keys(),
            [made.host_key().public_key_openssh.as_str()]
        );
        assert_eq!(read.public_key_openssh(), made.public_key_openssh());
        let kept = stored_keypair(&on_disk, &db).unwrap().unwrap();
        assert_eq!(
            kept.public_key_openssh(),
            other.public_key_openssh(),
            "the store was re-read under its lock before the change was saved"
        );
        assert!(
            !forget_adopted_host_key(&mut store, &www).unwrap(),
            "nothing left to forget"
        );
        let never_built = DomainName::parse("new.example.test").unwrap();
        assert!(!forget_adopted_host_key(&mut store, &never_built).unwrap());
    }

    #[test]
    fn a_pair_whose_halves_differ_is_refused() {
        let directory = tempfile::tempdir().unwrap();
        let mut store = new_store(&directory);
        let www = DomainName::parse("www.example.test").unwrap();
        let db = DomainName::parse("db.example.test").unwrap();
        guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(1)).unwrap();
        let other = guest_keypair(&mut store, &db, &mut StdRng::seed_from_u64(2)).unwrap();
        let field = FieldName::Custom(PUBLIC_KEY_FIELD.to_string());
        let swapped = Secret::new(other.public_key_openssh().to_string());
        store
            .put(
                &guest_keypair_entry(&www),
                &field,
                &swapped,
                Protection::Plain,
            )
            .unwrap();
        let error = guest_keypair(&mut store, &www, &mut StdRng::seed_from_u64(3)).unwrap_err();
        assert!(
            matches!(error, SecretsError::StoredKeypairMismatch { .. }),
            "{error:?}"
        );
    }
}
