//! What a guest's interface gives the filter it references: the guest's own addresses, and how
//! libvirt may come by one it is not given (never from the guest's own packets). Pure.

use super::{tenant_filter_name, GUEST_FILTER, IPV6_PARAMETER};
use crate::model::names::TenantName;
use crate::render::domain_xml::MacAddress;
use std::net::{Ipv4Addr, Ipv6Addr};

/// How libvirt comes by a guest's IPv4 address when the interface names none
/// (`CTRL_IP_LEARNING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpLearning {
    /// Never: the addresses given are the guest's, and no other.
    None,
    /// From a DHCP server's answer to the guest, never from the guest's own packets (which
    /// would let a guest claim any address, the gateway's included, by sending from it first).
    Dhcp,
}

impl IpLearning {
    fn as_str(self) -> &'static str {
        match self {
            IpLearning::None => "none",
            IpLearning::Dhcp => "dhcp",
        }
    }
}

/// Which filter a guest's interface references, and the parameters it gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceFilter {
    pub name: String,
    /// The guest's IPv4 addresses, the filter's `IP`: its static ones, or its pinned lease.
    pub ipv4: Vec<Ipv4Addr>,
    /// The IPv6 addresses the guest may send from (link-local first); only a filter that
    /// includes [`IPV6_FILTER`] is given them.
    pub ipv6: Vec<Ipv6Addr>,
}

impl InterfaceFilter {
    /// The same filter for a guest whose lease is pinned to `address`: that address, and no
    /// other, is the guest's.
    pub fn with_pinned_lease(&self, address: Ipv4Addr) -> InterfaceFilter {
        InterfaceFilter {
            ipv4: vec![address],
            ..self.clone()
        }
    }

    /// How libvirt is to come by the guest's address: never while one is known.
    pub fn learning(&self) -> IpLearning {
        if self.ipv4.is_empty() {
            IpLearning::Dhcp
        } else {
            IpLearning::None
        }
    }

    /// The `<parameter>`s of the interface's `<filterref>`, in order: name and value.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        let mut parameters: Vec<(&'static str, String)> = self
            .ipv4
            .iter()
            .map(|address| ("IP", address.to_string()))
            .collect();
        parameters.push(("CTRL_IP_LEARNING", self.learning().as_str().to_string()));
        parameters.extend(
            self.ipv6
                .iter()
                .map(|address| (IPV6_PARAMETER, address.to_string())),
        );
        parameters
    }
}

/// The IPv6 link-local address a guest derives from `mac` (modified EUI-64, RFC 4291 appendix
/// A): what the kernel, and systemd-networkd by default, give an interface.
pub fn link_local_address(mac: MacAddress) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac.0;
    let group = |high: u8, low: u8| (u16::from(high) << 8) | u16::from(low);
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        group(a ^ 0x02, b),
        group(c, 0xff),
        group(0xfe, d),
        group(e, f),
    )
}

/// The filter a guest's interface references: a tenant's, or for a guest without one
/// [`GUEST_FILTER`], which is given the guest's link-local address and `ipv6` as its own.
pub fn interface_filter(
    tenant: Option<&TenantName>,
    mac: MacAddress,
    ipv4: &[Ipv4Addr],
    ipv6: &[Ipv6Addr],
) -> InterfaceFilter {
    match tenant {
        Some(tenant) => InterfaceFilter {
            name: tenant_filter_name(tenant.as_str()),
            ipv4: ipv4.to_vec(),
            ipv6: Vec::new(),
        },
        None => {
            let mut own = vec![link_local_address(mac)];
            for address in ipv6 {
                if !own.contains(address) {
                    own.push(*address);
                }
            }
            InterfaceFilter {
                name: GUEST_FILTER.to_string(),
                ipv4: ipv4.to_vec(),
                ipv6: own,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddress = MacAddress([0x52, 0x54, 0x00, 0x59, 0xe0, 0xe9]);

    #[test]
    fn the_link_local_address_is_the_modified_eui64_of_the_mac() {
        assert_eq!(
            link_local_address(MAC),
            "fe80::5054:ff:fe59:e0e9".parse::<Ipv6Addr>().unwrap()
        );
        // The universal/local bit flips either way.
        assert_eq!(
            link_local_address(MacAddress([0x00, 0x16, 0x3e, 0x00, 0x00, 0x01])),
            "fe80::216:3eff:fe00:1".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn an_interface_names_its_addresses_and_never_lets_libvirt_learn_from_the_guest() {
        let declared: Ipv6Addr = "2001:db8::10".parse().unwrap();
        let leased = interface_filter(None, MAC, &[], &[]);
        assert_eq!(leased.name, "trog-guest");
        assert_eq!(
            leased.parameters(),
            [
                ("CTRL_IP_LEARNING", "dhcp".to_string()),
                ("TROG_IPV6", "fe80::5054:ff:fe59:e0e9".to_string())
            ],
            "a lease not pinned is learnt from the DHCP server's answer, never from the guest"
        );
        let pinned = leased.with_pinned_lease("192.168.122.57".parse().unwrap());
        assert_eq!(
            pinned.parameters(),
            [
                ("IP", "192.168.122.57".to_string()),
                ("CTRL_IP_LEARNING", "none".to_string()),
                ("TROG_IPV6", "fe80::5054:ff:fe59:e0e9".to_string())
            ]
        );
        let static_guest = interface_filter(
            None,
            MAC,
            &["192.0.2.10".parse().unwrap()],
            &[declared, link_local_address(MAC)],
        );
        assert_eq!(
            static_guest.parameters(),
            [
                ("IP", "192.0.2.10".to_string()),
                ("CTRL_IP_LEARNING", "none".to_string()),
                ("TROG_IPV6", "fe80::5054:ff:fe59:e0e9".to_string()),
                ("TROG_IPV6", "2001:db8::10".to_string())
            ]
        );
        let tenant = TenantName::parse("shop").unwrap();
        let tenants = interface_filter(
            Some(&tenant),
            MAC,
            &["192.0.2.11".parse().unwrap()],
            &[declared],
        );
        assert_eq!(tenants.name, "trog-tenant-shop");
        assert_eq!(
            tenants.parameters(),
            [
                ("IP", "192.0.2.11".to_string()),
                ("CTRL_IP_LEARNING", "none".to_string())
            ],
            "a tenant's guest has no IPv6"
        );
    }
}
