//! `destroy DOMAIN`: find the guest on whichever hypervisor has it, stop and undefine it (with
//! its firmware and TPM state), delete its root disk and seed, and keep its data volume unless
//! `--purge`. A failed step does not stop the rest; what was left behind is named, and the run
//! exits with its own status.

use crate::cli::GlobalArgs;
use crate::credentials::{confirmed_by_retyping, CredentialSource};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::libvirt::DEFAULT_ANSWER_TIMEOUT;
use crate::model::names::DomainName;
use crate::output::events::{emit, Event};
use crate::provision::inputs::domain_argument;
use crate::workflow::destroy::{destroy, DestroyRequest, LastBackup};
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
    #[error("--purge deletes the data of {domain}, and that was not confirmed")]
    PurgeNotConfirmed { domain: String },
}

impl Diagnose for DestroyCommandError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Conflict
    }

    fn hint(&self) -> Option<String> {
        Some("on a terminal, retype the guest's name when asked; without one, add --yes".into())
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
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let report = destroy(
        &global.installation_paths(),
        &DestroyRequest {
            domain: &domain,
            hypervisor: args.hypervisor.as_deref(),
            purge: args.purge,
            answer_timeout: Duration::from_secs(args.timeout),
            now_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs() as i64),
        },
        &mut credentials,
        &global.locks("destroy"),
    )?;
    if let Some(warning) = &report.fleet_warning {
        crate::errln!("warning: {warning}");
    }
    let outcome = &report.outcome;
    if global.json {
        emit(&Event::Destroyed(&report));
    } else {
        match &report.last_backup {
            LastBackup::Taken(taken) => {
                crate::outln!("backed up {}", taken.archive.display())
            }
            LastBackup::NotTaken { why } => {
                crate::outln!("no last backup: {why}")
            }
        }
        if outcome.removed.is_empty() && outcome.left_behind.is_empty() {
            crate::outln!("{domain}: nothing of it on {}", report.hypervisor);
        }
        for removed in &outcome.removed {
            crate::outln!("removed  {removed}");
        }
        for kept in &outcome.kept {
            crate::outln!("kept     {kept}");
        }
        for (what, why) in &outcome.left_behind {
            crate::outln!("LEFT     {what}: {why}");
        }
    }
    Ok(if outcome.left_behind.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::PartialDestroy
    })
}
