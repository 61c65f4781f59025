//! `status --all`: every domain of recipes.d as `status DOMAIN` sees it, and the drift between
//! recipes.d and what the hypervisors hold: domains this installation made that no file declares
//! (orphans, each with the command that removes it), domains another installation sharing the
//! hypervisor made (theirs: listed, never offered for removal), domains trog tagged before its
//! tags named their installation (said so, with the command only for the case they are this
//! installation's), and domains of a declared name that trog did not make. Asks only; removes
//! nothing.

use crate::config::guest::list_domains;
use crate::config::installation_id::read_installation_id;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::hypervisor::observer::Maker;
use crate::lock::Locks;
use crate::workflow::session::GuestAddress;
use crate::workflow::site::{ask_holdings, HypervisorHoldings};
use crate::workflow::status::{guest_status, GuestStatus};
use serde::Serialize;
use std::time::Duration;

/// What libvirt has that recipes.d does not say, or says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    /// Domains tagged by this installation with no file in recipes.d.
    pub orphans: Vec<Orphan>,
    /// Domains tagged by another installation (sharing the hypervisor) that no file of this one
    /// declares: theirs, not this installation's to remove. Not drift of this installation.
    pub other_installations: Vec<OtherInstallations>,
    /// Domains with trog's tag from before tags named their installation, with no file in
    /// recipes.d: this installation's or another's, which nobody can tell; `remove_with` is the
    /// command for the case they are this one's.
    pub unknown_installation: Vec<Orphan>,
    /// Domains named as a guest of recipes.d that do not carry trog's tag: `provision` refuses
    /// them as a conflict (`--force` adopts one).
    pub foreign: Vec<HeldElsewhere>,
    /// Hypervisors that could not be asked, each with why: what they hold is not known.
    pub unreachable: Vec<String>,
}

/// A domain trog made that no file declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Orphan {
    pub guest: String,
    pub hypervisor: String,
    /// The command that removes it (its data volume and address are kept without `--purge`).
    pub remove_with: String,
}

/// A domain another installation of trog made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OtherInstallations {
    pub guest: String,
    pub hypervisor: String,
    /// The identity its tag names (that installation's `installation-id`).
    pub installation: String,
}

/// A domain on a hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldElsewhere {
    pub guest: String,
    pub hypervisor: String,
}

impl Drift {
    /// Whether nothing drifted that may be this installation's: another installation's guests
    /// are theirs, and do not count.
    pub fn is_empty(&self) -> bool {
        self.orphans.is_empty() && self.unknown_installation.is_empty() && self.foreign.is_empty()
    }
}

/// The drift between the `declared` guests and what `hypervisors` hold (pure); `this` is the
/// installation's identity (`None` before its first change: then no tag names it). The command
/// that removes an orphan names its hypervisor when the fleet has several: `destroy` then asks
/// that one only.
pub fn find_drift(
    declared: &[String],
    this: Option<&str>,
    hypervisors: &[HypervisorHoldings],
) -> Drift {
    let name_hypervisor = hypervisors.len() > 1;
    let mut drift = Drift {
        orphans: Vec::new(),
        other_installations: Vec::new(),
        unknown_installation: Vec::new(),
        foreign: Vec::new(),
        unreachable: Vec::new(),
    };
    for hypervisor in hypervisors {
        let held = match &hypervisor.answer {
            Ok(held) => held,
            Err(why) => {
                drift
                    .unreachable
                    .push(format!("{}: {why}", hypervisor.name));
                continue;
            }
        };
        for domain in held {
            let is_declared = declared.contains(&domain.name);
            let orphan = || Orphan {
                guest: domain.name.clone(),
                hypervisor: hypervisor.name.clone(),
                remove_with: if name_hypervisor {
                    format!(
                        "trog destroy {} --hypervisor {}",
                        domain.name, hypervisor.name
                    )
                } else {
                    format!("trog destroy {}", domain.name)
                },
            };
            match (&domain.maker, is_declared) {
                (Maker::NotTrog, true) => drift.foreign.push(HeldElsewhere {
                    guest: domain.name.clone(),
                    hypervisor: hypervisor.name.clone(),
                }),
                (Maker::NotTrog, false) | (_, true) => {}
                (Maker::Trog { installation }, false) if Some(installation.as_str()) == this => {
                    drift.orphans.push(orphan())
                }
                (Maker::Trog { installation }, false) => {
                    drift.other_installations.push(OtherInstallations {
                        guest: domain.name.clone(),
                        hypervisor: hypervisor.name.clone(),
                        installation: installation.clone(),
                    })
                }
                (Maker::TrogUnrecorded, false) => drift.unknown_installation.push(orphan()),
            }
        }
    }
    drift
}

/// Every guest of recipes.d, and the drift.
#[derive(Debug)]
pub struct SiteStatus {
    pub guests: Vec<GuestStatus>,
    pub drift: Drift,
    /// The fleet file's warning, said before anything else.
    pub warning: Option<String>,
}

/// The status of every domain of recipes.d (a guest whose status cannot be had, its
/// configuration invalid say, is not converged, with why), and the drift, looked for on every
/// hypervisor of the fleet or only the one `named`.
pub fn site_status(
    paths: &InstallationPaths,
    named: Option<&str>,
    answer_timeout: Duration,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    reporter: &dyn crate::workflow::reporter::Reporter,
) -> Result<SiteStatus, Failure> {
    let domains = list_domains(paths)?;
    // Read, never made: a status changes nothing. An installation without one yet has tagged
    // nothing with it.
    let this = read_installation_id(&paths.dir)?;
    let (hypervisors, warning) = ask_holdings(paths, named, answer_timeout)?;
    let mut guests = Vec::with_capacity(domains.len());
    for domain in &domains {
        let address = GuestAddress {
            domain,
            hypervisor: named,
            answer_timeout,
        };
        let status =
            guest_status(paths, &address, credentials, locks, reporter).unwrap_or_else(|failure| {
                GuestStatus {
                    guest: domain.to_string(),
                    hypervisor: None,
                    converged: false,
                    pending: vec![format!("resolve first: {}", failure.chain().join(": "))],
                    unreachable: Vec::new(),
                    base_image: None,
                }
            });
        guests.push(status);
    }
    let declared: Vec<String> = domains.iter().map(ToString::to_string).collect();
    Ok(SiteStatus {
        guests,
        drift: find_drift(&declared, this.as_ref().map(|id| id.as_str()), &hypervisors),
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::observer::HeldDomain;

    const THIS: &str = "11111111-1111-4111-8111-111111111111";
    const OTHER: &str = "22222222-2222-4222-8222-222222222222";

    /// A domain made by `maker`: `Some(THIS)`, `Some(OTHER)`, `Some("")` (trog, no
    /// installation recorded) or `None` (not trog).
    fn held(name: &str, maker: Option<&str>) -> HeldDomain {
        HeldDomain {
            name: name.into(),
            maker: match maker {
                None => Maker::NotTrog,
                Some("") => Maker::TrogUnrecorded,
                Some(id) => Maker::Trog {
                    installation: id.into(),
                },
            },
            leased: Vec::new(),
        }
    }

    fn hypervisor(name: &str, domains: Vec<HeldDomain>) -> HypervisorHoldings {
        HypervisorHoldings {
            name: name.into(),
            local: false,
            answer: Ok(domains),
        }
    }

    #[test]
    fn orphans_other_installations_unrecorded_and_foreign_namesakes_are_told_apart() {
        let declared = vec!["www.site.test".to_string(), "db.site.test".to_string()];
        let fleet = [
            hypervisor(
                "hv1",
                vec![
                    held("www.site.test", Some(THIS)),
                    held("old.site.test", Some(THIS)),
                    held("theirs.site.test", Some(OTHER)),
                    held("legacy.site.test", Some("")),
                    held("db.site.test", None),
                    held("someone-elses-vm", None),
                ],
            ),
            HypervisorHoldings {
                name: "hv2".into(),
                local: false,
                answer: Err("did not answer within 20s".into()),
            },
        ];
        let drift = find_drift(&declared, Some(THIS), &fleet);
        assert_eq!(
            drift.orphans,
            [Orphan {
                guest: "old.site.test".into(),
                hypervisor: "hv1".into(),
                remove_with: "trog destroy old.site.test --hypervisor hv1".into(),
            }]
        );
        assert_eq!(
            drift.other_installations,
            [OtherInstallations {
                guest: "theirs.site.test".into(),
                hypervisor: "hv1".into(),
                installation: OTHER.into(),
            }]
        );
        assert_eq!(
            drift.unknown_installation,
            [Orphan {
                guest: "legacy.site.test".into(),
                hypervisor: "hv1".into(),
                remove_with: "trog destroy legacy.site.test --hypervisor hv1".into(),
            }]
        );
        assert_eq!(
            drift.foreign,
            [HeldElsewhere {
                guest: "db.site.test".into(),
                hypervisor: "hv1".into(),
            }]
        );
        assert_eq!(drift.unreachable, ["hv2: did not answer within 20s"]);
        assert!(!drift.is_empty());
    }

    #[test]
    fn another_installations_guests_are_not_this_ones_drift() {
        let declared = vec!["www.site.test".to_string()];
        let only = [hypervisor(
            "local",
            vec![
                held("www.site.test", Some(THIS)),
                held("theirs.site.test", Some(OTHER)),
            ],
        )];
        let drift = find_drift(&declared, Some(THIS), &only);
        assert!(drift.orphans.is_empty());
        assert_eq!(drift.other_installations.len(), 1);
        assert!(drift.is_empty());
        // An installation that has no identity yet tagged nothing: every named tag is another's.
        let before_any = find_drift(&declared, None, &only);
        assert!(before_any.orphans.is_empty());
        assert_eq!(before_any.other_installations.len(), 1);
        // A declared guest is not drift, whoever tagged it last.
        let shared = [hypervisor(
            "local",
            vec![held("www.site.test", Some(OTHER))],
        )];
        let drift = find_drift(&declared, Some(THIS), &shared);
        assert!(drift.other_installations.is_empty() && drift.is_empty());
    }

    #[test]
    fn an_only_hypervisor_is_not_named_and_a_matching_site_has_no_drift() {
        let declared = vec!["www.site.test".to_string()];
        let only = [hypervisor(
            "local",
            vec![
                held("www.site.test", Some(THIS)),
                held("gone.site.test", Some(THIS)),
            ],
        )];
        let drift = find_drift(&declared, Some(THIS), &only);
        assert_eq!(drift.orphans[0].remove_with, "trog destroy gone.site.test");
        let matching = [hypervisor("local", vec![held("www.site.test", Some(THIS))])];
        assert!(find_drift(&declared, Some(THIS), &matching).is_empty());
    }
}
