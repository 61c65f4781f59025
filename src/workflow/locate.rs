//! Which hypervisor of the fleet holds a guest: the one `--hypervisor` names, the only one there
//! is, or the one that answers "I have it" when every hypervisor is asked at once.

use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet, BuildFleet};
use crate::config::paths::InstallationPaths;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::libvirt::{find_guest, LibvirtObserver};
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error("{domain} is on no hypervisor of {fleet}{}", unreachable_list(.unreachable))]
    NotFound {
        domain: String,
        fleet: String,
        /// Hypervisors that could not be asked, each with why.
        unreachable: Vec<String>,
    },
    #[error("{domain} is defined on several hypervisors: {}", holders.join(", "))]
    SeveralHolders {
        domain: String,
        holders: Vec<String>,
    },
}

fn unreachable_list(unreachable: &[String]) -> String {
    if unreachable.is_empty() {
        String::new()
    } else {
        format!(
            " that answered; these could not be asked:\n  {}",
            unreachable.join("\n  ")
        )
    }
}

impl Diagnose for LocateError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            // The guest may be on the hypervisor that could not be asked.
            LocateError::NotFound { unreachable, .. } if !unreachable.is_empty() => {
                ExitStatus::Hypervisor
            }
            LocateError::NotFound { .. } => ExitStatus::Failure,
            LocateError::SeveralHolders { .. } => ExitStatus::Conflict,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            LocateError::NotFound { .. } => {
                "check the name; `trog fleet` lists every hypervisor's guests".into()
            }
            LocateError::SeveralHolders { .. } => "name the one to act on with --hypervisor".into(),
        })
    }
}

/// The fleet a command about `domain` works with: `hypervisors.conf`, or without one this
/// machine (or the guest's own deprecated `libvirt_uri`). A warning to print comes with it.
pub fn fleet_for_guest(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<BuildFleet, Failure> {
    // Without a fleet file, a guest's own (deprecated) libvirt_uri still says where it lives; a
    // guest whose file cannot be read (already removed, say) is looked for on this machine.
    let guest_uri = crate::config::guest::load_guest(paths, domain)
        .ok()
        .and_then(|guest| guest.settings.libvirt_uri);
    Ok(fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        guest_uri.as_ref(),
    ))
}

/// The hypervisor that holds `domain`: the one `named` (an unknown name is an error listing the
/// known ones), the fleet's only one, or the one that says it has the guest when all are asked at
/// once, each within `answer_timeout`.
pub fn locate_guest<'f>(
    fleet: &'f BuildFleet,
    domain: &DomainName,
    named: Option<&str>,
    answer_timeout: Duration,
) -> Result<&'f HypervisorConfig, Failure> {
    if let Some(name) = named {
        return Ok(fleet.hypervisor_named(name)?);
    }
    if let [only] = fleet.fleet.hypervisors.as_slice() {
        return Ok(only);
    }
    let found = find_guest(fleet, domain, Arc::new(LibvirtObserver), answer_timeout);
    match found.holders.as_slice() {
        [one] => Ok(fleet
            .fleet
            .hypervisors
            .iter()
            .find(|hypervisor| &hypervisor.name == one)
            .expect("a holder is in the fleet")),
        [] => Err(LocateError::NotFound {
            domain: domain.to_string(),
            fleet: fleet.source.describe(),
            unreachable: found
                .unreachable
                .iter()
                .map(|(name, why)| format!("{name}: {why}"))
                .collect(),
        }
        .into()),
        several => Err(LocateError::SeveralHolders {
            domain: domain.to_string(),
            holders: several.iter().map(ToString::to_string).collect(),
        }
        .into()),
    }
}
