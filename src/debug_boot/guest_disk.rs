//! The pure parts of reading and changing a shut-off guest's disks with libguestfs: which disks
//! a domain has (and in which pools), a path in the guest as libguestfs takes it, `single` on the kernel command lines
//! of a GRUB configuration, and what libguestfs answered.

/// The guest's own GRUB configuration: where Debian's GRUB and trog's images (whose core image
/// only runs this file) read the kernel command line at every boot.
pub const GRUB_CONFIG: &str = "/boot/grub/grub.cfg";

/// Where `--single` keeps the configuration it replaced, beside it on the guest's own disk, so
/// that `--restore` puts back those very bytes (and nothing on this machine has to remember them).
pub const GRUB_CONFIG_BEFORE_SINGLE: &str = "/boot/grub/grub.cfg.before-trog-single";

/// The word that makes the kernel hand it on to systemd, which then boots its rescue target.
const SINGLE: &str = "single";

/// A disk of a domain, as its definition names it: a volume of a storage pool and the format
/// libvirt reads it in (trog's root disks are qcow2 overlays on a base image).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainDisk {
    pub pool: String,
    pub volume: String,
    pub format: String,
}

/// A disk as libguestfs opens it: its file on the hypervisor and its format (never probed: a
/// probed raw disk could claim to be anything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFile {
    pub path: String,
    pub format: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestPathError {
    #[error("{path:?} is not an absolute path in the guest")]
    NotAbsolute { path: String },
    #[error("the domain's definition names no disk of a storage pool")]
    NoDisk,
    #[error("{path} in the guest has no kernel line (`linux …`) to put `single` on")]
    NoKernelLine { path: String },
}

/// The disks (not the cdroms) of a domain's XML that live in a storage pool, in order.
pub fn domain_disks(xml: &str) -> Result<Vec<DomainDisk>, GuestPathError> {
    let document = roxmltree::Document::parse(xml).map_err(|_| GuestPathError::NoDisk)?;
    let disks: Vec<DomainDisk> = document
        .descendants()
        .filter(|node| node.has_tag_name("disk") && node.attribute("device") == Some("disk"))
        .filter_map(|disk| {
            let source = disk.children().find(|node| node.has_tag_name("source"))?;
            let format = disk
                .children()
                .find(|node| node.has_tag_name("driver"))
                .and_then(|driver| driver.attribute("type"))
                .unwrap_or("raw");
            Some(DomainDisk {
                pool: source.attribute("pool")?.to_string(),
                volume: source.attribute("volume")?.to_string(),
                format: format.to_string(),
            })
        })
        .collect();
    if disks.is_empty() {
        return Err(GuestPathError::NoDisk);
    }
    Ok(disks)
}

/// The storage pools a domain's definition takes its disks from, each once, sorted (none for a
/// definition that does not parse or has no disk of a pool): what the planner compares with the
/// pool its hypervisor's `pool_name` names now. The libvirt backend and the fake read it alike.
pub fn disk_pools(xml: &str) -> Vec<String> {
    let pools: std::collections::BTreeSet<String> = domain_disks(xml)
        .unwrap_or_default()
        .into_iter()
        .map(|disk| disk.pool)
        .collect();
    pools.into_iter().collect()
}

/// A path in the guest as libguestfs takes it: absolute, and one word of its command line.
pub fn guest_path(path: &str) -> Result<String, GuestPathError> {
    if !path.starts_with('/') || path.contains('\n') {
        return Err(GuestPathError::NotAbsolute {
            path: path.to_string(),
        });
    }
    Ok(path.to_string())
}

/// `config` with `single` on every kernel line (`linux`, `linux16`, `linuxefi`), or `None` when
/// every one has it already. Nothing else of the file changes.
pub fn with_single(config: &str) -> Result<Option<String>, GuestPathError> {
    let mut kernel_lines = 0;
    let mut changed = false;
    let lines: Vec<String> = config
        .split_inclusive('\n')
        .map(|line| {
            let body = line.trim_end_matches(['\n', '\r']);
            let ending = &line[body.len()..];
            let mut words = body.split_whitespace();
            if !matches!(words.next(), Some("linux" | "linux16" | "linuxefi")) {
                return line.to_string();
            }
            kernel_lines += 1;
            if words.any(|word| word == SINGLE) {
                return line.to_string();
            }
            changed = true;
            format!("{} {SINGLE}{ending}", body.trim_end())
        })
        .collect();
    if kernel_lines == 0 {
        return Err(GuestPathError::NoKernelLine {
            path: GRUB_CONFIG.to_string(),
        });
    }
    Ok(changed.then(|| lines.concat()))
}

/// What a read of libguestfs answered: it first asks whether the path is there (as a file for
/// `--cat`, a directory for `--ls`) and prints `true` or `false`, then reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadAnswer {
    Found(Vec<u8>),
    Missing,
    /// Neither: libguestfs itself failed before it answered.
    Unanswered,
}

pub fn read_answer(stdout: &[u8]) -> ReadAnswer {
    if let Some(rest) = stdout.strip_prefix(b"true\n") {
        ReadAnswer::Found(rest.to_vec())
    } else if stdout.starts_with(b"false\n") {
        ReadAnswer::Missing
    } else {
        ReadAnswer::Unanswered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVISIONED: &str = "set timeout=0\nlinux /boot/vmlinuz root=LABEL=r ro console=ttyS0\ninitrd /boot/initrd.img\nboot\n";

    #[test]
    fn the_pools_of_a_definitions_disks_each_once() {
        let xml = "<domain><devices>\
            <disk type='volume' device='disk'><source pool='trog' volume='a-root.qcow2'/></disk>\
            <disk type='volume' device='disk'><source pool='trog' volume='a-data.qcow2'/></disk>\
            <disk type='volume' device='disk'><source pool='fast' volume='a-disk-pg.qcow2'/></disk>\
            <disk type='file' device='cdrom'><source file='/var/lib/x.iso'/></disk>\
            <filesystem><source dir='/srv/media'/></filesystem>\
            </devices></domain>";
        assert_eq!(disk_pools(xml), ["fast", "trog"]);
        assert_eq!(disk_pools("<domain/>"), Vec::<String>::new());
        assert_eq!(disk_pools("not xml"), Vec::<String>::new());
    }

    #[test]
    fn single_goes_on_every_kernel_line_and_nothing_else_changes() {
        let single = with_single(PROVISIONED).unwrap().unwrap();
        assert_eq!(
            single,
            "set timeout=0\nlinux /boot/vmlinuz root=LABEL=r ro console=ttyS0 single\ninitrd /boot/initrd.img\nboot\n"
        );
        assert_eq!(with_single(&single).unwrap(), None);
        let debian =
            "menuentry 'Debian' {\n\tlinux\t/vmlinuz root=UUID=x ro quiet\r\n\tinitrd /initrd\n}\n";
        assert_eq!(
            with_single(debian).unwrap().unwrap(),
            "menuentry 'Debian' {\n\tlinux\t/vmlinuz root=UUID=x ro quiet single\r\n\tinitrd /initrd\n}\n"
        );
    }

    #[test]
    fn a_configuration_without_a_kernel_line_is_named() {
        assert_eq!(
            with_single("set timeout=5\n# linux is not here\n"),
            Err(GuestPathError::NoKernelLine {
                path: GRUB_CONFIG.into()
            })
        );
    }

    #[test]
    fn the_disks_of_pools_are_read_with_their_format_and_the_seed_cdrom_left_out() {
        let xml = "<domain><devices>\
            <disk type='volume' device='disk'><driver name='qemu' type='qcow2'/><source pool='p' volume='g.qcow2'/><target dev='vda'/></disk>\
            <disk type='volume' device='disk'><driver name='qemu' type='raw'/><source pool='p' volume='g-data'/><target dev='vdb'/></disk>\
            <disk type='volume' device='cdrom'><source pool='p' volume='g-seed.iso'/><target dev='sda'/></disk>\
            </devices></domain>";
        let disks = domain_disks(xml).unwrap();
        assert_eq!(
            disks,
            [
                DomainDisk {
                    pool: "p".into(),
                    volume: "g.qcow2".into(),
                    format: "qcow2".into()
                },
                DomainDisk {
                    pool: "p".into(),
                    volume: "g-data".into(),
                    format: "raw".into()
                },
            ]
        );
        assert_eq!(
            domain_disks("<domain/>"),
            Err(GuestPathError::NoDisk),
            "a domain without disks"
        );
    }

    #[test]
    fn only_absolute_paths_are_read() {
        assert_eq!(guest_path("/etc/fstab").unwrap(), "/etc/fstab");
        assert!(guest_path("etc/fstab").is_err());
        assert!(guest_path("/a\nb").is_err());
    }

    #[test]
    fn the_answer_says_found_missing_or_nothing() {
        assert_eq!(
            read_answer(b"true\nroot:x:0\n"),
            ReadAnswer::Found(b"root:x:0\n".to_vec())
        );
        assert_eq!(read_answer(b"false\n"), ReadAnswer::Missing);
        assert_eq!(read_answer(b""), ReadAnswer::Unanswered);
    }
}
