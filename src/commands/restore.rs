//! `restore DOMAIN --latest | --oldest | --name NAME`: returns the guest to a snapshot, waits for
//! SSH when the snapshot was of a running guest, and ends with what `status` says.

use crate::cli::target::GuestTarget;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::output::progress::{PrintedProgress, ProgressMode};
use crate::snapshot::Which;
use crate::workflow::restore::restore;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["latest", "oldest", "name"])))]
pub struct RestoreArgs {
    #[command(flatten)]
    pub target: GuestTarget,
    /// Restore the newest snapshot.
    #[arg(long)]
    pub latest: bool,
    /// Restore the oldest snapshot.
    #[arg(long)]
    pub oldest: bool,
    /// Restore the snapshot NAME (`trog snapshot --list DOMAIN` shows them).
    #[arg(long, value_name = "NAME", value_parser = values::existing_snapshot_name)]
    pub name: Option<String>,
}

pub fn run(global: &GlobalArgs, args: RestoreArgs) -> Result<ExitStatus, Failure> {
    let which = match (&args.name, args.oldest) {
        (Some(name), _) => Which::Named(name.clone()),
        (None, true) => Which::Oldest,
        (None, false) => Which::Latest,
    };
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let progress = PrintedProgress::new(ProgressMode::for_run(global.json));
    let report = restore(
        &global.installation_paths(),
        &args.target.address(),
        &which,
        &progress,
        &mut credentials,
        &global.locks("restore"),
        &crate::commands::StderrReporter,
    )?;
    if global.json {
        emit(&Event::Restored(&report));
        return Ok(ExitStatus::Success);
    }
    crate::outln!(
        "{}: restored snapshot {} on {} ({})",
        report.guest,
        report.snapshot,
        report.hypervisor,
        report.capture
    );
    match &report.address {
        Some(address) => crate::outln!("{}: running, SSH answers at {address}", report.guest),
        None => crate::outln!("{}: shut off, as it was in the snapshot", report.guest),
    }
    let status = &report.status;
    if status.converged {
        crate::outln!("{}: converged with today's declaration", status.guest);
    } else {
        crate::outln!("{}: not converged; provision would:", status.guest);
        for (index, step) in status.pending.iter().enumerate() {
            crate::outln!("  {:>2}. {step}", index + 1);
        }
    }
    Ok(ExitStatus::Success)
}
