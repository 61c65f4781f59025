//! trog's libvirt network filters (nwfilter), as XML. Pure.
//!
//! Every interface trog defines references one of them, with the guest's addresses as
//! parameters (`IP`, `TROG_IPV6`) and `CTRL_IP_LEARNING` set so that libvirt never takes an
//! address from the guest's own packets:
//! - [`GUEST_FILTER`] for a guest without a tenant: [`ISOLATED_FILTER`] and [`IPV6_FILTER`].
//! - `trog-tenant-NAME` for a guest of tenant NAME: [`ISOLATED_FILTER`], and no IPv4 to or from
//!   any address held in ips.db by a guest of another tenant. No IPv6: ips.db knows no tenant's
//!   IPv6 addresses, so nothing could keep two tenants apart over it.
//! - [`ISOLATED_FILTER`], which both build on: libvirt's own `clean-traffic` (no frame with a MAC
//!   or IPv4 source that is not the guest's, no ARP answer for another address, no other
//!   layer-2 protocol, IPv6 included) and no DHCP answers from the guest (a guest has no
//!   business handing out leases on the hypervisor's network). Guests defined before
//!   [`GUEST_FILTER`] existed reference it directly, until their domain is defined again.
//! - [`IPV6_FILTER`]: IPv6 from the guest only from its own addresses (`TROG_IPV6`: its
//!   link-local address, derived from its MAC, and the IPv6 addresses of its `ips`), or from
//!   the unspecified address for neighbour discovery's probes; never a router advertisement,
//!   a redirect or a DHCPv6 answer. libvirt ships no IPv6 anti-spoofing filter.
//!
//! Only drop rules are added to what `clean-traffic` does for IPv4: a drop can never let past a
//! frame the anti-spoofing rules would stop. The tenant rules come before libvirt's `ipv4`
//! chain, whose `allow-incoming-ipv4` accepts (and so ends the checks for) incoming IPv4.
//!
//! trog's filters are told apart from anyone else's by their UUID, derived from the name: a
//! filter of that name with another UUID is not trog's and is never changed.

use crate::model::names::TenantName;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

mod interface;
pub use interface::{interface_filter, link_local_address, InterfaceFilter, IpLearning};

/// IPv4 without spoofing and without DHCP answers: what every guest's filter builds on.
pub const ISOLATED_FILTER: &str = "trog-isolated";

/// IPv6 without spoofing, for guests without a tenant.
pub const IPV6_FILTER: &str = "trog-ipv6";

/// The filter of guests without a tenant: [`ISOLATED_FILTER`] and [`IPV6_FILTER`].
pub const GUEST_FILTER: &str = "trog-guest";

/// The prefix of every tenant's filter name.
pub const TENANT_FILTER_PREFIX: &str = "trog-tenant-";

/// The interface parameter [`IPV6_FILTER`] reads the guest's IPv6 addresses from. Not `IPV6`,
/// which libvirt reserves.
pub const IPV6_PARAMETER: &str = "TROG_IPV6";

/// The priority of trog's drop rules in the root chain: after libvirt's MAC chain (-800), before
/// its `ipv4` chain (-700), which accepts incoming IPv4.
const DROP_PRIORITY: i32 = -720;

/// libvirt's filter trog's filters build on.
const LIBVIRT_CLEAN_TRAFFIC: &str = "clean-traffic";

/// A filter as libvirt is given it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkFilter {
    pub name: String,
    pub uuid: uuid::Uuid,
    pub xml: String,
}

/// trog's UUID for the filter `name`: what tells trog's filters from others of the same name.
pub fn filter_uuid(name: &str) -> uuid::Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("trog network filter {name}"));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

pub fn tenant_filter_name(tenant: &str) -> String {
    format!("{TENANT_FILTER_PREFIX}{tenant}")
}

/// The tenant a filter name is the filter of, when it is a tenant's.
pub fn tenant_of_filter(name: &str) -> Option<&str> {
    name.strip_prefix(TENANT_FILTER_PREFIX)
        .filter(|tenant| TenantName::parse(tenant).is_ok())
}

fn filter_xml(name: &str, chain: &str, body: &str) -> NetworkFilter {
    let uuid = filter_uuid(name);
    NetworkFilter {
        name: name.to_string(),
        uuid,
        xml: format!(
            "<filter name='{name}' chain='{chain}'>\n  <uuid>{uuid}</uuid>\n{body}</filter>\n"
        ),
    }
}

/// [`ISOLATED_FILTER`].
pub fn isolated_filter() -> NetworkFilter {
    filter_xml(
        ISOLATED_FILTER,
        "root",
        &format!(
            "  <filterref filter='{LIBVIRT_CLEAN_TRAFFIC}'/>\n  \
             <rule action='drop' direction='out' priority='{DROP_PRIORITY}'>\n    \
             <ip protocol='udp' srcportstart='67' srcportend='67'/>\n  </rule>\n"
        ),
    )
}

/// ICMPv6 types a guest never sends: router advertisements (134) and redirects (137). A guest
/// is no router of the hypervisor's network, as it is no DHCP server.
const ICMPV6_ROUTER_ONLY: [u8; 2] = [134, 137];

/// ICMPv6 types a guest may send from the unspecified address `::`, before it has an address
/// of its own: router solicitations (133), neighbour solicitations of duplicate address
/// detection (135) and multicast listener reports (143, MLDv2).
const ICMPV6_FROM_UNSPECIFIED: [u8; 3] = [133, 135, 143];

/// [`IPV6_FILTER`], in libvirt's `ipv6` chain (entered from the root chain after the MAC
/// checks, so a frame's source MAC is the guest's here already). Out of the guest: router-only
/// messages and DHCPv6 answers dropped, then IPv6 from one of its own addresses accepted, and
/// everything else dropped. Into the guest: everything accepted, as libvirt's
/// `allow-incoming-ipv4` does for IPv4.
pub fn ipv6_filter() -> NetworkFilter {
    let mut body = String::new();
    let rule = |body: &mut String, action: &str, direction: &str, priority: i32, ipv6: &str| {
        body.push_str(&format!(
            "  <rule action='{action}' direction='{direction}' priority='{priority}'>\n"
        ));
        if !ipv6.is_empty() {
            body.push_str(&format!("    <ipv6{ipv6}/>\n"));
        }
        body.push_str("  </rule>\n");
    };
    for icmp_type in ICMPV6_ROUTER_ONLY {
        rule(
            &mut body,
            "drop",
            "out",
            100,
            &format!(" protocol='icmpv6' type='{icmp_type}'"),
        );
    }
    rule(
        &mut body,
        "drop",
        "out",
        100,
        " protocol='udp' srcportstart='547' srcportend='547'",
    );
    rule(
        &mut body,
        "accept",
        "out",
        200,
        &format!(" srcipaddr='${IPV6_PARAMETER}'"),
    );
    for icmp_type in ICMPV6_FROM_UNSPECIFIED {
        rule(
            &mut body,
            "accept",
            "out",
            200,
            &format!(" srcipaddr='::' protocol='icmpv6' type='{icmp_type}'"),
        );
    }
    rule(&mut body, "drop", "out", 1000, "");
    rule(&mut body, "accept", "in", 1000, "");
    filter_xml(IPV6_FILTER, "ipv6", &body)
}

/// [`GUEST_FILTER`].
pub fn guest_filter() -> NetworkFilter {
    filter_xml(
        GUEST_FILTER,
        "root",
        &format!(
            "  <filterref filter='{ISOLATED_FILTER}'/>\n  <filterref filter='{IPV6_FILTER}'/>\n"
        ),
    )
}

/// The filter of `tenant`: [`ISOLATED_FILTER`], and no IPv4 to or from `foreign` (the addresses
/// of other tenants' guests).
pub fn tenant_filter(tenant: &str, foreign: &[Ipv4Addr]) -> NetworkFilter {
    let mut body = format!("  <filterref filter='{ISOLATED_FILTER}'/>\n");
    for address in foreign {
        body.push_str(&format!(
            "  <rule action='drop' direction='out' priority='{DROP_PRIORITY}'>\n    \
             <ip dstipaddr='{address}'/>\n  </rule>\n  \
             <rule action='drop' direction='in' priority='{DROP_PRIORITY}'>\n    \
             <ip srcipaddr='{address}'/>\n  </rule>\n"
        ));
    }
    filter_xml(&tenant_filter_name(tenant), "root", &body)
}

/// Every tenant's addresses, as ips.db records them: tenant → addresses of its guests.
pub type TenantDirectory = BTreeMap<String, Vec<Ipv4Addr>>;

/// The addresses held by guests of tenants other than `tenant`, lowest first. An address that
/// `tenant` holds itself is never foreign to it (a guest that moved between tenants may still be
/// named under its old one by a definition not yet rewritten).
pub fn foreign_addresses(directory: &TenantDirectory, tenant: &str) -> Vec<Ipv4Addr> {
    let own = directory.get(tenant);
    let mut foreign: Vec<Ipv4Addr> = directory
        .iter()
        .filter(|(other, _)| other.as_str() != tenant)
        .flat_map(|(_, addresses)| addresses.iter().copied())
        .filter(|address| !own.is_some_and(|own| own.contains(address)))
        .collect();
    foreign.sort();
    foreign.dedup();
    foreign
}

/// Both directories in one: every tenant of either, with the addresses either gives it.
///
/// A hypervisor may be shared by installations that each keep their own ips.db; what its
/// domains' interfaces carry is the one record all of them see, so a refresh joins the two and
/// never drops an address only the other installation knows.
pub fn joined_directories(first: TenantDirectory, second: TenantDirectory) -> TenantDirectory {
    let mut joined = first;
    for (tenant, addresses) in second {
        joined.entry(tenant).or_default().extend(addresses);
    }
    for addresses in joined.values_mut() {
        addresses.sort();
        addresses.dedup();
    }
    joined
}

/// The filters a hypervisor should hold after a guest is defined there: [`ISOLATED_FILTER`],
/// [`IPV6_FILTER`] and [`GUEST_FILTER`], and the filter of every tenant in `tenants` (the guest's own, and those already on the hypervisor,
/// refreshed so that they know every other tenant's addresses).
pub fn filters_for(directory: &TenantDirectory, tenants: &[String]) -> Vec<NetworkFilter> {
    // Each after the filters it references.
    let mut filters = vec![isolated_filter(), ipv6_filter(), guest_filter()];
    let mut tenants = tenants.to_vec();
    tenants.sort();
    tenants.dedup();
    for tenant in tenants {
        filters.push(tenant_filter(
            &tenant,
            &foreign_addresses(directory, &tenant),
        ));
    }
    filters
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> TenantDirectory {
        let mut directory = TenantDirectory::new();
        directory.insert("shop".into(), vec!["192.168.122.101".parse().unwrap()]);
        directory.insert(
            "blog".into(),
            vec![
                "192.168.122.103".parse().unwrap(),
                "192.168.122.102".parse().unwrap(),
            ],
        );
        directory
    }

    #[test]
    fn a_tenant_filter_drops_every_other_tenants_addresses_both_ways() {
        let filter = tenant_filter("shop", &foreign_addresses(&directory(), "shop"));
        assert_eq!(filter.name, "trog-tenant-shop");
        assert!(filter.xml.contains("<filterref filter='trog-isolated'/>"));
        for address in ["192.168.122.102", "192.168.122.103"] {
            assert!(filter.xml.contains(&format!("<ip dstipaddr='{address}'/>")));
            assert!(filter.xml.contains(&format!("<ip srcipaddr='{address}'/>")));
        }
        assert!(!filter.xml.contains("192.168.122.101"), "{}", filter.xml);
        assert!(
            !filter.xml.contains("action='accept'") && !filter.xml.contains("action='return'"),
            "only drops may be added: {}",
            filter.xml
        );
    }

    #[test]
    fn an_address_a_tenant_holds_itself_is_never_foreign_to_it() {
        let mut directory = directory();
        directory
            .get_mut("shop")
            .unwrap()
            .push("192.168.122.102".parse().unwrap());
        assert_eq!(
            foreign_addresses(&directory, "shop"),
            ["192.168.122.103".parse::<Ipv4Addr>().unwrap()]
        );
    }

    #[test]
    fn joined_directories_keep_every_address_of_either_once() {
        let mut observed = TenantDirectory::new();
        observed.insert(
            "shop".into(),
            vec![
                "192.168.122.101".parse().unwrap(),
                "192.168.122.100".parse().unwrap(),
            ],
        );
        observed.insert("news".into(), vec!["192.168.122.104".parse().unwrap()]);
        let joined = joined_directories(directory(), observed);
        let text: Vec<(String, Vec<String>)> = joined
            .iter()
            .map(|(tenant, addresses)| {
                (
                    tenant.clone(),
                    addresses.iter().map(ToString::to_string).collect(),
                )
            })
            .collect();
        assert_eq!(
            text,
            [
                (
                    "blog".to_string(),
                    vec!["192.168.122.102".to_string(), "192.168.122.103".into()]
                ),
                ("news".to_string(), vec!["192.168.122.104".to_string()]),
                (
                    "shop".to_string(),
                    vec!["192.168.122.100".to_string(), "192.168.122.101".into()]
                ),
            ]
        );
    }

    #[test]
    fn the_isolated_filter_builds_on_clean_traffic_and_drops_dhcp_answers() {
        let filter = isolated_filter();
        assert!(filter.xml.contains("<filterref filter='clean-traffic'/>"));
        assert!(filter.xml.contains("protocol='udp' srcportstart='67'"));
        assert!(filter.xml.contains(&filter.uuid.to_string()));
    }

    #[test]
    fn filters_are_trogs_by_a_uuid_of_their_name() {
        assert_eq!(filter_uuid("trog-tenant-a"), filter_uuid("trog-tenant-a"));
        assert_ne!(filter_uuid("trog-tenant-a"), filter_uuid("trog-tenant-b"));
        assert_eq!(tenant_of_filter("trog-tenant-shop"), Some("shop"));
        assert_eq!(tenant_of_filter("trog-isolated"), None);
        assert_eq!(tenant_of_filter("trog-tenant-Bad;"), None);
    }

    #[test]
    fn the_filters_for_a_hypervisor_are_the_shared_ones_and_each_tenants_once() {
        let filters = filters_for(&directory(), &["shop".into(), "blog".into(), "shop".into()]);
        assert_eq!(
            names_of(&filters),
            [
                "trog-isolated",
                "trog-ipv6",
                "trog-guest",
                "trog-tenant-blog",
                "trog-tenant-shop"
            ]
        );
        assert_eq!(
            names_of(&filters_for(&directory(), &[])),
            ["trog-isolated", "trog-ipv6", "trog-guest"]
        );
    }

    fn names_of(filters: &[NetworkFilter]) -> Vec<&str> {
        filters.iter().map(|filter| filter.name.as_str()).collect()
    }

    #[test]
    fn the_ipv6_filter_accepts_only_the_guests_own_sources_and_no_router_messages() {
        let filter = ipv6_filter();
        assert!(filter
            .xml
            .starts_with("<filter name='trog-ipv6' chain='ipv6'>"));
        let rules: Vec<&str> = filter.xml.split("<rule ").skip(1).collect();
        let accepts_out: Vec<&str> = rules
            .iter()
            .copied()
            .filter(|rule| rule.starts_with("action='accept' direction='out'"))
            .collect();
        assert_eq!(accepts_out.len(), 4, "{}", filter.xml);
        assert!(accepts_out[0].contains("srcipaddr='$TROG_IPV6'"));
        for rule in &accepts_out[1..] {
            assert!(
                rule.contains("srcipaddr='::' protocol='icmpv6'"),
                "only neighbour discovery from the unspecified address: {rule}"
            );
        }
        // Drops of router messages come before every accept; everything else out is dropped.
        for icmp_type in ["134", "137"] {
            assert!(rules.iter().any(|rule| rule
                .starts_with("action='drop' direction='out' priority='100'")
                && rule.contains(&format!("type='{icmp_type}'"))));
        }
        assert!(rules.iter().any(|rule| rule
            .starts_with("action='drop' direction='out' priority='100'")
            && rule.contains("srcportstart='547'")));
        assert!(rules
            .iter()
            .any(|rule| rule
                .starts_with("action='drop' direction='out' priority='1000'>\n  </rule>")));
        assert!(accepts_out
            .iter()
            .all(|rule| rule.contains("priority='200'")));
    }

    #[test]
    fn a_guest_without_a_tenant_gets_ipv4_isolation_and_ipv6_and_a_tenant_only_ipv4() {
        let guest = guest_filter();
        assert!(guest.xml.contains("<filterref filter='trog-isolated'/>"));
        assert!(guest.xml.contains("<filterref filter='trog-ipv6'/>"));
        let tenant = tenant_filter("shop", &[]);
        assert!(!tenant.xml.contains("trog-ipv6"), "{}", tenant.xml);
        assert!(!isolated_filter().xml.contains("trog-ipv6"));
    }
}
