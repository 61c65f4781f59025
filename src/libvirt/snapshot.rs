//! A guest's snapshots through libvirt: internal qcow2 snapshots of every writable disk (root and
//! data), with the domain's definition (and trog's tag in it) and, for a running guest, its
//! memory. The shared base image under a root disk is a read-only backing file: an internal
//! snapshot is written into the guest's own overlay, never into it. Why internal and not external
//! overlays is in docs/BACKUPS.md.

use crate::hypervisor::HypervisorFault;
pub use crate::hypervisor::SnapshotError;
use crate::libvirt::trog_tag::is_trogs;
use crate::render::domain_xml::metadata::{parse_tag, TAG_NAMESPACE};
use crate::snapshot::{Capture, SnapshotRecord};
use virt::domain::Domain;
use virt::error::ErrorNumber;

/// A trog guest's domain on one hypervisor, for snapshot work.
pub struct GuestSnapshots<'a> {
    pub hypervisor: &'a str,
    pub domain: Domain,
    pub name: String,
}

impl<'a> GuestSnapshots<'a> {
    /// Looks up `name` on `connection`; refuses a domain without trog's tag.
    pub fn open(
        connection: &virt::connect::Connect,
        hypervisor: &'a str,
        name: &str,
    ) -> Result<GuestSnapshots<'a>, SnapshotError> {
        let domain =
            connection
                .lookup_domain_by_name(name)
                .map_err(|source| SnapshotError::Backend {
                    backend: "libvirt",
                    hypervisor: hypervisor.to_string(),
                    domain: name.to_string(),
                    operation: "look up the domain".into(),
                    source: HypervisorFault::new(source),
                })?;
        let tagged = is_trogs(&domain);
        if !tagged {
            return Err(SnapshotError::Foreign {
                hypervisor: hypervisor.to_string(),
                domain: name.to_string(),
            });
        }
        Ok(GuestSnapshots {
            hypervisor,
            domain,
            name: name.to_string(),
        })
    }

    fn fail(
        &self,
        operation: impl Into<String>,
    ) -> impl FnOnce(virt::error::Error) -> SnapshotError {
        let (hypervisor, domain, operation) = (
            self.hypervisor.to_string(),
            self.name.clone(),
            operation.into(),
        );
        move |source| SnapshotError::Backend {
            backend: "libvirt",
            hypervisor,
            domain,
            operation,
            source: HypervisorFault::new(source),
        }
    }

    /// Every snapshot the guest has, as libvirt lists them.
    pub fn list(&self) -> Result<Vec<SnapshotRecord>, SnapshotError> {
        let snapshots = self
            .domain
            .list_all_snapshots(0)
            .map_err(self.fail("list the snapshots"))?;
        snapshots
            .iter()
            .map(|snapshot| {
                let name = snapshot
                    .name()
                    .map_err(self.fail("read a snapshot's name"))?;
                let xml = snapshot
                    .xml_desc(0)
                    .map_err(self.fail(format!("read snapshot {name}")))?;
                parse_snapshot_xml(&xml).map_err(|source| SnapshotError::Unreadable {
                    backend: "libvirt",
                    hypervisor: self.hypervisor.to_string(),
                    domain: self.name.clone(),
                    name,
                    source: source.into(),
                })
            })
            .collect()
    }

    /// The files of the guest's disks (root and data, not the seed) on the hypervisor, as their
    /// pools name them.
    pub fn disk_paths(
        &self,
        connection: &virt::connect::Connect,
    ) -> Result<Vec<String>, SnapshotError> {
        let xml = self
            .domain
            .xml_desc(0)
            .map_err(self.fail("read the domain's definition"))?;
        let disks = crate::debug_boot::guest_disk::domain_disks(&xml).unwrap_or_default();
        disks
            .iter()
            .map(|disk| {
                connection
                    .lookup_storage_pool_by_name(&disk.pool)
                    .and_then(|pool| pool.lookup_storage_vol_by_name(&disk.volume))
                    .and_then(|volume| volume.path())
                    .map_err(self.fail(format!("find the file of volume {}", disk.volume)))
            })
            .collect()
    }

    pub fn is_running(&self) -> Result<bool, SnapshotError> {
        self.domain
            .is_active()
            .map_err(self.fail("ask whether the domain runs"))
    }

    /// Takes snapshot `name`: with memory when the guest runs, offline when it is shut off.
    /// Atomic: libvirt either records the whole snapshot or none of it. A running guest that the
    /// attempt left paused is resumed, so a failed snapshot leaves the guest as it was.
    pub fn take(&self, name: &str) -> Result<Capture, SnapshotError> {
        let running = self.is_running()?;
        let domain_xml = self
            .domain
            .xml_desc(0)
            .map_err(self.fail("read the domain's definition"))?;
        if running && shares_folders(&domain_xml) {
            // QEMU cannot save a vhost-user-fs device's state: refused here, before libvirt
            // pauses the guest to try.
            return Err(SnapshotError::SharedFoldersRunning {
                hypervisor: self.hypervisor.to_string(),
                domain: self.name.clone(),
            });
        }
        let capture = if running {
            Capture::WithMemory
        } else {
            Capture::Offline
        };
        let xml = snapshot_request_xml(name, capture, &disk_targets(&domain_xml));
        let result = self
            .domain
            .create_snapshot_xml(&xml, virt::sys::VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC)
            .map_err(self.fail(format!("take snapshot {name}")));
        if running && result.is_err() {
            self.resume_if_paused();
        }
        result.map(|_| capture)
    }

    fn resume_if_paused(&self) {
        let paused = self
            .domain
            .info()
            .map(|info| {
                info.state == virt::enumutil::Enum::Known(virt::domain::DomainState::Paused)
            })
            .unwrap_or(false);
        if paused {
            let _ = self.domain.resume();
        }
    }

    /// Deletes snapshot `name` (its metadata and the states it holds in the guest's disks).
    pub fn delete(&self, name: &str) -> Result<(), SnapshotError> {
        let snapshot = Domain::lookup_snapshot_by_name(&self.domain, name, 0)
            .map_err(self.fail(format!("find snapshot {name}")))?;
        snapshot
            .delete(0)
            .map_err(self.fail(format!("delete snapshot {name}")))
    }

    /// Returns the guest to snapshot `name`: its disks, its definition and, when the snapshot
    /// has one, its memory (the guest runs again where it was). A revert libvirt calls risky
    /// (the definition changed in a way a running guest cannot follow) is done by restarting:
    /// the user asked for exactly this snapshot.
    pub fn revert(&self, name: &str) -> Result<(), SnapshotError> {
        let snapshot = Domain::lookup_snapshot_by_name(&self.domain, name, 0)
            .map_err(self.fail(format!("find snapshot {name}")))?;
        match snapshot.revert(0) {
            Ok(()) => Ok(()),
            Err(error) if error.code().is(ErrorNumber::SnapshotRevertRisky) => snapshot
                .revert(virt::sys::VIR_DOMAIN_SNAPSHOT_REVERT_FORCE)
                .map_err(self.fail(format!("restore snapshot {name}"))),
            Err(error) => Err(self.fail(format!("restore snapshot {name}"))(error)),
        }
    }
}

/// The names of `domain`'s snapshots, oldest first (for the planner, which only needs to know
/// which there are).
pub fn snapshot_names_oldest_first(domain: &Domain) -> Result<Vec<String>, virt::error::Error> {
    let mut records = Vec::new();
    for snapshot in domain.list_all_snapshots(0)? {
        let name = snapshot.name()?;
        let created = parse_snapshot_xml(&snapshot.xml_desc(0)?)
            .map(|record| record.created_unix)
            .unwrap_or(0);
        records.push((created, name));
    }
    records.sort();
    Ok(records.into_iter().map(|(_, name)| name).collect())
}

/// Whether a domain's XML shares a folder through virtiofs.
fn shares_folders(domain_xml: &str) -> bool {
    roxmltree::Document::parse(domain_xml).is_ok_and(|document| {
        document.descendants().any(|node| {
            node.has_tag_name("driver")
                && node.attribute("type") == Some("virtiofs")
                && node
                    .parent()
                    .is_some_and(|parent| parent.has_tag_name("filesystem"))
        })
    })
}

/// The target device and whether it is writable, of each disk in a domain's XML.
fn disk_targets(domain_xml: &str) -> Vec<(String, bool)> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    document
        .descendants()
        .filter(|node| node.has_tag_name("disk"))
        .filter_map(|disk| {
            let target = disk
                .children()
                .find(|node| node.has_tag_name("target"))?
                .attribute("dev")?
                .to_string();
            let read_only = disk.attribute("device") == Some("cdrom")
                || disk.children().any(|node| node.has_tag_name("readonly"));
            Some((target, !read_only))
        })
        .collect()
}

/// The XML of a snapshot request: every writable disk internal, the seed cdrom left out (it is
/// read-only and rebuilt from the declaration), the memory with it when the guest runs.
pub fn snapshot_request_xml(name: &str, capture: Capture, disks: &[(String, bool)]) -> String {
    let memory = match capture {
        Capture::WithMemory => "internal",
        Capture::Offline => "no",
    };
    let disks: String = disks
        .iter()
        .map(|(target, writable)| {
            format!(
                "<disk name='{target}' snapshot='{}'/>",
                if *writable { "internal" } else { "no" }
            )
        })
        .collect();
    format!(
        "<domainsnapshot><name>{name}</name><description>taken by trog</description>\
         <memory snapshot='{memory}'/><disks>{disks}</disks></domainsnapshot>"
    )
}

/// A snapshot's record from the XML libvirt describes it with.
pub fn parse_snapshot_xml(xml: &str) -> Result<SnapshotRecord, String> {
    let document = roxmltree::Document::parse(xml).map_err(|error| error.to_string())?;
    let root = document.root_element();
    let child_text = |name: &str| {
        root.children()
            .find(|node| node.has_tag_name(name))
            .and_then(|node| node.text())
            .map(str::trim)
    };
    let name = child_text("name").ok_or("no <name>")?.to_string();
    let created_unix = child_text("creationTime")
        .ok_or("no <creationTime>")?
        .parse::<i64>()
        .map_err(|error| format!("<creationTime>: {error}"))?;
    let state = child_text("state").ok_or("no <state>")?;
    let running = matches!(state, "running" | "paused" | "blocked");
    let with_memory = root
        .children()
        .find(|node| node.has_tag_name("memory"))
        .and_then(|node| node.attribute("snapshot"))
        .is_some_and(|kind| kind == "internal" || kind == "external");
    let tag = root
        .descendants()
        .find(|node| node.tag_name().namespace() == Some(TAG_NAMESPACE))
        .and_then(|node| parse_tag(&xml[node.range()]));
    Ok(SnapshotRecord {
        name,
        created_unix,
        running,
        capture: if with_memory {
            Capture::WithMemory
        } else {
            Capture::Offline
        },
        tag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtiofs_filesystem_is_a_shared_folder_and_a_disk_is_not() {
        assert!(shares_folders(
            "<domain><devices><filesystem type='mount'><driver type='virtiofs'/>\
             <source dir='/srv/x'/><target dir='x'/></filesystem></devices></domain>"
        ));
        assert!(!shares_folders(
            "<domain><devices><disk type='volume'><driver name='qemu' type='qcow2'/></disk>\
             </devices></domain>"
        ));
    }

    #[test]
    fn a_request_snapshots_writable_disks_and_leaves_the_seed_out() {
        let domain = "<domain><devices>\
            <disk type='volume' device='disk'><target dev='vda' bus='virtio'/></disk>\
            <disk type='volume' device='disk'><target dev='vdb' bus='virtio'/></disk>\
            <disk type='volume' device='cdrom'><target dev='sda' bus='scsi'/><readonly/></disk>\
            </devices></domain>";
        let disks = disk_targets(domain);
        assert_eq!(
            snapshot_request_xml("s1", Capture::WithMemory, &disks),
            "<domainsnapshot><name>s1</name><description>taken by trog</description>\
             <memory snapshot='internal'/><disks><disk name='vda' snapshot='internal'/>\
             <disk name='vdb' snapshot='internal'/><disk name='sda' snapshot='no'/></disks>\
             </domainsnapshot>"
        );
        assert!(snapshot_request_xml("s2", Capture::Offline, &disks)
            .contains("<memory snapshot='no'/>"));
    }

    #[test]
    fn a_snapshot_is_read_back_with_its_state_capture_and_tag() {
        let xml = "<domainsnapshot><name>20261130T212233Z</name><state>running</state>\
            <creationTime>1796073753</creationTime><memory snapshot='internal'/>\
            <domain type='qemu'><name>g.test</name><metadata>\
            <trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='g.test' boot='b' shape='s' payload='p'/>\
            </metadata></domain></domainsnapshot>";
        let record = parse_snapshot_xml(xml).unwrap();
        assert_eq!(record.name, "20261130T212233Z");
        assert_eq!(record.created_unix, 1_796_073_753);
        assert!(record.running);
        assert_eq!(record.capture, Capture::WithMemory);
        let tag = record.tag.unwrap();
        assert_eq!(tag.boot_fingerprint, "b");
        assert_eq!(tag.payload_digest.as_deref(), Some("p"));

        let offline = "<domainsnapshot><name>x</name><state>shutoff</state>\
            <creationTime>1</creationTime><memory snapshot='no'/></domainsnapshot>";
        let record = parse_snapshot_xml(offline).unwrap();
        assert!(!record.running);
        assert_eq!(record.capture, Capture::Offline);
        assert_eq!(record.tag, None);
        assert!(parse_snapshot_xml("<domainsnapshot/>").is_err());
    }
}
