//! A guest's seed in its domain's definition: whether the definition attaches it, and detaching
//! it once the guest's first boot is over (the seed holds the guest's host private key, and
//! nothing reads it again).

use virt::connect::Connect;

/// The `<disk>` element of `domain_xml` whose source is the volume `volume`, as text, if any:
/// what a detach names (a seed's here, an extra disk's in `guest_resources_extra_disks`).
pub(crate) fn disk_of_volume<'x>(domain_xml: &'x str, volume: &str) -> Option<&'x str> {
    let document = roxmltree::Document::parse(domain_xml).ok()?;
    let disk = document.descendants().find(|node| {
        node.has_tag_name("disk")
            && node.children().any(|source| {
                source.has_tag_name("source") && source.attribute("volume") == Some(volume)
            })
    })?;
    Some(&domain_xml[disk.range()])
}

/// Whether a domain's definition attaches the volume `volume` as a disk.
pub fn attaches_volume(domain_xml: &str, volume: &str) -> bool {
    disk_of_volume(domain_xml, volume).is_some()
}

/// Detaches the disk of volume `volume` from `domain`: from its definition, and from the running
/// guest too when it runs. Whether it was attached anywhere.
pub fn detach_seed(
    connection: &Connect,
    domain: &str,
    volume: &str,
) -> Result<bool, virt::error::Error> {
    let domain = connection.lookup_domain_by_name(domain)?;
    let mut detached = false;
    let definition = domain.xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)?;
    if let Some(disk) = disk_of_volume(&definition, volume) {
        domain.detach_device_flags(disk, virt::sys::VIR_DOMAIN_AFFECT_CONFIG)?;
        detached = true;
    }
    if domain.is_active()? {
        let live = domain.xml_desc(0)?;
        if let Some(disk) = disk_of_volume(&live, volume) {
            domain.detach_device_flags(disk, virt::sys::VIR_DOMAIN_AFFECT_LIVE)?;
            detached = true;
        }
    }
    Ok(detached)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFINITION: &str = "<domain><devices>\
        <disk type='volume' device='disk'><source pool='p' volume='g-root.qcow2'/><target dev='vda'/></disk>\
        <disk type='volume' device='cdrom'><source pool='p' volume='g-seed.iso'/><target dev='sda' bus='scsi'/><readonly/></disk>\
        </devices></domain>";

    #[test]
    fn the_seed_disk_is_found_by_its_volume_and_given_whole() {
        assert!(attaches_volume(DEFINITION, "g-seed.iso"));
        assert!(!attaches_volume(DEFINITION, "other-seed.iso"));
        assert_eq!(
            disk_of_volume(DEFINITION, "g-seed.iso"),
            Some("<disk type='volume' device='cdrom'><source pool='p' volume='g-seed.iso'/><target dev='sda' bus='scsi'/><readonly/></disk>")
        );
        assert!(!attaches_volume("not xml", "g-seed.iso"));
    }
}
