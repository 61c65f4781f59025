//! A snapshot that fails halfway leaves no partial snapshot: the guest's second disk cannot take
//! one (its file is not the qcow2 its definition says), after the first one could. Nothing is
//! recorded in libvirt, the root disk holds no internal snapshot of that name, and the run says
//! what failed.

use super::{guest_with_data_disk, trog_on_pool};
use std::process::Command;

#[test]
fn a_snapshot_failing_on_the_second_disk_leaves_none_on_the_first() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = guest_with_data_disk("snapfail");
    let data_volume = guest.desired.data_volume.clone().unwrap().name;
    guest.build_without_starting(&connection);
    let (domain, pool_name) = (guest.desired.domain.as_str(), &guest.desired.pool_name);
    let pool = connection.lookup_storage_pool_by_name(pool_name).unwrap();
    let volume_path = |name: &str| {
        pool.lookup_storage_vol_by_name(name)
            .unwrap()
            .path()
            .unwrap()
    };
    let root_path = volume_path(&guest.desired.root_volume.name);
    // The injected failure: the data volume is no qcow2 any more, so its snapshot fails after
    // the root disk's (taken first, in the definition's order) succeeded.
    std::fs::write(volume_path(&data_volume), b"").unwrap();

    let failed = trog_on_pool(pool_name, &["snapshot", "--name", "halfway", domain]);
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&failed.stdout),
        String::from_utf8_lossy(&failed.stderr)
    );
    assert!(!failed.status.success(), "{said}");
    assert!(said.contains("take snapshot halfway"), "{said}");
    let libvirt_domain = connection.lookup_domain_by_name(domain).unwrap();
    assert!(libvirt_domain.list_all_snapshots(0).unwrap().is_empty());
    assert!(
        !libvirt_domain.is_active().unwrap(),
        "the guest is left as it was"
    );
    let listed = Command::new("qemu-img")
        .args(["snapshot", "-l", "-U"])
        .arg(&root_path)
        .output()
        .unwrap();
    assert!(listed.status.success());
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("halfway"),
        "the root disk kept a partial snapshot:\n{}",
        String::from_utf8_lossy(&listed.stdout)
    );
}
