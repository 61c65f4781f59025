//! Whether a run may make a new secret store. The store holds every guest's SSH key, and a guest's
//! public key is part of its seed: a new store means new keys, so every guest of the installation
//! would be planned for a new root disk ("the boot inputs changed"). A store that is missing while
//! the installation has guests is therefore never replaced on the quiet — it was moved, lost, or
//! `TROG_PROVISIONER_CONFIG` names the wrong installation — and the run is refused before
//! anything is written (ips.db, the store, its lock files).
//!
//! Which guests are the installation's: libvirt's domains that carry trog's tag (which records no
//! installation) and whose name has a file in this installation's `recipes.d`. Every hypervisor
//! of the fleet is asked at once; one that cannot be asked may hold guests, so it never counts as
//! "none". `provision --new-secret-store` makes a new store on purpose, whatever the fleet holds.

use crate::config::hypervisors_conf::BuildFleet;
use crate::config::paths::InstallationPaths;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::hypervisor::fleet::ask_fleet;
use crate::model::names::{DomainName, HypervisorName};
use crate::secrets::{store_presence, SecretsError, StorePresence};
use crate::workflow::open::fleet_observer;
use std::path::PathBuf;
use std::time::Duration;

/// Proof that a run may make a new store: this installation has no guests on a fleet that
/// answered in full, or the user asked for a new store. Only [`check_store`] and, for the verb
/// that asks no hypervisor, [`new_store_asked_without_the_fleet`] make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewStorePermit(());

/// What [`check_store`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCheck {
    /// The store is there: open it.
    Present,
    /// There is none, and one may be made.
    MayCreate(NewStorePermit),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreGuardError {
    #[error(transparent)]
    Store(#[from] SecretsError),

    #[error(
        "the secret store {} does not exist, but this installation has guests: {}; a new store \
         would give them new SSH keys and plan a new root disk for each",
        .path.display(), .guests.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    MissingWithGuests {
        path: PathBuf,
        guests: Vec<GuestFound>,
    },

    #[error(
        "the secret store {} does not exist, and whether this installation has guests is not \
         known: {} could not be asked:\n  {}",
        .path.display(),
        if .unreachable.len() == 1 { "a hypervisor" } else { "hypervisors" },
        .unreachable.iter().map(|(name, why)| format!("{name}: {why}")).collect::<Vec<_>>().join("\n  ")
    )]
    FleetNotAsked {
        path: PathBuf,
        unreachable: Vec<(HypervisorName, String)>,
    },

    #[error("--new-secret-store: the secret store {} exists", .path.display())]
    NewStoreButOneExists { path: PathBuf },
}

/// A guest of this installation found on a hypervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFound {
    pub guest: DomainName,
    pub hypervisor: HypervisorName,
}

impl std::fmt::Display for GuestFound {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} on {}", self.guest, self.hypervisor)
    }
}

impl Diagnose for StoreGuardError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            StoreGuardError::Store(error) => error.exit_status(),
            // The store is lost to this installation as surely as a damaged one, and what helps
            // is the same: a person restores it. Not Credentials (4): no passphrase would help,
            // and a caller that hands one in and retries would be misled.
            StoreGuardError::MissingWithGuests { .. } => ExitStatus::DamagedStore,
            // Asking again once the hypervisor answers may settle it.
            StoreGuardError::FleetNotAsked { .. } => ExitStatus::Hypervisor,
            StoreGuardError::NewStoreButOneExists { .. } => ExitStatus::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        let lost = "if the store is truly lost, make a new one deliberately with \
                    `trog provision --new-secret-store DOMAIN` (every guest then gets a new key, \
                    and its plan shows a new root disk)";
        match self {
            StoreGuardError::Store(error) => error.hint(),
            StoreGuardError::MissingWithGuests { path, .. } => Some(format!(
                "restore {} from a backup, or point TROG_PROVISIONER_CONFIG at the installation \
                 these guests belong to; {lost}",
                path.display()
            )),
            StoreGuardError::FleetNotAsked { .. } => Some(format!(
                "run again when every hypervisor answers (`trog preflight` checks them), or \
                 restore the store from a backup; {lost}"
            )),
            StoreGuardError::NewStoreButOneExists { path } => Some(format!(
                "run without --new-secret-store to use it; to replace it, move {} away first",
                path.display()
            )),
        }
    }
}

/// Whether the installation's store is there and, when it is not, whether a new one may be made:
/// only when `new_store_asked` (and then only when there is none), or when no hypervisor of
/// `fleet`, each asked within `answer_timeout`, holds a guest of this installation. A store that
/// cannot be looked at is refused here, before anything else.
pub fn check_store(
    paths: &InstallationPaths,
    fleet: &BuildFleet,
    new_store_asked: bool,
    answer_timeout: Duration,
) -> Result<StoreCheck, StoreGuardError> {
    let path = &paths.secrets_kdbx;
    match (store_presence(path)?, new_store_asked) {
        (StorePresence::Present, false) => return Ok(StoreCheck::Present),
        (StorePresence::Present, true) => {
            return Err(StoreGuardError::NewStoreButOneExists { path: path.clone() })
        }
        (StorePresence::Absent, true) => return Ok(StoreCheck::MayCreate(NewStorePermit(()))),
        (StorePresence::Absent, false) => {}
    }
    let hypervisors = &fleet.fleet.hypervisors;
    let observer = fleet_observer();
    let answers = ask_fleet(hypervisors, answer_timeout, move |hypervisor| {
        observer.tagged_domain_names(hypervisor)
    });
    let mut guests = Vec::new();
    let mut unreachable = Vec::new();
    for (hypervisor, answer) in hypervisors.iter().zip(answers) {
        match answer {
            Ok(names) => {
                guests.extend(installation_guests(paths, &names).into_iter().map(|guest| {
                    GuestFound {
                        guest,
                        hypervisor: hypervisor.name.clone(),
                    }
                }))
            }
            Err(why) => unreachable.push((hypervisor.name.clone(), why)),
        }
    }
    if !guests.is_empty() {
        return Err(StoreGuardError::MissingWithGuests {
            path: path.clone(),
            guests,
        });
    }
    if !unreachable.is_empty() {
        return Err(StoreGuardError::FleetNotAsked {
            path: path.clone(),
            unreachable,
        });
    }
    Ok(StoreCheck::MayCreate(NewStorePermit(())))
}

/// For `new_config --new-secret-store`: new_config asks no hypervisor, so it cannot tell
/// whether the installation has guests, and makes a store only when asked, never on its own (a
/// store it made would be the one a later provision finds and obeys). Refused when one is there.
pub fn new_store_asked_without_the_fleet(
    paths: &InstallationPaths,
) -> Result<NewStorePermit, StoreGuardError> {
    let path = &paths.secrets_kdbx;
    match store_presence(path)? {
        StorePresence::Absent => Ok(NewStorePermit(())),
        StorePresence::Present => Err(StoreGuardError::NewStoreButOneExists { path: path.clone() }),
    }
}

/// Of trog's domains named `tagged`, those declared in this installation's `recipes.d`.
fn installation_guests(paths: &InstallationPaths, tagged: &[String]) -> Vec<DomainName> {
    tagged
        .iter()
        .filter_map(|name| DomainName::parse(name).ok())
        .filter(|domain| paths.domain_file(domain).is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::hypervisors_conf::{Fleet, FleetSource};
    use crate::model::hypervisor::{HypervisorConfig, LibvirtUri};

    /// A test-driver node holding `domains`, each with trog's tag when its flag says so.
    fn node(directory: &std::path::Path, name: &str, domains: &[(&str, bool)]) -> String {
        let mut xml = String::from(
            "<node><cpu><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads>\
             <active>4</active><mhz>2000</mhz><model>x86_64</model></cpu>\
             <memory>8388608</memory>",
        );
        for (domain, tagged) in domains {
            let metadata = if *tagged {
                format!(
                    "<metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' \
                     domain='{domain}' boot='b' shape='s' payload=''/></metadata>"
                )
            } else {
                String::new()
            };
            xml.push_str(&format!(
                "<domain type='test'><name>{domain}</name><memory>524288</memory>\
                 <vcpu>1</vcpu><os><type>hvm</type></os>{metadata}</domain>"
            ));
        }
        xml.push_str("</node>");
        let path = directory.join(format!("{name}.xml"));
        std::fs::write(&path, xml).unwrap();
        format!("test://{}", path.display())
    }

    fn fleet(uris: &[(&str, String)]) -> BuildFleet {
        BuildFleet {
            source: FleetSource::File {
                path: "hypervisors.conf".into(),
            },
            fleet: Fleet {
                hypervisors: uris
                    .iter()
                    .map(|(name, uri)| {
                        HypervisorConfig::with_defaults(
                            HypervisorName::parse(name).unwrap(),
                            LibvirtUri::parse(uri).unwrap(),
                        )
                    })
                    .collect(),
            },
            warning: None,
        }
    }

    /// An installation declaring `declared` guests, without a store.
    fn installation(declared: &[&str]) -> (tempfile::TempDir, InstallationPaths) {
        let directory = tempfile::tempdir().unwrap();
        let paths = InstallationPaths::resolve(directory.path().to_str(), None, None);
        std::fs::create_dir(&paths.recipes_d).unwrap();
        for guest in declared {
            std::fs::write(paths.recipes_d.join(format!("{guest}.yaml")), "").unwrap();
        }
        (directory, paths)
    }

    const TIMEOUT: Duration = Duration::from_secs(20);

    #[test]
    fn a_tagged_guest_of_the_installation_refuses_a_new_store_and_is_named() {
        let (directory, paths) = installation(&["www.example.test"]);
        let fleet = fleet(&[
            (
                "hv1",
                node(directory.path(), "hv1", &[("other.test", true)]),
            ),
            (
                "hv2",
                node(
                    directory.path(),
                    "hv2",
                    &[("www.example.test", true), ("plain.test", false)],
                ),
            ),
        ]);
        let error = check_store(&paths, &fleet, false, TIMEOUT).unwrap_err();
        assert_eq!(error.exit_status(), ExitStatus::DamagedStore);
        let message = error.to_string();
        assert!(
            message.contains(&paths.secrets_kdbx.display().to_string())
                && message.contains("www.example.test on hv2")
                && !message.contains("other.test"),
            "{message}"
        );
        assert!(error.hint().unwrap().contains("--new-secret-store"));
    }

    #[test]
    fn no_guest_of_the_installation_lets_a_store_be_made() {
        // A tagged domain of another installation, and one of the same name that is not trog's.
        let (directory, paths) = installation(&["www.example.test"]);
        let fleet = fleet(&[(
            "hv1",
            node(
                directory.path(),
                "hv1",
                &[("other.test", true), ("www.example.test", false)],
            ),
        )]);
        assert!(matches!(
            check_store(&paths, &fleet, false, TIMEOUT).unwrap(),
            StoreCheck::MayCreate(_)
        ));
    }

    #[test]
    fn a_hypervisor_that_cannot_be_asked_is_not_taken_for_none() {
        let (directory, paths) = installation(&["www.example.test"]);
        let missing = directory.path().join("no-such-node.xml");
        let fleet = fleet(&[
            ("hv1", node(directory.path(), "hv1", &[])),
            ("hv2", format!("test://{}", missing.display())),
        ]);
        let error = check_store(&paths, &fleet, false, TIMEOUT).unwrap_err();
        assert!(
            matches!(&error, StoreGuardError::FleetNotAsked { unreachable, .. }
                if unreachable.len() == 1 && unreachable[0].0.as_str() == "hv2"),
            "{error:?}"
        );
        assert_eq!(error.exit_status(), ExitStatus::Hypervisor);
    }

    #[test]
    fn asking_for_a_new_store_asks_nobody_and_refuses_an_existing_one() {
        let (directory, paths) = installation(&["www.example.test"]);
        let fleet = fleet(&[(
            "hv1",
            node(directory.path(), "hv1", &[("www.example.test", true)]),
        )]);
        assert!(matches!(
            check_store(&paths, &fleet, true, TIMEOUT).unwrap(),
            StoreCheck::MayCreate(_)
        ));
        std::fs::write(&paths.secrets_kdbx, b"a store").unwrap();
        assert_eq!(
            check_store(&paths, &fleet, false, TIMEOUT).unwrap(),
            StoreCheck::Present
        );
        assert!(matches!(
            check_store(&paths, &fleet, true, TIMEOUT).unwrap_err(),
            StoreGuardError::NewStoreButOneExists { .. }
        ));
    }

    #[test]
    fn a_store_that_cannot_be_looked_at_is_refused_before_the_fleet_is_asked() {
        let (directory, paths) = installation(&[]);
        std::os::unix::fs::symlink(directory.path().join("moved.kdbx"), &paths.secrets_kdbx)
            .unwrap();
        // Nothing answers at this address: were it asked, the error would say so instead.
        let fleet = fleet(&[(
            "hv1",
            format!("test://{}", directory.path().join("none.xml").display()),
        )]);
        let error = check_store(&paths, &fleet, false, TIMEOUT).unwrap_err();
        assert!(
            matches!(
                &error,
                StoreGuardError::Store(SecretsError::DanglingLink { .. })
            ),
            "{error:?}"
        );
        assert_eq!(error.exit_status(), ExitStatus::DamagedStore);
    }
}
