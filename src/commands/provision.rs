//! `provision DOMAIN…`: generate each guest, place it, plan its convergence, print the plan, and
//! (unless `--dry-run`) carry it out: boot the guest and finish it over SSH.

use crate::addresses::settle::AddressPolicy;
use crate::cli::GlobalArgs;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::credentials::{confirmed_by_retyping, CredentialSource};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::images::default_cache_dir;
use crate::libvirt::{observe_for_placement, LibvirtObserver, DEFAULT_ANSWER_TIMEOUT};
use crate::model::names::HypervisorName;
use crate::output::events::{Event, GuestKey};
use crate::output::progress::{Progress, ProgressMode};
use crate::placement::{place_guests, render_decision, GuestDemand};
use crate::plan::{Action, Resolution};
use crate::provision::inputs::{
    domain_argument, generate_guest_inputs, load_guest_configured, GuestConfigured, GuestInputs,
    StoreUse,
};
use crate::provision::{check_reachable, execute, prepare, ready_to_execute, GuestOnHypervisor};
use crate::secrets::KeypairOrigin;
use crate::workflow::lock::take_guest_lock;
use crate::workflow::{open_hypervisor, HypervisorAccess};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ProvisionArgs {
    /// The guests, fully qualified.
    #[arg(required = true, value_name = "DOMAIN")]
    pub domains: Vec<String>,
    /// Print the placement and the numbered plan, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Build on this hypervisor of hypervisors.conf, skipping the search and the capacity checks.
    #[arg(long, value_name = "NAME")]
    pub hypervisor: Option<String>,
    /// Adopt same-named resources trog did not create (lossless).
    #[arg(long)]
    pub force: bool,
    /// Allow recreating a data volume that cannot be kept (its contents are lost).
    #[arg(long)]
    pub destroy_data: bool,
    /// Without a terminal, confirms --destroy-data (on a terminal the volume's name is retyped).
    #[arg(long)]
    pub yes: bool,
    /// Seconds each hypervisor has to answer when the fleet is observed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub timeout: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionCommandError {
    #[error("--hypervisor cannot name a hypervisor")]
    BadHypervisorName {
        #[source]
        source: crate::model::names::NameError,
    },
    #[error("the plan recreates data volume {volume} empty, and that was not confirmed")]
    DestroyNotConfirmed { volume: String },
}

impl Diagnose for ProvisionCommandError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ProvisionCommandError::BadHypervisorName { .. } => ExitStatus::Usage,
            ProvisionCommandError::DestroyNotConfirmed { .. } => ExitStatus::Conflict,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ProvisionCommandError::BadHypervisorName { .. } => {
                Some("name a [block] of hypervisors.conf".into())
            }
            ProvisionCommandError::DestroyNotConfirmed { .. } => Some(
                "on a terminal, retype the volume's name when asked; without one, add --yes".into(),
            ),
        }
    }
}

/// `--destroy-data` deletes a data volume only when the user retyped its name (or said `--yes`
/// where there is no terminal to retype it at).
fn confirm_destroy(volume: &str, yes: bool) -> Result<(), ProvisionCommandError> {
    let warning = format!("This recreates {volume} empty.");
    if confirmed_by_retyping(&warning, volume, yes) {
        Ok(())
    } else {
        Err(ProvisionCommandError::DestroyNotConfirmed {
            volume: volume.to_string(),
        })
    }
}

pub fn run(global: &GlobalArgs, args: ProvisionArgs) -> Result<ExitStatus, Failure> {
    let domains = args
        .domains
        .iter()
        .map(|text| domain_argument(text))
        .collect::<Result<Vec<_>, _>>()?;
    let command_line_hypervisor = match &args.hypervisor {
        Some(name) => Some(
            HypervisorName::parse(name)
                .map_err(|source| ProvisionCommandError::BadHypervisorName { source })?,
        ),
        None => None,
    };
    let resolution = Resolution {
        force: args.force,
        destroy_data: args.destroy_data,
    };
    let mut progress = Progress::new(ProgressMode::for_run(global.json));

    // Everything local first: configuration, then placement, then secrets and artifacts of every
    // guest. What can be refused without the store is refused before it is unlocked, so a refused
    // first run leaves no store and no key behind.
    let paths = global.installation_paths();
    let locks = global.locks("provision");
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    // A dry run changes nothing, ips.db and the secret store included: it shows the address a
    // guest already holds, and a guest without a key as new.
    let (addresses, store_use) = if args.dry_run {
        (AddressPolicy::ReadOnly, StoreUse::ReadOnly)
    } else {
        (AddressPolicy::Record, StoreUse::Write(&locks))
    };
    let configured: Vec<GuestConfigured> = domains
        .iter()
        .map(|domain| load_guest_configured(&paths, domain))
        .collect::<Result<_, _>>()?;

    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(&paths)?,
        configured[0].config.settings.libvirt_uri.as_ref(),
    );
    if let Some(warning) = &fleet.warning {
        progress.say(&format!("warning: {warning}"));
    }
    let observation = observe_for_placement(
        &fleet,
        command_line_hypervisor.as_ref(),
        Arc::new(LibvirtObserver),
        Duration::from_secs(args.timeout),
    );
    let demands: Vec<GuestDemand> = configured
        .iter()
        .map(|guest| GuestDemand {
            domain: guest.config.domain.clone(),
            memory: guest.config.settings.memory,
            vcpus: guest.config.settings.cpus,
            disk: guest.config.settings.size,
            pinned_to: guest.config.settings.hypervisor.clone(),
        })
        .collect();
    let decisions = place_guests(&demands, &observation, command_line_hypervisor.as_ref())
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let guests: Vec<GuestInputs> = configured
        .into_iter()
        .map(|guest| generate_guest_inputs(guest, &mut credentials, store_use, addresses))
        .collect::<Result<_, _>>()?;

    let image_cache = default_cache_dir(
        std::env::var("XDG_CACHE_HOME").ok().as_deref(),
        std::env::var("HOME").ok().as_deref(),
    );
    for (guest, decision) in guests.iter().zip(&decisions) {
        let hypervisor = fleet
            .fleet
            .hypervisors
            .iter()
            .find(|h| h.name == decision.chosen)
            .expect("placement chose a hypervisor of the fleet");
        let opened = open_hypervisor(hypervisor, HypervisorAccess::WithSystem, &mut credentials)?;
        let on_hypervisor = GuestOnHypervisor {
            inputs: guest,
            hypervisor,
            connection: &opened.connection,
            hypervisor_machine: opened.machine.as_ref(),
            locks: &locks,
        };
        check_reachable(&on_hypervisor)?;
        // A dry run changes nothing, so it plans from what is there without waiting for a run
        // that holds the guest; a real run plans and acts under the guest's lock.
        let _guest_lock = if args.dry_run {
            None
        } else {
            Some(take_guest_lock(
                &locks,
                &guest.config.domain,
                &mut |text| progress.say(text),
            )?)
        };
        let mut prepared = prepare(&on_hypervisor, resolution)?;

        let guest_key = if guest.keypair.origin() == KeypairOrigin::Unsaved {
            GuestKey::New
        } else {
            GuestKey::Stored
        };
        if global.json {
            progress.event(&Event::Plan {
                guest: guest.config.domain.as_str(),
                guest_key,
                placement: decision,
                plan: &prepared.plan,
            });
        } else {
            println!("{}", render_decision(decision));
            if guest_key == GuestKey::New {
                println!(
                    "{}: new, no SSH key yet (the first run that builds it makes one)",
                    guest.config.domain
                );
            }
            print!("{}", prepared.plan);
            let _ = std::io::stdout().flush();
        }
        if args.dry_run {
            continue;
        }
        if let Some(data) = &prepared.desired.data_volume {
            if prepared.plan.actions.iter().any(|action| matches!(action, Action::DeleteVolume { volume, .. } if *volume == data.name)) {
                confirm_destroy(&data.name, args.yes)?;
            }
        }
        ready_to_execute(&on_hypervisor, &mut prepared, &image_cache)?;
        let report = execute(&on_hypervisor, &prepared, &mut progress)?;
        if global.json {
            progress.event(&Event::Done { report: &report });
        } else if !report.converged_already {
            println!(
                "{} is on {}{}, provisioned in {:.1}s",
                report.guest,
                report.hypervisor,
                report
                    .address
                    .as_deref()
                    .map(|address| format!(" at {address}"))
                    .unwrap_or_default(),
                report.total_seconds
            );
            for (step, seconds) in &report.steps {
                println!("  {seconds:>7.1}s  {step}");
            }
        }
    }
    Ok(ExitStatus::Success)
}
