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
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::lock::Locks;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::output::progress::Progress;
use crate::output::progress::ProgressMode;
use crate::placement::Decision;
use crate::provision::inputs::GuestInputs;
use crate::provision::inputs::{generate_guest_inputs, load_guest_configured};
use crate::provision::run::{
    converge_one, place_configured, refused, store_and_addresses, GuestConverged, PlannedGuest,
    ProvisionOutput, ProvisionRequest,
};
use crate::provision::ConvergeReport;
use crate::workflow::{open_hypervisor, HypervisorAccess};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What became of one guest of the site.
#[derive(Debug)]
pub enum SiteOutcome {
    /// Converged by this run (in a dry run: its plan has steps).
    Changed,
    /// Converged already: nothing was (or would be) done.
    Already,
    /// It failed, and why; the other guests went on.
    Failed(Failure),
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
        progress: &mut Progress,
        output: &mut dyn ProvisionOutput,
        key_kept: &mut bool,
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
        progress: &mut Progress,
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
    progress: &mut Progress,
    output: &mut (dyn ProvisionOutput + Send),
) -> Result<Vec<(DomainName, SiteOutcome)>, Failure> {
    let domains = list_domains(paths)?;
    let mut outcomes: Vec<(DomainName, Option<SiteOutcome>)> = domains
        .iter()
        .map(|domain| (domain.clone(), None))
        .collect();
    let mut configured = Vec::new();
    for (domain, outcome) in &mut outcomes {
        match load_guest_configured(paths, domain) {
            Ok(guest) => configured.push(guest),
            Err(failure) => *outcome = Some(SiteOutcome::Failed(failure)),
        }
    }
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        None,
    );
    if let Some(warning) = &fleet.warning {
        output.warning(progress, warning);
    }
    let decisions = place_configured(&fleet, &configured, request);
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
        let prepared = decision
            .map_err(|error| Failure::from(error.pin_written_at(written_at)))
            .and_then(|decision| {
                generate_guest_inputs(guest, credentials, store_use, addresses)
                    .map(|inputs| (inputs, decision))
            });
        match prepared {
            Ok(pair) => ready.push(pair),
            Err(failure) => set_outcome(&mut outcomes, &domain, SiteOutcome::Failed(failure)),
        }
    }
    // Then the guests on their hypervisors, up to `parallel` at once.
    let converged = converge_at_once(
        &ready,
        &fleet,
        locks,
        credentials,
        request,
        how,
        progress.mode(),
        output,
    );
    for ((inputs, _), (result, key_kept)) in ready.iter().zip(converged) {
        let outcome = match result {
            Ok(GuestConverged::Changed) => SiteOutcome::Changed,
            Ok(GuestConverged::Already) => SiteOutcome::Already,
            Err(failure) if key_kept => SiteOutcome::Failed(failure),
            // A guest refused before its first step gives back the key this run made for it;
            // the store itself stays, the other guests' keys are in it.
            Err(failure) => SiteOutcome::Failed(refused(
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
type Converged = (Result<GuestConverged, Failure>, bool);

/// Converges each guest of `ready` on its hypervisor, up to `parallel` at once, each in a thread
/// of its own with its own progress; the credentials (a sudo password asked once) and what is
/// shown and asked (plans, a data loss to confirm) are shared, one guest at a time. The results
/// come back in `ready`'s order.
#[allow(clippy::too_many_arguments)]
fn converge_at_once(
    ready: &[(GuestInputs, Decision)],
    fleet: &BuildFleet,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    how: &SiteConvergence,
    mode: ProgressMode,
    output: &mut (dyn ProvisionOutput + Send),
) -> Vec<Converged> {
    let parallel = how.parallel;
    // Spinners of several guests would overwrite each other's line: side by side, each step is a
    // plain line.
    let mode = match mode {
        ProgressMode::Terminal if parallel > 1 => ProgressMode::Plain,
        other => other,
    };
    let credentials = Mutex::new(credentials);
    let run = SiteRun {
        fleet,
        locks,
        credentials: &credentials,
        request,
    };
    let output = SharedOutput(Mutex::new(output));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Converged>>> =
        Mutex::new((0..ready.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, ready.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some((inputs, decision)) = ready.get(index) else {
                    break;
                };
                let mut progress = Progress::new(mode);
                let mut key_kept = false;
                let result = how.guest.converge(
                    &run,
                    inputs,
                    decision,
                    &mut progress,
                    &mut &output,
                    &mut key_kept,
                );
                results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some((result, key_kept));
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|result| result.expect("every guest was taken by a worker"))
        .collect()
}

/// A run's [`ProvisionOutput`] shared by the guests converged at once: one at a time.
struct SharedOutput<'a>(Mutex<&'a mut (dyn ProvisionOutput + Send)>);

impl ProvisionOutput for &SharedOutput<'_> {
    fn warning(&mut self, progress: &mut Progress, text: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .warning(progress, text);
    }

    fn planned(&mut self, progress: &mut Progress, planned: &PlannedGuest<'_>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .planned(progress, planned);
    }

    fn confirm_data_loss(&mut self, volume: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .confirm_data_loss(volume)
    }

    fn converged(&mut self, progress: &mut Progress, report: &ConvergeReport) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .converged(progress, report);
    }

    fn planned_on_machine(
        &mut self,
        progress: &mut Progress,
        planned: &crate::provision::host::PlannedOnMachine<'_>,
    ) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .planned_on_machine(progress, planned);
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
