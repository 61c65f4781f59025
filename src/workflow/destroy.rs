//! Destroying a guest wherever it is: locate it, take its lock, take a last backup, then remove
//! it through its hypervisor: stop it, delete its snapshots, undefine it with its firmware and
//! TPM state, delete its root disk and seed, and keep its data volume unless asked to purge;
//! then trog's network filters no guest uses any more, its pinned leases, and with `--purge` its
//! addresses. A failed step does not stop the rest; the outcome names everything left behind.

use crate::addresses::AddressBook;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::hypervisor::{Hypervisor, HypervisorFault, Presence};
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::plan::resource_names;
use crate::workflow::backup::{back_up_located, TakenBackup};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, GuestSession, GuestUse, InstallationFleet};
use std::time::{Duration, Instant};

/// How long a guest being destroyed gets to shut down cleanly, so its data volume is left
/// consistent; then it is forced off.
pub const DESTROY_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How often a guest shutting down is asked whether it has stopped.
const SHUTDOWN_POLL: Duration = Duration::from_millis(500);

/// What a destroy leaves of trog's network filters when it cannot remove them.
pub const UNUSED_FILTERS: &str = "trog's unused network filters";

/// What to destroy and how.
pub struct DestroyRequest<'a> {
    pub domain: &'a DomainName,
    /// `--hypervisor`: act there instead of asking the fleet.
    pub hypervisor: Option<&'a str>,
    /// Delete the data volume too (already confirmed by the caller).
    pub purge: bool,
    pub answer_timeout: Duration,
    /// Now, for the name of the last backup.
    pub now_unix: i64,
}

/// What one destroy did and did not do.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DestroyOutcome {
    pub removed: Vec<String>,
    pub kept: Vec<String>,
    /// What could not be removed, and why.
    pub left_behind: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum DestroyRefusal {
    #[error("domain {domain} on {hypervisor} was not created by trog; destroy leaves it alone")]
    Foreign { domain: String, hypervisor: String },
    #[error("{backend} on {hypervisor} could not look up {domain}")]
    Lookup {
        backend: &'static str,
        domain: String,
        hypervisor: String,
        #[source]
        source: HypervisorFault,
    },
}

impl Diagnose for DestroyRefusal {
    fn exit_status(&self) -> ExitStatus {
        match self {
            DestroyRefusal::Foreign { .. } => ExitStatus::Conflict,
            DestroyRefusal::Lookup { .. } => ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DestroyRefusal::Foreign { .. } => Some(
                "remove it with the tools that made it (virsh undefine), or rename the guest"
                    .into(),
            ),
            DestroyRefusal::Lookup { .. } => None,
        }
    }
}

/// The backup `destroy` takes first, or why it could not (which never stops the destroy).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LastBackup {
    Taken(TakenBackup),
    NotTaken { why: String },
}

/// A finished destroy: where the guest was, and what was removed, kept and left behind.
#[derive(Debug, serde::Serialize)]
pub struct DestroyReport {
    pub guest: String,
    pub hypervisor: String,
    pub last_backup: LastBackup,
    pub outcome: DestroyOutcome,
}

/// Destroys the guest `request` names, wherever in the installation's fleet it is.
pub fn destroy(
    paths: &InstallationPaths,
    request: &DestroyRequest,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    reporter: &dyn Reporter,
) -> Result<DestroyReport, Failure> {
    let fleet = InstallationFleet { paths, locks };
    destroy_in(
        &fleet,
        paths,
        request,
        DESTROY_SHUTDOWN_GRACE,
        credentials,
        reporter,
    )
}

/// Destroys the guest on `fleet`, giving a running guest `grace` to shut down.
pub(crate) fn destroy_in(
    fleet: &dyn Fleet,
    paths: &InstallationPaths,
    request: &DestroyRequest,
    grace: Duration,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<DestroyReport, Failure> {
    let guest = GuestAddress {
        domain: request.domain,
        hypervisor: request.hypervisor,
        answer_timeout: request.answer_timeout,
    };
    let session = GuestSession::open(
        fleet,
        &guest,
        GuestUse::Change,
        HypervisorAccess::LibvirtOnly,
        credentials,
        reporter,
    )?;
    // Before anything of the guest is gone, while it may still answer: what its recipes back up
    // is kept off the hypervisor for `backup_retention_days`, a rebuild restores it.
    let last_backup =
        match back_up_located(paths, &session, request.now_unix, credentials, reporter) {
            Ok(taken) => LastBackup::Taken(taken),
            Err(failure) => LastBackup::NotTaken {
                why: failure.chain().join(": "),
            },
        };
    let hypervisor = session.hypervisor.as_ref();
    // Read before the domain goes: which networks its pinned leases are in, for which MAC.
    let interfaces = hypervisor.network_interfaces(request.domain.as_str());
    let mut outcome = remove_guest(
        hypervisor,
        request.domain,
        &session.config.pool_name,
        request.purge,
        grace,
    )?;
    // The guest's network filter goes when no other domain uses it; under the filters' lock, so
    // that a guest another run is defining meanwhile keeps the filters it is about to use.
    match fleet.lock_network_filters(&session.config, reporter) {
        Ok(_filters_lock) => remove_unused_network_filters(hypervisor, &mut outcome),
        Err(error) => outcome
            .left_behind
            .push((UNUSED_FILTERS.into(), error.to_string())),
    }
    release_pinned_leases(paths, request.domain, hypervisor, &interfaces, &mut outcome);
    if request.purge {
        release_addresses(paths, request.domain, hypervisor, &mut outcome);
    } else if let Ok(Some(book)) = AddressBook::open_existing(&paths.ips_db) {
        for holding in book.held_by(request.domain.as_str()).unwrap_or_default() {
            outcome.kept.push(format!("address {}", holding.address));
        }
    }
    Ok(DestroyReport {
        guest: request.domain.to_string(),
        hypervisor: session.hypervisor_name(),
        last_backup,
        outcome,
    })
}

/// Removes the guest `domain` and its volumes in `pool` from `hypervisor`: a domain without
/// trog's tag is refused, one that is not there is no error (its volumes may still be).
fn remove_guest(
    hypervisor: &dyn Hypervisor,
    domain: &DomainName,
    pool: &str,
    purge: bool,
    grace: Duration,
) -> Result<DestroyOutcome, DestroyRefusal> {
    let mut outcome = DestroyOutcome::default();
    let presence =
        hypervisor
            .presence(domain.as_str())
            .map_err(|source| DestroyRefusal::Lookup {
                backend: hypervisor.backend(),
                domain: domain.to_string(),
                hypervisor: hypervisor.name().to_string(),
                source,
            })?;
    match presence {
        Presence::Foreign => {
            return Err(DestroyRefusal::Foreign {
                domain: domain.to_string(),
                hypervisor: hypervisor.name().to_string(),
            })
        }
        Presence::Absent => {}
        Presence::Trogs => {
            // The grace keeps what a destroy leaves (the data volume, the extra disks)
            // consistent; a purge leaves nothing of the guest, so it is forced off at once.
            let grace = if purge { Duration::ZERO } else { grace };
            if let Err(why) = stop(hypervisor, domain.as_str(), grace) {
                outcome
                    .left_behind
                    .push((format!("domain {domain} (running)"), why));
            }
            remove_snapshots(hypervisor, domain.as_str(), &mut outcome);
            // Snapshot metadata goes with the domain even when deleting a snapshot failed
            // above (that one is named as left behind): a snapshot never blocks a destroy.
            match hypervisor.undefine(domain.as_str()) {
                Ok(()) => outcome.removed.push(format!("domain {domain}")),
                Err(error) => outcome
                    .left_behind
                    .push((format!("domain {domain}"), error.to_string())),
            }
        }
    }
    match hypervisor.refresh_pool(pool) {
        Ok(true) => {}
        Ok(false) => return Ok(outcome),
        Err(error) => {
            outcome
                .left_behind
                .push((format!("the volumes in pool {pool}"), error.to_string()));
            return Ok(outcome);
        }
    }
    let mut volumes = vec![
        resource_names::root_volume(domain),
        resource_names::seed_volume(domain),
    ];
    let data = resource_names::data_volume(domain);
    if purge {
        volumes.push(data.clone());
    }
    for name in volumes {
        match hypervisor.delete_volume(pool, &name) {
            Ok(true) => outcome.removed.push(format!("volume {name}")),
            Ok(false) => {}
            Err(error) => outcome
                .left_behind
                .push((format!("volume {name}"), error.to_string())),
        }
    }
    if !purge && matches!(hypervisor.volume_exists(pool, &data), Ok(true)) {
        outcome
            .kept
            .push(format!("data volume {data} (--purge deletes it)"));
    }
    remove_extra_disks(hypervisor, pool, domain, purge, &mut outcome);
    Ok(outcome)
}

/// The guest's extra disks (those it declares and those it no longer does): deleted with
/// `--purge`, named as kept otherwise. They are found among the pool's volumes by their names.
fn remove_extra_disks(
    hypervisor: &dyn Hypervisor,
    pool: &str,
    domain: &DomainName,
    purge: bool,
    outcome: &mut DestroyOutcome,
) {
    let names = match hypervisor.volume_names(pool) {
        Ok(names) => names,
        Err(error) => {
            if purge {
                outcome
                    .left_behind
                    .push((format!("the extra disks in pool {pool}"), error.to_string()));
            }
            return;
        }
    };
    let mut disks: Vec<String> = names
        .into_iter()
        .filter(|name| resource_names::is_extra_disk_volume(domain, name))
        .collect();
    disks.sort();
    for name in disks {
        if !purge {
            outcome
                .kept
                .push(format!("disk volume {name} (--purge deletes it)"));
            continue;
        }
        match hypervisor.delete_volume(pool, &name) {
            Ok(true) => outcome.removed.push(format!("volume {name}")),
            Ok(false) => {}
            Err(error) => outcome
                .left_behind
                .push((format!("volume {name}"), error.to_string())),
        }
    }
}

/// Deletes every snapshot of the guest, naming each: their states live inside the guest's disks,
/// and the data volume, which a destroy keeps, would otherwise carry them on.
fn remove_snapshots(hypervisor: &dyn Hypervisor, domain: &str, outcome: &mut DestroyOutcome) {
    let names = match hypervisor.snapshot_names(domain) {
        Ok(names) => names,
        Err(error) => {
            outcome
                .left_behind
                .push(("the guest's snapshots".into(), error.backend_text()));
            return;
        }
    };
    for name in names {
        match hypervisor.delete_snapshot(domain, &name) {
            Ok(()) => outcome.removed.push(format!("snapshot {name}")),
            Err(error) => outcome
                .left_behind
                .push((format!("snapshot {name}"), error.backend_text())),
        }
    }
}

/// Asks a running guest to shut down, waits up to `grace` for it, then forces it off; without a
/// grace, forces it off at once.
fn stop(hypervisor: &dyn Hypervisor, domain: &str, grace: Duration) -> Result<(), String> {
    let running = |hypervisor: &dyn Hypervisor| {
        hypervisor
            .is_running(domain)
            .map_err(|error| error.to_string())
    };
    if !running(hypervisor)? {
        return Ok(());
    }
    if !grace.is_zero() {
        // A guest that ignores the request is forced off below, once the grace is over.
        let _ = hypervisor.shut_down(domain);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !running(hypervisor)? {
                return Ok(());
            }
            std::thread::sleep(SHUTDOWN_POLL);
        }
    }
    hypervisor
        .force_off(domain)
        .map_err(|error| error.to_string())
}

/// Removes trog's network filters that no guest on `hypervisor` uses any more (the destroyed
/// guest's, when it was the last to use them), adding them to `outcome`. The caller holds the
/// filters' lock, so that no guest being defined meanwhile is about to reference one.
fn remove_unused_network_filters(hypervisor: &dyn Hypervisor, outcome: &mut DestroyOutcome) {
    match hypervisor.remove_unused_filters() {
        Ok(removed) => outcome.removed.extend(
            removed
                .into_iter()
                .map(|name| format!("network filter {name}")),
        ),
        Err(error) => outcome
            .left_behind
            .push((UNUSED_FILTERS.into(), error.to_string())),
    }
}

/// `--purge`: the guest's addresses go back to their ranges and their DHCP reservations are
/// removed. What fails is named as left behind; the rest goes on.
fn release_addresses(
    paths: &InstallationPaths,
    domain: &DomainName,
    hypervisor: &dyn Hypervisor,
    outcome: &mut DestroyOutcome,
) {
    let released = AddressBook::open_existing(&paths.ips_db).and_then(|book| match book {
        Some(mut book) => book.release(domain.as_str()),
        None => Ok(Vec::new()),
    });
    let released = match released {
        Ok(released) => released,
        Err(error) => {
            outcome.left_behind.push((
                format!("its addresses in {}", paths.ips_db.display()),
                error.to_string(),
            ));
            return;
        }
    };
    for holding in released {
        outcome.removed.push(format!("address {}", holding.address));
        if holding.network.starts_with("bridge:") {
            continue;
        }
        let reservation = format!(
            "DHCP reservation of {} in network {}",
            holding.address, holding.network
        );
        match hypervisor.release_reservation(&holding.network, holding.address) {
            Ok(true) => outcome.removed.push(reservation),
            Ok(false) => {}
            Err(error) => outcome.left_behind.push((reservation, error.to_string())),
        }
    }
}

/// A guest's pinned leases go with it (its static addresses' reservations stay, as the addresses
/// do, until `--purge`). What fails is named as left behind.
fn release_pinned_leases(
    paths: &InstallationPaths,
    domain: &DomainName,
    hypervisor: &dyn Hypervisor,
    interfaces: &[(String, String)],
    outcome: &mut DestroyOutcome,
) {
    let held = AddressBook::open_existing(&paths.ips_db)
        .and_then(|book| book.map(|book| book.held_by(domain.as_str())).transpose());
    let statics: Vec<std::net::Ipv4Addr> = match held {
        Ok(held) => held
            .unwrap_or_default()
            .into_iter()
            .map(|holding| holding.address)
            .collect(),
        Err(error) => {
            outcome
                .left_behind
                .push(("its pinned leases".into(), error.to_string()));
            return;
        }
    };
    for (network, mac) in interfaces {
        match hypervisor.release_pins(network, mac, &statics) {
            Ok(released) => outcome.removed.extend(
                released
                    .into_iter()
                    .map(|address| format!("pinned lease of {address} in network {network}")),
            ),
            Err(error) => outcome.left_behind.push((
                format!("pinned lease of {mac} in network {network}"),
                error.to_string(),
            )),
        }
    }
}

#[cfg(test)]
#[path = "destroy_tests.rs"]
mod tests;
