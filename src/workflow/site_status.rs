//! `status --all`: every domain of recipes.d as `status DOMAIN` sees it, and the drift between
//! recipes.d and what the hypervisors hold: domains trog made that no file declares (orphans,
//! each with the command that removes it), and domains of a declared name that trog did not make.
//! Asks only; removes nothing.

use crate::config::guest::list_domains;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::lock::Locks;
use crate::workflow::session::GuestAddress;
use crate::workflow::site::{ask_holdings, HypervisorHoldings};
use crate::workflow::status::{guest_status, GuestStatus};
use serde::Serialize;
use std::time::Duration;

/// What libvirt has that recipes.d does not say, or says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    /// Domains carrying trog's tag with no file in recipes.d.
    pub orphans: Vec<Orphan>,
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

/// A domain on a hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldElsewhere {
    pub guest: String,
    pub hypervisor: String,
}

impl Drift {
    pub fn is_empty(&self) -> bool {
        self.orphans.is_empty() && self.foreign.is_empty()
    }
}

/// The drift between the `declared` guests and what `hypervisors` hold (pure). The command that
/// removes an orphan names its hypervisor when the fleet has several: `destroy` then asks that
/// one only.
pub fn find_drift(declared: &[String], hypervisors: &[HypervisorHoldings]) -> Drift {
    let name_hypervisor = hypervisors.len() > 1;
    let mut drift = Drift {
        orphans: Vec::new(),
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
            if domain.tagged && !is_declared {
                let remove_with = if name_hypervisor {
                    format!(
                        "trog destroy {} --hypervisor {}",
                        domain.name, hypervisor.name
                    )
                } else {
                    format!("trog destroy {}", domain.name)
                };
                drift.orphans.push(Orphan {
                    guest: domain.name.clone(),
                    hypervisor: hypervisor.name.clone(),
                    remove_with,
                });
            } else if !domain.tagged && is_declared {
                drift.foreign.push(HeldElsewhere {
                    guest: domain.name.clone(),
                    hypervisor: hypervisor.name.clone(),
                });
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
                }
            });
        guests.push(status);
    }
    let declared: Vec<String> = domains.iter().map(ToString::to_string).collect();
    Ok(SiteStatus {
        guests,
        drift: find_drift(&declared, &hypervisors),
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::site::HeldDomain;

    fn held(name: &str, tagged: bool) -> HeldDomain {
        HeldDomain {
            name: name.into(),
            tagged,
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
    fn orphans_and_foreign_namesakes_are_told_apart_from_declared_guests() {
        let declared = vec!["www.site.test".to_string(), "db.site.test".to_string()];
        let fleet = [
            hypervisor(
                "hv1",
                vec![
                    held("www.site.test", true),
                    held("old.site.test", true),
                    held("db.site.test", false),
                    held("someone-elses-vm", false),
                ],
            ),
            HypervisorHoldings {
                name: "hv2".into(),
                local: false,
                answer: Err("did not answer within 20s".into()),
            },
        ];
        let drift = find_drift(&declared, &fleet);
        assert_eq!(
            drift.orphans,
            [Orphan {
                guest: "old.site.test".into(),
                hypervisor: "hv1".into(),
                remove_with: "trog destroy old.site.test --hypervisor hv1".into(),
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
    fn an_only_hypervisor_is_not_named_and_a_matching_site_has_no_drift() {
        let declared = vec!["www.site.test".to_string()];
        let only = [hypervisor(
            "local",
            vec![held("www.site.test", true), held("gone.site.test", true)],
        )];
        let drift = find_drift(&declared, &only);
        assert_eq!(drift.orphans[0].remove_with, "trog destroy gone.site.test");
        let matching = [hypervisor("local", vec![held("www.site.test", true)])];
        assert!(find_drift(&declared, &matching).is_empty());
    }
}
