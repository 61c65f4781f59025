//! What the planner reads back from a domain's definition besides trog's tag: the kind of
//! virtualisation libvirt runs it with (`<domain type>`). The tag's fingerprints cover what the
//! guest's own declaration decides; the domain type is the hypervisor's (`domain_type` in
//! hypervisors.conf), so a guest defined before it changed is found by reading its definition.
//! The libvirt backend and the fake read it alike.

use crate::model::hypervisor::DomainType;

/// The `type` of the definition's `<domain>`: `None` for one trog never writes (`xen`, `lxc`, …)
/// or a definition that does not parse.
pub fn domain_type_of(definition: &str) -> Option<DomainType> {
    let document = roxmltree::Document::parse(definition).ok()?;
    let root = document.root_element();
    if root.tag_name().name() != "domain" {
        return None;
    }
    match root.attribute("type")? {
        "kvm" => Some(DomainType::Kvm),
        "qemu" => Some(DomainType::Qemu),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_domain_type_is_read_from_the_root_element_only() {
        assert_eq!(
            domain_type_of("<domain type='kvm'><name>a</name></domain>"),
            Some(DomainType::Kvm)
        );
        assert_eq!(
            domain_type_of("<domain type=\"qemu\"><devices/></domain>"),
            Some(DomainType::Qemu)
        );
        for other in [
            "<domain type='xen'/>",
            "<domain/>",
            "<pool type='kvm'/>",
            "<domain type='kvm'",
            "",
        ] {
            assert_eq!(domain_type_of(other), None, "{other}");
        }
    }
}
