//! A guest's extra disks on libvirt: which ones its definition and its running domain attach
//! (read from their XML), and attaching or detaching one.

use super::{GuestResourceError, GuestResources};
use crate::libvirt::seed::disk_of_volume;
use crate::model::names::DomainName;
use crate::plan::resource_names::is_extra_disk_volume;
use crate::render::domain_xml::{extra_disk_xml, ExtraDiskSpec};
use std::collections::BTreeMap;
use virt::domain::Domain;

/// The guest's extra disks in a domain's XML: each one's volume with the bus it is on.
pub(super) fn extra_disks_in(domain_xml: &str, domain: &DomainName) -> BTreeMap<String, String> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return BTreeMap::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("disk"))
        .filter_map(|disk| {
            let volume = disk
                .children()
                .find(|node| node.has_tag_name("source"))?
                .attribute("volume")?;
            let bus = disk
                .children()
                .find(|node| node.has_tag_name("target"))?
                .attribute("bus")?;
            is_extra_disk_volume(domain, volume).then(|| (volume.to_string(), bus.to_string()))
        })
        .collect()
}

impl GuestResources<'_> {
    /// The domain's XML: its definition (`inactive`) or the running guest's.
    pub(super) fn domain_xml(
        &self,
        domain: &Domain,
        inactive: bool,
    ) -> Result<String, GuestResourceError> {
        let flags = if inactive {
            virt::sys::VIR_DOMAIN_XML_INACTIVE
        } else {
            0
        };
        domain
            .xml_desc(flags)
            .map_err(self.fail("read the guest's definition"))
    }

    /// The extra disks the definition attaches, and those the running guest has.
    pub(super) fn observe_extra_disks(
        &self,
        domain: &Domain,
        running: bool,
    ) -> Result<(BTreeMap<String, String>, Vec<String>), GuestResourceError> {
        let name = &self.desired.domain;
        let defined = extra_disks_in(&self.domain_xml(domain, true)?, name);
        let live = if running {
            extra_disks_in(&self.domain_xml(domain, false)?, name)
                .into_keys()
                .collect()
        } else {
            Vec::new()
        };
        Ok((defined, live))
    }

    /// Attaches the extra disk of `volume` where the plan says and it is not yet: the running
    /// guest (hot-plugged) and the definition. Safe to repeat.
    pub(super) fn attach_extra_disk(
        &self,
        volume: &str,
        to_running: bool,
        to_definition: bool,
        extra_disks: &[ExtraDiskSpec],
    ) -> Result<(), GuestResourceError> {
        let domain = self.require_domain()?;
        let spec = extra_disks
            .iter()
            .find(|extra| extra.disk.volume == volume)
            .ok_or_else(|| GuestResourceError {
                backend: "libvirt",
                hypervisor: self.hypervisor.to_string(),
                operation: format!("attach disk {volume}"),
                source: "the domain's declaration has no such disk".into(),
            })?;
        let xml = extra_disk_xml(spec).map_err(self.fail(format!("write disk {volume}'s XML")))?;
        let running = domain
            .is_active()
            .map_err(self.fail("ask whether the guest runs"))?;
        let has = |inactive: bool| -> Result<bool, GuestResourceError> {
            Ok(
                extra_disks_in(&self.domain_xml(&domain, inactive)?, &self.desired.domain)
                    .contains_key(volume),
            )
        };
        if to_running && running && !has(false)? {
            domain
                .attach_device_flags(&xml, virt::sys::VIR_DOMAIN_AFFECT_LIVE)
                .map_err(self.fail(format!("attach disk {volume} to the running guest")))?;
        }
        if to_definition && !has(true)? {
            domain
                .attach_device_flags(&xml, virt::sys::VIR_DOMAIN_AFFECT_CONFIG)
                .map_err(self.fail(format!("add disk {volume} to the guest's definition")))?;
        }
        Ok(())
    }

    /// Takes the extra disk of `volume` out of the definition (the running guest keeps it until
    /// it is next started; the volume stays). Safe to repeat.
    pub(super) fn detach_extra_disk(&self, volume: &str) -> Result<(), GuestResourceError> {
        let domain = self.require_domain()?;
        let definition = self.domain_xml(&domain, true)?;
        let Some(element) = disk_of_volume(&definition, volume) else {
            return Ok(());
        };
        domain
            .detach_device_flags(element, virt::sys::VIR_DOMAIN_AFFECT_CONFIG)
            .map_err(self.fail(format!("take disk {volume} out of the guest's definition")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN_XML: &str = "<domain><devices>\
        <disk type='volume' device='disk'><source pool='trog' volume='a.test-root.qcow2'/><target dev='vda' bus='virtio'/></disk>\
        <disk type='volume' device='disk'><source pool='trog' volume='a.test-disk-db.qcow2'/><target dev='vdc' bus='virtio'/><serial>trog-disk-db</serial></disk>\
        <disk type='volume' device='disk'><source pool='trog' volume='a.test-disk-logs.qcow2'/><target dev='sdd' bus='scsi'/></disk>\
        <disk type='volume' device='disk'><source pool='trog' volume='a.test-disk-b.test-root.qcow2'/><target dev='vdd' bus='virtio'/></disk>\
        </devices></domain>";

    #[test]
    fn the_guests_extra_disks_are_read_with_their_bus() {
        let domain = DomainName::parse("a.test").unwrap();
        let found = extra_disks_in(DOMAIN_XML, &domain);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [
                ("a.test-disk-db.qcow2".to_string(), "virtio".to_string()),
                ("a.test-disk-logs.qcow2".to_string(), "scsi".to_string()),
            ]
        );
        assert!(extra_disks_in("not xml", &domain).is_empty());
    }

    #[test]
    fn a_disk_element_is_found_by_its_volume() {
        let element = disk_of_volume(DOMAIN_XML, "a.test-disk-db.qcow2").unwrap();
        assert!(element.starts_with("<disk "), "{element}");
        assert!(element.contains("dev='vdc'"), "{element}");
        assert!(element.ends_with("</disk>"), "{element}");
        assert_eq!(disk_of_volume(DOMAIN_XML, "a.test-disk-x.qcow2"), None);
    }
}
