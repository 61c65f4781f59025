//! Asking one hypervisor what it has and what it has promised.

use crate::hypervisor::observer::{HeldDomain, HypervisorObserver};
use crate::hypervisor::HypervisorFault;
use crate::libvirt::connection::connect;
use crate::libvirt::domain_stats::{all_guest_stats, GuestStats};
use crate::libvirt::error::LibvirtError;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::model::units::{Bytes, MiB};
use crate::placement::observed::{DefinedGuest, HypervisorCapacity, PoolState};
use crate::preflight::LibvirtFacts;
use virt::connect::Connect;
use virt::enumutil::Enum;
use virt::error::ErrorNumber;

/// The real thing: libvirt at each hypervisor's `libvirt_uri`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LibvirtObserver;

impl HypervisorObserver for LibvirtObserver {
    fn capacity(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<HypervisorCapacity, HypervisorFault> {
        self.libvirt_capacity(hypervisor)
            .map_err(HypervisorFault::new)
    }

    fn holds_guest(
        &self,
        hypervisor: &HypervisorConfig,
        guest: &DomainName,
    ) -> Result<bool, HypervisorFault> {
        self.libvirt_holds_guest(hypervisor, guest)
            .map_err(HypervisorFault::new)
    }

    fn held_domains(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<HeldDomain>, HypervisorFault> {
        crate::libvirt::site::held_domains(&hypervisor.libvirt_uri).map_err(HypervisorFault::new)
    }

    fn tagged_domain_names(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<Vec<String>, HypervisorFault> {
        crate::libvirt::trog_tag::tagged_domain_names(&hypervisor.libvirt_uri)
            .map_err(HypervisorFault::new)
    }

    fn preflight_facts(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<LibvirtFacts, HypervisorFault> {
        crate::libvirt::facts::libvirt_facts(&hypervisor.libvirt_uri, &hypervisor.pool_name)
            .map_err(HypervisorFault::new)
    }

    fn client_version(&self) -> u32 {
        crate::libvirt::facts::linked_library_version()
    }
}

impl LibvirtObserver {
    fn libvirt_capacity(
        &self,
        hypervisor: &HypervisorConfig,
    ) -> Result<HypervisorCapacity, LibvirtError> {
        let uri = hypervisor.libvirt_uri.uri.as_str();
        let connection = connect(&hypervisor.libvirt_uri)?;
        // The node, the guests and the pool are independent questions. Asked from threads of
        // their own on the one connection, libvirt sends them together and they share a round
        // trip (a connection carries concurrent calls); asked one after another, each would wait
        // for the answer before it.
        let (node, guests, pool) = std::thread::scope(|scope| {
            let node = scope.spawn(|| {
                connection
                    .node_info()
                    .map_err(|e| LibvirtError::query(uri, "read the node's memory and CPUs", e))
            });
            let guests = scope.spawn(|| defined_guests(&connection, uri));
            let pool = pool_state(&connection, uri, &hypervisor.pool_name);
            (joined(node), joined(guests), pool)
        });
        let node = node?;
        Ok(HypervisorCapacity {
            physical_memory: MiB::from_kib(node.memory),
            physical_cpus: node.cpus,
            guests: guests?,
            pool: pool?,
        })
    }

    fn libvirt_holds_guest(
        &self,
        hypervisor: &HypervisorConfig,
        guest: &DomainName,
    ) -> Result<bool, LibvirtError> {
        let connection = connect(&hypervisor.libvirt_uri)?;
        match connection.lookup_domain_by_name(guest.as_str()) {
            Ok(_) => Ok(true),
            Err(error) if matches!(error.code(), Enum::Known(ErrorNumber::NoDomain)) => Ok(false),
            Err(error) => Err(LibvirtError::query(
                &hypervisor.libvirt_uri.uri,
                "look up the guest",
                error,
            )),
        }
    }
}

/// What a question's thread answered; a panic there is passed on as it was.
fn joined<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The storage pool's state and, when it runs, its size: three questions that depend on each
/// other (the pool, then its refresh, then its figures).
fn pool_state(connection: &Connect, uri: &str, pool_name: &str) -> Result<PoolState, LibvirtError> {
    let pool = match connection.lookup_storage_pool_by_name(pool_name) {
        Err(error) if matches!(error.code(), Enum::Known(ErrorNumber::NoStoragePool)) => {
            return Ok(PoolState::Absent)
        }
        Err(error) => return Err(LibvirtError::query(uri, "look up the storage pool", error)),
        Ok(pool) => pool,
    };
    // Files written beside libvirt's back are counted only after a refresh; a refusal (a
    // read-only account, or a stopped pool) leaves the last figures, and the state in the pool's
    // info says which it is: one question fewer than asking.
    let _ = pool.refresh(0);
    let info = pool
        .info()
        .map_err(|e| LibvirtError::query(uri, "read the pool's size", e))?;
    Ok(if info.state == virt::sys::VIR_STORAGE_POOL_RUNNING {
        PoolState::Active {
            capacity: Bytes(info.capacity),
            allocation: Bytes(info.allocation),
            available: Bytes(info.available),
        }
    } else {
        PoolState::Inactive
    })
}

/// Every defined guest with its maximum memory and vCPUs and whether it runs: one bulk statistics
/// call, so a hypervisor holding many guests costs no more round trips than an empty one. A
/// driver without that call (or a record lacking a figure) is asked guest by guest instead.
pub fn defined_guests(connection: &Connect, uri: &str) -> Result<Vec<DefinedGuest>, LibvirtError> {
    match all_guest_stats(connection) {
        Ok(records) => {
            let complete: Option<Vec<DefinedGuest>> =
                records.iter().map(GuestStats::defined_guest).collect();
            if let Some(guests) = complete {
                return Ok(guests);
            }
        }
        Err(error) if matches!(error.code(), Enum::Known(ErrorNumber::NoSupport)) => {}
        Err(error) => return Err(LibvirtError::query(uri, "read every guest's size", error)),
    }
    guest_by_guest(connection, uri)
}

/// The slow way: three questions per guest.
pub fn guest_by_guest(connection: &Connect, uri: &str) -> Result<Vec<DefinedGuest>, LibvirtError> {
    let domains = connection
        .list_all_domains(0)
        .map_err(|e| LibvirtError::query(uri, "list the defined guests", e))?;
    let mut guests = Vec::with_capacity(domains.len());
    for domain in domains {
        let name = domain
            .name()
            .map_err(|e| LibvirtError::query(uri, "read a guest's name", e))?;
        // A guest undefined since the domains were listed holds nothing.
        let info = match domain.info() {
            Ok(info) => info,
            Err(e) if matches!(e.code(), Enum::Known(ErrorNumber::NoDomain)) => continue,
            Err(e) => return Err(LibvirtError::query(uri, "read a guest's size", e)),
        };
        // The maximum, not the current count: a guest may hot-plug up to it.
        let max_vcpus = domain
            .vcpus_flags(virt::sys::VIR_DOMAIN_VCPU_MAXIMUM)
            .unwrap_or(info.nr_virt_cpu);
        guests.push(DefinedGuest {
            name,
            max_memory: MiB::from_kib(info.max_mem),
            max_vcpus,
            running: domain.is_active().unwrap_or(false),
        });
    }
    Ok(guests)
}
