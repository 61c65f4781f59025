//! `provision --all`: every domain of recipes.d converged in one run. One placement for all of
//! them (`place_guests`, so new guests share out the fleet's room between them), every guest's
//! inputs made in turn (the store and ips.db are written by one guest at a time), then the guests
//! converged up to `--parallel` at once (each through [`ConvergeGuest`]: on its hypervisor, or a
//! fake in the unit tests); a guest that fails is recorded with why and the others go on. The
//! run ends with one outcome per guest, for the command's summary and exit status.
//!
//! What concerns the whole installation still stops the run before any guest: the fleet file,
//! and whether a missing secret store may be made.

use crate::config::guest::list_domains;
use crate::config::hypervisors_conf::BuildFleet;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::config::site_graph::site_graph;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::lock::Locks;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::placement::Decision;
use crate::placement::PlacementError;
use crate::provision::host::converge_on_machine;
use crate::provision::run::place_configured_refs;
use crate::provision::run::{
    converge_one, refused, store_and_addresses, GuestConverged, PlannedGuest, ProvisionOutput,
    ProvisionRequest,
};
use crate::provision::schedule::{Next, Progress as ScheduleProgress, Schedule, Scheduled};
use crate::provision::ConvergeReport;
use crate::workflow::inputs::GuestConfigured;
use crate::workflow::inputs::GuestInputs;
use crate::workflow::inputs::{generate_guest_inputs, load_guest_configured};
use crate::workflow::machine_login::domain_node;
use crate::workflow::machine_login::{find_machine_login, machine_not_reached};
use crate::workflow::progress::Progress;
use crate::workflow::{open_hypervisor, HypervisorAccess};
use std::sync::{Condvar, Mutex};

/// What became of one guest of the site.
#[derive(Debug)]
pub enum SiteOutcome {
    /// Converged by this run (in a dry run: its plan has steps).
    Changed,
    /// Converged already: nothing was (or would be) done.
    Already,
    /// It failed, and why; the other guests went on.
    Failed(Failure),
    /// Not converged: the domain whose machine it runs on failed or was skipped.
    Skipped { because: DomainName },
}

/// What one guest's convergence shares with the other guests of the run.
pub struct SiteRun<'a, 'c> {
    pub fleet: &'a BuildFleet,
    pub locks: &'a Locks,
    /// Shared by the guests converged at once: a sudo password is asked once.
    pub credentials: &'a Mutex<&'c mut CredentialSource>,
    pub request: &'a ProvisionRequest,
}

/// How one guest of the site, its inputs made and its hypervisor chosen, is converged: on that
/// hypervisor ([`OnHypervisor`], the command's), or by a fake in the unit tests, which walk the
/// site's bookkeeping (order, failures, the summary) without a guest to reach.
pub trait ConvergeGuest: Sync {
    /// Converges `guest`; sets `key_kept` once the guest's key stays whatever happens next (its
    /// first step ran, or another run holds the guest).
    fn converge(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        decision: &Decision,
        progress: &mut dyn Progress,
        output: &mut dyn ProvisionOutput,
        key_kept: &mut bool,
    ) -> Result<GuestConverged, Failure>;

    /// Converges `guest`, a domain without a guest of its own, on the machine of `machine`.
    fn converge_on_machine(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        machine: &DomainName,
        progress: &mut dyn Progress,
        output: &mut dyn ProvisionOutput,
    ) -> Result<GuestConverged, Failure>;
}

/// A guest converged on its hypervisor, opened with its own system.
pub struct OnHypervisor;

impl ConvergeGuest for OnHypervisor {
    fn converge(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        decision: &Decision,
        progress: &mut dyn Progress,
        output: &mut dyn ProvisionOutput,
        key_kept: &mut bool,
    ) -> Result<GuestConverged, Failure> {
        let mut open = |hypervisor: &HypervisorConfig| {
            let mut credentials = run.credentials.lock().unwrap_or_else(|e| e.into_inner());
            open_hypervisor(hypervisor, HypervisorAccess::WithSystem, &mut credentials)
        };
        converge_one(
            guest,
            decision,
            run.fleet,
            run.locks,
            &mut open,
            run.request,
            progress,
            output,
            key_kept,
        )
    }

    fn converge_on_machine(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        machine: &DomainName,
        progress: &mut dyn Progress,
        output: &mut dyn ProvisionOutput,
    ) -> Result<GuestConverged, Failure> {
        let login = {
            let mut credentials = run.credentials.lock().unwrap_or_else(|e| e.into_inner());
            find_machine_login(
                &guest.paths,
                run.locks,
                &guest.config.domain,
                machine,
                &mut credentials,
                run.request.answer_timeout,
            )
            .map_err(|failure| machine_not_reached(guest, machine, failure))?
        };
        converge_on_machine(guest, &login, run.locks, run.request, progress, output)
    }
}

/// How the guests of a site are converged: how many at once, and by what.
pub struct SiteConvergence<'a> {
    /// `--parallel`: at most this many guests at once.
    pub parallel: usize,
    pub guest: &'a dyn ConvergeGuest,
}

/// Every domain of recipes.d, placed together, its inputs made one guest after another, then
/// converged up to `how.parallel` at once by `how.guest`; `request.domains` is not read. One
/// guest's failure is its outcome, not the run's.
pub fn provision_site(
    paths: &InstallationPaths,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    how: &SiteConvergence,
    progress: &mut dyn Progress,
    output: &mut (dyn ProvisionOutput + Send),
) -> Result<Vec<(DomainName, SiteOutcome)>, Failure> {
    let domains = list_domains(paths)?;
    let mut outcomes: Vec<(DomainName, Option<SiteOutcome>)> = domains
        .iter()
        .map(|domain| (domain.clone(), None))
        .collect();
    let mut loaded = Vec::new();
    for (domain, outcome) in &mut outcomes {
        match load_guest_configured(paths, domain, &*progress) {
            Ok(guest) => loaded.push(guest),
            Err(failure) => *outcome = Some(SiteOutcome::Failed(failure)),
        }
    }
    // The site's dependencies are followed before anything is asked of any machine: a cycle or
    // a domain depended on that has no file stops the run.
    let graph = site_graph(
        &loaded.iter().map(domain_node).collect::<Vec<_>>(),
        &domains,
    )?;
    let mut configured = Vec::new();
    for domain in &graph.order {
        let index = loaded
            .iter()
            .position(|guest| &guest.config.domain == domain)
            .expect("the graph orders the domains it was given");
        configured.push(loaded.remove(index));
    }
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        None,
    );
    if let Some(warning) = &fleet.warning {
        output.warning(progress, warning);
    }
    // Only the guests trog builds are placed, together.
    let built: Vec<&GuestConfigured> = configured
        .iter()
        .filter(|guest| guest.config.settings.runs_on() == RunsOn::OwnGuest)
        .collect();
    let mut placed = place_configured_refs(&fleet, &built, request).into_iter();
    let decisions: Vec<Option<Result<Decision, PlacementError>>> = configured
        .iter()
        .map(|guest| {
            (guest.config.settings.runs_on() == RunsOn::OwnGuest)
                .then(|| placed.next().expect("one decision per guest built"))
        })
        .collect();
    let (addresses, store_use) = store_and_addresses(paths, &fleet, locks, request)?;
    // Everything local first, one guest after another (the store is written one run at a time):
    // a guest refused here is that guest's outcome.
    let mut ready = Vec::new();
    for (guest, decision) in configured.into_iter().zip(decisions) {
        let domain = guest.config.domain.clone();
        let written_at = guest
            .config
            .origins
            .locate_setting("hypervisor")
            .map(ToString::to_string);
        let decision = match decision {
            None => Ok(None),
            Some(decision) => decision
                .map(Some)
                .map_err(|error| Failure::from(error.pin_written_at(written_at))),
        };
        let prepared = decision.and_then(|decision| {
            generate_guest_inputs(guest, credentials, store_use, addresses, &*progress)
                .map(|inputs| (inputs, decision))
        });
        match prepared {
            Ok(pair) => ready.push(pair),
            Err(failure) => set_outcome(&mut outcomes, &domain, SiteOutcome::Failed(failure)),
        }
    }
    let failed_before: Vec<DomainName> = outcomes
        .iter()
        .filter(|(_, outcome)| outcome.is_some())
        .map(|(domain, _)| domain.clone())
        .collect();
    let schedule = Schedule::new(
        ready
            .iter()
            .map(|(inputs, _)| {
                let domain = &inputs.config.domain;
                Scheduled {
                    domain: domain.clone(),
                    depends_on: graph.depends_on.get(domain).cloned(),
                    machine: graph.machine_of(domain).clone(),
                }
            })
            .collect(),
        failed_before,
    );
    // Then the guests on their machines, up to `parallel` at once, a machine before what runs
    // on it.
    let converged = converge_at_once(
        &ready,
        schedule,
        &fleet,
        locks,
        credentials,
        request,
        how,
        &*progress,
        output,
    );
    for ((inputs, _), result) in ready.iter().zip(converged) {
        let outcome = match result {
            Converged::Skipped { because } => SiteOutcome::Skipped { because },
            Converged::Ran(Ok(GuestConverged::Changed), _) => SiteOutcome::Changed,
            Converged::Ran(Ok(GuestConverged::Already), _) => SiteOutcome::Already,
            Converged::Ran(Err(failure), true) => SiteOutcome::Failed(failure),
            // A guest refused before its first step gives back the key this run made for it;
            // the store itself stays, the other guests' keys are in it.
            Converged::Ran(Err(failure), false) => SiteOutcome::Failed(refused(
                failure,
                paths,
                locks,
                credentials,
                std::slice::from_ref(inputs),
                false,
                output,
                progress,
            )),
        };
        set_outcome(&mut outcomes, &inputs.config.domain, outcome);
    }
    Ok(outcomes
        .into_iter()
        .map(|(domain, outcome)| (domain, outcome.expect("every guest has an outcome")))
        .collect())
}

fn set_outcome(
    outcomes: &mut [(DomainName, Option<SiteOutcome>)],
    domain: &DomainName,
    outcome: SiteOutcome,
) {
    if let Some((_, slot)) = outcomes.iter_mut().find(|(name, _)| name == domain) {
        *slot = Some(outcome);
    }
}

/// One guest's result, and whether its key stays whatever happens next.
type RanResult = (Result<GuestConverged, Failure>, bool);

/// What became of one guest of `ready`.
enum Converged {
    /// Its result, and whether its key stays whatever happens next.
    Ran(Result<GuestConverged, Failure>, bool),
    /// Not converged: the domain whose machine it runs on did not converge.
    Skipped { because: DomainName },
}

/// Converges each guest of `ready` on its machine, up to `parallel` at once as `schedule`
/// allows, each in a thread of its own with its own progress; the credentials (a sudo password
/// asked once) and what is shown and asked (plans, a data loss to confirm) are shared, one
/// guest at a time. The results come back in `ready`'s order.
#[allow(clippy::too_many_arguments)]
fn converge_at_once(
    ready: &[(GuestInputs, Option<Decision>)],
    schedule: Schedule,
    fleet: &BuildFleet,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    how: &SiteConvergence,
    progress: &dyn Progress,
    output: &mut (dyn ProvisionOutput + Send),
) -> Vec<Converged> {
    let parallel = how.parallel;
    // Each guest's own progress, made before the workers start, told as this run's is.
    let progresses: Vec<Mutex<Box<dyn Progress>>> = ready
        .iter()
        .map(|_| Mutex::new(progress.for_another_guest(parallel > 1)))
        .collect();
    let credentials = Mutex::new(credentials);
    let run = SiteRun {
        fleet,
        locks,
        credentials: &credentials,
        request,
    };
    let output = SharedOutput(Mutex::new(output));
    let schedule = Mutex::new(schedule);
    let turn = Condvar::new();
    let results: Mutex<Vec<Option<RanResult>>> =
        Mutex::new((0..ready.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, ready.len().max(1)) {
            scope.spawn(|| loop {
                let index = {
                    let mut next = schedule.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        match next.next_to_run() {
                            Next::Run(index) => break Some(index),
                            Next::Finished => break None,
                            Next::Wait => {
                                next = turn.wait(next).unwrap_or_else(|e| e.into_inner());
                            }
                        }
                    }
                };
                let Some(index) = index else {
                    // Another worker may be waiting for what this one saw finished.
                    turn.notify_all();
                    break;
                };
                let (inputs, decision) = &ready[index];
                let mut progress = progresses[index].lock().unwrap_or_else(|e| e.into_inner());
                let progress: &mut dyn Progress = &mut **progress;
                let mut key_kept = false;
                let result = match decision {
                    Some(decision) => how.guest.converge(
                        &run,
                        inputs,
                        decision,
                        progress,
                        &mut &output,
                        &mut key_kept,
                    ),
                    None => {
                        // A domain on a machine that is there keeps its key.
                        key_kept = true;
                        let domain = &inputs.config.domain;
                        let machine = schedule_machine(&schedule, domain);
                        how.guest.converge_on_machine(
                            &run,
                            inputs,
                            &machine,
                            progress,
                            &mut &output,
                        )
                    }
                };
                let converged = result.is_ok();
                results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some((result, key_kept));
                schedule
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .ended(index, converged);
                turn.notify_all();
            });
        }
    });
    let schedule = schedule.into_inner().unwrap_or_else(|e| e.into_inner());
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .enumerate()
        .map(|(index, result)| match (result, schedule.progress(index)) {
            (Some((result, key_kept)), _) => Converged::Ran(result, key_kept),
            (None, ScheduleProgress::Skipped { because }) => Converged::Skipped {
                because: because.clone(),
            },
            (None, other) => unreachable!("a guest neither converged nor skipped: {other:?}"),
        })
        .collect()
}

/// The machine `domain` is converged on, as the schedule knows it.
fn schedule_machine(schedule: &Mutex<Schedule>, domain: &DomainName) -> DomainName {
    schedule
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .machine_of(domain)
}

/// A run's [`ProvisionOutput`] shared by the guests converged at once: one at a time.
struct SharedOutput<'a>(Mutex<&'a mut (dyn ProvisionOutput + Send)>);

impl ProvisionOutput for &SharedOutput<'_> {
    fn warning(&mut self, progress: &mut dyn Progress, text: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .warning(progress, text);
    }

    fn planned(&mut self, planned: &PlannedGuest<'_>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .planned(planned);
    }

    fn confirm_data_loss(&mut self, volume: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .confirm_data_loss(volume)
    }

    fn converged(&mut self, report: &ConvergeReport) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .converged(report);
    }

    fn planned_on_machine(&mut self, planned: &crate::provision::host::PlannedOnMachine<'_>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .planned_on_machine(planned);
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
