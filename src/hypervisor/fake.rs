//! A [`Hypervisor`] kept in memory, for unit tests of the verbs acting on an existing guest:
//! domains (trog's or foreign, running or not, with their snapshots and interfaces), pools and
//! their volumes, networks and their DHCP reservations, and trog's network filters with the
//! domains using them. It fails the operation it is told to (every call of a kind, or only the
//! n-th), and records every call in order, as `operation arguments` lines, for a test to read
//! the steps a verb took. Clones share one state, so a test keeps one to inspect what a verb
//! left.
//!
//! A plan's steps (`provision`) change what it keeps, and observing the guest reads it back
//! (`fake_provisioning.rs`).
//!
//! The steps before a hypervisor is opened (locating the guest, taking its lock) are faked by
//! `workflow::fake_fleet`, which records into the same list and fails through the same rules.

use super::provisioning::{
    BuiltArtifacts, GuestResourceError, KeptApart, NetworkLease, PinnedLease,
};
use super::{
    DebugEdit, Hypervisor, HypervisorFault, Presence, SnapshotError, VncDisplay, VolumeUse,
};
use crate::debug_boot::domain_edit::{DebugChange, EditError};
use crate::debug_boot::guest_disk::DiskFile;
use crate::diagnose::Failure;
use crate::machine::hypervisor_ops::boot_files::BootFiles;
use crate::plan::{Action, GuestTag, ObservedVolume};
use crate::plan::{DesiredGuest, ObservedGuest};
use crate::render::network_filter::{NetworkFilter, TenantDirectory};
use crate::snapshot::{Capture, SnapshotRecord};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::rc::Rc;

/// Every kind of call a fake answers, for telling it which to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Locate,
    LockGuest,
    LockNetworkFilters,
    Open,
    Presence,
    IsRunning,
    ObserveGuest,
    ShutDown,
    ForceOff,
    Undefine,
    SnapshotNames,
    Snapshots,
    TakeSnapshot,
    DeleteSnapshot,
    RevertSnapshot,
    DiskPaths,
    RefreshPool,
    VolumeExists,
    DeleteVolume,
    VolumeUse,
    DetachSeed,
    VolumeNames,
    RemoveUnusedFilters,
    ReleasePins,
    ReleaseReservation,
    Definition,
    Redefine,
    Start,
    Screenshot,
    PressKeys,
    OpenVncDisplay,
    DiskFiles,
    DefinePool,
    StartPool,
    UploadBaseImage,
    CreateVolume,
    UploadSeed,
    DefineDomain,
    SetAutostart,
    StartDomain,
    StopDomain,
    AttachDisk,
    DetachDisk,
    RecordTag,
    RemovePartialBaseImages,
    BootFiles,
    StartOnceAs,
    TenantsWithFilters,
    TenantAddresses,
    DefineFilters,
    ReserveAddress,
    PinLease,
}

#[path = "fake_provisioning.rs"]
mod building;

/// A domain on the fake hypervisor.
#[derive(Debug, Clone, Default)]
pub struct FakeDomain {
    pub trogs: bool,
    pub running: bool,
    /// A guest without an OS that answers ACPI: it runs until forced off.
    pub ignores_shutdown: bool,
    pub snapshots: Vec<SnapshotRecord>,
    /// (network, MAC) of each interface.
    pub interfaces: Vec<(String, String)>,
    /// The files of its disks.
    pub disks: Vec<String>,
    /// Its definition, as the fake's own text: `debug_boot`'s edits are words appended to it
    /// (` +console=CAPTURE`, ` +bootmenu`), refused when it has no `<os>`.
    pub definition: String,
    /// The bytes a screenshot hands over.
    pub screen: Vec<u8>,
    /// Where its display listens, when it has one.
    pub display: Option<(String, u16)>,
    /// The keys pressed on its keyboard, each chord in order.
    pub pressed: Vec<Vec<u32>>,
    /// The seed volume its definition attaches, until it is detached.
    pub seed: Option<String>,
    /// trog's tag, as the plan's definition or a finish recorded it.
    pub tag: Option<GuestTag>,
    pub autostart: bool,
}

#[derive(Default)]
struct State {
    domains: BTreeMap<String, FakeDomain>,
    pools: BTreeMap<String, BTreeSet<String>>,
    /// The pools defined but not started.
    inactive_pools: BTreeSet<String>,
    /// The volume each root disk is layered over, by the root disk's name.
    backing: BTreeMap<String, String>,
    /// The size and digest a plan's step gave a volume, by name.
    volume_details: BTreeMap<String, ObservedVolume>,
    /// Each network's range of leases: (first, last).
    lease_ranges: BTreeMap<String, (Ipv4Addr, Ipv4Addr)>,
    /// Each network's DHCP reservations: (MAC, address).
    networks: BTreeMap<String, Vec<(String, Ipv4Addr)>>,
    /// Each network's current DHCP leases.
    leases: BTreeMap<String, Vec<NetworkLease>>,
    /// Each of trog's filters, with the domains that reference it.
    filters: BTreeMap<String, Vec<String>>,
    calls: Vec<String>,
    /// What to fail: an operation, on every call (`None`) or on its n-th (from 1).
    failing: Vec<(Operation, Option<usize>)>,
    counted: BTreeMap<Operation, usize>,
    /// The clock of snapshots taken, in seconds.
    now_unix: i64,
    /// The kernel a first boot starts directly, as if read out of every base image; none: every
    /// first boot is from the disk.
    direct_boot: Option<crate::model::direct_boot::DirectBoot>,
}

/// The fake hypervisor; clones share its state.
#[derive(Clone)]
pub struct FakeHypervisor {
    name: String,
    state: Rc<RefCell<State>>,
}

impl FakeHypervisor {
    pub fn new(name: &str) -> FakeHypervisor {
        FakeHypervisor {
            name: name.to_string(),
            state: Rc::new(RefCell::new(State {
                now_unix: 1_800_000_000,
                ..State::default()
            })),
        }
    }

    pub fn with_domain(self, name: &str, domain: FakeDomain) -> FakeHypervisor {
        self.state
            .borrow_mut()
            .domains
            .insert(name.to_string(), domain);
        self
    }

    pub fn with_volumes(self, pool: &str, volumes: &[&str]) -> FakeHypervisor {
        self.state
            .borrow_mut()
            .pools
            .entry(pool.to_string())
            .or_default()
            .extend(volumes.iter().map(ToString::to_string));
        self
    }

    /// A volume `volume` in `pool`, layered over `backing` (which is added too).
    pub fn with_layered(self, pool: &str, volume: &str, backing: &str) -> FakeHypervisor {
        let layered = self.with_volumes(pool, &[volume, backing]);
        layered
            .state
            .borrow_mut()
            .backing
            .insert(volume.to_string(), backing.to_string());
        layered
    }

    pub fn with_reservation(self, network: &str, mac: &str, address: Ipv4Addr) -> FakeHypervisor {
        self.state
            .borrow_mut()
            .networks
            .entry(network.to_string())
            .or_default()
            .push((mac.to_string(), address));
        self
    }

    /// A lease `network`'s DHCP has given `mac` (a machine trog does not know), ending an hour
    /// after the fake's clock.
    pub fn with_lease(self, network: &str, mac: &str, address: Ipv4Addr) -> FakeHypervisor {
        let mut state = self.state.borrow_mut();
        let expires_unix = state.now_unix + 3600;
        state
            .leases
            .entry(network.to_string())
            .or_default()
            .push(NetworkLease {
                mac: mac.to_string(),
                address,
                expires_unix,
            });
        drop(state);
        self
    }

    pub fn with_filter(self, filter: &str, used_by: &[&str]) -> FakeHypervisor {
        self.state.borrow_mut().filters.insert(
            filter.to_string(),
            used_by.iter().map(ToString::to_string).collect(),
        );
        self
    }

    /// Fails every call of `operation`.
    /// Every base image's kernel can be started directly, as `boot` says.
    pub fn with_direct_boot(self, boot: crate::model::direct_boot::DirectBoot) -> FakeHypervisor {
        self.state.borrow_mut().direct_boot = Some(boot);
        self
    }

    pub fn failing(self, operation: Operation) -> FakeHypervisor {
        self.state.borrow_mut().failing.push((operation, None));
        self
    }

    /// Fails the `nth` call of `operation` (counted from 1), and only that one.
    pub fn failing_nth(self, operation: Operation, nth: usize) -> FakeHypervisor {
        self.state.borrow_mut().failing.push((operation, Some(nth)));
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state.borrow().calls.clone()
    }

    pub fn domain(&self, name: &str) -> Option<FakeDomain> {
        self.state.borrow().domains.get(name).cloned()
    }

    pub fn volumes(&self, pool: &str) -> Vec<String> {
        self.state
            .borrow()
            .pools
            .get(pool)
            .map(|volumes| volumes.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The size a plan's step gave the volume `name`, if one made it.
    pub fn volume_capacity(&self, name: &str) -> Option<crate::model::units::Bytes> {
        self.state
            .borrow()
            .volume_details
            .get(name)
            .map(|volume| volume.capacity)
    }

    pub fn reservations(&self, network: &str) -> Vec<(String, Ipv4Addr)> {
        self.state
            .borrow()
            .networks
            .get(network)
            .cloned()
            .unwrap_or_default()
    }

    pub fn filters(&self) -> Vec<String> {
        self.state.borrow().filters.keys().cloned().collect()
    }

    pub fn snapshot_names_of(&self, domain: &str) -> Vec<String> {
        self.domain(domain)
            .map(|found| {
                found
                    .snapshots
                    .into_iter()
                    .map(|record| record.name)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records `call`, one that cannot fail (a lock let go, a question answered with nothing).
    pub fn note(&self, call: String) {
        self.state.borrow_mut().calls.push(call);
    }

    /// Records `call` (an operation and its arguments) and fails it when told to.
    pub fn call(&self, operation: Operation, call: String) -> Result<(), HypervisorFault> {
        let mut state = self.state.borrow_mut();
        state.calls.push(call.clone());
        let count = {
            let counted = state.counted.entry(operation).or_default();
            *counted += 1;
            *counted
        };
        let fails = state
            .failing
            .iter()
            .any(|(failing, nth)| *failing == operation && nth.is_none_or(|nth| nth == count));
        if fails {
            Err(HypervisorFault::new(format!("{call}: refused by the fake")))
        } else {
            Ok(())
        }
    }

    fn snapshot_call(
        &self,
        operation: Operation,
        call: String,
        domain: &str,
        doing: &str,
    ) -> Result<(), SnapshotError> {
        self.call(operation, call)
            .map_err(|source| self.snapshot_error(domain, doing, source))?;
        match self.domain(domain) {
            Some(found) if found.trogs => Ok(()),
            Some(_) => Err(SnapshotError::Foreign {
                hypervisor: self.name.clone(),
                domain: domain.to_string(),
            }),
            None => Err(self.snapshot_error(
                domain,
                "look up the domain",
                HypervisorFault::new("no such domain"),
            )),
        }
    }

    fn snapshot_error(&self, domain: &str, doing: &str, source: HypervisorFault) -> SnapshotError {
        SnapshotError::Backend {
            backend: "fake",
            hypervisor: self.name.clone(),
            domain: domain.to_string(),
            operation: doing.to_string(),
            source,
        }
    }

    fn with_domain_mut<T>(
        &self,
        domain: &str,
        change: impl FnOnce(&mut FakeDomain) -> T,
    ) -> Result<T, HypervisorFault> {
        let mut state = self.state.borrow_mut();
        let found = state
            .domains
            .get_mut(domain)
            .ok_or_else(|| HypervisorFault::new(format!("no domain {domain}")))?;
        Ok(change(found))
    }
}

impl Hypervisor for FakeHypervisor {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "fake"
    }

    fn presence(&self, domain: &str) -> Result<Presence, HypervisorFault> {
        self.call(Operation::Presence, format!("presence {domain}"))?;
        Ok(match self.domain(domain) {
            None => Presence::Absent,
            Some(found) if found.trogs => Presence::Trogs,
            Some(_) => Presence::Foreign,
        })
    }

    fn is_running(&self, domain: &str) -> Result<bool, HypervisorFault> {
        self.call(Operation::IsRunning, format!("is_running {domain}"))?;
        self.with_domain_mut(domain, |found| found.running)
    }

    fn stopped_state(&self, domain: &str) -> Option<String> {
        self.note(format!("stopped_state {domain}"));
        match self.domain(domain) {
            None => Some("undefined: the domain no longer exists".into()),
            Some(found) if found.running => None,
            Some(_) => Some("shut off (shutdown)".into()),
        }
    }

    fn shut_down(&self, domain: &str) -> Result<(), HypervisorFault> {
        self.call(Operation::ShutDown, format!("shut_down {domain}"))?;
        self.with_domain_mut(domain, |found| {
            if !found.ignores_shutdown {
                found.running = false;
            }
        })
    }

    fn force_off(&self, domain: &str) -> Result<(), HypervisorFault> {
        self.call(Operation::ForceOff, format!("force_off {domain}"))?;
        self.with_domain_mut(domain, |found| found.running = false)
    }

    fn undefine(&self, domain: &str) -> Result<(), HypervisorFault> {
        self.call(Operation::Undefine, format!("undefine {domain}"))?;
        self.state
            .borrow_mut()
            .domains
            .remove(domain)
            .map(|_| ())
            .ok_or_else(|| HypervisorFault::new(format!("no domain {domain}")))
    }

    fn network_interfaces(&self, domain: &str) -> Vec<(String, String)> {
        self.note(format!("network_interfaces {domain}"));
        self.domain(domain)
            .map(|found| found.interfaces)
            .unwrap_or_default()
    }

    fn leased_addresses(&self, domain: &str, mac: &str) -> Vec<String> {
        // Leases are a DHCP server's; the fake has none, as on a network of static addresses.
        self.note(format!("leased_addresses {domain} {mac}"));
        Vec::new()
    }

    fn observe_guest(&self, desired: &DesiredGuest) -> Result<ObservedGuest, Failure> {
        self.call(
            Operation::ObserveGuest,
            format!("observe_guest {}", desired.domain),
        )
        .map_err(|fault| Failure::new(fault, crate::exit_status::ExitStatus::Hypervisor, None))?;
        Ok(self.fake_observe_guest(desired))
    }

    fn snapshot_names(&self, domain: &str) -> Result<Vec<String>, SnapshotError> {
        self.snapshot_call(
            Operation::SnapshotNames,
            format!("snapshot_names {domain}"),
            domain,
            "list the snapshots",
        )?;
        Ok(self.snapshot_names_of(domain))
    }

    fn snapshots(&self, domain: &str) -> Result<Vec<SnapshotRecord>, SnapshotError> {
        self.snapshot_call(
            Operation::Snapshots,
            format!("snapshots {domain}"),
            domain,
            "list the snapshots",
        )?;
        Ok(self
            .domain(domain)
            .map(|found| found.snapshots)
            .unwrap_or_default())
    }

    fn take_snapshot(&self, domain: &str, name: &str) -> Result<Capture, SnapshotError> {
        self.snapshot_call(
            Operation::TakeSnapshot,
            format!("take_snapshot {domain} {name}"),
            domain,
            &format!("take snapshot {name}"),
        )?;
        let mut state = self.state.borrow_mut();
        state.now_unix += 60;
        let created_unix = state.now_unix;
        let found = state.domains.get_mut(domain).expect("checked above");
        let capture = if found.running {
            Capture::WithMemory
        } else {
            Capture::Offline
        };
        found.snapshots.push(SnapshotRecord {
            name: name.to_string(),
            created_unix,
            running: found.running,
            capture,
            tag: None,
        });
        Ok(capture)
    }

    fn delete_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError> {
        let doing = format!("delete snapshot {name}");
        self.snapshot_call(
            Operation::DeleteSnapshot,
            format!("delete_snapshot {domain} {name}"),
            domain,
            &doing,
        )?;
        let removed = self.with_domain_mut(domain, |found| {
            let before = found.snapshots.len();
            found.snapshots.retain(|record| record.name != name);
            before != found.snapshots.len()
        });
        match removed {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.snapshot_error(
                domain,
                &format!("find snapshot {name}"),
                HypervisorFault::new("no such snapshot"),
            )),
            Err(fault) => Err(self.snapshot_error(domain, &doing, fault)),
        }
    }

    fn revert_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError> {
        self.snapshot_call(
            Operation::RevertSnapshot,
            format!("revert_snapshot {domain} {name}"),
            domain,
            &format!("restore snapshot {name}"),
        )?;
        let reverted = self.with_domain_mut(domain, |found| {
            let record = found.snapshots.iter().find(|record| record.name == name)?;
            found.running = record.running;
            Some(())
        });
        match reverted {
            Ok(Some(())) => Ok(()),
            _ => Err(self.snapshot_error(
                domain,
                &format!("find snapshot {name}"),
                HypervisorFault::new("no such snapshot"),
            )),
        }
    }

    fn disk_paths(&self, domain: &str) -> Result<Vec<String>, SnapshotError> {
        self.snapshot_call(
            Operation::DiskPaths,
            format!("disk_paths {domain}"),
            domain,
            "read the domain's definition",
        )?;
        Ok(self
            .domain(domain)
            .map(|found| found.disks)
            .unwrap_or_default())
    }

    fn refresh_pool(&self, pool: &str) -> Result<bool, HypervisorFault> {
        self.call(Operation::RefreshPool, format!("refresh_pool {pool}"))?;
        Ok(self.state.borrow().pools.contains_key(pool))
    }

    fn volume_exists(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault> {
        self.call(
            Operation::VolumeExists,
            format!("volume_exists {pool} {volume}"),
        )?;
        Ok(self
            .state
            .borrow()
            .pools
            .get(pool)
            .is_some_and(|volumes| volumes.contains(volume)))
    }

    fn delete_volume(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault> {
        self.call(
            Operation::DeleteVolume,
            format!("delete_volume {pool} {volume}"),
        )?;
        let mut state = self.state.borrow_mut();
        let volumes = state
            .pools
            .get_mut(pool)
            .ok_or_else(|| HypervisorFault::new(format!("no pool {pool}")))?;
        let removed = volumes.remove(volume);
        state.backing.remove(volume);
        Ok(removed)
    }

    fn detach_seed(&self, domain: &str, volume: &str) -> Result<bool, HypervisorFault> {
        self.call(
            Operation::DetachSeed,
            format!("detach_seed {domain} {volume}"),
        )?;
        self.with_domain_mut(domain, |found| {
            let attached = found.seed.as_deref() == Some(volume);
            if attached {
                found.seed = None;
            }
            attached
        })
    }

    fn volume_use(&self, pool: &str, volume: &str) -> Result<VolumeUse, HypervisorFault> {
        self.call(Operation::VolumeUse, format!("volume_use {pool} {volume}"))?;
        let state = self.state.borrow();
        if !state
            .pools
            .get(pool)
            .is_some_and(|volumes| volumes.contains(volume))
        {
            return Ok(VolumeUse::Absent);
        }
        let layered = state
            .backing
            .iter()
            .filter(|(_, backing)| backing.as_str() == volume)
            .map(|(over, _)| format!("volume {over}"));
        let domains = state
            .domains
            .iter()
            .filter(|(_, domain)| domain.disks.iter().any(|disk| disk.ends_with(volume)))
            .map(|(name, _)| format!("domain {name}"));
        let by: Vec<String> = layered.chain(domains).collect();
        Ok(if by.is_empty() {
            VolumeUse::Unused
        } else {
            VolumeUse::Used { by }
        })
    }

    fn volume_names(&self, pool: &str) -> Result<Vec<String>, HypervisorFault> {
        self.call(Operation::VolumeNames, format!("volume_names {pool}"))?;
        Ok(self.volumes(pool))
    }

    fn remove_unused_filters(&self) -> Result<Vec<String>, HypervisorFault> {
        self.call(
            Operation::RemoveUnusedFilters,
            "remove_unused_filters".into(),
        )?;
        let mut state = self.state.borrow_mut();
        let defined: BTreeSet<String> = state.domains.keys().cloned().collect();
        let unused: Vec<String> = state
            .filters
            .iter()
            .filter(|(_, users)| !users.iter().any(|user| defined.contains(user)))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &unused {
            state.filters.remove(name);
        }
        Ok(unused)
    }

    fn release_pins(
        &self,
        network: &str,
        mac: &str,
        keep: &[Ipv4Addr],
    ) -> Result<Vec<Ipv4Addr>, HypervisorFault> {
        self.call(
            Operation::ReleasePins,
            format!("release_pins {network} {mac}"),
        )?;
        let mut state = self.state.borrow_mut();
        let reservations = state.networks.entry(network.to_string()).or_default();
        let (released, kept): (Vec<_>, Vec<_>) = reservations
            .drain(..)
            .partition(|(holder, address)| holder == mac && !keep.contains(address));
        *reservations = kept;
        Ok(released.into_iter().map(|(_, address)| address).collect())
    }

    fn release_reservation(
        &self,
        network: &str,
        address: Ipv4Addr,
    ) -> Result<bool, HypervisorFault> {
        self.call(
            Operation::ReleaseReservation,
            format!("release_reservation {network} {address}"),
        )?;
        let mut state = self.state.borrow_mut();
        let reservations = state.networks.entry(network.to_string()).or_default();
        let before = reservations.len();
        reservations.retain(|(_, held)| *held != address);
        Ok(before != reservations.len())
    }

    fn carry_out(
        &self,
        desired: &DesiredGuest,
        action: &Action,
        artifacts: &BuiltArtifacts,
    ) -> Result<(), GuestResourceError> {
        self.fake_carry_out(desired, action, artifacts)
    }

    fn record_tag(&self, desired: &DesiredGuest, tag: &GuestTag) -> Result<(), GuestResourceError> {
        self.fake_record_tag(desired, tag)
    }

    fn remove_partial_base_images(&self, desired: &DesiredGuest) -> Result<(), GuestResourceError> {
        self.fake_remove_partial_base_images(desired)
    }

    fn boot_files(&self, desired: &DesiredGuest) -> Result<Option<BootFiles>, GuestResourceError> {
        // The fake has no system to read a kernel out of an image: every first boot is from the
        // disk, as on libvirt's test driver, unless a test gave it a kernel to start.
        self.note(format!("boot_files {}", desired.base_image_volume));
        Ok(self
            .state
            .borrow()
            .direct_boot
            .clone()
            .map(BootFiles::Direct))
    }

    fn start_once_as(
        &self,
        desired: &DesiredGuest,
        first_definition: &str,
        _lasting_definition: &str,
    ) -> Result<(), GuestResourceError> {
        let domain = desired.domain.as_str();
        self.call(
            Operation::StartOnceAs,
            format!("start_once_as {domain} {first_definition:?}"),
        )
        .and_then(|()| self.with_domain_mut(domain, |found| found.running = true))
        .map_err(|source| GuestResourceError {
            backend: "fake",
            hypervisor: self.name.clone(),
            operation: "start the guest".into(),
            source: Box::new(source),
        })
    }

    fn tenants_with_filters(&self) -> Result<Vec<String>, Failure> {
        self.fake_tenants_with_filters()
    }

    fn tenant_addresses(&self) -> Result<TenantDirectory, Failure> {
        self.fake_tenant_addresses()
    }

    fn define_filters(&self, filters: &[NetworkFilter]) -> Result<(), Failure> {
        self.fake_define_filters(filters)
    }

    fn reserve_address(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<bool, Failure> {
        self.fake_reserve_address(network, mac, address)
    }

    fn address_leased_elsewhere(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<Option<super::provisioning::AddressLeased>, Failure> {
        Ok(self.fake_address_leased_elsewhere(network, mac, address))
    }

    fn pin_lease(
        &self,
        network: &str,
        mac: &str,
        kept_apart: &KeptApart,
    ) -> Result<Option<PinnedLease>, Failure> {
        self.fake_pin_lease(network, mac, kept_apart)
    }

    fn definition(&self, domain: &str) -> Result<String, HypervisorFault> {
        self.call(Operation::Definition, format!("definition {domain}"))?;
        self.with_domain_mut(domain, |found| found.definition.clone())
    }

    fn redefine(&self, domain: &str, definition: &str) -> Result<(), HypervisorFault> {
        self.call(
            Operation::Redefine,
            format!("redefine {domain} as {definition:?}"),
        )?;
        self.with_domain_mut(domain, |found| found.definition = definition.to_string())
    }

    fn debug_edit(&self, definition: &str, edit: DebugEdit) -> Result<String, EditError> {
        if !definition.contains("<os>") {
            return Err(EditError::NoOs);
        }
        let word = match edit {
            DebugEdit::ConsoleCapture { capture, .. } => format!(" +console={capture}"),
            DebugEdit::BootMenu => " +bootmenu".to_string(),
        };
        Ok(if definition.contains(&word) {
            definition.to_string()
        } else {
            format!("{definition}{word}")
        })
    }

    fn as_provisioned(
        &self,
        definition: &str,
        _provisioned_log: &str,
        capture: &str,
    ) -> (String, Vec<DebugChange>) {
        let mut changes = Vec::new();
        let mut provisioned = definition.to_string();
        for (word, change) in [
            (format!(" +console={capture}"), DebugChange::ConsoleCapture),
            (" +bootmenu".to_string(), DebugChange::BootMenu),
        ] {
            if provisioned.contains(&word) {
                provisioned = provisioned.replace(&word, "");
                changes.push(change);
            }
        }
        (provisioned, changes)
    }

    fn start(&self, domain: &str) -> Result<(), HypervisorFault> {
        self.call(Operation::Start, format!("start {domain}"))?;
        self.with_domain_mut(domain, |found| found.running = true)
    }

    fn screenshot(&self, domain: &str) -> Result<Vec<u8>, HypervisorFault> {
        self.call(Operation::Screenshot, format!("screenshot {domain}"))?;
        self.with_domain_mut(domain, |found| found.screen.clone())
    }

    fn press_keys(&self, domain: &str, codes: &[u32]) -> Result<(), HypervisorFault> {
        self.call(
            Operation::PressKeys,
            format!("press_keys {domain} {codes:?}"),
        )?;
        self.with_domain_mut(domain, |found| found.pressed.push(codes.to_vec()))
    }

    fn open_vnc_display(
        &self,
        domain: &str,
        now_unix: u64,
    ) -> Result<Option<VncDisplay>, HypervisorFault> {
        self.call(
            Operation::OpenVncDisplay,
            format!("open_vnc_display {domain}"),
        )?;
        self.with_domain_mut(domain, |found| {
            let (listen, port) = found.display.clone()?;
            Some(VncDisplay {
                listen,
                port,
                password: "FakePass".into(),
                valid_until: format!("{now_unix}+600"),
            })
        })
    }

    fn disk_files(&self, domain: &str) -> Result<Vec<DiskFile>, HypervisorFault> {
        self.call(Operation::DiskFiles, format!("disk_files {domain}"))?;
        self.with_domain_mut(domain, |found| {
            found
                .disks
                .iter()
                .map(|path| DiskFile {
                    path: path.clone(),
                    format: "qcow2".into(),
                })
                .collect()
        })
    }
}
