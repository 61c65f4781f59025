//! A guest's addresses as libvirt's own DHCP server leased them, for the NAT network trog
//! builds on locally.

use virt::connect::Connect;

/// Every IPv4 address leased to `mac` for the domain `name`. A reused MAC can leave an old lease
/// behind, so callers try each address rather than trusting the first.
pub fn leased_addresses(connection: &Connect, name: &str, mac: &str) -> Vec<String> {
    let Ok(domain) = connection.lookup_domain_by_name(name) else {
        return Vec::new();
    };
    let Ok(interfaces) =
        domain.interface_addresses(virt::sys::VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0)
    else {
        return Vec::new();
    };
    let mut addresses: Vec<String> = interfaces
        .into_iter()
        .filter(|interface| {
            interface
                .hwaddr
                .as_deref()
                .is_some_and(|hwaddr| hwaddr.eq_ignore_ascii_case(mac))
        })
        .flat_map(|interface| interface.addrs)
        .filter(|address| address.typed == virt::sys::VIR_IP_ADDR_TYPE_IPV4 as i64)
        .map(|address| address.addr)
        .collect();
    // The newest lease is listed last by libvirt's lease file order; try it first.
    addresses.reverse();
    addresses.dedup();
    addresses
}
