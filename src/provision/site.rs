//! `provision --all`: every domain of recipes.d converged in one run. One placement for all of
//! them (`place_guests`, so new guests share out the fleet's room between them), then each guest
//! in turn; a guest that fails is recorded with why and the others go on. The run ends with one
//! outcome per guest, for the command's summary and exit status.
//!
//! What concerns the whole installation still stops the run before any guest: the fleet file,
//! and whether a missing secret store may be made.

use crate::addresses::settle::AddressPolicy;
use crate::config::guest::list_domains;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::paths::InstallationPaths;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::libvirt::{observe_for_placement, LibvirtObserver};
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::output::progress::Progress;
use crate::placement::{place_guests, GuestDemand};
use crate::provision::inputs::{generate_guest_inputs, load_guest_configured, StoreUse};
use crate::provision::run::{
    converge_one, refused, GuestConverged, ProvisionOutput, ProvisionRequest,
};
use crate::provision::store_guard::{check_store, StoreCheck, StoreGuardError};
use std::sync::Arc;

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

/// Every domain of recipes.d, placed together and converged one after another; `request.domains`
/// is not read. One guest's failure is its outcome, not the run's.
pub fn provision_site(
    paths: &InstallationPaths,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    progress: &mut Progress,
    output: &mut dyn ProvisionOutput,
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
    let observation = observe_for_placement(
        &fleet,
        request.hypervisor.as_ref(),
        Arc::new(LibvirtObserver),
        request.answer_timeout,
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
    let decisions = place_guests(&demands, &observation, request.hypervisor.as_ref());
    let store_check = match check_store(
        paths,
        &fleet,
        request.new_secret_store,
        request.answer_timeout,
    ) {
        Ok(check) => Some(check),
        Err(StoreGuardError::FleetNotAsked { .. }) if request.dry_run => None,
        Err(error) => return Err(error.into()),
    };
    let (addresses, store_use) = match (request.dry_run, store_check) {
        (true, _) | (false, None) => (AddressPolicy::ReadOnly, StoreUse::ReadOnly),
        (false, Some(StoreCheck::Present)) => (AddressPolicy::Record, StoreUse::Write(locks)),
        (false, Some(StoreCheck::MayCreate(permit))) => (
            AddressPolicy::Record,
            StoreUse::WriteOrCreate(locks, permit),
        ),
    };
    for (guest, decision) in configured.into_iter().zip(decisions) {
        let domain = guest.config.domain.clone();
        let outcome = match decision {
            Err(error) => SiteOutcome::Failed(
                error
                    .pin_written_at(
                        guest
                            .config
                            .origins
                            .locate_setting("hypervisor")
                            .map(ToString::to_string),
                    )
                    .into(),
            ),
            Ok(decision) => match generate_guest_inputs(guest, credentials, store_use, addresses) {
                Err(failure) => SiteOutcome::Failed(failure),
                Ok(inputs) => {
                    let mut key_kept = false;
                    match converge_one(
                        &inputs,
                        &decision,
                        &fleet,
                        locks,
                        credentials,
                        request,
                        progress,
                        output,
                        &mut key_kept,
                    ) {
                        Ok(GuestConverged::Changed) => SiteOutcome::Changed,
                        Ok(GuestConverged::Already) => SiteOutcome::Already,
                        // A guest refused before its first step gives back the key this run
                        // made for it; the store itself stays, the other guests' keys are in it.
                        Err(failure) if key_kept => SiteOutcome::Failed(failure),
                        Err(failure) => SiteOutcome::Failed(refused(
                            failure,
                            paths,
                            locks,
                            credentials,
                            std::slice::from_ref(&inputs),
                            false,
                            output,
                            progress,
                        )),
                    }
                }
            },
        };
        if let Some((_, slot)) = outcomes.iter_mut().find(|(name, _)| *name == domain) {
            *slot = Some(outcome);
        }
    }
    Ok(outcomes
        .into_iter()
        .map(|(domain, outcome)| (domain, outcome.expect("every guest has an outcome")))
        .collect())
}
