//! What uses a volume of a pool: the volumes layered over it and the domains whose disk it is.
//! `image prune` removes a baked image's copy only when nothing does.

use crate::hypervisor::VolumeUse;
use crate::libvirt::error::LibvirtError;
use virt::connect::Connect;
use virt::error::ErrorNumber;

/// Whether `volume` is in `pool`, and what uses it.
pub fn volume_use(
    connection: &Connect,
    uri: &str,
    pool: &str,
    volume: &str,
) -> Result<VolumeUse, LibvirtError> {
    let query = |operation| move |error| LibvirtError::query(uri, operation, error);
    let pool = match connection.lookup_storage_pool_by_name(pool) {
        Ok(pool) => pool,
        Err(error) if error.code().is(ErrorNumber::NoStoragePool) => return Ok(VolumeUse::Absent),
        Err(error) => return Err(query("find the pool")(error)),
    };
    let copy = match pool.lookup_storage_vol_by_name(volume) {
        Ok(copy) => copy,
        Err(error) if error.code().is(ErrorNumber::NoStorageVolume) => {
            return Ok(VolumeUse::Absent)
        }
        Err(error) => return Err(query("find the base image")(error)),
    };
    let path = copy.path().map_err(query("read the base image's path"))?;
    let mut by = Vec::new();
    for other in pool
        .list_all_volumes(0)
        .map_err(query("list the pool's volumes"))?
    {
        // A volume deleted since the pool was listed is layered over nothing.
        let xml = match other.xml_desc(0) {
            Ok(xml) => xml,
            Err(error) if error.code().is(ErrorNumber::NoStorageVolume) => continue,
            Err(error) => return Err(query("read a volume's definition")(error)),
        };
        if backing_path(&xml).as_deref() == Some(path.as_str()) {
            by.push(format!(
                "volume {}",
                other.name().map_err(query("read a volume's name"))?
            ));
        }
    }
    for domain in connection
        .list_all_domains(0)
        .map_err(query("list the domains"))?
    {
        // A domain undefined since the domains were listed (another run's destroy, a transient
        // domain that ended) uses nothing.
        let xml = match domain.xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE) {
            Ok(xml) => xml,
            Err(error) if error.code().is(ErrorNumber::NoDomain) => continue,
            Err(error) => return Err(query("read a domain's definition")(error)),
        };
        let pool_name = pool.name().map_err(query("read the pool's name"))?;
        if disk_sources(&xml)
            .iter()
            .any(|source| source.is(&path, &pool_name, volume))
        {
            by.push(format!(
                "domain {}",
                domain.name().map_err(query("read a domain's name"))?
            ));
        }
    }
    Ok(if by.is_empty() {
        VolumeUse::Unused
    } else {
        VolumeUse::Used { by }
    })
}

/// The path of the file a volume is layered over, from its definition.
fn backing_path(volume_xml: &str) -> Option<String> {
    let document = roxmltree::Document::parse(volume_xml).ok()?;
    let backing = document
        .root_element()
        .children()
        .find(|node| node.has_tag_name("backingStore"))?;
    backing
        .children()
        .find(|node| node.has_tag_name("path"))
        .and_then(|path| path.text())
        .map(|text| text.trim().to_string())
}

/// A disk's source in a domain's definition: a file, or a volume of a pool.
#[derive(Debug, PartialEq, Eq)]
enum DiskSource {
    File(String),
    Volume { pool: String, volume: String },
}

impl DiskSource {
    fn is(&self, path: &str, pool: &str, volume: &str) -> bool {
        match self {
            DiskSource::File(file) => file == path,
            DiskSource::Volume {
                pool: their_pool,
                volume: their_volume,
            } => their_pool == pool && their_volume == volume,
        }
    }
}

fn disk_sources(domain_xml: &str) -> Vec<DiskSource> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("disk"))
        .flat_map(|disk| {
            disk.descendants()
                .filter(|node| node.has_tag_name("source"))
        })
        .filter_map(
            |source| match (source.attribute("file"), source.attribute("pool")) {
                (Some(file), _) => Some(DiskSource::File(file.to_string())),
                (None, Some(pool)) => Some(DiskSource::Volume {
                    pool: pool.to_string(),
                    volume: source.attribute("volume")?.to_string(),
                }),
                (None, None) => None,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_names_the_file_it_is_layered_over() {
        let root = "<volume type='file'><name>g-root.qcow2</name><target><path>/pool/g-root.qcow2</path></target>\
             <backingStore><path>/pool/trog-base-5555555555555555.qcow2</path><format type='qcow2'/></backingStore></volume>";
        assert_eq!(
            backing_path(root).as_deref(),
            Some("/pool/trog-base-5555555555555555.qcow2")
        );
        let plain = "<volume type='file'><name>base.qcow2</name><target><path>/pool/base.qcow2</path></target><backingStore/></volume>";
        assert_eq!(backing_path(plain), None);
    }

    #[test]
    fn a_domains_disks_are_files_or_volumes_of_a_pool() {
        let xml = "<domain><devices>\
             <disk type='volume' device='disk'><source pool='trog' volume='g-root.qcow2'/></disk>\
             <disk type='file' device='disk'><source file='/pool/trog-base-5555555555555555.qcow2'/>\
             <backingStore type='file'><source file='/elsewhere/x.qcow2'/></backingStore></disk>\
             <interface type='network'><source network='default'/></interface>\
             </devices></domain>";
        let sources = disk_sources(xml);
        assert!(sources[0].is("/nowhere", "trog", "g-root.qcow2"));
        assert!(sources[1].is("/pool/trog-base-5555555555555555.qcow2", "x", "y"));
        // A backing chain's own files count too: a disk layered over the copy uses it.
        assert!(sources[2].is("/elsewhere/x.qcow2", "x", "y"));
        assert_eq!(sources.len(), 3, "the interface's source is not a disk's");
    }
}
