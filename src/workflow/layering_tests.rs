//! The verbs acting on an existing guest reach its hypervisor only through
//! [`crate::hypervisor::Hypervisor`], opened by [`crate::workflow::session`]: no `virt` type and
//! no libvirt module in their files, so each runs against the fake as it runs against libvirt.

/// The files of the verbs written against the trait.
const VERBS: [(&str, &str); 9] = [
    ("destroy.rs", include_str!("destroy.rs")),
    ("snapshot.rs", include_str!("snapshot.rs")),
    ("restore.rs", include_str!("restore.rs")),
    ("backup.rs", include_str!("backup.rs")),
    ("status.rs", include_str!("status.rs")),
    ("debug_boot.rs", include_str!("debug_boot.rs")),
    (
        "debug_boot_console.rs",
        include_str!("debug_boot_console.rs"),
    ),
    ("debug_boot_disk.rs", include_str!("debug_boot_disk.rs")),
    ("debug_domain.rs", include_str!("debug_domain.rs")),
];

/// Where `text` names the `virt` crate (`virt::`, but not the `libvirt::` of a module path).
fn names_virt(text: &str) -> bool {
    text.match_indices("virt::")
        .any(|(at, _)| !text[..at].ends_with("lib"))
}

#[test]
fn the_verbs_name_neither_the_virt_crate_nor_the_libvirt_backend() {
    for (file, text) in VERBS {
        assert!(!names_virt(text), "workflow/{file} names the virt crate");
        assert!(
            !text.contains("crate::libvirt"),
            "workflow/{file} reaches into libvirt/ instead of through the Hypervisor trait"
        );
    }
}

#[test]
fn the_check_sees_the_virt_crate_and_not_a_module_path() {
    assert!(names_virt("connection: &virt::connect::Connect"));
    assert!(!names_virt(
        "use crate::libvirt::hypervisor::LibvirtHypervisor;"
    ));
}
