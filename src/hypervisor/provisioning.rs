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

/// A domain running on a hypervisor, with the MAC of each of its interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningDomain {
    pub name: String,
    pub macs: Vec<String>,
}

/// A static address that a running domain holds now through the network's DHCP. Reserving it
/// for the guest would not take the lease back: two machines would answer at one address until
/// it ended, and the guest's finish could reach the other one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{address} is leased by network {network}'s DHCP to {holder_domain} ({holder}), which is \
     running, {term}: it cannot be this guest's"
)]
pub struct AddressLeased {
    pub network: String,
    pub address: Ipv4Addr,
    /// The MAC address of the interface holding the lease.
    pub holder: String,
    /// The running domain whose interface that is.
    pub holder_domain: String,
    /// How long the lease lasts: `until YYYY-MM-DD HH:MM:SS UTC unless that machine renews it`,
    /// or `with no end`.
    pub term: String,
}

impl AddressLeased {
    pub fn new(network: &str, lease: &NetworkLease, holder_domain: &str) -> AddressLeased {
        // libvirt reports a lease that never ends with an expiry time of 0.
        let term = if lease.expires_unix > 0 {
            format!(
                "until {} unless it renews it",
                crate::snapshot::utc(lease.expires_unix).format("%Y-%m-%d %H:%M:%S UTC")
            )
        } else {
            "with no end".to_string()
        };
        AddressLeased {
            network: network.to_string(),
            address: lease.address,
            holder: lease.mac.clone(),
            holder_domain: holder_domain.to_string(),
            term,
        }
    }
}

impl crate::diagnose::Diagnose for AddressLeased {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Conflict
    }

    fn hint(&self) -> Option<String> {
        Some(format!(
            "give this guest another address, or shut {} off first (a lease whose holder is not \
             running is no obstacle); keep the addresses trog gives guests (`address_range`, a \
             guest's `ips`) outside network {}'s DHCP pool (its <range> in `virsh net-dumpxml \
             {}`); nothing was changed",
            self.holder_domain, self.network, self.network
        ))
    }
}

/// The lease among `leases` of `address` held by an interface of a domain among `running` other
/// than `mac` (MACs compared without regard to case, as libvirt writes them either way), with
/// that domain's name. A lease whose holder is not running is no obstacle: it is most often
/// a destroyed guest's, left until it runs out (every guest, a static one too, takes a lease at
/// its first boot), and nobody answers at its address.
pub fn held_by_a_running_domain<'a>(
    leases: &'a [NetworkLease],
    mac: &str,
    address: Ipv4Addr,
    running: &'a [RunningDomain],
) -> Option<(&'a NetworkLease, &'a str)> {
    leases
        .iter()
        .filter(|lease| lease.address == address && !lease.mac.eq_ignore_ascii_case(mac))
        .find_map(|lease| {
            running
                .iter()
                .find(|domain| {
                    domain
                        .macs
                        .iter()
                        .any(|held| held.eq_ignore_ascii_case(&lease.mac))
                })
                .map(|domain| (lease, domain.name.as_str()))
        })
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

    fn running(name: &str, macs: &[&str]) -> RunningDomain {
        RunningDomain {
            name: name.to_string(),
            macs: macs.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn only_a_running_domains_lease_of_the_address_stands_in_the_way() {
        let address = Ipv4Addr::new(192, 168, 122, 231);
        let ours = "52:54:00:aa:bb:cc";
        let other = "52:54:00:00:00:02";
        let domains = vec![
            running("web.example.test", &["52:54:00:aa:bb:cc"]),
            running(
                "db.example.test",
                &["52:54:00:00:00:09", "52:54:00:00:00:02"],
            ),
        ];
        // Our own lease (in libvirt's other case), or a running domain's of another address.
        let leases = vec![
            lease("52:54:00:00:00:02", Ipv4Addr::new(192, 168, 122, 17)),
            lease("52:54:00:AA:BB:CC", address),
        ];
        assert_eq!(
            held_by_a_running_domain(&leases, ours, address, &domains),
            None
        );
        // Another MAC's lease of the address, held by no running domain: a destroyed guest's.
        let mut taken = leases.clone();
        taken.push(lease("52:54:00:00:00:77", address));
        assert_eq!(
            held_by_a_running_domain(&taken, ours, address, &domains),
            None
        );
        // The same, held by a running domain's second interface (MAC in upper case).
        taken.push(lease(&other.to_uppercase(), address));
        let (found, holder) = held_by_a_running_domain(&taken, ours, address, &domains).unwrap();
        assert_eq!(
            (found.mac.as_str(), holder),
            (
                "52:54:00:00:00:02".to_uppercase().as_str(),
                "db.example.test"
            )
        );
        assert_eq!(held_by_a_running_domain(&taken, ours, address, &[]), None);
        assert_eq!(held_by_a_running_domain(&[], ours, address, &domains), None);

        let refusal = AddressLeased::new("default", &lease(other, address), holder);
        assert_eq!(
            refusal.to_string(),
            "192.168.122.231 is leased by network default's DHCP to db.example.test \
             (52:54:00:00:00:02), which is running, until 2027-01-15 09:00:00 UTC unless it \
             renews it: it cannot be this guest's"
        );
        let endless = NetworkLease {
            expires_unix: 0,
            ..lease(other, address)
        };
        assert!(AddressLeased::new("default", &endless, holder)
            .to_string()
            .contains("which is running, with no end: it cannot be this guest's"));
    }
}
