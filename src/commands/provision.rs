//! `provision DOMAIN…`: parses the arguments, runs `provision::run` (generate, place, plan and,
//! unless `--dry-run`, boot and finish each guest) and prints what it shows: the placement and
//! the numbered plan, then how the run went. `--all` ends with `provision_all`'s summary.

use crate::cli::target::FleetSearch;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::credentials::{confirmed_by_retyping, CredentialSource};
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::images::default_cache_dir;
use crate::model::names::DomainName;
use crate::output::events::{emit, Event, GuestKey};
use crate::output::progress::{PrintedProgress, ProgressMode};
use crate::placement::render_decision;
use crate::plan::Resolution;
use crate::provision::run::{provision_guests, PlannedGuest, ProvisionOutput, ProvisionRequest};
use crate::provision::site::{provision_site, OnHypervisor, SiteConvergence};
use crate::provision::site_summary::{render as render_summary, summarise};
use crate::provision::ConvergeReport;
use crate::workflow::progress::Progress;

/// `provision --all`'s guests converged at once unless `--parallel` says otherwise: two keep a
/// hypervisor busy while one guest waits on its boot or its packages, without booting so many
/// emulated guests side by side that each one's SSH login takes minutes.
pub const DEFAULT_AT_ONCE: usize = 2;

#[derive(Debug, clap::Args)]
#[command(mut_arg("hypervisor", |arg| arg.help(
    "Build on this hypervisor of hypervisors.conf, skipping the search and the capacity checks"
)))]
pub struct ProvisionArgs {
    /// The guests, fully qualified.
    #[arg(required_unless_present = "all", value_name = "DOMAIN", value_parser = values::domain)]
    pub domains: Vec<DomainName>,
    /// Every guest of recipes.d, placed together; a guest that fails does not stop the others,
    /// and a summary ends the run.
    #[arg(long, conflicts_with = "domains")]
    pub all: bool,
    /// With --all: how many guests are converged at once (1: one after another; default 2).
    /// Guests booting side by side share their hypervisor's CPUs and disk.
    #[arg(long, value_name = "N", value_parser = values::parallel_count)]
    pub parallel: Option<usize>,
    /// Print the placement and the numbered plan, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub search: FleetSearch,
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
    /// accept it from then on (trog's own key replaces it with the guest's next root disk). A run
    /// that makes a new root disk adopts nothing: that disk answers with trog's key.
    #[arg(long)]
    pub adopt_host_key: bool,
    /// Apply a new domain definition (machine type, disk bus, memory, …) of a running guest when
    /// it is next started, instead of restarting it now. A new root disk still restarts it.
    #[arg(long)]
    pub restart_later: bool,
    /// Make a new secret store: its file is lost for good, and every guest gets a new key (its
    /// plan then shows a new root disk). Refused when the store is there.
    #[arg(long)]
    pub new_secret_store: bool,
}

pub fn run(global: &GlobalArgs, args: ProvisionArgs) -> Result<ExitStatus, Failure> {
    // clap's `requires` counts a flag that is off as present: checked here.
    if args.parallel.is_some() && !args.all {
        return Err(crate::commands::provision_all::ParallelWithoutAll.into());
    }
    let answer_timeout = args.search.answer_timeout();
    let request = ProvisionRequest {
        domains: args.domains,
        hypervisor: args.search.hypervisor().cloned(),
        resolution: Resolution {
            force: args.force,
            destroy_data: args.destroy_data,
            restart_later: args.restart_later,
        },
        dry_run: args.dry_run,
        answer_timeout,
        image_cache: default_cache_dir(
            std::env::var("XDG_CACHE_HOME").ok().as_deref(),
            std::env::var("HOME").ok().as_deref(),
        ),
        adopt_host_key: args.adopt_host_key,
        new_secret_store: args.new_secret_store,
        package_versions: crate::images::package_versions::PackageVersions::default(),
    };
    let mut progress = PrintedProgress::new(ProgressMode::for_run(global.json));
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    if args.all {
        let outcomes = provision_site(
            &global.installation_paths(),
            &global.locks("provision"),
            &mut credentials,
            &request,
            &SiteConvergence {
                parallel: args.parallel.unwrap_or(DEFAULT_AT_ONCE),
                guest: &OnHypervisor,
            },
            &mut progress,
            &mut Printed {
                json: global.json,
                yes: args.yes,
            },
        )?;
        let (summary, status) = summarise(&outcomes, args.dry_run);
        if global.json {
            emit(&Event::SiteProvisioned(&summary));
        } else {
            crate::out!("{}", render_summary(&summary));
        }
        return Ok(status);
    }
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
    fn warning(&mut self, progress: &mut dyn Progress, text: &str) {
        progress.say(&format!("warning: {text}"));
    }

    fn planned(&mut self, planned: &PlannedGuest<'_>) {
        if self.json {
            emit(&Event::Plan {
                guest: planned.guest.as_str(),
                guest_key: planned.guest_key,
                placement: planned.decision,
                plan: planned.plan,
                base_image: planned.base_image,
            });
            return;
        }
        crate::outln!("{}", render_decision(planned.decision));
        if let Some(base_image) = planned.base_image {
            crate::outln!("{}: base image: {base_image}", planned.guest);
        }
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

    fn planned_on_machine(&mut self, planned: &crate::provision::host::PlannedOnMachine<'_>) {
        if self.json {
            emit(&Event::PlanOnMachine {
                guest: planned.guest.as_str(),
                machine: planned.machine.as_str(),
                state_dir: planned.state_dir,
                steps: planned.steps,
            });
            return;
        }
        if planned.steps.is_empty() {
            crate::outln!(
                "{} on {}'s machine ({}): converged, nothing to do",
                planned.guest,
                planned.machine,
                planned.state_dir
            );
            return;
        }
        crate::outln!(
            "{} on {}'s machine ({}):",
            planned.guest,
            planned.machine,
            planned.state_dir
        );
        for (number, step) in planned.steps.iter().enumerate() {
            crate::outln!("  {}. {step}", number + 1);
        }
    }

    fn converged(&mut self, report: &ConvergeReport) {
        if self.json {
            emit(&Event::Done { report });
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
