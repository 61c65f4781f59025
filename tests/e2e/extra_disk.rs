//! An extra disk on the real guest: added to its file while it runs, the next provision makes
//! the volume, plugs it into the running guest (no restart) and into its definition, and the
//! finish formats and mounts it where the file says; a file written on it is still there after
//! the guest's destroy and rebuild from a new root disk, and `destroy --purge` deletes it.

use super::support::*;
use super::{on_guest, Installation};

const NAME: &str = "extra";
const MOUNT: &str = "/srv/extra";
/// A file written on the disk, and what it holds.
pub const KEPT_FILE: &str = "/srv/extra/kept.txt";
pub const KEPT_TEXT: &str = "on the extra disk";

/// The disk's volume in the guest's pool.
pub fn volume(installation: &Installation) -> String {
    trog::plan::resource_names::extra_disk_volume(&installation.domain, NAME)
}

/// Adds the disk to the running guest's file and provisions: made, hot-plugged, formatted,
/// mounted, without a restart. A file is written on it.
pub fn added_to_the_running_guest(installation: &Installation, address: &str) {
    let config = installation.dir.path();
    let domain = installation.domain.as_str();
    let guest_file = config.join("recipes.d").join(format!("{domain}.yaml"));
    let declared = std::fs::read_to_string(&guest_file).unwrap();
    let with_disk = declared.replace(
        "    data_volume_size: 1G\n",
        &format!(
            "    data_volume_size: 1G\n    disks: [{{name: {NAME}, size: 256M, mount: {MOUNT}}}]\n"
        ),
    );
    assert_ne!(
        declared, with_disk,
        "the guest's file has no data_volume_size line"
    );
    std::fs::write(&guest_file, with_disk).unwrap();
    let booted = on_guest(installation, address, "uptime -s");

    let provision = run_verb("provision", config, &[domain]);
    let said = format!("{}\n{}", text(&provision.stdout), text(&provision.stderr));
    assert!(provision.status.success(), "{said}");
    let volume = volume(installation);
    for step in [
        format!("create disk {NAME}: volume {volume} of 256MB"),
        format!("attach disk {NAME} ({volume}) to the running guest and its definition"),
    ] {
        assert!(said.contains(&step), "{step}:\n{said}");
    }
    assert!(!said.contains("stop the guest"), "{said}");
    assert_eq!(
        on_guest(installation, address, "uptime -s"),
        booted,
        "the disk was plugged into the running guest"
    );

    // The guest finds it by its serial, formatted and mounted where its file says.
    let listed = on_guest(
        installation,
        address,
        &format!("lsblk -n -o SERIAL,FSTYPE,MOUNTPOINT /dev/disk/by-id/virtio-trog-disk-{NAME}"),
    );
    let columns: Vec<&str> = listed.split_whitespace().collect();
    assert_eq!(
        columns,
        [format!("trog-disk-{NAME}").as_str(), "ext4", MOUNT],
        "{listed}"
    );
    let fstab = on_guest(installation, address, "cat /etc/fstab");
    assert!(
        fstab.lines().any(|line| line.starts_with("UUID=")
            && line.contains(&format!(" {MOUNT} ext4 defaults,nofail "))),
        "{fstab}"
    );
    on_guest(
        installation,
        address,
        &format!("echo {KEPT_TEXT} | sudo tee {KEPT_FILE} >/dev/null && sync"),
    );

    // The domain's definition has it too: the next run has nothing to do.
    let again = run_verb("provision", config, &[domain]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains(&format!("{domain}: converged, nothing to do")),
        "{}",
        text(&again.stdout)
    );
}

/// After the guest was destroyed and built again from a new root disk: the disk was kept,
/// attached again, mounted again, and the file written on it is there.
pub fn survived_the_rebuild(installation: &Installation, address: &str) {
    assert_eq!(
        on_guest(installation, address, &format!("cat {KEPT_FILE}")).trim(),
        KEPT_TEXT
    );
    assert_eq!(
        on_guest(
            installation,
            address,
            &format!("findmnt -n -o SOURCE,FSTYPE {MOUNT}")
        )
        .split_whitespace()
        .nth(1),
        Some("ext4")
    );
}
