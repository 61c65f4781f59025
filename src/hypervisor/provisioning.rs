//! What `provision` hands a hypervisor and gets back from it, beside the [`super::Hypervisor`]
//! methods that carry out a plan's steps: the artifacts built on this machine beforehand, the
//! failure of a step, and a leased guest's pinned lease.

use crate::model::address_range::AddressRange;
use std::net::Ipv4Addr;
use std::path::Path;

/// What a plan's hypervisor steps need beyond the plan: the bytes built locally beforehand.
pub struct BuiltArtifacts<'a> {
    /// The guest's definition as trog rendered it (`render::domain_xml`).
    pub domain_xml: &'a str,
    pub seed_iso: &'a [u8],
    /// The verified base image on this machine, uploaded when the plan says so.
    pub base_image_file: &'a Path,
    /// The extra disks as the domain attaches them, for a disk attached to a defined guest.
    pub extra_disks: &'a [crate::render::domain_xml::ExtraDiskSpec],
}

/// A step of a guest's plan that the hypervisor did not carry out: which hypervisor, what was
/// being done, and the backend's own reason.
#[derive(Debug, thiserror::Error)]
#[error("{backend} on {hypervisor} could not {operation}")]
pub struct GuestResourceError {
    /// Which kind of hypervisor said no (`libvirt`).
    pub backend: &'static str,
    pub hypervisor: String,
    pub operation: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl crate::diagnose::Diagnose for GuestResourceError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Hypervisor
    }

    fn hint(&self) -> Option<String> {
        Some("run `trog preflight` against that hypervisor; rerunning `provision` continues from where this stopped".into())
    }
}

/// What else on a network must not be pinned to a leased guest: the ranges trog hands static
/// addresses from and the addresses its guests hold (both from `ips.db`).
#[derive(Debug, Clone, Default)]
pub struct KeptApart {
    pub ranges: Vec<AddressRange>,
    pub held: Vec<Ipv4Addr>,
}

/// A lease pinned for a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedLease {
    pub address: Ipv4Addr,
    /// True when this run made the reservation, false when it was there already.
    pub made: bool,
}

/// One current IPv4 lease of a network's DHCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkLease {
    pub mac: String,
    pub address: Ipv4Addr,
    /// When the lease ends, in seconds since the epoch, unless its holder renews it.
    pub expires_unix: i64,
}

/// A static address that a machine of another MAC holds now through the network's DHCP.
/// Reserving it for the guest would not take it back before that lease ends: two machines would
/// answer at one address, and the guest's finish could reach the other one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{address} is leased to another machine ({holder}) by network {network}'s DHCP until {until} \
     (unless that machine renews it): it cannot be this guest's"
)]
pub struct AddressLeased {
    pub network: String,
    pub address: Ipv4Addr,
    /// The MAC address of the machine holding the lease.
    pub holder: String,
    /// When the lease ends (`YYYY-MM-DD HH:MM:SS UTC`).
    pub until: String,
}

impl AddressLeased {
    pub fn new(network: &str, lease: &NetworkLease) -> AddressLeased {
        AddressLeased {
            network: network.to_string(),
            address: lease.address,
            holder: lease.mac.clone(),
            until: crate::snapshot::utc(lease.expires_unix)
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string(),
        }
    }
}

impl crate::diagnose::Diagnose for AddressLeased {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Conflict
    }

    fn hint(&self) -> Option<String> {
        Some(format!(
            "keep the addresses trog gives guests (`address_range`, a guest's `ips`) outside network \
             {}'s DHCP pool (its <range> in `virsh net-dumpxml {}`), or give this guest another \
             address; nothing was changed",
            self.network, self.network
        ))
    }
}

/// The lease among `leases` of `address` to a machine other than `mac` (MACs compared without
/// regard to case, as libvirt writes them either way). Every current lease counts, as when a
/// lease is pinned (`libvirt::lease_pin`): whether its holder still runs cannot be told here.
pub fn leased_to_another<'a>(
    leases: &'a [NetworkLease],
    mac: &str,
    address: Ipv4Addr,
) -> Option<&'a NetworkLease> {
    leases
        .iter()
        .find(|lease| lease.address == address && !lease.mac.eq_ignore_ascii_case(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(mac: &str, address: Ipv4Addr) -> NetworkLease {
        NetworkLease {
            mac: mac.to_string(),
            address,
            expires_unix: 1_800_003_600,
        }
    }

    #[test]
    fn only_another_macs_lease_of_the_address_stands_in_the_way() {
        let address = Ipv4Addr::new(192, 168, 122, 231);
        let ours = "52:54:00:aa:bb:cc";
        let leases = vec![
            lease("52:54:00:00:00:01", Ipv4Addr::new(192, 168, 122, 17)),
            lease("52:54:00:AA:BB:CC", address),
        ];
        // Our own lease (in libvirt's other case), or another machine's of another address.
        assert_eq!(leased_to_another(&leases, ours, address), None);
        let mut taken = leases.clone();
        taken.push(lease("52:54:00:00:00:02", address));
        let found = leased_to_another(&taken, ours, address).unwrap();
        assert_eq!(found.mac, "52:54:00:00:00:02");
        assert_eq!(leased_to_another(&[], ours, address), None);
        let refusal = AddressLeased::new("default", found);
        assert_eq!(
            refusal.to_string(),
            "192.168.122.231 is leased to another machine (52:54:00:00:00:02) by network \
             default's DHCP until 2027-01-15 09:00:00 UTC (unless that machine renews it): it \
             cannot be this guest's"
        );
    }
}
