//! trog's libvirt network filters (nwfilter), as XML. Pure.
//!
//! Every interface trog defines references one of them, with the guest's addresses as `IP`:
//! - [`ISOLATED_FILTER`] for a guest without a tenant: libvirt's own `clean-traffic` (no frame
//!   with a MAC or IPv4 source that is not the guest's, no ARP answer for another address, no
//!   other layer-2 protocol), and no DHCP answers from the guest (a guest has no business
//!   handing out leases on the hypervisor's network).
//! - `trog-tenant-NAME` for a guest of tenant NAME: the same, and no IPv4 to or from any address
//!   held in ips.db by a guest of another tenant.
//!
//! Only drop rules are added to what `clean-traffic` does: a drop can never let past a frame the
//! anti-spoofing rules would stop. The tenant rules come before libvirt's `ipv4` chain, whose
//! `allow-incoming-ipv4` accepts (and so ends the checks for) incoming IPv4.
//!
//! trog's filters are told apart from anyone else's by their UUID, derived from the name: a
//! filter of that name with another UUID is not trog's and is never changed.

use crate::model::names::TenantName;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The filter of guests without a tenant.
pub const ISOLATED_FILTER: &str = "trog-isolated";

/// The prefix of every tenant's filter name.
pub const TENANT_FILTER_PREFIX: &str = "trog-tenant-";

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

/// Which filter a guest's interface references, with the guest's addresses as `IP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceFilter {
    pub name: String,
    /// Empty: libvirt learns the guest's address from its first packets (a guest on a lease).
    pub addresses: Vec<String>,
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

/// The filter a guest's interface references.
pub fn interface_filter(tenant: Option<&TenantName>, addresses: &[String]) -> InterfaceFilter {
    InterfaceFilter {
        name: match tenant {
            Some(tenant) => tenant_filter_name(tenant.as_str()),
            None => ISOLATED_FILTER.to_string(),
        },
        addresses: addresses.to_vec(),
    }
}

/// [`ISOLATED_FILTER`].
pub fn isolated_filter() -> NetworkFilter {
    let name = ISOLATED_FILTER.to_string();
    let uuid = filter_uuid(&name);
    let xml = format!(
        "<filter name='{name}' chain='root'>\n  <uuid>{uuid}</uuid>\n  \
         <filterref filter='{LIBVIRT_CLEAN_TRAFFIC}'/>\n  \
         <rule action='drop' direction='out' priority='{DROP_PRIORITY}'>\n    \
         <ip protocol='udp' srcportstart='67' srcportend='67'/>\n  </rule>\n</filter>\n"
    );
    NetworkFilter { name, uuid, xml }
}

/// The filter of `tenant`: [`ISOLATED_FILTER`], and no IPv4 to or from `foreign` (the addresses
/// of other tenants' guests).
pub fn tenant_filter(tenant: &str, foreign: &[Ipv4Addr]) -> NetworkFilter {
    let name = tenant_filter_name(tenant);
    let uuid = filter_uuid(&name);
    let mut xml = format!(
        "<filter name='{name}' chain='root'>\n  <uuid>{uuid}</uuid>\n  \
         <filterref filter='{ISOLATED_FILTER}'/>\n"
    );
    for address in foreign {
        xml.push_str(&format!(
            "  <rule action='drop' direction='out' priority='{DROP_PRIORITY}'>\n    \
             <ip dstipaddr='{address}'/>\n  </rule>\n  \
             <rule action='drop' direction='in' priority='{DROP_PRIORITY}'>\n    \
             <ip srcipaddr='{address}'/>\n  </rule>\n"
        ));
    }
    xml.push_str("</filter>\n");
    NetworkFilter { name, uuid, xml }
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

/// The filters a hypervisor should hold after a guest is defined there: [`ISOLATED_FILTER`], and
/// the filter of every tenant in `tenants` (the guest's own, and those already on the hypervisor,
/// refreshed so that they know every other tenant's addresses).
pub fn filters_for(directory: &TenantDirectory, tenants: &[String]) -> Vec<NetworkFilter> {
    let mut filters = vec![isolated_filter()];
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
    fn the_filters_for_a_hypervisor_are_the_isolated_one_and_each_tenants_once() {
        let names: Vec<String> =
            filters_for(&directory(), &["shop".into(), "blog".into(), "shop".into()])
                .into_iter()
                .map(|filter| filter.name)
                .collect();
        assert_eq!(
            names,
            ["trog-isolated", "trog-tenant-blog", "trog-tenant-shop"]
        );
        let tenant = TenantName::parse("shop").unwrap();
        assert_eq!(
            interface_filter(Some(&tenant), &[]).name,
            "trog-tenant-shop"
        );
        assert_eq!(interface_filter(None, &[]).name, "trog-isolated");
    }
}
