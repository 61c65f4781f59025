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

/// Whether [`guest_keypair`] found the pair in the store or made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeypairOrigin {
    Stored,
    Created,
    /// Made for a verb that changes nothing and kept nowhere ([`unsaved_guest_keypair`]): the
    /// guest has no key yet, and the first run that builds it makes the real one.
    Unsaved,
}

/// A guest's key pair, as kept in the store.
#[derive(Debug, Clone)]
pub struct GuestKeypair {
    domain: DomainName,
    private_key_openssh: Secret,
    public_key_openssh: String,
    origin: KeypairOrigin,
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
        return Ok(stored);
    }
    // Under the store's writer lock, on the store as it is on disk now: another run may have
    // made this guest's key (or another guest's) since the store was opened.
    store.update(|store| {
        if let Some(stored) = stored_keypair(store, domain)? {
            return Ok(stored);
        }
        let keypair = generate(domain, rng)?;
        store_keypair(store, &guest_keypair_entry(domain), &keypair)?;
        Ok(keypair)
    })
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

/// `domain`'s key pair when the store has one, checked to be a pair; changes nothing.
pub fn stored_keypair(
    store: &SecretStore,
    domain: &DomainName,
) -> Result<Option<GuestKeypair>, SecretsError> {
    let entry = guest_keypair_entry(domain);
    match store.get(&entry, &FieldName::Custom(PRIVATE_KEY_FIELD.to_string())) {
        Ok(private_key_openssh) => {
            let public_key_openssh =
                store.get(&entry, &FieldName::Custom(PUBLIC_KEY_FIELD.to_string()))?;
            check_stored_pair(
                domain,
                &entry,
                &private_key_openssh,
                public_key_openssh.expose(),
            )?;
            Ok(Some(GuestKeypair {
                domain: domain.clone(),
                private_key_openssh,
                public_key_openssh: public_key_openssh.expose().to_string(),
                origin: KeypairOrigin::Stored,
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
    })
}

fn store_keypair(
    store: &mut SecretStore,
    entry: &EntryPath,
    keypair: &GuestKeypair,
) -> Result<(), SecretsError> {
    let notes = format!(
        "The SSH key pair trog logs into {} with; its public key is in the guest's authorized_keys. \
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
    )
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
