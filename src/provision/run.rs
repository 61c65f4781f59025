//! The whole of a `provision` run over several guests, in the order the design requires:
//! everything local first (configuration, placement, then secrets and artifacts of every guest),
//! then one guest at a time on its hypervisor — open it with sudo settled, take the guest's lock,
//! observe and plan, show the plan, and (unless it is a dry run) carry it out.
//!
//! What is shown and asked of the user goes through [`ProvisionOutput`], which the command
//! implements: this module prints nothing itself.

use crate::addresses::settle::AddressPolicy;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet, BuildFleet};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::config::site_graph::SiteGraph;
use crate::credentials::CredentialSource;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::hypervisor::fleet::observe_for_placement;
use crate::images::baked::{bake, BakeChoice, BakedRecord, ResolvedBake};
use crate::images::package_versions::PackageVersions;
use crate::lock::Locks;
use crate::machine::local::LocalMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::{DomainName, HypervisorName};
use crate::model::units::Bytes;
use crate::placement::{place_guests, Decision, GuestDemand, PlacementError};
use crate::plan::{Action, Plan, Resolution};
use crate::provision::host::converge_on_machine;
use crate::provision::{
    check_reachable, execute, makes_root_disk, prepare, ready_to_execute, ConvergeReport,
    GuestOnHypervisor,
};
use crate::secrets::KeypairOrigin;
use crate::workflow::baked_images::{bake_choice, unix_now};
use crate::workflow::inputs::{
    generate_guest_inputs, store_key_file, take_back, GuestConfigured, GuestInputs, StoreAdditions,
    StoreUse,
};
use crate::workflow::lock::take_guest_lock;
use crate::workflow::machine_login::{
    find_machine_login, machine_not_reached, with_machines_first,
};
use crate::workflow::open::fleet_observer;
use crate::workflow::progress::Progress;
use crate::workflow::store_guard::{check_store, StoreCheck, StoreGuardError};
use crate::workflow::{open_hypervisor, HypervisorAccess, OpenedHypervisor};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a `provision` run was asked to do.
pub struct ProvisionRequest {
    pub domains: Vec<DomainName>,
    /// Build there, skipping the search and the capacity checks.
    pub hypervisor: Option<HypervisorName>,
    pub resolution: Resolution,
    /// Show the placement and the plan, and change nothing (ips.db and the secret store
    /// included).
    pub dry_run: bool,
    /// How long each hypervisor has to answer when the fleet is observed.
    pub answer_timeout: Duration,
    /// Where verified base images are kept on this machine.
    pub image_cache: PathBuf,
    /// A guest built before trog made host keys is taken with the key it answers with, once.
    pub adopt_host_key: bool,
    /// `--new-secret-store`: make a new secret store, though the installation may have guests
    /// (their keys are then new, and their plans show it). Refused when a store is there.
    pub new_secret_store: bool,
    /// The versions the mirrors offer baked images' packages at, read once in the run.
    pub package_versions: PackageVersions,
}

/// One guest's placement and plan, as shown before anything is done.
pub struct PlannedGuest<'a> {
    pub guest: &'a DomainName,
    pub guest_key: GuestKey,
    pub decision: &'a Decision,
    pub plan: &'a Plan,
    /// `bake_packages`, when the plan makes a root disk: which image it is made over, and why.
    pub base_image: Option<&'a str>,
}

/// Whether the guest's SSH key is in the secret store, or it has none yet (a dry run makes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestKey {
    Stored,
    New,
}

/// What a run shows and asks while it goes: the command decides how (text or JSON events).
pub trait ProvisionOutput {
    /// Something the user should know that does not stop the run.
    fn warning(&mut self, progress: &mut dyn Progress, text: &str);
    /// A guest's placement and plan, before it is carried out (or, in a dry run, instead).
    fn planned(&mut self, planned: &PlannedGuest<'_>);
    /// Whether the user confirms that the plan recreates data volume `volume` empty.
    fn confirm_data_loss(&mut self, volume: &str) -> bool;
    /// A guest converged.
    fn converged(&mut self, report: &ConvergeReport);
    /// A domain without a guest of its own: what is done on the machine it runs on (or, in a
    /// dry run, would be).
    fn planned_on_machine(&mut self, planned: &crate::provision::host::PlannedOnMachine<'_>);
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionRunError {
    #[error("the plan recreates data volume {volume} empty, and that was not confirmed")]
    DataLossNotConfirmed { volume: String },
}

impl Diagnose for ProvisionRunError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ProvisionRunError::DataLossNotConfirmed { .. } => ExitStatus::Conflict,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ProvisionRunError::DataLossNotConfirmed { .. } => Some(
                "on a terminal, retype the volume's name when asked; without one, add --yes".into(),
            ),
        }
    }
}

/// Every guest of `configured` placed together on the fleet (or on `--hypervisor`), in order.
pub(crate) fn place_configured_refs(
    fleet: &BuildFleet,
    configured: &[&GuestConfigured],
    request: &ProvisionRequest,
) -> Vec<Result<Decision, PlacementError>> {
    // Domains that run on a machine that is there are not placed: no hypervisor is asked.
    if configured.is_empty() {
        return Vec::new();
    }
    let observation = observe_for_placement(
        fleet,
        request.hypervisor.as_ref(),
        fleet_observer(),
        request.answer_timeout,
    );
    let demands: Vec<GuestDemand> = configured
        .iter()
        .map(|guest| GuestDemand {
            domain: guest.config.domain.clone(),
            memory: guest.config.settings.memory,
            vcpus: guest.config.settings.cpus,
            // The root disk and the extra disks, each taken from the pool in full.
            disk: Bytes(guest.config.settings.size.0.saturating_add(
                crate::render::extra_disks::declared_capacity(&guest.config.global_as_written).0,
            )),
            pinned_to: guest.config.settings.hypervisor.clone(),
        })
        .collect();
    place_guests(&demands, &observation, request.hypervisor.as_ref())
}

/// Whether the run records addresses and writes the store, and whether it may make the store.
pub(crate) fn store_and_addresses<'l>(
    paths: &InstallationPaths,
    fleet: &BuildFleet,
    locks: &'l Locks,
    request: &ProvisionRequest,
) -> Result<(AddressPolicy, StoreUse<'l>), Failure> {
    // Before anything is written (ips.db, the store, a lock file): a missing store is made only
    // when the installation has no guests, or on --new-secret-store. A dry run asks only what it asks anyway (`--hypervisor` names one): it writes nothing, and
    // one elsewhere that hangs must not delay it. A real run may make the store, a decision for
    // the whole installation, so it asks every hypervisor.
    let asked = match &request.hypervisor {
        Some(name) if request.dry_run => fleet
            .fleet
            .hypervisors
            .iter()
            .find(|hypervisor| &hypervisor.name == name)
            .map(|hypervisor| fleet.narrowed_to(hypervisor)),
        _ => None,
    };
    let store_check = match check_store(
        paths,
        asked.as_ref().unwrap_or(fleet),
        request.new_secret_store,
        request.answer_timeout,
    ) {
        Ok(check) => Some(check),
        // A dry run writes nothing and makes no store, so a hypervisor that cannot be asked does
        // not stop it (the real run refuses); guests found do, as they would make its plan a lie.
        Err(StoreGuardError::FleetNotAsked { .. }) if request.dry_run => None,
        Err(error) => return Err(error.into()),
    };
    Ok(match (request.dry_run, store_check) {
        (true, _) | (false, None) => (AddressPolicy::ReadOnly, StoreUse::ReadOnly),
        (false, Some(StoreCheck::Present)) => (AddressPolicy::Record, StoreUse::Write(locks)),
        (false, Some(StoreCheck::MayCreate(permit))) => (
            AddressPolicy::Record,
            StoreUse::WriteOrCreate(locks, permit),
        ),
    })
}

/// Places, plans and (unless a dry run) converges every guest of `request`, in order; stops at
/// the first guest that fails.
pub fn provision_guests(
    paths: &InstallationPaths,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    progress: &mut dyn Progress,
    output: &mut dyn ProvisionOutput,
) -> Result<(), Failure> {
    // What can be refused without the store is refused before it is unlocked, so a refused
    // first run leaves no store and no key behind. A domain that runs on another's machine
    // brings that machine's domain in first: it is converged before what runs on it.
    let (configured, graph) = with_machines_first(paths, &request.domains, &*progress)?;

    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        configured[0].config.settings.libvirt_uri.as_ref(),
    );
    if let Some(warning) = &fleet.warning {
        output.warning(progress, warning);
    }
    // Only the guests trog builds are placed: the others run on a machine that is there.
    let built: Vec<&GuestConfigured> = configured
        .iter()
        .filter(|guest| guest.config.settings.runs_on() == RunsOn::OwnGuest)
        .collect();
    let mut placed = place_configured_refs(&fleet, &built, request)
        .into_iter()
        .zip(&built)
        .map(|(decision, guest)| {
            decision.map_err(|error| {
                let origins = &guest.config.origins;
                error.pin_written_at(
                    origins
                        .locate_setting("hypervisor")
                        .map(ToString::to_string),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let decisions: Vec<Option<Decision>> = configured
        .iter()
        .map(|guest| {
            (guest.config.settings.runs_on() == RunsOn::OwnGuest)
                .then(|| placed.next().expect("one decision per guest built"))
        })
        .collect();
    let (addresses, store_use) = store_and_addresses(paths, &fleet, locks, request)?;
    let mut guests: Vec<GuestInputs> = Vec::new();
    for guest in configured {
        match generate_guest_inputs(guest, credentials, store_use, addresses, &*progress) {
            Ok(inputs) => guests.push(inputs),
            Err(failure) => {
                return Err(refused(
                    failure,
                    paths,
                    locks,
                    credentials,
                    &guests,
                    true,
                    output,
                    progress,
                ))
            }
        }
    }

    // A run refused before a guest's first step takes back what it added to the secret store for
    // the guests not yet built; a step that ran may have built with the key, which then stays.
    let mut kept = 0;
    let converged = converge_each(
        &guests,
        &decisions,
        &graph,
        &fleet,
        locks,
        credentials,
        request,
        progress,
        output,
        &mut kept,
    );
    converged.map_err(|failure| {
        refused(
            failure,
            paths,
            locks,
            credentials,
            &guests[kept..],
            kept == 0,
            output,
            progress,
        )
    })
}

/// Opens each guest's hypervisor, takes its lock, plans, shows the plan and (unless a dry run)
/// carries it out; `kept` counts the guests whose key stays in the store whatever happens next:
/// their steps began, or another run of the guest holds its lock (and may be building with it).
#[allow(clippy::too_many_arguments)]
fn converge_each(
    guests: &[GuestInputs],
    decisions: &[Option<Decision>],
    graph: &SiteGraph,
    fleet: &crate::config::hypervisors_conf::BuildFleet,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    progress: &mut dyn Progress,
    output: &mut dyn ProvisionOutput,
    kept: &mut usize,
) -> Result<(), Failure> {
    for (guest, decision) in guests.iter().zip(decisions) {
        let Some(decision) = decision else {
            // A domain on a machine that is there keeps its key (an existing host's is the one
            // its admin was asked to authorize); a dependent has none.
            *kept += 1;
            converge_without_guest(guest, graph, locks, credentials, request, progress, output)?;
            continue;
        };
        let mut key_kept = false;
        let result = converge_one(
            guest,
            decision,
            fleet,
            locks,
            &mut |hypervisor| {
                open_hypervisor(hypervisor, HypervisorAccess::WithSystem, credentials)
            },
            request,
            progress,
            output,
            &mut key_kept,
        );
        if key_kept {
            *kept += 1;
        }
        result?;
    }
    Ok(())
}

/// Converges a domain without a guest of its own on the machine it runs on (`graph` says which).
pub(crate) fn converge_without_guest(
    guest: &GuestInputs,
    graph: &SiteGraph,
    locks: &Locks,
    credentials: &mut CredentialSource,
    request: &ProvisionRequest,
    progress: &mut dyn Progress,
    output: &mut dyn ProvisionOutput,
) -> Result<GuestConverged, Failure> {
    let domain = &guest.config.domain;
    let machine = graph.machine_of(domain);
    let login = find_machine_login(
        &guest.paths,
        locks,
        domain,
        machine,
        credentials,
        request.answer_timeout,
    )
    .map_err(|failure| machine_not_reached(guest, machine, failure))?;
    converge_on_machine(guest, &login, locks, request, progress, output)
}

/// What became of one guest that was planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestConverged {
    /// Its plan was carried out (or, in a dry run, shown) and had steps.
    Changed,
    /// Its plan was empty: it was converged already.
    Already,
}

/// Opens a hypervisor with its own system, sudo settled (the credentials it may ask for are the
/// caller's: one run's, or shared between the guests converged at once).
pub(crate) type OpenHypervisor<'a> =
    dyn FnMut(&HypervisorConfig) -> Result<OpenedHypervisor, Failure> + 'a;

/// [`converge_each`] for one guest; `key_kept` says whether its key stays in the store whatever
/// happens next (its steps began, or another run holds its lock).
#[allow(clippy::too_many_arguments)]
pub(crate) fn converge_one(
    guest: &GuestInputs,
    decision: &Decision,
    fleet: &crate::config::hypervisors_conf::BuildFleet,
    locks: &Locks,
    open: &mut OpenHypervisor<'_>,
    request: &ProvisionRequest,
    progress: &mut dyn Progress,
    output: &mut dyn ProvisionOutput,
    key_kept: &mut bool,
) -> Result<GuestConverged, Failure> {
    let hypervisor = fleet
        .fleet
        .hypervisors
        .iter()
        .find(|h| h.name == decision.chosen)
        .expect("placement chose a hypervisor of the fleet");
    check_reachable(guest, hypervisor)?;
    // The order of every verb acting on a guest (`workflow::session`): the guest's place is
    // known, then its lock, then its hypervisor opened with sudo settled, then the work. A dry
    // run changes nothing, so it plans from what is there without waiting for a run that holds
    // the guest; a real run plans and acts under the guest's lock.
    let _guest_lock = if request.dry_run {
        None
    } else {
        let lock = take_guest_lock(locks, &guest.config.domain, hypervisor, None, &mut |text| {
            progress.say(text)
        });
        if lock.is_err() {
            *key_kept = true;
        }
        Some(lock?)
    };
    let opened = open(hypervisor)?;
    let on_hypervisor = GuestOnHypervisor {
        inputs: guest,
        hypervisor,
        backend: opened.hypervisor.as_ref(),
        hypervisor_machine: opened.machine.as_deref(),
        locks,
        adopt_host_key: request.adopt_host_key,
    };
    let mut prepared = prepare(
        &on_hypervisor,
        request.resolution,
        None,
        &request.image_cache,
    )?;
    // Only a new root disk is made over a base image: the mirror is asked which baked image
    // that is only then.
    let mut bake = if makes_root_disk(&prepared.plan) {
        bake_choice(
            guest,
            &request.package_versions,
            &request.image_cache,
            unix_now(),
        )?
    } else {
        None
    };
    if let Some(record) = bake.as_ref().and_then(|(choice, _)| choice.fresh()) {
        prepared = prepare(
            &on_hypervisor,
            request.resolution,
            Some(record),
            &request.image_cache,
        )?;
    }
    let mut built_because = None;
    // A baked image is built before the plan is shown (a dry run never builds one): it is made
    // on this machine and touches no hypervisor, and the plan then names the image it uploads.
    if let Some((choice, Some(resolved))) = bake.as_ref().filter(|(choice, _)| choice.needs_build())
    {
        if !request.dry_run {
            progress.say(&format!(
                "{}: {choice} (a few minutes)…",
                guest.config.domain
            ));
            let why = choice.why_built().unwrap_or_default();
            let record = bake_image(guest, resolved, &request.image_cache)?;
            prepared = prepare(
                &on_hypervisor,
                request.resolution,
                Some(&record),
                &request.image_cache,
            )?;
            built_because = Some(why);
            bake = Some((
                BakeChoice::Fresh {
                    record,
                    age_seconds: 0,
                },
                None,
            ));
        }
    }
    let bake = bake.map(|(choice, _)| choice);
    let base_image_line = bake.as_ref().map(|choice| match &built_because {
        Some(why) => format!("{choice}; built by this run: {why}"),
        None => choice.to_string(),
    });
    output.planned(&PlannedGuest {
        guest: &guest.config.domain,
        guest_key: if guest.keypair.origin() == KeypairOrigin::Unsaved {
            GuestKey::New
        } else {
            GuestKey::Stored
        },
        decision,
        plan: &prepared.plan,
        base_image: base_image_line.as_deref(),
    });
    let changes = if prepared.plan.actions.is_empty() {
        GuestConverged::Already
    } else {
        GuestConverged::Changed
    };
    if request.dry_run {
        // What the run's first step would refuse, the dry run refuses too, after the plan. A
        // network that cannot be read (one the hypervisor does not have, a driver that keeps no
        // leases) is left to that step, which names what it could not do when a run gets there.
        if let Ok(Some(refusal)) = execute::static_address_leased_elsewhere(&on_hypervisor) {
            return Err(refusal.into());
        }
        return Ok(changes);
    }
    // Which image the root disk would be made over is unknown: refused before anything changes.
    if let Some(BakeChoice::Unresolved { error }) = bake {
        return Err(error.into());
    }
    // The data volume and the extra disks hold what the configuration cannot make again: each
    // the plan recreates empty is confirmed by its name.
    let holding_data = prepared
        .desired
        .data_volume
        .iter()
        .map(|data| data.name.as_str())
        .chain(
            prepared
                .desired
                .extra_disks
                .iter()
                .map(|disk| disk.volume.as_str()),
        );
    for name in holding_data {
        let deletes_it =
            prepared.plan.actions.iter().any(
                |action| matches!(action, Action::DeleteVolume { volume, .. } if volume == name),
            );
        if deletes_it && !output.confirm_data_loss(name) {
            return Err(ProvisionRunError::DataLossNotConfirmed {
                volume: name.to_string(),
            }
            .into());
        }
    }
    ready_to_execute(&on_hypervisor, &mut prepared, &request.image_cache)?;
    *key_kept = true;
    let report = execute(&on_hypervisor, &prepared, progress)?;
    output.converged(&report);
    Ok(if report.converged_already {
        GuestConverged::Already
    } else {
        changes
    })
}

/// Builds the guest's baked image on this machine, where base images come from.
fn bake_image(
    guest: &GuestInputs,
    resolved: &ResolvedBake,
    image_cache: &Path,
) -> Result<BakedRecord, Failure> {
    Ok(bake(
        &LocalMachine,
        resolved,
        image_cache,
        unix_now(),
        guest.config.settings.baked_image_max_age_days,
    )?)
}

/// `failure` ends the run: first, what the run added to the secret store for `not_built` (and the
/// store itself, when `store_too` and this run made it) is taken back. The refusal is what is
/// reported; a failure to take back is a warning beside it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn refused(
    failure: Failure,
    paths: &InstallationPaths,
    locks: &Locks,
    credentials: &mut CredentialSource,
    not_built: &[GuestInputs],
    store_too: bool,
    output: &mut dyn ProvisionOutput,
    progress: &mut dyn Progress,
) -> Failure {
    let Some(first) = not_built.first() else {
        return failure;
    };
    let additions: Vec<StoreAdditions> = not_built
        .iter()
        .map(|guest| StoreAdditions {
            made_store: store_too && guest.store_additions.made_store,
            key_of: guest.store_additions.key_of.clone(),
        })
        .collect();
    let key_file = store_key_file(paths, &first.config);
    if let Err(error) = take_back(
        paths,
        key_file.as_deref(),
        locks,
        credentials,
        &additions.iter().collect::<Vec<_>>(),
    ) {
        output.warning(
            progress,
            &format!("what this run added to the secret store stays: {error}"),
        );
    }
    failure
}
