//! `image prune` against this machine's real libvirtd: of two baked images no guest uses, the
//! copy in the pool that nothing is layered over is removed, with its record; the copy a root
//! disk is layered over is kept, named with what uses it, and so is its record, for a later prune.
//! The boot files kept beside the removed copy go with it.

use crate::{root_warning, TestGuest};
use std::path::Path;
use std::process::Command;

/// A baked image's record (and its image) in the cache `images`, no guest resolving to it.
fn record(images: &Path, key: &str, image_sha256: &str) {
    std::fs::create_dir_all(images).unwrap();
    std::fs::write(
        images.join(format!("baked-{key}.json")),
        format!(
            r#"{{"key":"{key}","built_at":1,"distro":"debian","release":"bookworm","mirror":"m","security_mirror":"s","packages":["nginx"],"builder":"b","image_sha256":"{image_sha256}"}}"#
        ),
    )
    .unwrap();
    std::fs::write(images.join(format!("sha256-{image_sha256}.img")), b"baked").unwrap();
}

fn prune(installation: &Path, cache: &Path, dry_run: bool) -> Vec<String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    command.args(["image", "prune"]);
    if dry_run {
        command.arg("--dry-run");
    }
    let output = root_warning::output_without_root_warning(
        command
            .env("TROG_PROVISIONER_CONFIG", installation)
            .env("XDG_CACHE_HOME", cache)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

#[test]
fn prune_removes_the_pool_copies_nothing_is_layered_over_and_names_each() {
    let guest = TestGuest::new("prune", false);
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    // The guest's base image in the pool with its root disk over it, and an unused copy beside.
    guest.build_without_starting(&connection);
    let pool_name = guest.desired.pool_name.clone();
    let pool = connection.lookup_storage_pool_by_name(&pool_name).unwrap();
    let unused_sha = "a".repeat(64);
    let unused_copy = format!("trog-base-{}.qcow2", &unused_sha[..16]);
    virt::storage_vol::StorageVol::create_xml(
        &pool,
        &format!(
            "<volume><name>{unused_copy}</name><capacity unit='M'>1</capacity><target><format type='qcow2'/></target></volume>"
        ),
        0,
    )
    .unwrap();
    let used_copy = guest.desired.base_image_volume.clone();
    let used_sha = guest.desired.base_image_digest.clone();

    let installation = tempfile::tempdir().unwrap();
    std::fs::write(
        installation.path().join("hypervisors.conf"),
        format!(
            "[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool_name}\npool_path = {}\n",
            guest.desired.pool_path
        ),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        installation.path().join("recipes.yaml"),
    )
    .unwrap();
    std::fs::create_dir(installation.path().join("recipes.d")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let images = cache.path().join("trog/images");
    let (unused_key, used_key) = ("1".repeat(64), "2".repeat(64));
    record(&images, &unused_key, &unused_sha);
    record(&images, &used_key, &used_sha);
    let volumes = || {
        let mut names = pool.list_volumes().unwrap();
        names.sort();
        names
    };
    let before = volumes();
    assert!(
        before.contains(&unused_copy) && before.contains(&used_copy),
        "{before:?}"
    );
    // What the root program boot-files keeps beside a base image for first boots, written as it
    // writes them: files in the pool's directory that libvirt has not listed. They belong to the
    // unused copy, and go with it.
    let boot_files: Vec<std::path::PathBuf> = [".kernel", ".initrd", ".cmdline", ".network-stage"]
        .iter()
        .map(|suffix| Path::new(&guest.desired.pool_path).join(format!("{unused_copy}{suffix}")))
        .collect();
    for file in &boot_files {
        std::fs::write(file, "kept beside the image").unwrap();
    }

    let root = guest.desired.root_volume.name.clone();
    let expected = |would: bool| {
        let (remove, keep) = if would {
            ("would remove", "would keep")
        } else {
            ("removed", "kept")
        };
        vec![
            format!(
                "{remove} baked image 111111111111 (debian bookworm, 1 packages, built 1970-01-01 00:00:01 UTC): {}",
                images.join(format!("sha256-{unused_sha}.img")).display()
            ),
            format!("  {remove} its copy {unused_copy} from pool {pool_name} on local"),
            format!(
                "{remove} baked image 222222222222 (debian bookworm, 1 packages, built 1970-01-01 00:00:01 UTC): {}",
                images.join(format!("sha256-{used_sha}.img")).display()
            ),
            format!("  {keep} its copy {used_copy} in pool {pool_name} on local: used by volume {root}"),
            format!(
                "  {keep} its record baked-{used_key}.json, for a later prune to remove the copies left"
            ),
        ]
    };
    assert_eq!(
        prune(installation.path(), cache.path(), true),
        expected(true)
    );
    assert_eq!(volumes(), before, "a dry run removes nothing");
    assert!(boot_files.iter().all(|file| file.exists()));

    assert_eq!(
        prune(installation.path(), cache.path(), false),
        expected(false)
    );
    let after = volumes();
    assert!(!after.contains(&unused_copy), "{after:?}");
    for file in &boot_files {
        assert!(!file.exists(), "{} was left in the pool", file.display());
    }
    assert!(
        after.contains(&used_copy) && after.contains(&root),
        "{after:?}"
    );
    assert!(!images.join(format!("baked-{unused_key}.json")).exists());
    assert!(
        images.join(format!("baked-{used_key}.json")).exists(),
        "the record of the copy left stays"
    );
    assert!(!images.join(format!("sha256-{used_sha}.img")).exists());
}
