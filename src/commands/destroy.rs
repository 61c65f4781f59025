//! `destroy DOMAIN`: find the guest on whichever hypervisor has it, stop and undefine it (with
//! its firmware and TPM state), delete its root disk and seed, and keep its data volume unless
//! `--purge`. A failed step does not stop the rest; what was left behind is named, and the run
//! exits with its own status.

use crate::cli::GlobalArgs;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_fleet};
use crate::config::paths::InstallationPaths;
use crate::credentials::confirmed_by_retyping;
use crate::exit_status::ExitStatus;
use crate::libvirt::destroy::destroy_guest;
use crate::libvirt::{connect, find_guest, LibvirtObserver, DEFAULT_ANSWER_TIMEOUT};
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::provision::inputs::domain_argument;
use crate::report::{Diagnose, Failure};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct DestroyArgs {
    /// The guest, fully qualified.
    pub domain: String,
    /// Act on this hypervisor of hypervisors.conf instead of searching the fleet.
    #[arg(long, value_name = "NAME")]
    pub hypervisor: Option<String>,
    /// Delete the guest's data volume too (its contents are lost).
    #[arg(long)]
    pub purge: bool,
    /// Without a terminal, confirms --purge (on a terminal the guest's name is retyped).
    #[arg(long)]
    pub yes: bool,
    /// Seconds each hypervisor has to answer when the guest is looked for.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub timeout: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DestroyCommandError {
    #[error("{domain} is on no hypervisor of {fleet}{}", unreachable_list(.unreachable))]
    NotFound {
        domain: String,
        fleet: String,
        unreachable: Vec<String>,
    },
    #[error("{domain} is defined on several hypervisors: {}", holders.join(", "))]
    SeveralHolders {
        domain: String,
        holders: Vec<String>,
    },
    #[error("--purge deletes the data of {domain}, and that was not confirmed")]
    PurgeNotConfirmed { domain: String },
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

impl Diagnose for DestroyCommandError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            DestroyCommandError::NotFound { unreachable, .. } if !unreachable.is_empty() => {
                ExitStatus::Hypervisor
            }
            DestroyCommandError::NotFound { .. } => ExitStatus::Failure,
            DestroyCommandError::SeveralHolders { .. }
            | DestroyCommandError::PurgeNotConfirmed { .. } => ExitStatus::Conflict,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            DestroyCommandError::NotFound { .. } => {
                "check the name; `trog fleet` lists every hypervisor's guests".into()
            }
            DestroyCommandError::SeveralHolders { .. } => {
                "name the one to act on with --hypervisor".into()
            }
            DestroyCommandError::PurgeNotConfirmed { .. } => {
                "on a terminal, retype the guest's name when asked; without one, add --yes".into()
            }
        })
    }
}

fn confirm_purge(domain: &DomainName, yes: bool) -> Result<(), DestroyCommandError> {
    let warning = format!("--purge deletes the data volume of {domain}.");
    if confirmed_by_retyping(&warning, domain.as_str(), yes) {
        Ok(())
    } else {
        Err(DestroyCommandError::PurgeNotConfirmed {
            domain: domain.to_string(),
        })
    }
}

pub fn run(global: &GlobalArgs, args: DestroyArgs) -> Result<ExitStatus, Failure> {
    let domain = domain_argument(&args.domain)?;
    if args.purge {
        confirm_purge(&domain, args.yes)?;
    }
    let paths = InstallationPaths::from_environment(global);
    // Without a fleet file, a guest's own (deprecated) libvirt_uri still says where it lives.
    let guest_uri = crate::config::guest::load_guest(&paths, &domain)
        .ok()
        .and_then(|guest| guest.settings.libvirt_uri);
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_fleet(&paths.hypervisors_conf)?,
        guest_uri.as_ref(),
    );
    if let Some(warning) = &fleet.warning {
        eprintln!("warning: {warning}");
    }
    let hypervisor: &HypervisorConfig = match &args.hypervisor {
        Some(name) => fleet.hypervisor_named(name)?,
        None if fleet.fleet.hypervisors.len() == 1 => &fleet.fleet.hypervisors[0],
        None => {
            let found = find_guest(
                &fleet,
                &domain,
                Arc::new(LibvirtObserver),
                Duration::from_secs(args.timeout),
            );
            match found.holders.as_slice() {
                [one] => fleet
                    .fleet
                    .hypervisors
                    .iter()
                    .find(|h| &h.name == one)
                    .expect("a holder is in the fleet"),
                [] => {
                    return Err(DestroyCommandError::NotFound {
                        domain: domain.to_string(),
                        fleet: fleet.source.describe(),
                        unreachable: found
                            .unreachable
                            .iter()
                            .map(|(name, why)| format!("{name}: {why}"))
                            .collect(),
                    }
                    .into())
                }
                several => {
                    return Err(DestroyCommandError::SeveralHolders {
                        domain: domain.to_string(),
                        holders: several.iter().map(ToString::to_string).collect(),
                    }
                    .into())
                }
            }
        }
    };
    let connection = connect(&hypervisor.libvirt_uri)?;
    let outcome = destroy_guest(
        &connection,
        hypervisor.name.as_str(),
        &domain,
        &hypervisor.pool_name,
        args.purge,
    )?;
    if global.json {
        println!(
            "{}",
            serde_json::json!({ "guest": domain.as_str(), "hypervisor": hypervisor.name.as_str(), "outcome": outcome })
        );
    } else {
        if outcome.removed.is_empty() && outcome.left_behind.is_empty() {
            println!("{domain}: nothing of it on {}", hypervisor.name);
        }
        for removed in &outcome.removed {
            println!("removed  {removed}");
        }
        for kept in &outcome.kept {
            println!("kept     {kept}");
        }
        for (what, why) in &outcome.left_behind {
            println!("LEFT     {what}: {why}");
        }
    }
    Ok(if outcome.left_behind.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::PartialDestroy
    })
}
