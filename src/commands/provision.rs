//! `provision DOMAIN…`: parses the arguments, runs `provision::run` (generate, place, plan and,
//! unless `--dry-run`, boot and finish each guest) and prints what it shows: the placement and
//! the numbered plan, then how the run went.

use crate::cli::GlobalArgs;
use crate::credentials::{confirmed_by_retyping, CredentialSource};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::images::default_cache_dir;
use crate::libvirt::DEFAULT_ANSWER_TIMEOUT;
use crate::model::names::HypervisorName;
use crate::output::events::{Event, GuestKey};
use crate::output::progress::{Progress, ProgressMode};
use crate::placement::render_decision;
use crate::plan::Resolution;
use crate::provision::inputs::domain_argument;
use crate::provision::run::{provision_guests, PlannedGuest, ProvisionOutput, ProvisionRequest};
use crate::provision::ConvergeReport;
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
    /// Take the SSH host key a guest built before trog made host keys answers with, once, and
    /// accept it from then on (trog's own key replaces it with the guest's next root disk).
    #[arg(long)]
    pub adopt_host_key: bool,
    /// Make a new secret store: its file is lost for good, and every guest gets a new key (its
    /// plan then shows a new root disk). Refused when the store is there.
    #[arg(long)]
    pub new_secret_store: bool,
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
}

impl Diagnose for ProvisionCommandError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ProvisionCommandError::BadHypervisorName { .. } => ExitStatus::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ProvisionCommandError::BadHypervisorName { .. } => {
                Some("name a [block] of hypervisors.conf".into())
            }
        }
    }
}

pub fn run(global: &GlobalArgs, args: ProvisionArgs) -> Result<ExitStatus, Failure> {
    let domains = args
        .domains
        .iter()
        .map(|text| domain_argument(text))
        .collect::<Result<Vec<_>, _>>()?;
    let hypervisor = match &args.hypervisor {
        Some(name) => Some(
            HypervisorName::parse(name)
                .map_err(|source| ProvisionCommandError::BadHypervisorName { source })?,
        ),
        None => None,
    };
    let request = ProvisionRequest {
        domains,
        hypervisor,
        resolution: Resolution {
            force: args.force,
            destroy_data: args.destroy_data,
        },
        dry_run: args.dry_run,
        answer_timeout: Duration::from_secs(args.timeout),
        image_cache: default_cache_dir(
            std::env::var("XDG_CACHE_HOME").ok().as_deref(),
            std::env::var("HOME").ok().as_deref(),
        ),
        adopt_host_key: args.adopt_host_key,
        new_secret_store: args.new_secret_store,
    };
    let mut progress = Progress::new(ProgressMode::for_run(global.json));
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    provision_guests(
        &global.installation_paths(),
        &global.locks("provision"),
        &mut credentials,
        &request,
        &mut progress,
        &mut Printed {
            json: global.json,
            yes: args.yes,
        },
    )?;
    Ok(ExitStatus::Success)
}

/// How a run is shown: text on stdout (steps on stderr), or JSON events.
struct Printed {
    json: bool,
    /// `--yes`: confirms a data loss where there is no terminal to retype the volume's name at.
    yes: bool,
}

impl ProvisionOutput for Printed {
    fn warning(&mut self, progress: &mut Progress, text: &str) {
        progress.say(&format!("warning: {text}"));
    }

    fn planned(&mut self, progress: &mut Progress, planned: &PlannedGuest<'_>) {
        if self.json {
            progress.event(&Event::Plan {
                guest: planned.guest.as_str(),
                guest_key: planned.guest_key,
                placement: planned.decision,
                plan: planned.plan,
            });
            return;
        }
        crate::outln!("{}", render_decision(planned.decision));
        if planned.guest_key == GuestKey::New {
            crate::outln!(
                "{}: new, no SSH key yet (the first run that builds it makes one)",
                planned.guest
            );
        }
        crate::out!("{}", planned.plan);
        crate::output::print::write_stdout_bytes(b"");
    }

    fn confirm_data_loss(&mut self, volume: &str) -> bool {
        confirmed_by_retyping(&format!("This recreates {volume} empty."), volume, self.yes)
    }

    fn converged(&mut self, progress: &mut Progress, report: &ConvergeReport) {
        if self.json {
            progress.event(&Event::Done { report });
        } else if !report.converged_already {
            crate::outln!(
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
                crate::outln!("  {seconds:>7.1}s  {step}");
            }
        }
    }
}
