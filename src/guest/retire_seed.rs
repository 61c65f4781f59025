//! Retiring a guest's seed once its first boot is over. The seed ISO holds the guest's host
//! private key and the rest of its first-boot configuration; cloud-init reads it on the first
//! boot of a root disk only. Kept attached, it would hand that key to anyone who reads the
//! guest's disks or the pool for the guest's whole life.
//!
//! Without its seed, cloud-init on a later boot would look for its datasource again: finding
//! none, `ds-identify` turns cloud-init off (so `cloud-init status` no longer says `done`), and a
//! list that lets it search tries other clouds' metadata services first. So before the seed goes,
//! the guest is told to keep what it has: only NoCloud (and None) is looked for, and the instance
//! cloud-init set up from the seed is kept as it is (`manual_cache_clean`: the cached datasource
//! is trusted, so nothing per-instance runs again: no new host keys, no users reset).

use crate::guest::cloud_init::wait_for_cloud_init;
use crate::guest::finish::FinishError;
use crate::hypervisor::{Hypervisor, HypervisorFault};
use crate::machine::{Machine, MachineCommand, MachineError};

/// Where the guest keeps the setting that pins its datasource once the seed is gone.
pub const DATASOURCE_PIN_PATH: &str = "/etc/cloud/cloud.cfg.d/90-trog-seed-retired.cfg";

/// What the setting says (cloud-init reads `/etc/cloud/cloud.cfg.d/*.cfg` on every boot).
pub const DATASOURCE_PIN: &str = "\
# Written by trog once this guest's first boot was over, before its seed was detached:
# cloud-init looks for no other datasource, and keeps the instance it set up from the seed.
datasource_list: [ NoCloud, None ]
manual_cache_clean: true
";

#[derive(Debug, thiserror::Error)]
pub enum RetireSeedError {
    #[error("the first boot of {guest} is not over")]
    FirstBoot {
        guest: String,
        #[source]
        source: Box<FinishError>,
    },
    #[error("cannot write {DATASOURCE_PIN_PATH} on {guest}, which keeps cloud-init to its instance once the seed is gone")]
    PinDatasource {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("cannot detach seed {volume} from {guest} on {hypervisor}")]
    Detach {
        guest: String,
        hypervisor: String,
        volume: String,
        #[source]
        source: HypervisorFault,
    },
    #[error("cannot delete seed {volume} of {guest} from pool {pool} on {hypervisor}")]
    Delete {
        guest: String,
        hypervisor: String,
        pool: String,
        volume: String,
        #[source]
        source: HypervisorFault,
    },
}

impl crate::diagnose::Diagnose for RetireSeedError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            RetireSeedError::FirstBoot { source, .. } => source.exit_status(),
            RetireSeedError::PinDatasource { .. } => crate::exit_status::ExitStatus::Guest,
            RetireSeedError::Detach { .. } | RetireSeedError::Delete { .. } => {
                crate::exit_status::ExitStatus::Hypervisor
            }
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            RetireSeedError::FirstBoot { source, .. } => source.hint(),
            _ => Some(
                "the guest runs, not finished yet; its seed stays until a provision retires it: \
                 run provision again once the cause is fixed (libvirtd's log on that hypervisor \
                 says why libvirt refused)"
                    .into(),
            ),
        }
    }
}

/// The guest and the hypervisor that holds it, and where its seed is.
pub struct SeedOf<'a> {
    pub domain: &'a str,
    pub pool: &'a str,
    pub volume: &'a str,
}

/// Waits for cloud-init to be done with the seed, pins the guest's datasource, then detaches the
/// seed from the domain and deletes its volume. Each part is safe to repeat: a run stopped
/// half-way is finished by the next.
pub fn retire_seed(
    guest: &dyn Machine,
    hypervisor: &dyn Hypervisor,
    seed: &SeedOf,
) -> Result<(), RetireSeedError> {
    let name = guest.describe();
    wait_for_cloud_init(guest).map_err(|source| RetireSeedError::FirstBoot {
        guest: name.clone(),
        source: Box::new(source),
    })?;
    let pin = MachineCommand::shell(&format!(
        "set -e; mkdir -p /etc/cloud/cloud.cfg.d; cat > {DATASOURCE_PIN_PATH}.new; \
         mv {DATASOURCE_PIN_PATH}.new {DATASOURCE_PIN_PATH}"
    ))
    .as_root(true)
    .stdin(DATASOURCE_PIN.as_bytes().to_vec());
    guest
        .run(&pin)
        .and_then(|output| output.success())
        .map_err(|source| RetireSeedError::PinDatasource {
            guest: name.clone(),
            source,
        })?;
    hypervisor
        .detach_seed(seed.domain, seed.volume)
        .map_err(|source| RetireSeedError::Detach {
            guest: seed.domain.to_string(),
            hypervisor: hypervisor.name().to_string(),
            volume: seed.volume.to_string(),
            source,
        })?;
    hypervisor
        .delete_volume(seed.pool, seed.volume)
        .map_err(|source| RetireSeedError::Delete {
            guest: seed.domain.to_string(),
            hypervisor: hypervisor.name().to_string(),
            pool: seed.pool.to_string(),
            volume: seed.volume.to_string(),
            source,
        })?;
    Ok(())
}

#[cfg(test)]
#[path = "retire_seed_tests.rs"]
mod tests;
