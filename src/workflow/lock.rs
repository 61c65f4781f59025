//! The guest's lock, taken by every verb that changes a guest after locating it and held until
//! the verb is done: two runs never act on one guest at once (see the module docs of
//! `workflow`). It is two locks: this installation's (between runs of it), then the guest's
//! hypervisor's (between runs from every installation that reaches that hypervisor). The lock
//! of a hypervisor's network filters is taken the same way, by a destroy removing them.

use crate::lock::{HeldLock, HeldLocks, LockError, LockingHypervisor, Locks, Subject};
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::workflow::hypervisor_machine::lock_machine_for;

/// A lock held here and on a hypervisor (a guest's, or its network filters'), until dropped.
pub struct HypervisorWideLock {
    // Let go before the machine they were taken over is closed.
    _held: HeldLocks,
    /// The hypervisor's system opened for the lock alone, when the verb had none open.
    _machine: Option<HypervisorMachine>,
}

/// A guest's locks, held until dropped.
pub type GuestLock = HypervisorWideLock;

/// Takes `domain`'s lock here and on `hypervisor`, where the guest is, waiting up to the run's
/// `--wait` in all for another run holding either; `on_wait` is told what is waited for, once,
/// when a wait begins. `system` is the hypervisor's system when the verb opened it already (it
/// must outlive the lock); otherwise it is opened for the lock, as the login alone (the lock
/// needs no sudo). libvirt's test driver has no system, and only the local lock.
pub fn take_guest_lock(
    locks: &Locks,
    domain: &DomainName,
    hypervisor: &HypervisorConfig,
    system: Option<&HypervisorMachine>,
    on_wait: &mut dyn FnMut(&str),
) -> Result<GuestLock, LockError> {
    take_hypervisor_wide_lock(
        locks,
        &Subject::Guest(domain.to_string()),
        hypervisor,
        system,
        on_wait,
    )
}

/// Takes the lock of `hypervisor`'s network filters here and there, as [`take_guest_lock`]
/// takes a guest's.
pub fn take_network_filters_lock(
    locks: &Locks,
    hypervisor: &HypervisorConfig,
    system: Option<&HypervisorMachine>,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorWideLock, LockError> {
    take_hypervisor_wide_lock(
        locks,
        &Subject::NetworkFilters {
            hypervisor: hypervisor.name.to_string(),
        },
        hypervisor,
        system,
        on_wait,
    )
}

/// Takes the lock of the upload of base image `volume` into `hypervisor`'s `pool` here and there:
/// the one a provision uploading it holds (`provision::execute`), which `image prune` holds while
/// it looks at a copy and removes it, so that no copy is written meanwhile.
pub fn take_base_image_upload_lock(
    locks: &Locks,
    hypervisor: &HypervisorConfig,
    pool: &str,
    volume: &str,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorWideLock, LockError> {
    take_hypervisor_wide_lock(
        locks,
        &Subject::BaseImageUpload {
            hypervisor: hypervisor.name.to_string(),
            pool: pool.to_string(),
            volume: volume.to_string(),
        },
        hypervisor,
        None,
        on_wait,
    )
}

fn take_hypervisor_wide_lock(
    locks: &Locks,
    subject: &Subject,
    hypervisor: &HypervisorConfig,
    system: Option<&HypervisorMachine>,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorWideLock, LockError> {
    let opened = match system {
        Some(_) => None,
        None => {
            lock_machine_for(&hypervisor.libvirt_uri).map_err(|source| LockError::OnHypervisor {
                subject: subject.to_string(),
                hypervisor: hypervisor.name.to_string(),
                source: Box::new(source),
            })?
        }
    };
    let name = hypervisor.name.to_string();
    let locking = system.or(opened.as_ref()).map(|machine| LockingHypervisor {
        machine,
        name: &name,
    });
    let held = locks.acquire_with_hypervisor(subject, locking, on_wait)?;
    Ok(HypervisorWideLock {
        _held: held,
        _machine: opened,
    })
}

/// Takes `domain`'s lock of this installation only: for what changes only this installation's
/// records of the guest (its addresses in `ips.db`), never the hypervisor.
pub fn take_local_guest_lock(
    locks: &Locks,
    domain: &DomainName,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HeldLock, LockError> {
    locks.acquire(&Subject::Guest(domain.to_string()), on_wait)
}
