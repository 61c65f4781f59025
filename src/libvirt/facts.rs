//! What `preflight` asks libvirt: the daemon's version, the storage pool, and the networks'
//! DHCP ranges.

use crate::libvirt::connection::connect;
use crate::libvirt::error::LibvirtError;
use crate::libvirt::reservation::ipv4_dhcp;
use crate::model::hypervisor::LibvirtUri;
use crate::preflight::{DhcpPool, LibvirtFacts, PoolFacts};
use virt::enumutil::Enum;
use virt::error::ErrorNumber;

/// The version of the libvirt library this process is linked against.
pub fn linked_library_version() -> u32 {
    virt::connect::Connect::version().unwrap_or(0)
}

/// Connects to `uri` and reads the daemon's version and the pool `pool_name`.
pub fn libvirt_facts(uri: &LibvirtUri, pool_name: &str) -> Result<LibvirtFacts, LibvirtError> {
    let connection = connect(uri)?;
    let query = |what, error| LibvirtError::query(&uri.uri, what, error);
    (|| {
        // Over a remote transport, this is the daemon's libvirt, not the local library's.
        let daemon_version = connection
            .lib_version()
            .map_err(|e| query("read libvirt's version", e))?;
        let hypervisor_version = connection.hyp_version().unwrap_or(0);
        let pool = match connection.lookup_storage_pool_by_name(pool_name) {
            Err(error) if matches!(error.code(), Enum::Known(ErrorNumber::NoStoragePool)) => None,
            Err(error) => return Err(query("look up the storage pool", error)),
            Ok(pool) => {
                let xml = pool
                    .xml_desc(0)
                    .map_err(|e| query("read the storage pool's XML", e))?;
                Some(PoolFacts {
                    path: target_path(&xml).unwrap_or_default(),
                    active: pool.is_active().unwrap_or(false),
                })
            }
        };
        let networks = connection
            .list_all_networks(0)
            .map_err(|e| query("list the networks", e))?;
        let mut dhcp_pools = Vec::new();
        for network in networks {
            // A network removed while it is read has no pool to report.
            let (Ok(name), Ok(xml)) = (network.name(), network.xml_desc(0)) else {
                continue;
            };
            let ranges = ipv4_dhcp(&xml).map(|dhcp| dhcp.ranges).unwrap_or_default();
            dhcp_pools.extend(ranges.into_iter().map(|(first, last)| DhcpPool {
                network: name.clone(),
                first,
                last,
            }));
        }
        Ok(LibvirtFacts {
            daemon_version,
            hypervisor_version,
            pool,
            dhcp_pools,
        })
    })()
}

/// The `<target><path>` of a pool's XML.
pub(crate) fn target_path(xml: &str) -> Option<String> {
    let target = &xml[xml.find("<target>")?..];
    let start = target.find("<path>")? + "<path>".len();
    let end = target[start..].find("</path>")? + start;
    Some(target[start..end].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_path_is_read_from_its_target() {
        let xml = "<pool type='dir'><name>p</name><source>\n</source><target>\n    <path>/var/tmp/p</path>\n  </target></pool>";
        assert_eq!(target_path(xml).as_deref(), Some("/var/tmp/p"));
    }
}
