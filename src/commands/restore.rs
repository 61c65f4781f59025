//! `restore DOMAIN --latest | --oldest | --name NAME`: returns the guest to a snapshot, waits for
//! SSH when the snapshot was of a running guest, and ends with what `status` says.

use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::libvirt::DEFAULT_ANSWER_TIMEOUT;
use crate::output::events::{emit, Event};
use crate::output::progress::{Progress, ProgressMode};
use crate::provision::inputs::domain_argument;
use crate::snapshot::Which;
use crate::workflow::restore::restore;
use crate::workflow::snapshot::GuestAddress;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["latest", "oldest", "name"])))]
pub struct RestoreArgs {
    /// The guest, fully qualified.
    pub domain: String,
    /// Restore the newest snapshot.
    #[arg(long)]
    pub latest: bool,
    /// Restore the oldest snapshot.
    #[arg(long)]
    pub oldest: bool,
    /// Restore the snapshot NAME (`trog snapshot --list DOMAIN` shows them).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Act on this hypervisor of hypervisors.conf instead of searching the fleet.
    #[arg(long, value_name = "NAME")]
    pub hypervisor: Option<String>,
    /// Seconds each hypervisor has to answer when the guest is looked for.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub timeout: u64,
}

pub fn run(global: &GlobalArgs, args: RestoreArgs) -> Result<ExitStatus, Failure> {
    let domain = domain_argument(&args.domain)?;
    let which = match (&args.name, args.oldest) {
        (Some(name), _) => Which::Named(name.clone()),
        (None, true) => Which::Oldest,
        (None, false) => Which::Latest,
    };
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let progress = Progress::new(ProgressMode::for_run(global.json));
    let report = restore(
        &global.installation_paths(),
        &GuestAddress {
            domain: &domain,
            hypervisor: args.hypervisor.as_deref(),
            answer_timeout: Duration::from_secs(args.timeout),
        },
        &which,
        &progress,
        &mut credentials,
        &global.locks("restore"),
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
