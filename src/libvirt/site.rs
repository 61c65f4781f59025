//! What one hypervisor holds, as the whole site's verbs need it (`inventory`, `status --all`):
//! every defined domain by name, whether trog made it and by which installation (its tag), and
//! the IPv4 addresses its network leased it.

use crate::hypervisor::observer::HeldDomain;
use crate::libvirt::connection::connect;
use crate::libvirt::error::LibvirtError;
use crate::libvirt::trog_tag::read_maker;
use crate::model::hypervisor::LibvirtUri;

/// Every domain defined at `uri`, running or not, sorted by name.
pub fn held_domains(uri: &LibvirtUri) -> Result<Vec<HeldDomain>, LibvirtError> {
    let connection = connect(uri)?;
    let domains = connection
        .list_all_domains(0)
        .map_err(|e| LibvirtError::query(&uri.uri, "list the defined guests", e))?;
    let mut held = Vec::with_capacity(domains.len());
    for domain in &domains {
        let name = domain
            .name()
            .map_err(|e| LibvirtError::query(&uri.uri, "read a guest's name", e))?;
        // A guest that is off, or a driver that keeps no leases, has none: not an error.
        let mut leased: Vec<String> = domain
            .interface_addresses(virt::sys::VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|interface| interface.addrs)
            .filter(|address| address.typed == virt::sys::VIR_IP_ADDR_TYPE_IPV4 as i64)
            .map(|address| address.addr)
            .collect();
        // libvirt lists the newest lease last; a reused MAC may have left an older one.
        leased.reverse();
        leased.dedup();
        held.push(HeldDomain {
            maker: read_maker(domain),
            name,
            leased,
        });
    }
    held.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(held)
}
