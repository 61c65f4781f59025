//! trog's network filters on a hypervisor: defined (or refreshed) before a guest's domain is,
//! and removed once no domain uses them, directly or through another filter. A filter is trog's when its UUID is the one trog derives
//! from its name (`render::network_filter::filter_uuid`); any other filter is left alone.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::render::network_filter::{
    filter_uuid, tenant_of_filter, NetworkFilter, TenantDirectory,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use virt::connect::Connect;
use virt::nwfilter::NWFilter;
use virt::sys;

// virt 0.5 wraps neither looking a filter up by name nor defining one: both are one call into
// libvirt, made here with the ownership rules libvirt documents (the caller owns the returned
// reference, which `NWFilter` frees when dropped).

fn lookup_filter(connection: &Connect, name: &str) -> Result<NWFilter, virt::error::Error> {
    let name = CString::new(name).expect("trog's filter names hold no NUL");
    // SAFETY: a valid connection pointer and a NUL-terminated name, both alive for the call.
    let filter = unsafe { sys::virNWFilterLookupByName(connection.as_ptr(), name.as_ptr()) };
    if filter.is_null() {
        return Err(virt::error::Error::last_error());
    }
    // SAFETY: libvirt returned a new reference, which `NWFilter` now owns.
    Ok(unsafe { NWFilter::from_ptr(filter) })
}

fn define_filter(connection: &Connect, xml: &str) -> Result<NWFilter, virt::error::Error> {
    let xml = CString::new(xml).expect("trog's filter XML holds no NUL");
    // SAFETY: as in `lookup_filter`.
    let filter = unsafe { sys::virNWFilterDefineXML(connection.as_ptr(), xml.as_ptr()) };
    if filter.is_null() {
        return Err(virt::error::Error::last_error());
    }
    // SAFETY: as in `lookup_filter`.
    Ok(unsafe { NWFilter::from_ptr(filter) })
}

#[derive(Debug, thiserror::Error)]
pub enum NetworkFilterError {
    #[error("{hypervisor} has a network filter named {name} that trog did not make (its UUID is {found})")]
    Foreign {
        hypervisor: String,
        name: String,
        found: String,
    },
    #[error("libvirt on {hypervisor} could not {doing} the network filter {name}: {message}")]
    Filter {
        hypervisor: String,
        name: String,
        doing: &'static str,
        message: String,
    },
    #[error("libvirt on {hypervisor} could not list {what}: {message}")]
    List {
        hypervisor: String,
        what: &'static str,
        message: String,
    },
}

impl Diagnose for NetworkFilterError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            NetworkFilterError::Foreign { .. } => ExitStatus::Conflict,
            _ => ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            NetworkFilterError::Foreign { name, .. } => Some(format!(
                "trog's filter names start with `trog-`: rename the filter {name} you made, or give the guest another `tenant`"
            )),
            NetworkFilterError::Filter { .. } => Some(
                "libvirt's nwfilter driver needs ebtables on the hypervisor (Debian: ebtables); `trog preflight` checks libvirt".into(),
            ),
            NetworkFilterError::List { .. } => None,
        }
    }
}

/// The tenants whose filters trog has defined on `connection`.
pub fn tenants_with_filters(
    connection: &Connect,
    hypervisor: &str,
) -> Result<Vec<String>, NetworkFilterError> {
    Ok(trogs_filters(connection, hypervisor)?
        .into_iter()
        .filter_map(|name| tenant_of_filter(&name).map(str::to_string))
        .collect())
}

/// Defines each of `filters` (in order: a filter is defined after those it references), or
/// redefines it when trog's already (libvirt then applies the new rules to every interface that
/// uses it). Refuses, before changing anything, when a filter of one of those names is not
/// trog's.
pub fn define_filters(
    connection: &Connect,
    hypervisor: &str,
    filters: &[NetworkFilter],
) -> Result<(), NetworkFilterError> {
    for filter in filters {
        if let Ok(existing) = lookup_filter(connection, &filter.name) {
            let found = existing.uuid_string().unwrap_or_default();
            if found != filter.uuid.to_string() {
                return Err(NetworkFilterError::Foreign {
                    hypervisor: hypervisor.to_string(),
                    name: filter.name.clone(),
                    found,
                });
            }
        }
    }
    for filter in filters {
        define_filter(connection, &filter.xml).map_err(|error| NetworkFilterError::Filter {
            hypervisor: hypervisor.to_string(),
            name: filter.name.clone(),
            doing: "define",
            message: error.message().to_string(),
        })?;
    }
    Ok(())
}

/// Undefines trog's filters that no domain on `connection` uses any more, directly or through
/// another filter, returning their names in the order they went (a filter before those it
/// references: libvirt refuses to undefine a filter another one references).
pub fn remove_unused_filters(
    connection: &Connect,
    hypervisor: &str,
) -> Result<Vec<String>, NetworkFilterError> {
    let used = filters_in_use(connection, hypervisor)?;
    let filters = filters_on(connection, hypervisor)?;
    let removed = unused_filters(&filters, &used);
    for name in &removed {
        undefine(connection, hypervisor, name)?;
    }
    Ok(removed)
}

/// A filter on a hypervisor: whether it is trog's, and the filters it references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterOnHypervisor {
    pub trogs: bool,
    pub references: Vec<String>,
}

/// Which of trog's `filters` nothing needs: neither a domain (`used`) nor a filter that is
/// needed itself. In the order they can go: each before the filters it references.
pub fn unused_filters(
    filters: &BTreeMap<String, FilterOnHypervisor>,
    used: &BTreeSet<String>,
) -> Vec<String> {
    let mut needed = used.clone();
    let mut to_follow: Vec<String> = used.iter().cloned().collect();
    while let Some(name) = to_follow.pop() {
        for referenced in filters
            .get(&name)
            .map_or(&[][..], |filter| &filter.references)
        {
            if needed.insert(referenced.clone()) {
                to_follow.push(referenced.clone());
            }
        }
    }
    let mut left: Vec<&String> = filters
        .iter()
        .filter(|(name, filter)| filter.trogs && !needed.contains(*name))
        .map(|(name, _)| name)
        .collect();
    let mut order = Vec::new();
    loop {
        let (free, held): (Vec<&String>, Vec<&String>) = left.iter().partition(|name| {
            !left
                .iter()
                .any(|other| filters[*other].references.contains(**name))
        });
        if free.is_empty() {
            // Nothing left, or filters that reference each other (not trog's doing): kept.
            return order;
        }
        order.extend(free.into_iter().cloned());
        left = held;
    }
}

/// Every filter on `connection` by name: whether it is trog's, and what it references.
fn filters_on(
    connection: &Connect,
    hypervisor: &str,
) -> Result<BTreeMap<String, FilterOnHypervisor>, NetworkFilterError> {
    Ok(all_filters(connection, hypervisor)?
        .iter()
        .filter_map(|filter| {
            let name = filter.name().ok()?;
            let uuid = filter.uuid_string().ok()?;
            let references = filter
                .xml_desc(0)
                .map(|xml| filter_references(&xml))
                .unwrap_or_default();
            Some((
                name.clone(),
                FilterOnHypervisor {
                    trogs: uuid == filter_uuid(&name).to_string(),
                    references,
                },
            ))
        })
        .collect())
}

/// The filters a filter's XML references.
pub fn filter_references(filter_xml: &str) -> Vec<String> {
    let Ok(document) = roxmltree::Document::parse(filter_xml) else {
        return Vec::new();
    };
    document
        .root_element()
        .children()
        .filter(|node| node.has_tag_name("filterref"))
        .filter_map(|node| node.attribute("filter").map(str::to_string))
        .collect()
}

fn undefine(connection: &Connect, hypervisor: &str, name: &str) -> Result<(), NetworkFilterError> {
    let fail = |doing, error: virt::error::Error| NetworkFilterError::Filter {
        hypervisor: hypervisor.to_string(),
        name: name.to_string(),
        doing,
        message: error.message().to_string(),
    };
    lookup_filter(connection, name)
        .map_err(|error| fail("look up", error))?
        .undefine()
        .map_err(|error| fail("undefine", error))
}

/// Every filter on `connection`; none on a driver without network filters (libvirt's test
/// driver), which holds none of trog's.
fn all_filters(
    connection: &Connect,
    hypervisor: &str,
) -> Result<Vec<NWFilter>, NetworkFilterError> {
    match connection.list_all_nw_filters(0) {
        Ok(filters) => Ok(filters),
        Err(error) if error.code().is(virt::error::ErrorNumber::NoSupport) => Ok(Vec::new()),
        Err(error) => Err(NetworkFilterError::List {
            hypervisor: hypervisor.to_string(),
            what: "its network filters",
            message: error.message().to_string(),
        }),
    }
}

/// The names of the filters on `connection` that are trog's.
fn trogs_filters(
    connection: &Connect,
    hypervisor: &str,
) -> Result<Vec<String>, NetworkFilterError> {
    let mut names: Vec<String> = all_filters(connection, hypervisor)?
        .iter()
        .filter_map(|filter| {
            let name = filter.name().ok()?;
            let uuid = filter.uuid_string().ok()?;
            (uuid == filter_uuid(&name).to_string()).then_some(name)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// The XML of every domain on `connection`: both the running definition and the one it starts
/// from next time.
fn domain_definitions(
    connection: &Connect,
    hypervisor: &str,
) -> Result<Vec<String>, NetworkFilterError> {
    let domains = connection
        .list_all_domains(0)
        .map_err(|error| NetworkFilterError::List {
            hypervisor: hypervisor.to_string(),
            what: "its domains",
            message: error.message().to_string(),
        })?;
    Ok(domains
        .iter()
        .flat_map(|domain| {
            [0, sys::VIR_DOMAIN_XML_INACTIVE]
                .into_iter()
                .filter_map(|flags| domain.xml_desc(flags).ok())
        })
        .collect())
}

/// Every filter an interface of a domain on `connection` references, running or not.
fn filters_in_use(
    connection: &Connect,
    hypervisor: &str,
) -> Result<BTreeSet<String>, NetworkFilterError> {
    Ok(domain_definitions(connection, hypervisor)?
        .iter()
        .flat_map(|xml| referenced_filters(xml))
        .collect())
}

/// Every tenant's addresses as the interfaces of the domains on `connection` carry them (the `IP`
/// of each interface that references a tenant's filter), running definitions and the ones they
/// start from next time alike. This is what every installation sharing the hypervisor sees, where
/// each ips.db knows only its own guests.
pub fn tenant_addresses_on_hypervisor(
    connection: &Connect,
    hypervisor: &str,
) -> Result<TenantDirectory, NetworkFilterError> {
    let mut directory = TenantDirectory::new();
    for xml in domain_definitions(connection, hypervisor)? {
        for (tenant, address) in tenant_addresses_in(&xml) {
            directory.entry(tenant).or_default().push(address);
        }
    }
    for addresses in directory.values_mut() {
        addresses.sort();
        addresses.dedup();
    }
    Ok(directory)
}

/// The (tenant, address) pairs a domain's XML carries: each `IP` parameter of an interface's
/// reference to a tenant's filter.
pub fn tenant_addresses_in(domain_xml: &str) -> Vec<(String, std::net::Ipv4Addr)> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("filterref"))
        .filter(|node| {
            node.parent()
                .is_some_and(|parent| parent.has_tag_name("interface"))
        })
        .filter_map(|node| {
            let tenant = tenant_of_filter(node.attribute("filter")?)?.to_string();
            Some((tenant, node))
        })
        .flat_map(|(tenant, node)| {
            node.children()
                .filter(|child| {
                    child.has_tag_name("parameter") && child.attribute("name") == Some("IP")
                })
                .filter_map(|child| child.attribute("value")?.parse().ok())
                .map(move |address| (tenant.clone(), address))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The filters a domain's XML references on its interfaces.
pub fn referenced_filters(domain_xml: &str) -> Vec<String> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("filterref"))
        .filter(|node| {
            node.parent()
                .is_some_and(|parent| parent.has_tag_name("interface"))
        })
        .filter_map(|node| node.attribute("filter").map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_an_interface_references_are_read_from_the_domain() {
        let xml = "<domain><devices><interface type='network'><filterref filter='trog-tenant-a'>\
                   <parameter name='IP' value='192.0.2.1'/></filterref></interface>\
                   <interface type='bridge'><filterref filter='clean-traffic'/></interface>\
                   </devices></domain>";
        assert_eq!(referenced_filters(xml), ["trog-tenant-a", "clean-traffic"]);
        assert!(referenced_filters("not xml").is_empty());
    }

    #[test]
    fn the_tenant_addresses_an_interface_carries_are_read_from_the_domain() {
        let xml = "<domain><devices>\
                   <interface type='network'><filterref filter='trog-tenant-shop'>\
                   <parameter name='IP' value='192.0.2.1'/><parameter name='IP' value='192.0.2.2'/>\
                   <parameter name='MAC' value='52:54:00:00:00:01'/></filterref></interface>\
                   <interface type='network'><filterref filter='trog-isolated'>\
                   <parameter name='IP' value='192.0.2.3'/></filterref></interface>\
                   <interface type='bridge'><filterref filter='trog-tenant-blog'>\
                   <parameter name='IP' value='2001:db8::1'/></filterref></interface>\
                   </devices></domain>";
        let found: Vec<(String, String)> = tenant_addresses_in(xml)
            .into_iter()
            .map(|(tenant, address)| (tenant, address.to_string()))
            .collect();
        assert_eq!(
            found,
            [
                ("shop".to_string(), "192.0.2.1".to_string()),
                ("shop".to_string(), "192.0.2.2".to_string())
            ]
        );
        assert!(tenant_addresses_in("not xml").is_empty());
    }

    fn filter(trogs: bool, references: &[&str]) -> FilterOnHypervisor {
        FilterOnHypervisor {
            trogs,
            references: references.iter().map(|name| name.to_string()).collect(),
        }
    }

    fn hypervisor_filters() -> BTreeMap<String, FilterOnHypervisor> {
        [
            ("clean-traffic", filter(false, &["no-mac-spoofing"])),
            ("no-mac-spoofing", filter(false, &[])),
            ("trog-isolated", filter(true, &["clean-traffic"])),
            ("trog-ipv6", filter(true, &[])),
            ("trog-guest", filter(true, &["trog-isolated", "trog-ipv6"])),
            ("trog-tenant-shop", filter(true, &["trog-isolated"])),
            ("site-filter", filter(false, &["trog-ipv6"])),
        ]
        .into_iter()
        .map(|(name, filter)| (name.to_string(), filter))
        .collect()
    }

    fn used(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn only_trogs_filters_that_nothing_needs_go_each_before_what_it_references() {
        let filters = hypervisor_filters();
        assert_eq!(
            unused_filters(&filters, &used(&[])),
            [
                "trog-guest",
                "trog-tenant-shop",
                "trog-ipv6",
                "trog-isolated"
            ]
        );
        // A tenant's guest keeps its filter and the one that filter builds on.
        assert_eq!(
            unused_filters(&filters, &used(&["trog-tenant-shop"])),
            ["trog-guest", "trog-ipv6"]
        );
        // A guest without a tenant keeps both it builds on; a filter of the site's that
        // references one of trog's keeps it too.
        assert_eq!(
            unused_filters(&filters, &used(&["trog-guest"])),
            ["trog-tenant-shop"]
        );
        assert_eq!(
            unused_filters(&filters, &used(&["site-filter"])),
            ["trog-guest", "trog-tenant-shop", "trog-isolated"]
        );
        // A guest defined before trog-guest existed references trog-isolated directly.
        assert_eq!(
            unused_filters(&filters, &used(&["trog-isolated", "trog-guest"])),
            ["trog-tenant-shop"]
        );
    }

    #[test]
    fn the_filters_a_filter_references_are_read_from_its_xml() {
        assert_eq!(
            filter_references(&crate::render::network_filter::guest_filter().xml),
            ["trog-isolated", "trog-ipv6"]
        );
        assert!(filter_references("not xml").is_empty());
    }
}
