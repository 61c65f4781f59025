//! `destroy DOMAIN`: find the guest on whichever hypervisor has it, stop and undefine it (with
//! its firmware and TPM state), delete its root disk and seed, and keep its data volume unless
//! `--purge`. A running guest is given 30 s to shut down cleanly, for the volumes that stay;
//! with `--purge` none stays, and it is forced off at once. A failed step does not stop the rest; what was left behind is named, and the run
//! exits with its own status.

use crate::cli::target::GuestTarget;
use crate::cli::GlobalArgs;
use crate::credentials::{confirmed_by_retyping, CredentialSource};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::model::names::DomainName;
use crate::output::events::{emit, Event};
use crate::workflow::destroy::{destroy, DestroyRequest, LastBackup};

#[derive(Debug, clap::Args)]
pub struct DestroyArgs {
    #[command(flatten)]
    pub target: GuestTarget,
    /// Delete the guest's data volume and extra disks too (their contents are lost); a running
    /// guest is forced off at once instead of being given time to shut down.
    #[arg(long)]
    pub purge: bool,
    /// Without a terminal, confirms --purge (on a terminal the guest's name is retyped).
    #[arg(long)]
    pub yes: bool,
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
    let domain = &args.target.guest.domain;
    if args.purge {
        confirm_purge(domain, args.yes)?;
    }
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let paths = global.installation_paths();
    // A domain without a guest of its own is destroyed on its machine (a dependent) or not at
    // all (an existing host). One whose configuration cannot be read is looked for on the
    // hypervisors, as an orphan would be.
    let without_guest = crate::workflow::inputs::load_guest_configured(
        &paths,
        domain,
        &crate::commands::StderrReporter,
    )
    .ok()
    .filter(|configured| {
        configured.config.settings.runs_on() != crate::config::settings::RunsOn::OwnGuest
    });
    let report = match without_guest {
        Some(configured) => crate::workflow::host::destroy_host(
            &paths,
            &global.locks("destroy"),
            &configured,
            &mut credentials,
            args.target.search.answer_timeout(),
            &crate::commands::StderrReporter,
        )?,
        None => destroy(
            &global.installation_paths(),
            &DestroyRequest {
                domain,
                hypervisor: args.target.search.hypervisor_name(),
                purge: args.purge,
                answer_timeout: args.target.search.answer_timeout(),
                now_unix: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |elapsed| elapsed.as_secs() as i64),
            },
            &mut credentials,
            &global.locks("destroy"),
            &crate::commands::StderrReporter,
        )?,
    };
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
