//! What a hypervisor can honestly tell of the room a guest's snapshots take. trog's snapshots
//! are internal qcow2 snapshots (docs/BACKUPS.md), and qcow2 keeps them as reference counts on
//! clusters the guest's current state shares: no tool can say how much of a disk belongs to one
//! snapshot alone, and libvirt says nothing of sizes per snapshot at all. What can be told, from
//! `qemu-img info` on each of the guest's disks:
//! - per snapshot, the memory it holds (`vm-state-size`: the saved RAM and device state of a
//!   snapshot taken while the guest ran; none for one taken shut off), which is that snapshot's
//!   own and freed when it is deleted;
//! - per guest, the space its disks take on the hypervisor (`actual-size`), the current state
//!   and every snapshot's kept clusters and memory together.

use std::collections::BTreeMap;

/// One disk image as `qemu-img info --output=json` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// Bytes the image's file takes on the hypervisor's filesystem.
    pub allocated_bytes: u64,
    /// Each internal snapshot's saved memory, by snapshot name (0 for one without memory).
    pub snapshot_memory: BTreeMap<String, u64>,
}

#[derive(Debug, serde::Deserialize)]
struct QemuImgInfo {
    #[serde(rename = "actual-size")]
    actual_size: u64,
    #[serde(default)]
    snapshots: Vec<QemuImgSnapshot>,
}

#[derive(Debug, serde::Deserialize)]
struct QemuImgSnapshot {
    name: String,
    #[serde(rename = "vm-state-size")]
    vm_state_size: u64,
}

/// Reads `qemu-img info --output=json`'s answer for one image.
pub fn parse_image_info(json: &str) -> Result<ImageInfo, String> {
    let info: QemuImgInfo = serde_json::from_str(json)
        .map_err(|error| format!("qemu-img's description of the image is unreadable: {error}"))?;
    Ok(ImageInfo {
        allocated_bytes: info.actual_size,
        snapshot_memory: info
            .snapshots
            .into_iter()
            .map(|snapshot| (snapshot.name, snapshot.vm_state_size))
            .collect(),
    })
}

/// The space of a guest's disks and each snapshot's memory, over all its disks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotSpace {
    /// Bytes the guest's disks take on the hypervisor: the current state and every snapshot.
    pub disk_bytes: u64,
    /// Each snapshot's saved memory, by name; a snapshot no disk knows is absent.
    pub memory_bytes: BTreeMap<String, u64>,
}

/// Adds up the images of one guest. QEMU writes a snapshot's memory into one of its disks only,
/// so summing over the disks counts it once.
pub fn snapshot_space(images: &[ImageInfo]) -> SnapshotSpace {
    let mut memory_bytes = BTreeMap::new();
    for image in images {
        for (name, bytes) in &image.snapshot_memory {
            *memory_bytes.entry(name.clone()).or_insert(0) += bytes;
        }
    }
    SnapshotSpace {
        disk_bytes: images.iter().map(|image| image.allocated_bytes).sum(),
        memory_bytes,
    }
}

/// A size as people read it, in binary units with one decimal (`312.5 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from `qemu-img info --output=json -U` on a root disk with two internal snapshots.
    const ROOT: &str = r#"{
        "snapshots": [
            {"icount": 0, "vm-clock-nsec": 5, "name": "running-1", "date-sec": 1796097514,
             "date-nsec": 0, "vm-clock-sec": 30, "id": "1", "vm-state-size": 331350016},
            {"icount": 0, "vm-clock-nsec": 0, "name": "off-1", "date-sec": 1796097600,
             "date-nsec": 0, "vm-clock-sec": 0, "id": "2", "vm-state-size": 0}
        ],
        "virtual-size": 4294967296, "filename": "/pool/root.qcow2", "cluster-size": 65536,
        "format": "qcow2", "actual-size": 912261120, "backing-filename": "/pool/base.qcow2",
        "dirty-flag": false
    }"#;
    const DATA: &str = r#"{
        "snapshots": [
            {"name": "running-1", "id": "1", "vm-state-size": 0},
            {"name": "off-1", "id": "2", "vm-state-size": 0}
        ],
        "virtual-size": 1073741824, "format": "qcow2", "actual-size": 7340032
    }"#;

    #[test]
    fn memory_is_counted_once_and_disks_added_up() {
        let images = [
            parse_image_info(ROOT).unwrap(),
            parse_image_info(DATA).unwrap(),
        ];
        let space = snapshot_space(&images);
        assert_eq!(space.disk_bytes, 912261120 + 7340032);
        assert_eq!(
            space.memory_bytes,
            BTreeMap::from([
                ("off-1".to_string(), 0),
                ("running-1".to_string(), 331350016)
            ])
        );
    }

    #[test]
    fn an_image_without_snapshots_has_only_its_allocation() {
        let info =
            parse_image_info(r#"{"format": "qcow2", "actual-size": 200704, "virtual-size": 1}"#)
                .unwrap();
        assert_eq!(info.allocated_bytes, 200704);
        assert!(info.snapshot_memory.is_empty());
    }

    #[test]
    fn an_unreadable_answer_says_so() {
        let error = parse_image_info("qemu-img: Could not open").unwrap_err();
        assert!(error.contains("unreadable"), "{error}");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(331350016), "316.0 MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
