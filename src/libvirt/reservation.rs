//! DHCP host reservations (MAC → IP) in a libvirt network, through libvirt's network update API,
//! live and persistent: dnsmasq then never leases a guest's address to another MAC, and a guest
//! that asks for a lease is given its own address.

use crate::diagnose::Failure;
use crate::hypervisor::provisioning::{held_by_a_running_domain, AddressLeased, RunningDomain};
use crate::libvirt::error::LibvirtError;
use crate::libvirt::lease_pin::interface_macs;
use crate::libvirt::network_leases::network_leases;
use std::net::Ipv4Addr;
use virt::connect::Connect;
use virt::network::Network;
use virt::sys;

/// One `<host>` of a network's `<dhcp>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpHost {
    pub mac: Option<String>,
    pub name: Option<String>,
    pub ip: Option<String>,
}

impl DhcpHost {
    /// The element as the update API takes it (matching the entry to change or delete).
    pub fn to_xml(&self) -> String {
        let mut xml = String::from("<host");
        for (attribute, value) in [("mac", &self.mac), ("name", &self.name), ("ip", &self.ip)] {
            if let Some(value) = value {
                xml.push_str(&format!(" {attribute}='{value}'"));
            }
        }
        xml.push_str("/>");
        xml
    }
}

/// What a network's definition says about one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationChange {
    /// The network hands out no IPv4 leases: nothing to reserve.
    NoDhcp,
    /// The reservation is there already.
    Present,
    /// Remove these entries (the MAC or the address reserved otherwise), then add.
    Add { replacing: Vec<DhcpHost> },
}

/// A network's IPv4 DHCP section: the network's own address, its ranges and its host entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Dhcp {
    pub own_address: Option<Ipv4Addr>,
    /// Each `<range>`, first and last address.
    pub ranges: Vec<(Ipv4Addr, Ipv4Addr)>,
    pub hosts: Vec<DhcpHost>,
}

/// The IPv4 DHCP section of a network's XML, or `None` when it has no IPv4 `<dhcp>`.
pub fn ipv4_dhcp(network_xml: &str) -> Option<Ipv4Dhcp> {
    let document = roxmltree::Document::parse(network_xml).ok()?;
    let (ip, dhcp) = document
        .root_element()
        .children()
        .filter(|node| node.has_tag_name("ip"))
        .filter(|ip| ip.attribute("family").is_none_or(|family| family == "ipv4"))
        .find_map(|ip| Some((ip, ip.children().find(|node| node.has_tag_name("dhcp"))?)))?;
    let children = |tag: &'static str| dhcp.children().filter(move |node| node.has_tag_name(tag));
    Some(Ipv4Dhcp {
        own_address: ip.attribute("address").and_then(|text| text.parse().ok()),
        ranges: children("range")
            .filter_map(|range| {
                let start: Ipv4Addr = range.attribute("start")?.parse().ok()?;
                let end: Ipv4Addr = range.attribute("end")?.parse().ok()?;
                (start <= end).then_some((start, end))
            })
            .collect(),
        hosts: children("host")
            .map(|host| DhcpHost {
                mac: host.attribute("mac").map(str::to_string),
                name: host.attribute("name").map(str::to_string),
                ip: host.attribute("ip").map(str::to_string),
            })
            .collect(),
    })
}

/// The IPv4 DHCP host entries of a network's XML, or `None` when it has no IPv4 `<dhcp>`.
pub fn dhcp_hosts(network_xml: &str) -> Option<Vec<DhcpHost>> {
    ipv4_dhcp(network_xml).map(|dhcp| dhcp.hosts)
}

/// What reserving `ip` for `mac` changes in a network whose XML is `network_xml`.
pub fn reservation_change(network_xml: &str, mac: &str, ip: Ipv4Addr) -> ReservationChange {
    let Some(hosts) = dhcp_hosts(network_xml) else {
        return ReservationChange::NoDhcp;
    };
    let ip = ip.to_string();
    let same_mac = |host: &DhcpHost| {
        host.mac
            .as_deref()
            .is_some_and(|other| other.eq_ignore_ascii_case(mac))
    };
    if hosts
        .iter()
        .any(|host| same_mac(host) && host.ip.as_deref() == Some(ip.as_str()))
    {
        return ReservationChange::Present;
    }
    ReservationChange::Add {
        replacing: hosts
            .into_iter()
            .filter(|host| same_mac(host) || host.ip.as_deref() == Some(ip.as_str()))
            .collect(),
    }
}

pub(crate) fn network(
    connection: &Connect,
    name: &str,
    uri: &str,
) -> Result<Network, LibvirtError> {
    connection
        .lookup_network_by_name(name)
        .map_err(|error| LibvirtError::query(uri, "look up the network", error))
}

/// The network's live definition when it runs (where dnsmasq reads reservations), else its
/// persistent one; and the flags that change both.
pub(crate) fn definition(
    network: &Network,
    uri: &str,
) -> Result<(String, sys::virNetworkUpdateFlags), LibvirtError> {
    let xml = network
        .xml_desc(0)
        .map_err(|error| LibvirtError::query(uri, "read the network's definition", error))?;
    let active = network
        .is_active()
        .map_err(|error| LibvirtError::query(uri, "ask whether the network runs", error))?;
    let flags = if active {
        sys::VIR_NETWORK_UPDATE_AFFECT_LIVE | sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG
    } else {
        sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG
    };
    Ok((xml, flags))
}

pub(crate) fn update(
    network: &Network,
    command: sys::virNetworkUpdateCommand,
    host: &DhcpHost,
    flags: sys::virNetworkUpdateFlags,
    uri: &str,
) -> Result<(), LibvirtError> {
    network
        .update(
            command,
            sys::VIR_NETWORK_SECTION_IP_DHCP_HOST,
            -1,
            &host.to_xml(),
            flags,
        )
        .map_err(|error| LibvirtError::query(uri, "update the network's DHCP reservations", error))
}

/// Reserves `ip` for `mac` in the libvirt network `network_name`, replacing any other
/// reservation of that MAC or address. Returns whether anything changed. Refuses, changing
/// nothing, an address the network's DHCP has leased to a running domain's other MAC: a
/// reservation does not end a lease, and the two machines would share the address until it did.
pub fn reserve_address(
    connection: &Connect,
    uri: &str,
    network_name: &str,
    mac: &str,
    ip: Ipv4Addr,
) -> Result<bool, Failure> {
    let network = network(connection, network_name, uri)?;
    let (xml, flags) = definition(&network, uri)?;
    let ReservationChange::Add { replacing } = reservation_change(&xml, mac, ip) else {
        return Ok(false);
    };
    if let Some(refusal) = leased_elsewhere(connection, uri, &network, network_name, mac, ip)? {
        return Err(refusal.into());
    }
    for old in &replacing {
        update(
            &network,
            sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
            old,
            flags,
            uri,
        )?;
    }
    let host = DhcpHost {
        mac: Some(mac.to_string()),
        name: None,
        ip: Some(ip.to_string()),
    };
    update(
        &network,
        sys::VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
        &host,
        flags,
        uri,
    )?;
    Ok(true)
}

/// What [`reserve_address`] refuses, asked without changing anything: the lease of `ip` a
/// running domain holds under another MAC than `mac`, unless `ip` is reserved for `mac` already.
pub fn address_leased_elsewhere(
    connection: &Connect,
    uri: &str,
    network_name: &str,
    mac: &str,
    ip: Ipv4Addr,
) -> Result<Option<AddressLeased>, LibvirtError> {
    let network = network(connection, network_name, uri)?;
    let (xml, _) = definition(&network, uri)?;
    match reservation_change(&xml, mac, ip) {
        ReservationChange::Add { .. } => {
            leased_elsewhere(connection, uri, &network, network_name, mac, ip)
        }
        _ => Ok(None),
    }
}

/// The lease of `ip` in `network` that a running domain holds under another MAC than `mac`. The
/// running domains are listed only when another MAC holds a lease of it.
fn leased_elsewhere(
    connection: &Connect,
    uri: &str,
    network: &Network,
    network_name: &str,
    mac: &str,
    ip: Ipv4Addr,
) -> Result<Option<AddressLeased>, LibvirtError> {
    let leases = network_leases(network, uri)?;
    let leased_to_another = leases
        .iter()
        .any(|lease| lease.address == ip && !lease.mac.eq_ignore_ascii_case(mac));
    if !leased_to_another {
        return Ok(None);
    }
    let running = running_domains(connection, uri)?;
    Ok(held_by_a_running_domain(&leases, mac, ip, &running)
        .map(|(lease, holder)| AddressLeased::new(network_name, lease, holder)))
}

/// Every domain running on the hypervisor, with the MACs of all its interfaces (whatever they
/// are plugged into: a domain bridged onto the network's bridge leases from it too). A domain
/// that ends while it is read is passed over.
fn running_domains(connection: &Connect, uri: &str) -> Result<Vec<RunningDomain>, LibvirtError> {
    let domains = connection
        .list_all_domains(sys::VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        .map_err(|error| LibvirtError::query(uri, "list the running domains", error))?;
    Ok(domains
        .iter()
        .filter_map(|domain| {
            Some(RunningDomain {
                name: domain.name().ok()?,
                macs: interface_macs(&domain.xml_desc(0).ok()?),
            })
        })
        .collect())
}

/// Removes every reservation of `ip` from the network. Returns whether one was there.
pub fn release_reservation(
    connection: &Connect,
    uri: &str,
    network_name: &str,
    ip: Ipv4Addr,
) -> Result<bool, LibvirtError> {
    let network = network(connection, network_name, uri)?;
    let (xml, flags) = definition(&network, uri)?;
    let ip = ip.to_string();
    let held: Vec<DhcpHost> = dhcp_hosts(&xml)
        .unwrap_or_default()
        .into_iter()
        .filter(|host| host.ip.as_deref() == Some(ip.as_str()))
        .collect();
    for host in &held {
        update(
            &network,
            sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
            host,
            flags,
            uri,
        )?;
    }
    Ok(!held.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: &str = "<network><name>default</name><forward mode='nat'/>\
        <ip address='192.168.122.1' netmask='255.255.255.0'><dhcp>\
        <range start='192.168.122.2' end='192.168.122.254'/>\
        <host mac='52:54:00:aa:bb:cc' ip='192.168.122.100'/>\
        <host mac='52:54:00:11:22:33' name='old' ip='192.168.122.101'/>\
        </dhcp></ip></network>";

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn a_reservation_already_there_changes_nothing() {
        assert_eq!(
            reservation_change(DEFAULT, "52:54:00:AA:BB:CC", ip("192.168.122.100")),
            ReservationChange::Present
        );
    }

    #[test]
    fn every_interfaces_mac_is_read_whatever_it_is_plugged_into() {
        let xml = "<domain type='qemu'><name>g</name><devices>\
            <interface type='network'><mac address='52:54:00:01:02:03'/><source network='default'/></interface>\
            <interface type='bridge'><mac address='52:54:00:01:02:04'/><source bridge='virbr0'/></interface>\
            <interface type='ethernet'><mac address='52:54:00:01:02:05'/></interface>\
            <interface type='user'/>\
            <disk type='file'><mac address='not-an-interface'/></disk>\
            </devices></domain>";
        assert_eq!(
            interface_macs(xml),
            [
                "52:54:00:01:02:03",
                "52:54:00:01:02:04",
                "52:54:00:01:02:05"
            ]
        );
        assert!(interface_macs("<domain").is_empty());
    }

    #[test]
    fn the_macs_and_the_addresses_other_reservations_are_replaced() {
        let ReservationChange::Add { replacing } =
            reservation_change(DEFAULT, "52:54:00:aa:bb:cc", ip("192.168.122.101"))
        else {
            panic!("expected an addition");
        };
        let replaced: Vec<String> = replacing.iter().map(DhcpHost::to_xml).collect();
        assert_eq!(
            replaced,
            [
                "<host mac='52:54:00:aa:bb:cc' ip='192.168.122.100'/>",
                "<host mac='52:54:00:11:22:33' name='old' ip='192.168.122.101'/>"
            ]
        );
        assert_eq!(
            reservation_change(DEFAULT, "52:54:00:dd:ee:ff", ip("192.168.122.150")),
            ReservationChange::Add { replacing: vec![] }
        );
    }

    #[test]
    fn a_network_without_dhcp_takes_no_reservation() {
        let isolated =
            "<network><name>lab</name><ip address='10.0.0.1' netmask='255.0.0.0'/></network>";
        assert_eq!(
            reservation_change(isolated, "52:54:00:aa:bb:cc", ip("10.0.0.5")),
            ReservationChange::NoDhcp
        );
    }
}
