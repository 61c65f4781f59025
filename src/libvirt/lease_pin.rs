//! Pinned leases. A guest that takes a DHCP lease from a libvirt network is, before it first
//! boots, given a reservation (MAC → address) of the address it is to be leased: dnsmasq then
//! answers its first request at once, where an address it picks itself is first pinged and
//! waited for (about 3 s of every new guest's first boot). Like dnsmasq, trog spreads guests over
//! the range by a hash of the MAC (the same MAC is offered the same address), away from every
//! reservation, every other MAC's lease and the ranges trog hands static addresses from. The
//! pin goes with the guest at `destroy`.

pub use crate::hypervisor::provisioning::{KeptApart, PinnedLease};
use crate::libvirt::error::LibvirtError;
use crate::libvirt::network_leases::{network_leases, NetworkLease};
use crate::libvirt::reservation::{
    definition, dhcp_hosts, ipv4_dhcp, network, update, DhcpHost, Ipv4Dhcp,
};
use std::net::Ipv4Addr;
use virt::connect::Connect;
use virt::sys;

/// What the network's definition and leases say about pinning a MAC's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinChoice {
    /// The network hands out no IPv4 leases from a range: nothing to pin.
    NoDhcp,
    /// The MAC has a reservation already: its address.
    Pinned(Ipv4Addr),
    /// Reserve this address for the MAC.
    Pin(Ipv4Addr),
    /// Every address of the range is taken: the guest takes whatever dnsmasq gives it.
    NoneFree,
}

/// How much `mac` prefers `address`: FNV-1a of the MAC's text (lower case) and the address. The
/// free address it prefers most is pinned, so one MAC is offered the same address every time,
/// and two new guests pinning at once rarely want the same one (each MAC has an order of its
/// own over the whole range, where a search from a hashed start would pile them up behind
/// whatever is taken).
fn preference(mac: &str, address: Ipv4Addr) -> u64 {
    mac.to_ascii_lowercase()
        .bytes()
        .chain(address.octets())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Which address to pin for `mac` on the network of `network_xml`, given its current leases.
pub fn pin_choice(
    network_xml: &str,
    mac: &str,
    leases: &[NetworkLease],
    kept_apart: &KeptApart,
) -> PinChoice {
    let Some(Ipv4Dhcp {
        own_address,
        ranges,
        hosts,
    }) = ipv4_dhcp(network_xml)
    else {
        return PinChoice::NoDhcp;
    };
    if ranges.is_empty() {
        return PinChoice::NoDhcp;
    }
    let same_mac = |other: &str| other.eq_ignore_ascii_case(mac);
    let address_of = |host: &DhcpHost| host.ip.as_deref()?.parse::<Ipv4Addr>().ok();
    if let Some(address) = hosts
        .iter()
        .filter(|host| host.mac.as_deref().is_some_and(same_mac))
        .find_map(address_of)
    {
        return PinChoice::Pinned(address);
    }
    let reserved: Vec<Ipv4Addr> = hosts.iter().filter_map(address_of).collect();
    let taken = |address: Ipv4Addr| {
        own_address == Some(address)
            || reserved.contains(&address)
            || leases
                .iter()
                .any(|lease| lease.address == address && !same_mac(&lease.mac))
            || kept_apart.held.contains(&address)
            || kept_apart
                .ranges
                .iter()
                .any(|range| range.contains(address))
    };
    let in_ranges = |address: Ipv4Addr| {
        ranges
            .iter()
            .any(|(start, end)| (*start..=*end).contains(&address))
    };
    // A MAC that holds a lease already keeps its address.
    if let Some(lease) = leases
        .iter()
        .filter(|lease| same_mac(&lease.mac))
        .find(|lease| in_ranges(lease.address) && !taken(lease.address))
    {
        return PinChoice::Pin(lease.address);
    }
    ranges
        .iter()
        .flat_map(|(start, end)| u32::from(*start)..=u32::from(*end))
        .map(Ipv4Addr::from)
        .filter(|address| !taken(*address))
        .max_by_key(|address| preference(mac, *address))
        .map_or(PinChoice::NoneFree, PinChoice::Pin)
}

/// Another run may reserve the chosen address between reading the network and writing it
/// (libvirt refuses a second reservation of an address): read again and choose again, this
/// many times.
const PIN_ATTEMPTS: usize = 8;

/// Pins the lease of `mac` in the libvirt network `network_name` (live and persistent), unless
/// the network hands out no leases from a range or has no free address. Returns the address.
pub fn pin_lease(
    connection: &Connect,
    uri: &str,
    network_name: &str,
    mac: &str,
    kept_apart: &KeptApart,
) -> Result<Option<PinnedLease>, LibvirtError> {
    let network = network(connection, network_name, uri)?;
    let mut attempt = 1;
    loop {
        let (xml, flags) = definition(&network, uri)?;
        let active = flags & sys::VIR_NETWORK_UPDATE_AFFECT_LIVE != 0;
        let leases = if active {
            network_leases(&network, uri)?
        } else {
            Vec::new()
        };
        let address = match pin_choice(&xml, mac, &leases, kept_apart) {
            PinChoice::NoDhcp | PinChoice::NoneFree => return Ok(None),
            PinChoice::Pinned(address) => {
                return Ok(Some(PinnedLease {
                    address,
                    made: false,
                }))
            }
            PinChoice::Pin(address) => address,
        };
        let host = DhcpHost {
            mac: Some(mac.to_string()),
            name: None,
            ip: Some(address.to_string()),
        };
        match update(
            &network,
            sys::VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
            &host,
            flags,
            uri,
        ) {
            Ok(()) => {
                return Ok(Some(PinnedLease {
                    address,
                    made: true,
                }))
            }
            Err(_) if attempt < PIN_ATTEMPTS => attempt += 1,
            Err(error) => return Err(error),
        }
    }
}

/// Removes the reservations of `mac` in `network_name` except those of `keep` (the guest's
/// static addresses, which `destroy` keeps). Returns the addresses released.
pub fn release_pins(
    connection: &Connect,
    uri: &str,
    network_name: &str,
    mac: &str,
    keep: &[Ipv4Addr],
) -> Result<Vec<Ipv4Addr>, LibvirtError> {
    let network = network(connection, network_name, uri)?;
    let (xml, flags) = definition(&network, uri)?;
    let mut released = Vec::new();
    for host in dhcp_hosts(&xml).unwrap_or_default() {
        let ours = host
            .mac
            .as_deref()
            .is_some_and(|other| other.eq_ignore_ascii_case(mac));
        let address = host.ip.as_deref().and_then(|text| text.parse().ok());
        let Some(address) = address.filter(|address| ours && !keep.contains(address)) else {
            continue;
        };
        update(
            &network,
            sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
            &host,
            flags,
            uri,
        )?;
        released.push(address);
    }
    Ok(released)
}

/// The (network, MAC) of each of the domain `name`'s interfaces on a libvirt network; none when
/// it is not defined.
pub fn domain_network_interfaces(connection: &Connect, name: &str) -> Vec<(String, String)> {
    connection
        .lookup_domain_by_name(name)
        .and_then(|domain| domain.xml_desc(0))
        .map(|xml| network_interfaces(&xml))
        .unwrap_or_default()
}

/// One `<interface>` of a domain's XML: what it is plugged into and its MAC, as written.
struct Interface {
    /// `network`, `bridge`, `ethernet`, …
    kind: Option<String>,
    /// The libvirt network of a `network` interface.
    network: Option<String>,
    mac: Option<String>,
}

/// Every interface of a domain, from its XML; none when the XML does not parse.
fn interfaces(domain_xml: &str) -> Vec<Interface> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("interface"))
        .map(|interface| {
            let child = |tag: &str, attribute: &str| {
                interface
                    .children()
                    .find(|node| node.has_tag_name(tag))?
                    .attribute(attribute)
                    .map(str::to_string)
            };
            Interface {
                kind: interface.attribute("type").map(str::to_string),
                network: child("source", "network"),
                mac: child("mac", "address"),
            }
        })
        .collect()
}

/// The (network, MAC) of each of a domain's interfaces on a libvirt network, from its XML.
pub fn network_interfaces(domain_xml: &str) -> Vec<(String, String)> {
    interfaces(domain_xml)
        .into_iter()
        .filter(|interface| interface.kind.as_deref() == Some("network"))
        .filter_map(|interface| Some((interface.network?, interface.mac?)))
        .collect()
}

/// The MAC of each of a domain's interfaces, whatever it is plugged into, from its XML.
pub fn interface_macs(domain_xml: &str) -> Vec<String> {
    interfaces(domain_xml)
        .into_iter()
        .filter_map(|interface| interface.mac)
        .collect()
}

#[cfg(test)]
#[path = "lease_pin_tests.rs"]
mod tests;
