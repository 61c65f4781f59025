//! The fake hypervisor's side of building a guest: a plan's steps change what it keeps (pools,
//! volumes with their sizes and digests, a domain's definition, tag, autostart and state, its
//! network's reservations and pinned leases, trog's filters), and observing the guest reads
//! that back, so that a test plans against what an earlier run left and sees a rerun converge.
//! Each step is an [`Operation`] of its own, to be failed.

use super::{FakeHypervisor, Operation};
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::hypervisor::provisioning::{
    held_by_a_running_domain, AddressLeased, BuiltArtifacts, GuestResourceError, KeptApart,
    PinnedLease, RunningDomain,
};
use crate::hypervisor::HypervisorFault;
use crate::model::units::Bytes;
use crate::plan::{
    Action, DesiredGuest, GuestTag, ObservedDomain, ObservedGuest, ObservedVolume, PoolState,
};
use crate::render::network_filter::{tenant_of_filter, NetworkFilter, TenantDirectory};
use sha2::{Digest, Sha256};
use std::net::Ipv4Addr;

/// The operation a plan's step is, and how the fake records it.
fn step_call(action: &Action) -> (Operation, String) {
    match action {
        Action::DefinePool { name, .. } => (Operation::DefinePool, format!("define_pool {name}")),
        Action::StartPool { name } => (Operation::StartPool, format!("start_pool {name}")),
        Action::RemovePartialBaseImage { volume } | Action::DeleteVolume { volume, .. } => {
            (Operation::DeleteVolume, format!("delete_volume {volume}"))
        }
        Action::UploadBaseImage { volume, .. } => (
            Operation::UploadBaseImage,
            format!("upload_base_image {volume}"),
        ),
        Action::CreateRootVolume { volume, .. }
        | Action::CreateDataVolume { volume, .. }
        | Action::CreateExtraDisk { volume, .. } => {
            (Operation::CreateVolume, format!("create_volume {volume}"))
        }
        Action::UploadSeed { volume, .. } => {
            (Operation::UploadSeed, format!("upload_seed {volume}"))
        }
        Action::DefineDomain { .. } => (Operation::DefineDomain, "define_domain".into()),
        Action::SetAutostart => (Operation::SetAutostart, "set_autostart".into()),
        Action::StartDomain => (Operation::StartDomain, "start_domain".into()),
        Action::StopDomain => (Operation::StopDomain, "stop_domain".into()),
        Action::PowerOffDomain => (Operation::StopDomain, "power_off_domain".into()),
        Action::DeleteSnapshots { names } => (
            Operation::DeleteSnapshot,
            format!("delete_snapshots {}", names.join(" ")),
        ),
        Action::AttachExtraDisk { volume, .. } => {
            (Operation::AttachDisk, format!("attach_disk {volume}"))
        }
        Action::DetachExtraDisk { volume, .. } => {
            (Operation::DetachDisk, format!("detach_disk {volume}"))
        }
        other => unreachable!("{other} is not a hypervisor's step"),
    }
}

impl FakeHypervisor {
    /// Leases of `network` are handed out from `first` to `last` (what a lease is pinned from).
    pub fn with_lease_range(
        self,
        network: &str,
        first: Ipv4Addr,
        last: Ipv4Addr,
    ) -> FakeHypervisor {
        self.state
            .borrow_mut()
            .lease_ranges
            .insert(network.to_string(), (first, last));
        self
    }

    /// Whether `pool` is defined and started.
    pub fn pool_is_active(&self, pool: &str) -> bool {
        let state = self.state.borrow();
        state.pools.contains_key(pool) && !state.inactive_pools.contains(pool)
    }

    fn step_error(&self, operation: &str, fault: HypervisorFault) -> GuestResourceError {
        GuestResourceError {
            backend: "fake",
            hypervisor: self.name.clone(),
            operation: operation.to_string(),
            source: Box::new(fault),
        }
    }

    fn failure(fault: HypervisorFault) -> Failure {
        Failure::new(fault, ExitStatus::Hypervisor, None)
    }

    fn add_volume(&self, pool: &str, volume: &str, observed: ObservedVolume) {
        let mut state = self.state.borrow_mut();
        state
            .pools
            .entry(pool.to_string())
            .or_default()
            .insert(volume.to_string());
        state.volume_details.insert(volume.to_string(), observed);
    }

    fn has_volume(&self, pool: &str, volume: &str) -> bool {
        self.state
            .borrow()
            .pools
            .get(pool)
            .is_some_and(|volumes| volumes.contains(volume))
    }

    pub(super) fn fake_carry_out(
        &self,
        desired: &DesiredGuest,
        action: &Action,
        artifacts: &BuiltArtifacts,
    ) -> Result<(), GuestResourceError> {
        let (operation, call) = step_call(action);
        let doing = action.to_string();
        self.call(operation, call)
            .map_err(|fault| self.step_error(&doing, fault))?;
        let pool = desired.pool_name.as_str();
        let domain = desired.domain.as_str();
        let missing = |what: &str| {
            self.step_error(
                &doing,
                HypervisorFault::new(format!("{what} does not exist")),
            )
        };
        match action {
            Action::DefinePool { name, .. } => {
                let mut state = self.state.borrow_mut();
                if !state.pools.contains_key(name) {
                    state.pools.insert(name.clone(), Default::default());
                    state.inactive_pools.insert(name.clone());
                }
            }
            Action::StartPool { name } => {
                self.state.borrow_mut().inactive_pools.remove(name);
            }
            Action::RemovePartialBaseImage { volume } | Action::DeleteVolume { volume, .. } => {
                if let Some(volumes) = self.state.borrow_mut().pools.get_mut(pool) {
                    volumes.remove(volume);
                }
            }
            Action::UploadBaseImage { volume, .. } => {
                if !self.pool_is_active(pool) {
                    return Err(missing(&format!("storage pool {pool}")));
                }
                let length = std::fs::metadata(artifacts.base_image_file)
                    .map_err(|error| self.step_error(&doing, HypervisorFault::new(error)))?
                    .len();
                self.add_volume(
                    pool,
                    volume,
                    ObservedVolume {
                        capacity: Bytes(length),
                        sha256: None,
                    },
                );
            }
            Action::CreateRootVolume {
                volume,
                backing_volume,
                capacity,
            } => {
                if !self.has_volume(pool, backing_volume) {
                    return Err(missing(&format!("base image {backing_volume}")));
                }
                self.state
                    .borrow_mut()
                    .backing
                    .insert(volume.clone(), backing_volume.clone());
                self.add_volume(
                    pool,
                    volume,
                    ObservedVolume {
                        capacity: *capacity,
                        sha256: None,
                    },
                );
            }
            Action::CreateDataVolume { volume, capacity }
            | Action::CreateExtraDisk {
                volume, capacity, ..
            } => {
                if !self.pool_is_active(pool) {
                    return Err(missing(&format!("storage pool {pool}")));
                }
                self.add_volume(
                    pool,
                    volume,
                    ObservedVolume {
                        capacity: *capacity,
                        sha256: None,
                    },
                );
            }
            Action::UploadSeed { volume, .. } => {
                if !self.pool_is_active(pool) {
                    return Err(missing(&format!("storage pool {pool}")));
                }
                self.add_volume(
                    pool,
                    volume,
                    ObservedVolume {
                        capacity: Bytes(artifacts.seed_iso.len() as u64),
                        sha256: Some(hex::encode(Sha256::digest(artifacts.seed_iso))),
                    },
                );
            }
            Action::DefineDomain { tag, .. } => {
                let mut state = self.state.borrow_mut();
                let defined = state.domains.entry(domain.to_string()).or_default();
                defined.trogs = true;
                defined.tag = Some(tag.clone());
                defined.definition = artifacts.domain_xml.to_string();
                defined.seed = Some(desired.seed_volume.clone());
            }
            Action::SetAutostart => {
                self.with_domain_mut(domain, |found| found.autostart = true)
                    .map_err(|fault| self.step_error(&doing, fault))?;
            }
            Action::StartDomain => {
                self.with_domain_mut(domain, |found| found.running = true)
                    .map_err(|fault| self.step_error(&doing, fault))?;
            }
            // Nothing to stop, or no snapshot left to delete, on a domain that is not there.
            Action::StopDomain | Action::PowerOffDomain => {
                let _ = self.with_domain_mut(domain, |found| found.running = false);
            }
            Action::DeleteSnapshots { names } => {
                let _ = self.with_domain_mut(domain, |found| {
                    found
                        .snapshots
                        .retain(|record| !names.contains(&record.name))
                });
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn fake_observe_guest(&self, desired: &DesiredGuest) -> ObservedGuest {
        let pool = desired.pool_name.as_str();
        let state = self.state.borrow();
        let mut observed = ObservedGuest::nothing();
        let volume = |name: &str| {
            state
                .pools
                .get(pool)
                .filter(|volumes| volumes.contains(name))
                .map(|_| {
                    state
                        .volume_details
                        .get(name)
                        .cloned()
                        .unwrap_or(ObservedVolume {
                            capacity: Bytes(0),
                            sha256: None,
                        })
                })
        };
        if state.pools.contains_key(pool) {
            observed.pool = if state.inactive_pools.contains(pool) {
                PoolState::Inactive
            } else {
                PoolState::Active
            };
            observed.base_image_present = volume(&desired.base_image_volume).is_some();
            observed.partial_base_image_present =
                volume(&desired.partial_base_image_volume).is_some();
            observed.root_volume = volume(&desired.root_volume.name);
            observed.seed_volume = volume(&desired.seed_volume);
            observed.data_volume = desired
                .data_volume
                .as_ref()
                .and_then(|data| volume(&data.name));
            for disk in &desired.extra_disks {
                if let Some(found) = volume(&disk.volume) {
                    observed
                        .extra_disks
                        .volumes
                        .insert(disk.volume.clone(), found);
                }
            }
        }
        observed.domain = state
            .domains
            .get(desired.domain.as_str())
            .map(|found| ObservedDomain {
                tag: found.tag.clone(),
                running: found.running,
                autostart: found.autostart,
                snapshots: found
                    .snapshots
                    .iter()
                    .map(|record| record.name.clone())
                    .collect(),
                seed_attached: found.seed.as_deref() == Some(desired.seed_volume.as_str()),
                shares_folders: found.definition.contains("<filesystem"),
                disk_pools: crate::debug_boot::guest_disk::disk_pools(&found.definition),
                domain_type: crate::render::domain_xml::defined::domain_type_of(&found.definition),
            });
        observed
    }

    pub(super) fn fake_record_tag(
        &self,
        desired: &DesiredGuest,
        tag: &GuestTag,
    ) -> Result<(), GuestResourceError> {
        let domain = desired.domain.as_str();
        self.call(Operation::RecordTag, format!("record_tag {domain}"))
            .and_then(|()| self.with_domain_mut(domain, |found| found.tag = Some(tag.clone())))
            .map_err(|fault| self.step_error("tag the guest", fault))
    }

    pub(super) fn fake_remove_partial_base_images(
        &self,
        desired: &DesiredGuest,
    ) -> Result<(), GuestResourceError> {
        self.call(
            Operation::RemovePartialBaseImages,
            format!("remove_partial_base_images {}", desired.base_image_volume),
        )
        .map_err(|fault| self.step_error("remove the partial base images", fault))?;
        let prefix = format!("{}.part-", desired.base_image_volume);
        if let Some(volumes) = self.state.borrow_mut().pools.get_mut(&desired.pool_name) {
            volumes.retain(|volume| !volume.starts_with(&prefix));
        }
        Ok(())
    }

    pub(super) fn fake_tenants_with_filters(&self) -> Result<Vec<String>, Failure> {
        self.call(Operation::TenantsWithFilters, "tenants_with_filters".into())
            .map_err(FakeHypervisor::failure)?;
        Ok(self
            .filters()
            .iter()
            .filter_map(|name| tenant_of_filter(name).map(str::to_string))
            .collect())
    }

    pub(super) fn fake_tenant_addresses(&self) -> Result<TenantDirectory, Failure> {
        // The fake keeps no interfaces' filter parameters: no other installation's guests.
        self.call(Operation::TenantAddresses, "tenant_addresses".into())
            .map_err(FakeHypervisor::failure)?;
        Ok(TenantDirectory::new())
    }

    pub(super) fn fake_define_filters(&self, filters: &[NetworkFilter]) -> Result<(), Failure> {
        let names: Vec<&str> = filters.iter().map(|filter| filter.name.as_str()).collect();
        self.call(
            Operation::DefineFilters,
            format!("define_filters {}", names.join(" ")),
        )
        .map_err(FakeHypervisor::failure)?;
        let mut state = self.state.borrow_mut();
        for name in names {
            state.filters.entry(name.to_string()).or_default();
        }
        Ok(())
    }

    pub(super) fn fake_reserve_address(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<bool, Failure> {
        self.call(
            Operation::ReserveAddress,
            format!("reserve_address {network} {mac} {address}"),
        )
        .map_err(FakeHypervisor::failure)?;
        if self.reserved_already(network, mac, address) {
            return Ok(false);
        }
        if let Some(refusal) = self.fake_address_leased_elsewhere(network, mac, address) {
            return Err(refusal.into());
        }
        let mut state = self.state.borrow_mut();
        let reservations = state.networks.entry(network.to_string()).or_default();
        reservations.retain(|(held_mac, held)| held_mac != mac && *held != address);
        reservations.push((mac.to_string(), address));
        Ok(true)
    }

    /// Whether `address` is reserved for `mac`, and for nothing else, in `network`.
    fn reserved_already(&self, network: &str, mac: &str, address: Ipv4Addr) -> bool {
        let state = self.state.borrow();
        let wanted = (mac.to_string(), address);
        let clashing: Vec<&(String, Ipv4Addr)> = state
            .networks
            .get(network)
            .into_iter()
            .flatten()
            .filter(|(held_mac, held)| held_mac == mac || *held == address)
            .collect();
        clashing == [&wanted]
    }

    /// What `reserve_address` refuses: the lease of `address` a running domain holds under
    /// another MAC, unless `address` is reserved for `mac` already.
    pub(super) fn fake_address_leased_elsewhere(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Option<AddressLeased> {
        if self.reserved_already(network, mac, address) {
            return None;
        }
        let state = self.state.borrow();
        let leases = state.leases.get(network).cloned().unwrap_or_default();
        let running: Vec<RunningDomain> = state
            .domains
            .iter()
            .filter(|(_, domain)| domain.running)
            .map(|(name, domain)| RunningDomain {
                name: name.clone(),
                macs: domain
                    .interfaces
                    .iter()
                    .map(|(_, mac)| mac.clone())
                    .collect(),
            })
            .collect();
        held_by_a_running_domain(&leases, mac, address, &running)
            .map(|(lease, holder)| AddressLeased::new(network, lease, holder))
    }

    pub(super) fn fake_pin_lease(
        &self,
        network: &str,
        mac: &str,
        kept_apart: &KeptApart,
    ) -> Result<Option<PinnedLease>, Failure> {
        self.call(Operation::PinLease, format!("pin_lease {network} {mac}"))
            .map_err(FakeHypervisor::failure)?;
        let mut state = self.state.borrow_mut();
        let Some(&(first, last)) = state.lease_ranges.get(network) else {
            return Ok(None);
        };
        let reservations = state.networks.entry(network.to_string()).or_default();
        if let Some((_, address)) = reservations.iter().find(|(held_mac, _)| held_mac == mac) {
            return Ok(Some(PinnedLease {
                address: *address,
                made: false,
            }));
        }
        let free = (u32::from(first)..=u32::from(last))
            .map(Ipv4Addr::from)
            .find(|address| {
                !reservations.iter().any(|(_, held)| held == address)
                    && !kept_apart.held.contains(address)
                    && !kept_apart
                        .ranges
                        .iter()
                        .any(|range| range.contains(*address))
            });
        Ok(free.map(|address| {
            reservations.push((mac.to_string(), address));
            PinnedLease {
                address,
                made: true,
            }
        }))
    }
}
