//! Whether a domain is trog's: it carries trog's tag in its persistent `<metadata>`. Every verb
//! that changes an existing guest (destroy, snapshot, debug_boot) refuses a domain without it.

use crate::libvirt::connection::connect;
use crate::libvirt::error::LibvirtError;
use crate::model::hypervisor::LibvirtUri;
use crate::plan::GuestTag;
use crate::render::domain_xml::metadata::{maker_of, parse_tag, Maker, TAG_NAMESPACE};
use virt::domain::Domain;

/// The element in trog's namespace of `domain`'s persistent definition, if it has one.
fn tag_element(domain: &Domain) -> Option<String> {
    domain
        .metadata(
            virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
            Some(TAG_NAMESPACE),
            virt::sys::VIR_DOMAIN_AFFECT_CONFIG,
        )
        .ok()
}

/// The tag trog wrote into `domain`'s persistent definition, if it carries one.
pub fn read_tag(domain: &Domain) -> Option<GuestTag> {
    tag_element(domain).and_then(|element| parse_tag(&element))
}

/// Who made `domain`: not trog, trog by an installation its tag names, or trog before tags
/// named their installation.
pub fn read_maker(domain: &Domain) -> Maker {
    maker_of(tag_element(domain).as_deref())
}

/// Whether trog made `domain` (a same-named domain without the tag is someone else's).
pub fn is_trogs(domain: &Domain) -> bool {
    read_tag(domain).is_some()
}

/// The names of the domains defined at `uri` that carry trog's tag, running or not: what trog
/// made there, for any installation.
pub fn tagged_domain_names(uri: &LibvirtUri) -> Result<Vec<String>, LibvirtError> {
    let connection = connect(uri)?;
    let domains = connection
        .list_all_domains(0)
        .map_err(|e| LibvirtError::query(&uri.uri, "list the defined guests", e))?;
    let mut names = Vec::new();
    for domain in domains.iter().filter(|domain| is_trogs(domain)) {
        names.push(
            domain
                .name()
                .map_err(|e| LibvirtError::query(&uri.uri, "read a guest's name", e))?,
        );
    }
    Ok(names)
}
