//! [`Hypervisor`] over one libvirt connection: the real implementation of what `provision`'s
//! steps and the verbs acting on an existing guest ask, each method one or a few libvirt calls
//! (a plan's steps through `guest_resources`). The verbs' sequences are not here: they are in
//! `provision/` and `workflow/`, written against the trait.

use crate::debug_boot::domain_edit::{self, DebugChange, EditError};
use crate::debug_boot::guest_disk::DiskFile;
use crate::diagnose::Failure;
use crate::hypervisor::provisioning::{BuiltArtifacts, GuestResourceError, KeptApart, PinnedLease};
use crate::hypervisor::{
    DebugEdit, Hypervisor, HypervisorFault, Presence, SnapshotError, VncDisplay, VolumeUse,
};
use crate::libvirt::debug_boot;
use crate::libvirt::guest_address;
use crate::libvirt::guest_resources::GuestResources;
use crate::libvirt::guest_state;
use crate::libvirt::lease_pin;
use crate::libvirt::network_filter::{self, remove_unused_filters};
use crate::libvirt::reservation::release_reservation;
use crate::libvirt::snapshot::GuestSnapshots;
use crate::libvirt::trog_tag::is_trogs;
use crate::machine::hypervisor_ops::boot_files::BootFiles;
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::plan::{Action, GuestTag};
use crate::plan::{DesiredGuest, ObservedGuest};
use crate::render::network_filter::{NetworkFilter, TenantDirectory};
use crate::snapshot::{Capture, SnapshotRecord};
use std::net::Ipv4Addr;
use std::rc::Rc;
use virt::connect::Connect;
use virt::error::ErrorNumber;

/// A hypervisor of the fleet, reached through its libvirt.
pub struct LibvirtHypervisor {
    name: String,
    uri: String,
    connection: Connect,
    /// The hypervisor's own system, through which a plan's steps write the base image and the
    /// seed into the pool and read a base image's kernel; `None` for libvirt's test driver,
    /// which has none (there they go through libvirt's upload streams), and for the verbs that
    /// write nothing there.
    system: Option<Rc<HypervisorMachine>>,
}

impl LibvirtHypervisor {
    /// Connects to `hypervisor`'s libvirt.
    pub fn connect(
        hypervisor: &HypervisorConfig,
    ) -> Result<LibvirtHypervisor, super::LibvirtError> {
        Ok(LibvirtHypervisor {
            name: hypervisor.name.to_string(),
            uri: hypervisor.libvirt_uri.uri.clone(),
            connection: super::connect(&hypervisor.libvirt_uri)?,
            system: None,
        })
    }

    /// `hypervisor` through a connection already open to it (shared: libvirt counts its
    /// references, and closes it when the last goes).
    pub fn over(connection: &Connect, hypervisor: &HypervisorConfig) -> LibvirtHypervisor {
        LibvirtHypervisor {
            name: hypervisor.name.to_string(),
            uri: hypervisor.libvirt_uri.uri.clone(),
            connection: connection.clone(),
            system: None,
        }
    }

    /// The same hypervisor, its pool written through `system` (its own system, sudo settled).
    pub fn with_system(self, system: Option<Rc<HypervisorMachine>>) -> LibvirtHypervisor {
        LibvirtHypervisor { system, ..self }
    }

    /// The guest `desired` describes, on this hypervisor's connection.
    fn resources<'a>(&'a self, desired: &'a DesiredGuest) -> GuestResources<'a> {
        GuestResources {
            connection: &self.connection,
            hypervisor: &self.name,
            desired,
            machine: self.system.as_deref(),
        }
    }

    fn snapshots_of(&self, domain: &str) -> Result<GuestSnapshots<'_>, SnapshotError> {
        GuestSnapshots::open(&self.connection, &self.name, domain)
    }

    fn domain(&self, domain: &str) -> Result<virt::domain::Domain, HypervisorFault> {
        self.connection
            .lookup_domain_by_name(domain)
            .map_err(HypervisorFault::new)
    }
}

impl Hypervisor for LibvirtHypervisor {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "libvirt"
    }

    fn presence(&self, domain: &str) -> Result<Presence, HypervisorFault> {
        match self.connection.lookup_domain_by_name(domain) {
            Ok(found) if is_trogs(&found) => Ok(Presence::Trogs),
            Ok(_) => Ok(Presence::Foreign),
            Err(error) if error.code().is(ErrorNumber::NoDomain) => Ok(Presence::Absent),
            Err(error) => Err(HypervisorFault::new(error)),
        }
    }

    fn is_running(&self, domain: &str) -> Result<bool, HypervisorFault> {
        self.domain(domain)?
            .is_active()
            .map_err(HypervisorFault::new)
    }

    fn stopped_state(&self, domain: &str) -> Option<String> {
        guest_state::stopped_state(&self.connection, domain)
    }

    fn shut_down(&self, domain: &str) -> Result<(), HypervisorFault> {
        self.domain(domain)?
            .shutdown()
            .map(|_| ())
            .map_err(HypervisorFault::new)
    }

    fn force_off(&self, domain: &str) -> Result<(), HypervisorFault> {
        match self.domain(domain)?.destroy() {
            Ok(()) => Ok(()),
            // Already off: it stopped between the question and the order.
            Err(error) if error.code().is(ErrorNumber::OperationInvalid) => Ok(()),
            Err(error) => Err(HypervisorFault::new(error)),
        }
    }

    fn undefine(&self, domain: &str) -> Result<(), HypervisorFault> {
        let flags = virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM
            | virt::sys::VIR_DOMAIN_UNDEFINE_TPM
            | virt::sys::VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
            | virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
            | virt::sys::VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA;
        self.domain(domain)?
            .undefine_flags(flags)
            .map_err(HypervisorFault::new)
    }

    fn network_interfaces(&self, domain: &str) -> Vec<(String, String)> {
        lease_pin::domain_network_interfaces(&self.connection, domain)
    }

    fn leased_addresses(&self, domain: &str, mac: &str) -> Vec<String> {
        guest_address::leased_addresses(&self.connection, domain, mac)
    }

    fn observe_guest(&self, desired: &DesiredGuest) -> Result<ObservedGuest, Failure> {
        let resources = GuestResources {
            connection: &self.connection,
            hypervisor: &self.name,
            desired,
            // Observing writes nothing into the pool: no system is needed.
            machine: None,
        };
        Ok(resources.observe()?)
    }

    fn snapshot_names(&self, domain: &str) -> Result<Vec<String>, SnapshotError> {
        let snapshots = self.snapshots_of(domain)?;
        let fault = |operation: &str| {
            let operation = operation.to_string();
            move |source| SnapshotError::Backend {
                backend: "libvirt",
                hypervisor: self.name.clone(),
                domain: domain.to_string(),
                operation,
                source: HypervisorFault::new(source),
            }
        };
        Ok(snapshots
            .domain
            .list_all_snapshots(0)
            .map_err(fault("list the snapshots"))?
            .iter()
            .map(|snapshot| snapshot.name().unwrap_or_else(|_| "(unnamed)".into()))
            .collect())
    }

    fn snapshots(&self, domain: &str) -> Result<Vec<SnapshotRecord>, SnapshotError> {
        self.snapshots_of(domain)?.list()
    }

    fn take_snapshot(&self, domain: &str, name: &str) -> Result<Capture, SnapshotError> {
        self.snapshots_of(domain)?.take(name)
    }

    fn delete_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError> {
        self.snapshots_of(domain)?.delete(name)
    }

    fn revert_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError> {
        self.snapshots_of(domain)?.revert(name)
    }

    fn disk_paths(&self, domain: &str) -> Result<Vec<String>, SnapshotError> {
        self.snapshots_of(domain)?.disk_paths(&self.connection)
    }

    fn refresh_pool(&self, pool: &str) -> Result<bool, HypervisorFault> {
        match self.connection.lookup_storage_pool_by_name(pool) {
            Ok(found) => {
                // A refresh that fails leaves libvirt's last listing, which names the guest's
                // volumes well enough to delete them.
                let _ = found.refresh(0);
                Ok(true)
            }
            Err(error) if error.code().is(ErrorNumber::NoStoragePool) => Ok(false),
            Err(error) => Err(HypervisorFault::new(error)),
        }
    }

    fn volume_exists(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault> {
        let pool = self
            .connection
            .lookup_storage_pool_by_name(pool)
            .map_err(HypervisorFault::new)?;
        match pool.lookup_storage_vol_by_name(volume) {
            Ok(_) => Ok(true),
            Err(error) if error.code().is(ErrorNumber::NoStorageVolume) => Ok(false),
            Err(error) => Err(HypervisorFault::new(error)),
        }
    }

    fn delete_volume(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault> {
        let pool = self
            .connection
            .lookup_storage_pool_by_name(pool)
            .map_err(HypervisorFault::new)?;
        match pool.lookup_storage_vol_by_name(volume) {
            Ok(found) => found.delete(0).map(|()| true).map_err(HypervisorFault::new),
            Err(error) if error.code().is(ErrorNumber::NoStorageVolume) => Ok(false),
            Err(error) => Err(HypervisorFault::new(error)),
        }
    }

    fn volume_use(&self, pool: &str, volume: &str) -> Result<VolumeUse, HypervisorFault> {
        crate::libvirt::volume_use::volume_use(&self.connection, &self.uri, pool, volume)
            .map_err(HypervisorFault::new)
    }

    fn detach_seed(&self, domain: &str, volume: &str) -> Result<bool, HypervisorFault> {
        crate::libvirt::seed::detach_seed(&self.connection, domain, volume)
            .map_err(HypervisorFault::new)
    }

    fn volume_names(&self, pool: &str) -> Result<Vec<String>, HypervisorFault> {
        self.connection
            .lookup_storage_pool_by_name(pool)
            .and_then(|pool| pool.list_volumes())
            .map_err(HypervisorFault::new)
    }

    fn remove_unused_filters(&self) -> Result<Vec<String>, HypervisorFault> {
        remove_unused_filters(&self.connection, &self.name).map_err(HypervisorFault::new)
    }

    fn release_pins(
        &self,
        network: &str,
        mac: &str,
        keep: &[Ipv4Addr],
    ) -> Result<Vec<Ipv4Addr>, HypervisorFault> {
        lease_pin::release_pins(&self.connection, &self.uri, network, mac, keep)
            .map_err(HypervisorFault::new)
    }

    fn release_reservation(
        &self,
        network: &str,
        address: Ipv4Addr,
    ) -> Result<bool, HypervisorFault> {
        release_reservation(&self.connection, &self.uri, network, address)
            .map_err(HypervisorFault::new)
    }

    fn carry_out(
        &self,
        desired: &DesiredGuest,
        action: &Action,
        artifacts: &BuiltArtifacts,
    ) -> Result<(), GuestResourceError> {
        self.resources(desired).execute(action, artifacts)
    }

    fn record_tag(&self, desired: &DesiredGuest, tag: &GuestTag) -> Result<(), GuestResourceError> {
        self.resources(desired).record_tag(tag)
    }

    fn remove_partial_base_images(&self, desired: &DesiredGuest) -> Result<(), GuestResourceError> {
        self.resources(desired).remove_partial_base_images()
    }

    fn boot_files(&self, desired: &DesiredGuest) -> Result<Option<BootFiles>, GuestResourceError> {
        self.resources(desired).boot_files()
    }

    fn start_once_as(
        &self,
        desired: &DesiredGuest,
        first_definition: &str,
        lasting_definition: &str,
    ) -> Result<(), GuestResourceError> {
        self.resources(desired)
            .start_once_as(first_definition, lasting_definition)
    }

    fn tenants_with_filters(&self) -> Result<Vec<String>, Failure> {
        Ok(network_filter::tenants_with_filters(
            &self.connection,
            &self.name,
        )?)
    }

    fn tenant_addresses(&self) -> Result<TenantDirectory, Failure> {
        Ok(network_filter::tenant_addresses_on_hypervisor(
            &self.connection,
            &self.name,
        )?)
    }

    fn define_filters(&self, filters: &[NetworkFilter]) -> Result<(), Failure> {
        Ok(network_filter::define_filters(
            &self.connection,
            &self.name,
            filters,
        )?)
    }

    fn reserve_address(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<bool, Failure> {
        crate::libvirt::reservation::reserve_address(
            &self.connection,
            &self.uri,
            network,
            mac,
            address,
        )
    }

    fn address_leased_elsewhere(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<Option<crate::hypervisor::provisioning::AddressLeased>, Failure> {
        Ok(crate::libvirt::reservation::address_leased_elsewhere(
            &self.connection,
            &self.uri,
            network,
            mac,
            address,
        )?)
    }

    fn pin_lease(
        &self,
        network: &str,
        mac: &str,
        kept_apart: &KeptApart,
    ) -> Result<Option<PinnedLease>, Failure> {
        Ok(lease_pin::pin_lease(
            &self.connection,
            &self.uri,
            network,
            mac,
            kept_apart,
        )?)
    }

    fn definition(&self, domain: &str) -> Result<String, HypervisorFault> {
        debug_boot::definition(&self.domain(domain)?)
    }

    fn redefine(&self, _domain: &str, definition: &str) -> Result<(), HypervisorFault> {
        debug_boot::redefine(&self.connection, definition)
    }

    fn debug_edit(&self, definition: &str, edit: DebugEdit) -> Result<String, EditError> {
        match edit {
            DebugEdit::ConsoleCapture {
                provisioned_log,
                capture,
            } => domain_edit::with_console_capture(definition, provisioned_log, capture),
            DebugEdit::BootMenu => domain_edit::with_boot_menu(definition),
        }
    }

    fn as_provisioned(
        &self,
        definition: &str,
        provisioned_log: &str,
        capture: &str,
    ) -> (String, Vec<DebugChange>) {
        (
            domain_edit::as_provisioned(definition, provisioned_log, capture),
            domain_edit::debug_changes(definition, capture),
        )
    }

    fn start(&self, domain: &str) -> Result<(), HypervisorFault> {
        debug_boot::start(&self.domain(domain)?)
    }

    fn screenshot(&self, domain: &str) -> Result<Vec<u8>, HypervisorFault> {
        debug_boot::screenshot(&self.connection, &self.domain(domain)?)
    }

    fn press_keys(&self, domain: &str, codes: &[u32]) -> Result<(), HypervisorFault> {
        debug_boot::press_keys(&self.domain(domain)?, codes)
    }

    fn open_vnc_display(
        &self,
        domain: &str,
        now_unix: u64,
    ) -> Result<Option<VncDisplay>, HypervisorFault> {
        debug_boot::open_vnc_display(&self.domain(domain)?, now_unix)
    }

    fn disk_files(&self, domain: &str) -> Result<Vec<DiskFile>, HypervisorFault> {
        debug_boot::disk_files(&self.connection, &self.domain(domain)?)
    }
}
