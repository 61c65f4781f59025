//! Destroying a guest wherever it is: locate it, then remove it through libvirt (a failed step
//! does not stop the rest; what was left behind is named in the outcome).

use crate::addresses::AddressBook;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::libvirt::destroy::{
    destroy_guest, remove_unused_network_filters, DestroyOutcome, UNUSED_FILTERS,
};
use crate::libvirt::lease_pin::{domain_network_interfaces, release_pins};
use crate::libvirt::reservation::release_reservation;
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::workflow::backup::{back_up_located, TakenBackup};
use crate::workflow::lock::{take_guest_lock, take_network_filters_lock};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::{fleet_for_guest, locate_guest, open_hypervisor};
use std::time::Duration;

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
    /// A warning about the fleet to show the user (`warning: …`).
    #[serde(skip)]
    pub fleet_warning: Option<String>,
}

/// `--purge`: the guest's addresses go back to their ranges and their DHCP reservations are
/// removed. What fails is named as left behind; the rest goes on.
fn release_addresses(
    paths: &InstallationPaths,
    domain: &DomainName,
    opened: &crate::workflow::OpenedHypervisor,
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
        match release_reservation(
            &opened.connection,
            &opened.config.libvirt_uri.uri,
            &holding.network,
            holding.address,
        ) {
            Ok(true) => outcome.removed.push(format!(
                "DHCP reservation of {} in network {}",
                holding.address, holding.network
            )),
            Ok(false) => {}
            Err(error) => outcome.left_behind.push((
                format!(
                    "DHCP reservation of {} in network {}",
                    holding.address, holding.network
                ),
                error.to_string(),
            )),
        }
    }
}

/// A guest's pinned leases go with it (its static addresses' reservations stay, as the addresses
/// do, until `--purge`). What fails is named as left behind.
fn release_pinned_leases(
    paths: &InstallationPaths,
    domain: &DomainName,
    opened: &crate::workflow::OpenedHypervisor,
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
        match release_pins(
            &opened.connection,
            &opened.config.libvirt_uri.uri,
            network,
            mac,
            &statics,
        ) {
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

pub fn destroy(
    paths: &InstallationPaths,
    request: &DestroyRequest,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
) -> Result<DestroyReport, Failure> {
    let fleet = fleet_for_guest(paths, request.domain)?;
    let hypervisor = locate_guest(
        &fleet,
        request.domain,
        request.hypervisor,
        request.answer_timeout,
    )?;
    let _guest_lock = take_guest_lock(locks, request.domain, hypervisor, None, &mut |text| {
        eprintln!("{text}")
    })?;
    let opened = open_hypervisor(hypervisor, HypervisorAccess::LibvirtOnly, credentials)?;
    // Before anything of the guest is gone, while it may still answer: what its recipes back up
    // is kept off the hypervisor for `backup_retention_days`, a rebuild restores it.
    let last_backup = match back_up_located(
        paths,
        &opened,
        request.domain,
        request.now_unix,
        credentials,
    ) {
        Ok(taken) => LastBackup::Taken(taken),
        Err(failure) => LastBackup::NotTaken {
            why: failure.chain().join(": "),
        },
    };
    // Read before the domain goes: which networks its pinned leases are in, for which MAC.
    let interfaces = domain_network_interfaces(&opened.connection, request.domain.as_str());
    let mut outcome = destroy_guest(
        &opened.connection,
        opened.config.name.as_str(),
        request.domain,
        &opened.config.pool_name,
        request.purge,
    )?;
    // The guest's network filter goes when no other domain uses it; under the filters' lock, so
    // that a guest another run is defining meanwhile keeps the filters it is about to use.
    match take_network_filters_lock(locks, hypervisor, None, &mut |text| eprintln!("{text}")) {
        Ok(_filters_lock) => remove_unused_network_filters(
            &opened.connection,
            opened.config.name.as_str(),
            &mut outcome,
        ),
        Err(error) => outcome
            .left_behind
            .push((UNUSED_FILTERS.into(), error.to_string())),
    }
    release_pinned_leases(paths, request.domain, &opened, &interfaces, &mut outcome);
    if request.purge {
        release_addresses(paths, request.domain, &opened, &mut outcome);
    } else if let Ok(Some(book)) = AddressBook::open_existing(&paths.ips_db) {
        for holding in book.held_by(request.domain.as_str()).unwrap_or_default() {
            outcome.kept.push(format!("address {}", holding.address));
        }
    }
    Ok(DestroyReport {
        guest: request.domain.to_string(),
        hypervisor: opened.config.name.to_string(),
        last_backup,
        outcome,
        fleet_warning: fleet.warning.clone(),
    })
}
