//! The guest's extra disks, read once from the `vm` recipe's `disks` argument: each a volume of
//! its own in the guest's pool, attached on a bus under a serial the guest finds it by
//! (`/dev/disk/by-id/*trog-disk-<name>`), formatted ext4 when blank and mounted by the finish.
//!
//! The recipe's schema checks the shape of each entry (its keys, a name's spelling, the bus's
//! words); what a schema cannot say is checked here, each problem with the JSON pointer of the
//! value at fault so the configuration layer can name the file and line it was written at.

use crate::model::system_directory::system_directory;
use crate::model::units::Bytes;
use crate::render::domain_xml::DiskBus;
use crate::untrusted::one_line;
use serde_json::Value;

/// The smallest extra disk: room for an ext4 filesystem's journal and metadata with files left
/// over. Anything smaller is a unit typed wrong (`64K`).
pub const SMALLEST_EXTRA_DISK: Bytes = Bytes(64 * 1024 * 1024);

/// The largest extra disk, 64 TiB: beyond what a qcow2 volume in a directory pool is sensibly
/// given, so a size typed with a unit too many (`20T` for `20G`) is refused rather than promised.
pub const LARGEST_EXTRA_DISK: Bytes = Bytes(64 * 1024 * 1024 * 1024 * 1024);

/// Device letters a bus names its disks with (`vda`…`vdz`, `sda`…`sdz`): libvirt's target names,
/// which the domain's disks on one bus may not share.
const LETTERS_PER_BUS: usize = 26;

/// One extra disk as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraDisk {
    /// The name it is known by: in its volume's name, its serial and the plan.
    pub name: String,
    pub capacity: Bytes,
    pub bus: DiskBus,
    /// Where the guest mounts it (absolute, never a system directory).
    pub mount: String,
    /// The JSON pointer of its entry in `_global` (`/disks/0`), for messages.
    pub pointer: String,
    /// Where its size was written (`file:line:column`), once the configuration layer has said.
    pub written_at: Option<String>,
}

impl ExtraDisk {
    /// The serial the guest sees it under: `/dev/disk/by-id/virtio-trog-disk-NAME` on virtio,
    /// `…scsi-0QEMU_QEMU_HARDDISK_trog-disk-NAME` on SCSI. virtio-blk carries at most 20 bytes of
    /// serial, which a name of at most 10 characters keeps to.
    pub fn serial(&self) -> String {
        format!("trog-disk-{}", self.name)
    }
}

/// What is wrong with one value of `disks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskProblem {
    /// The JSON pointer of the value in `_global` (`/disks/1/mount`).
    pub pointer: String,
    pub why: String,
}

/// The disks the `vm` recipe's effective arguments (`machine`) declare, in their order. The
/// schema has checked each entry's keys and words; `default_bus` is the guest's `disk_bus`, and
/// `data_mount` is where its data volume is mounted, when it has one.
pub fn extra_disks(
    machine: &Value,
    default_bus: DiskBus,
    data_mount: Option<&str>,
) -> Result<Vec<ExtraDisk>, Vec<DiskProblem>> {
    let entries = machine
        .get("disks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut disks = Vec::new();
    let mut problems = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let pointer = format!("/disks/{index}");
        let word = |key: &str| entry.get(key).and_then(Value::as_str);
        let name = word("name").unwrap_or_default().to_string();
        let bus = match word("bus") {
            Some("scsi") => DiskBus::Scsi,
            Some(_) => DiskBus::Virtio,
            None => default_bus,
        };
        let mount = word("mount").unwrap_or_default().to_string();
        let mut problem = |key: &str, why: String| {
            problems.push(DiskProblem {
                pointer: format!("{pointer}/{key}"),
                why,
            })
        };
        let capacity = match size_of(entry.get("size")) {
            Ok(capacity) => capacity,
            Err(why) => {
                problem("size", why);
                Bytes(0)
            }
        };
        if let Some(why) = mount_problem(&mount) {
            problem("mount", why);
        }
        if data_mount.is_some_and(|data| same_path(data, &mount)) {
            problem(
                "mount",
                format!("{mount} is where the data volume is mounted (data_mount)"),
            );
        }
        if let Some(earlier) = disks.iter().find(|disk: &&ExtraDisk| disk.name == name) {
            problem(
                "name",
                format!(
                    "disk {name} is declared twice (the first is disks[{}])",
                    earlier.pointer.trim_start_matches("/disks/")
                ),
            );
        }
        if let Some(earlier) = disks
            .iter()
            .find(|disk: &&ExtraDisk| same_path(&disk.mount, &mount))
        {
            problem(
                "mount",
                format!(
                    "{mount} is the mount point of disk {} too; each disk needs its own",
                    earlier.name
                ),
            );
        }
        disks.push(ExtraDisk {
            name,
            capacity,
            bus,
            mount,
            pointer,
            written_at: None,
        });
    }
    for bus in [DiskBus::Virtio, DiskBus::Scsi] {
        let room = LETTERS_PER_BUS - reserved_letters(bus, default_bus);
        let on_bus: Vec<&ExtraDisk> = disks.iter().filter(|disk| disk.bus == bus).collect();
        if let Some(first_too_many) = on_bus.get(room) {
            problems.push(DiskProblem {
                pointer: format!("{}/name", first_too_many.pointer),
                why: format!(
                    "the {} bus has room for {room} extra disks beside the guest's own, and this is disk {}",
                    bus.as_str(),
                    room + 1
                ),
            });
        }
    }
    if problems.is_empty() {
        Ok(disks)
    } else {
        Err(problems)
    }
}

/// The device letters on `bus` the guest's own disks take: on the guest's `disk_bus` its root and
/// data disks (whether or not it has a data volume, so that declaring one later moves no extra
/// disk), and on SCSI the seed's cdrom.
fn reserved_letters(bus: DiskBus, default_bus: DiskBus) -> usize {
    let own_disks = if bus == default_bus { 2 } else { 0 };
    let seed = usize::from(bus == DiskBus::Scsi);
    own_disks + seed
}

/// The target device names of `disks`, in their order: each bus's letters after the guest's own.
pub fn target_devices(disks: &[ExtraDisk], default_bus: DiskBus) -> Vec<String> {
    let mut used = [0usize; 2];
    disks
        .iter()
        .map(|disk| {
            let slot = usize::from(disk.bus == DiskBus::Scsi);
            let letter = reserved_letters(disk.bus, default_bus) + used[slot];
            used[slot] += 1;
            let prefix = match disk.bus {
                DiskBus::Virtio => "vd",
                DiskBus::Scsi => "sd",
            };
            format!("{prefix}{}", char::from(b'a' + letter as u8))
        })
        .collect()
}

/// What the extra disks `_global` (merged, as written) lists take of a pool at most, for
/// placement: each size that reads as one (a wrong one is refused when the guest is generated).
pub fn declared_capacity(global: &serde_json::Map<String, Value>) -> Bytes {
    let total = global
        .get("disks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| size_of(entry.get("size")).ok())
        .fold(0u64, |total, size| total.saturating_add(size.0));
    Bytes(total)
}

/// A size as `size:` is written: a bare number is GiB, or with K/M/G/T.
fn size_of(value: Option<&Value>) -> Result<Bytes, String> {
    let text = match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) if number.is_u64() => number.to_string(),
        Some(other) => return Err(format!("expected a size such as 20G, found {other}")),
        None => return Err("every disk needs a size".to_string()),
    };
    let size = Bytes::parse_disk(&text).map_err(|error| error.to_string())?;
    if size < SMALLEST_EXTRA_DISK {
        return Err(format!(
            "{size} is smaller than a disk trog formats (at least {SMALLEST_EXTRA_DISK})"
        ));
    }
    if size > LARGEST_EXTRA_DISK {
        return Err(format!(
            "{size} is more than an extra disk may be ({LARGEST_EXTRA_DISK} at most)"
        ));
    }
    Ok(size)
}

/// Why `mount` cannot be a disk's mount point, if it cannot: it must be absolute, plain (letters,
/// digits, `.`, `_`, `-` between slashes, no `.` or `..` segment), and no system directory
/// (mounting an empty disk there would hide the guest's own system). The rule of every disk the
/// finish mounts: the extra disks' `mount` and the data volume's `data_mount`.
pub fn mount_problem(mount: &str) -> Option<String> {
    if !mount.starts_with('/') {
        return Some(format!("`{}` is not an absolute path", one_line(mount)));
    }
    let plain = mount
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    if !plain || mount.len() > 255 {
        return Some(format!(
            "`{}` is not a plain path (letters, digits, `.`, `_`, `-` between slashes, at most 255 bytes)",
            one_line(mount)
        ));
    }
    let segments: Vec<&str> = mount.split('/').skip(1).collect();
    let trailing_slash_only = segments.len() > 1 && segments.last() == Some(&"");
    let inner = if trailing_slash_only {
        &segments[..segments.len() - 1]
    } else {
        &segments[..]
    };
    if inner
        .iter()
        .any(|segment| matches!(*segment, "." | "..") || (segment.is_empty() && inner.len() > 1))
    {
        return Some(format!(
            "{mount} has an empty, `.` or `..` part; write the path plainly"
        ));
    }
    system_directory(mount).map(|directory| {
        format!(
            "{directory} is the guest's own system; mount the disk somewhere of its own (/srv/…, /var/lib/…)"
        )
    })
}

/// `mount` without a trailing slash (`/srv/db/` is `/srv/db`; `/` stays `/`).
fn normalised(mount: &str) -> String {
    let trimmed = mount.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    }
}

fn same_path(one: &str, other: &str) -> bool {
    normalised(one) == normalised(other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(disks: Value) -> Result<Vec<ExtraDisk>, Vec<DiskProblem>> {
        extra_disks(&json!({ "disks": disks }), DiskBus::Virtio, None)
    }

    fn problems(disks: Value) -> Vec<(String, String)> {
        read(disks)
            .unwrap_err()
            .into_iter()
            .map(|problem| (problem.pointer, problem.why))
            .collect()
    }

    #[test]
    fn disks_are_read_in_order_with_the_guest_bus_as_default() {
        let disks = read(json!([
            {"name": "db", "size": "20G", "mount": "/var/lib/postgresql"},
            {"name": "logs", "size": 2, "mount": "/srv/logs/", "bus": "scsi"},
        ]))
        .unwrap();
        assert_eq!(disks[0].name, "db");
        assert_eq!(disks[0].capacity, Bytes::from_gib(20));
        assert_eq!(disks[0].bus, DiskBus::Virtio);
        assert_eq!(disks[0].serial(), "trog-disk-db");
        assert_eq!(disks[1].capacity, Bytes::from_gib(2));
        assert_eq!(disks[1].bus, DiskBus::Scsi);
        assert_eq!(disks[1].pointer, "/disks/1");
        assert_eq!(target_devices(&disks, DiskBus::Virtio), ["vdc", "sdb"]);
        assert_eq!(target_devices(&disks, DiskBus::Scsi), ["vda", "sdd"]);
    }

    #[test]
    fn placement_counts_every_declared_size() {
        let global = json!({"disks": [
            {"name": "a", "size": "20G", "mount": "/srv/a"},
            {"name": "b", "size": 2, "mount": "/srv/b"},
            {"name": "c", "size": "wrong", "mount": "/srv/c"},
        ]});
        assert_eq!(
            declared_capacity(global.as_object().unwrap()),
            Bytes::from_gib(22)
        );
        assert_eq!(declared_capacity(json!({}).as_object().unwrap()), Bytes(0));
    }

    #[test]
    fn no_disks_is_an_empty_list() {
        assert_eq!(extra_disks(&json!({}), DiskBus::Virtio, None), Ok(vec![]));
        assert_eq!(read(json!([])), Ok(vec![]));
    }

    #[test]
    fn bad_sizes_are_refused_at_their_value() {
        for (size, says) in [
            (json!("0"), "smaller"),
            (json!("1M"), "smaller"),
            (json!("65T"), "at most"),
            (json!("lots"), ""),
            (json!(-2), "expected a size"),
            (json!([20]), "expected a size"),
        ] {
            let found = problems(json!([{"name": "a", "size": size, "mount": "/srv/a"}]));
            assert_eq!(found.len(), 1, "{size}: {found:?}");
            assert_eq!(found[0].0, "/disks/0/size");
            assert!(found[0].1.contains(says), "{size}: {found:?}");
        }
    }

    #[test]
    fn bad_mount_points_are_refused() {
        for (mount, says) in [
            ("srv/a", "not an absolute path"),
            ("/", "own system"),
            ("//", "own system"),
            ("/etc/", "own system"),
            ("/usr", "own system"),
            ("/srv/../etc", "`..`"),
            ("/srv//a", "empty"),
            ("/srv/a b", "not a plain path"),
            ("/srv/$(reboot)", "not a plain path"),
        ] {
            let found = problems(json!([{"name": "a", "size": "1G", "mount": mount}]));
            assert_eq!(found.len(), 1, "{mount}: {found:?}");
            assert_eq!(found[0].0, "/disks/0/mount");
            assert!(found[0].1.contains(says), "{mount}: {found:?}");
        }
    }

    #[test]
    fn a_name_or_mount_point_used_twice_is_refused_at_the_second() {
        let found = problems(json!([
            {"name": "a", "size": "1G", "mount": "/srv/a"},
            {"name": "a", "size": "1G", "mount": "/srv/b"},
            {"name": "c", "size": "1G", "mount": "/srv/a/"},
        ]));
        assert_eq!(
            found,
            [
                (
                    "/disks/1/name".to_string(),
                    "disk a is declared twice (the first is disks[0])".to_string()
                ),
                (
                    "/disks/2/mount".to_string(),
                    "/srv/a/ is the mount point of disk a too; each disk needs its own".to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_data_volume_mount_point_is_taken() {
        let found = extra_disks(
            &json!({"disks": [{"name": "a", "size": "1G", "mount": "/srv/data/"}]}),
            DiskBus::Virtio,
            Some("/srv/data"),
        )
        .unwrap_err();
        assert!(found[0].why.contains("data volume"), "{found:?}");
    }

    #[test]
    fn a_bus_holds_as_many_disks_as_it_has_letters() {
        let many = |count: usize, bus: &str| {
            Value::Array(
                (0..count)
                    .map(|index| {
                        json!({"name": format!("d{index}"), "size": "1G",
                               "mount": format!("/srv/d{index}"), "bus": bus})
                    })
                    .collect(),
            )
        };
        assert!(read(many(24, "virtio")).is_ok());
        let found = problems(many(25, "virtio"));
        assert_eq!(found[0].0, "/disks/24/name");
        assert!(found[0].1.contains("room for 24"), "{found:?}");
        // SCSI: the seed's cdrom takes a letter too.
        assert!(read(many(25, "scsi")).is_ok());
        assert!(read(many(26, "scsi")).is_err());
        let devices = target_devices(&read(many(24, "virtio")).unwrap(), DiskBus::Virtio);
        assert_eq!(devices.last().unwrap(), "vdz");
    }
}
