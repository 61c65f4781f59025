//! The names trog gives what it creates for a guest. One function each, so the planner, the
//! executor, `destroy` and `status` can never disagree about what belongs to a guest.

use crate::model::names::DomainName;

/// The guest's root disk: a qcow2 overlay on the base image.
pub fn root_volume(domain: &DomainName) -> String {
    format!("{domain}-root.qcow2")
}

/// The guest's cloud-init seed ISO.
pub fn seed_volume(domain: &DomainName) -> String {
    format!("{domain}-seed.iso")
}

/// The guest's data volume, which outlives root disks.
pub fn data_volume(domain: &DomainName) -> String {
    format!("{domain}-data.qcow2")
}

/// One of the guest's extra disks (`disks:` of the `vm` recipe), which outlive root disks.
pub fn extra_disk_volume(domain: &DomainName, disk: &str) -> String {
    format!("{}{disk}.qcow2", extra_disk_prefix(domain))
}

/// What every extra disk volume of the guest's name begins with.
pub fn extra_disk_prefix(domain: &DomainName) -> String {
    format!("{domain}-disk-")
}

/// Whether `volume` is one of the guest's extra disks, declared or no longer declared (what
/// `destroy --purge` deletes). The whole name is checked, not only its beginning: a guest named
/// `a.test-disk-b.test` has volumes beginning `a.test-disk-` too, and they are not `a.test`'s.
pub fn is_extra_disk_volume(domain: &DomainName, volume: &str) -> bool {
    let Some(disk) = volume
        .strip_prefix(&extra_disk_prefix(domain))
        .and_then(|rest| rest.strip_suffix(".qcow2"))
    else {
        return false;
    };
    let mut characters = disk.chars();
    characters.next().is_some_and(|c| c.is_ascii_lowercase())
        && disk.len() <= 10
        && characters.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A base image, named by its digest: the name is the proof of what it holds, so one copy
/// serves every guest built from the same image.
pub fn base_image_volume(digest_hex: &str) -> String {
    format!(
        "trog-base-{}.qcow2",
        &digest_hex[..digest_hex.len().min(16)]
    )
}

/// What `boot_files.sh` keeps beside a base image in its pool, after the image's name: the kernel,
/// initramfs and command line read out of it, cloud-init's network unit, or why it has none. They
/// belong to the image: whatever removes it removes them.
pub const KEPT_BESIDE_BASE_IMAGE: [&str; 5] = [
    ".kernel",
    ".initrd",
    ".cmdline",
    ".network-stage",
    ".no-direct-boot",
];

/// The files [`KEPT_BESIDE_BASE_IMAGE`] names, for the base image `volume`.
pub fn kept_beside_base_image(volume: &str) -> Vec<String> {
    KEPT_BESIDE_BASE_IMAGE
        .iter()
        .map(|suffix| format!("{volume}{suffix}"))
        .collect()
}

/// Where the machine named `uploader` (the one running trog) uploads a base image before it is
/// complete. Only a finished upload is copied to the final name, so a volume under the final
/// name is always whole. The name is the uploader's: runs on one machine take turns with it
/// (under the upload's lock, so the one there is always a dead run's and is removed), and
/// runs on two machines sharing a pool never write into one volume. Every writer also holds the
/// upload's lock on the hypervisor, under which any machine's partial copy there is a dead
/// run's and is removed too (`Hypervisor::remove_partial_base_images`).
pub fn partial_base_image_volume(digest_hex: &str, uploader: &str) -> String {
    let uploader: String = uploader
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.part-{uploader}", base_image_volume(digest_hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_boot_files_keeps_beside_a_base_image_is_every_name_its_script_writes() {
        let script = include_str!("../machine/boot_files.sh");
        for suffix in KEPT_BESIDE_BASE_IMAGE {
            assert!(
                script.contains(&format!("$kept{suffix}")),
                "boot_files.sh writes no {suffix}"
            );
        }
        let written: std::collections::BTreeSet<&str> = script
            .match_indices("\"$kept.")
            .filter_map(|(at, _)| {
                // `.NAME`, up to the next `.` or `$` (`$kept.cmdline.part-$$` keeps `.cmdline`);
                // `$kept.$file` is the kernel or the initramfs, checked above.
                let rest = &script[at + "\"$kept".len()..];
                let end = 1 + rest[1..]
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                    .unwrap_or(rest.len() - 1);
                (end > 1).then(|| &rest[..end])
            })
            .collect();
        for suffix in written {
            assert!(
                KEPT_BESIDE_BASE_IMAGE.contains(&suffix),
                "boot_files.sh keeps {suffix}, which nothing removes with the image"
            );
        }
    }

    #[test]
    fn extra_disks_are_told_from_another_guests_volumes() {
        let guest = DomainName::parse("a.test").unwrap();
        let volume = extra_disk_volume(&guest, "db2");
        assert_eq!(volume, "a.test-disk-db2.qcow2");
        assert!(is_extra_disk_volume(&guest, &volume));
        // Volumes of a guest whose name begins like an extra disk's.
        assert!(!is_extra_disk_volume(
            &guest,
            "a.test-disk-b.test-root.qcow2"
        ));
        assert!(!is_extra_disk_volume(
            &guest,
            "a.test-disk-b.test-data.qcow2"
        ));
        assert!(!is_extra_disk_volume(&guest, "a.test-disk-.qcow2"));
        assert!(!is_extra_disk_volume(&guest, "a.test-root.qcow2"));
        assert!(!is_extra_disk_volume(&guest, "a.test-disk-db2.qcow2.part"));
    }
}
