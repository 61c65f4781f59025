//! Removing a guest: stop it, undefine it with its firmware and TPM state, delete its root disk
//! and seed, and keep its data volume unless asked to purge. A failed step does not stop the
//! rest; the outcome names everything left behind.

use crate::libvirt::network_filter::remove_unused_filters;
use crate::libvirt::trog_tag::is_trogs;
use crate::model::names::DomainName;
use crate::plan::resource_names;
use std::time::{Duration, Instant};
use virt::connect::Connect;
use virt::error::ErrorNumber;

/// How long a guest being destroyed gets to shut down cleanly, so its data volume is left
/// consistent; then it is forced off.
pub const DESTROY_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

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
    #[error("libvirt on {hypervisor} could not look up {domain}")]
    Lookup {
        domain: String,
        hypervisor: String,
        #[source]
        source: virt::error::Error,
    },
}

impl crate::diagnose::Diagnose for DestroyRefusal {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            DestroyRefusal::Foreign { .. } => crate::exit_status::ExitStatus::Conflict,
            DestroyRefusal::Lookup { .. } => crate::exit_status::ExitStatus::Hypervisor,
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

/// What a destroy leaves of trog's network filters when it cannot remove them.
pub const UNUSED_FILTERS: &str = "trog's unused network filters";

/// Removes trog's network filters that no domain on `connection` uses any more (the destroyed
/// guest's, when it was the last to use them), adding them to `outcome`. The caller holds the
/// filters' lock, so that no guest being defined meanwhile is about to reference one.
pub fn remove_unused_network_filters(
    connection: &Connect,
    hypervisor: &str,
    outcome: &mut DestroyOutcome,
) {
    match remove_unused_filters(connection, hypervisor) {
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

/// Destroys the guest `domain` in pool `pool_name` on `connection`.
pub fn destroy_guest(
    connection: &Connect,
    hypervisor: &str,
    domain: &DomainName,
    pool_name: &str,
    purge: bool,
) -> Result<DestroyOutcome, DestroyRefusal> {
    let mut outcome = DestroyOutcome::default();
    match connection.lookup_domain_by_name(domain.as_str()) {
        Ok(found) => {
            let tagged = is_trogs(&found);
            if !tagged {
                return Err(DestroyRefusal::Foreign {
                    domain: domain.to_string(),
                    hypervisor: hypervisor.to_string(),
                });
            }
            if let Err(why) = stop(&found) {
                outcome
                    .left_behind
                    .push((format!("domain {domain} (running)"), why));
            }
            remove_snapshots(&found, &mut outcome);
            // Snapshot metadata goes with the domain even when deleting a snapshot failed
            // above (that one is named as left behind): a snapshot never blocks a destroy.
            let flags = virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM
                | virt::sys::VIR_DOMAIN_UNDEFINE_TPM
                | virt::sys::VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
                | virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
                | virt::sys::VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA;
            match found.undefine_flags(flags) {
                Ok(()) => outcome.removed.push(format!("domain {domain}")),
                Err(error) => outcome
                    .left_behind
                    .push((format!("domain {domain}"), error.to_string())),
            }
        }
        Err(error) if error.code().is(ErrorNumber::NoDomain) => {}
        Err(source) => {
            return Err(DestroyRefusal::Lookup {
                domain: domain.to_string(),
                hypervisor: hypervisor.to_string(),
                source,
            })
        }
    }

    let pool = match connection.lookup_storage_pool_by_name(pool_name) {
        Ok(pool) => pool,
        Err(error) if error.code().is(ErrorNumber::NoStoragePool) => return Ok(outcome),
        Err(error) => {
            outcome.left_behind.push((
                format!("the volumes in pool {pool_name}"),
                error.to_string(),
            ));
            return Ok(outcome);
        }
    };
    let _ = pool.refresh(0);
    let mut volumes = vec![
        resource_names::root_volume(domain),
        resource_names::seed_volume(domain),
    ];
    let data = resource_names::data_volume(domain);
    if purge {
        volumes.push(data.clone());
    }
    for name in volumes {
        match pool.lookup_storage_vol_by_name(&name) {
            Ok(volume) => match volume.delete(0) {
                Ok(()) => outcome.removed.push(format!("volume {name}")),
                Err(error) => outcome
                    .left_behind
                    .push((format!("volume {name}"), error.to_string())),
            },
            Err(error) if error.code().is(ErrorNumber::NoStorageVolume) => {}
            Err(error) => outcome
                .left_behind
                .push((format!("volume {name}"), error.to_string())),
        }
    }
    if !purge && pool.lookup_storage_vol_by_name(&data).is_ok() {
        outcome
            .kept
            .push(format!("data volume {data} (--purge deletes it)"));
    }
    Ok(outcome)
}

/// Deletes every snapshot of the guest, naming each: their states live inside the guest's disks,
/// and the data volume, which a destroy keeps, would otherwise carry them on.
fn remove_snapshots(domain: &virt::domain::Domain, outcome: &mut DestroyOutcome) {
    let snapshots = match domain.list_all_snapshots(0) {
        Ok(snapshots) => snapshots,
        Err(error) => {
            outcome
                .left_behind
                .push(("the guest's snapshots".into(), error.to_string()));
            return;
        }
    };
    for snapshot in snapshots {
        let name = snapshot.name().unwrap_or_else(|_| "(unnamed)".into());
        match snapshot.delete(0) {
            Ok(()) => outcome.removed.push(format!("snapshot {name}")),
            Err(error) => outcome
                .left_behind
                .push((format!("snapshot {name}"), error.to_string())),
        }
    }
}

fn stop(domain: &virt::domain::Domain) -> Result<(), String> {
    if !domain.is_active().map_err(|error| error.to_string())? {
        return Ok(());
    }
    let _ = domain.shutdown();
    let deadline = Instant::now() + DESTROY_SHUTDOWN_GRACE;
    while Instant::now() < deadline {
        if !domain.is_active().map_err(|error| error.to_string())? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    match domain.destroy() {
        Ok(()) => Ok(()),
        Err(error) if error.code().is(ErrorNumber::OperationInvalid) => Ok(()),
        Err(error) => Err(error.to_string()),
    }
}
