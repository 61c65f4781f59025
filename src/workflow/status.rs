//! Where a guest is, and whether it is the realization of its declaration (converged) or what a
//! `provision` would still do. Asks libvirt only; changes nothing.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::libvirt::{find_guest, LibvirtObserver};
use crate::model::names::DomainName;
use crate::plan::Resolution;
use crate::provision::inputs::{generate_guest_inputs, load_guest_configured, StoreUse};
use crate::provision::{prepare, GuestOnHypervisor};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::{fleet_for_guest, open_hypervisor};
use std::sync::Arc;
use std::time::Duration;

/// What `status` found for one guest.
#[derive(Debug, serde::Serialize)]
pub struct GuestStatus {
    pub guest: String,
    pub hypervisor: Option<String>,
    pub converged: bool,
    /// What a `provision` would do, in order.
    pub pending: Vec<String>,
    /// Hypervisors that could not be asked, with why.
    pub unreachable: Vec<String>,
}

/// The status of `domain`, looked for on every hypervisor of the fleet at once or, when `named`
/// (a block of hypervisors.conf), on that one only: the rest of the fleet is not asked.
pub fn guest_status(
    paths: &InstallationPaths,
    domain: &DomainName,
    named: Option<&str>,
    answer_timeout: Duration,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &crate::lock::Locks,
) -> Result<GuestStatus, Failure> {
    // The configuration and the fleet first: what is wrong with them is said before the store is
    // asked for, and a guest on no hypervisor needs no store at all.
    let configured = load_guest_configured(paths, domain)?;
    let fleet = match named {
        Some(name) => {
            let whole = fleet_for_guest(paths, domain)?;
            let hypervisor = whole.hypervisor_named(name)?;
            whole.narrowed_to(hypervisor)
        }
        None => fleet_for_guest(paths, domain)?,
    };
    let found = find_guest(&fleet, domain, Arc::new(LibvirtObserver), answer_timeout);
    let unreachable: Vec<String> = found
        .unreachable
        .iter()
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    let Some(holder) = found.holders.first() else {
        return Ok(GuestStatus {
            guest: domain.to_string(),
            hypervisor: None,
            converged: false,
            pending: vec![match named {
                Some(name) => format!("provision it: it is not on {name}"),
                None => "provision it: it is on no hypervisor".into(),
            }],
            unreachable,
        });
    };
    let hypervisor = fleet
        .fleet
        .hypervisors
        .iter()
        .find(|hypervisor| &hypervisor.name == holder)
        .expect("a holder is in the fleet");
    // A status changes nothing, so it does not create a store: without one, the guest's key pair
    // (and with it the seed the guest was built from) is unknown.
    if !paths.secrets_kdbx.exists() {
        return Ok(GuestStatus {
            guest: domain.to_string(),
            hypervisor: Some(holder.to_string()),
            converged: false,
            pending: vec![format!(
                "provision it: there is no secret store {} holding its key pair",
                paths.secrets_kdbx.display()
            )],
            unreachable,
        });
    }
    let inputs = generate_guest_inputs(
        configured,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
    )?;
    // Only libvirt is asked: a status needs no shell on the hypervisor.
    let opened = open_hypervisor(hypervisor, HypervisorAccess::LibvirtOnly, credentials)?;
    let on_hypervisor = GuestOnHypervisor {
        inputs: &inputs,
        hypervisor,
        connection: &opened.connection,
        hypervisor_machine: None,
        locks,
        adopt_host_key: false,
    };
    let pending: Vec<String> = match prepare(&on_hypervisor, Resolution::default()) {
        Ok(prepared) => prepared
            .plan
            .actions
            .iter()
            .map(ToString::to_string)
            .collect(),
        Err(failure) => vec![format!("resolve first: {}", failure.chain().join(": "))],
    };
    Ok(GuestStatus {
        guest: domain.to_string(),
        hypervisor: Some(holder.to_string()),
        converged: pending.is_empty(),
        pending,
        unreachable,
    })
}
