//! Snapshots that fail halfway leave no partial snapshot and the guest as it was:
//! - a shut-off guest's second disk cannot take one (its file is not the qcow2 its definition
//!   says), after the first one could;
//! - a running guest's memory cannot be saved (its pool's filesystem is full) after libvirt
//!   paused it for the save: it runs on.
//!
//! Nothing is recorded in libvirt, no disk holds an internal snapshot of that name, and the run
//! says what failed.

use super::{guest_with_data_disk, trog_on_pool};
use std::io::Write;
use std::path::PathBuf;
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

/// A running guest's snapshot that fails after libvirt paused the guest to save its memory (the
/// pool's filesystem is full, so the memory cannot be written): nothing is recorded, neither disk
/// keeps a partial snapshot, and the guest runs on, not paused. With room again, the same guest
/// takes the snapshot.
#[test]
fn a_running_guest_whose_snapshot_runs_out_of_room_runs_on_with_none_taken() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    // Declared first, so it is unmounted after the guest and its pool are gone.
    let filesystem = SmallFilesystem::mount(256);
    let mut guest = guest_with_data_disk("snapfull");
    guest.desired.pool_path = filesystem.mount_point.join("pool").display().to_string();
    guest.build_without_starting(&connection);
    let (domain, pool_name) = (guest.desired.domain.as_str(), &guest.desired.pool_name);
    let pool = connection.lookup_storage_pool_by_name(pool_name).unwrap();
    let disk_paths: Vec<String> = [
        guest.desired.root_volume.name.clone(),
        guest.desired.data_volume.clone().unwrap().name,
    ]
    .iter()
    .map(|name| {
        pool.lookup_storage_vol_by_name(name)
            .unwrap()
            .path()
            .unwrap()
    })
    .collect();
    let libvirt_domain = connection.lookup_domain_by_name(domain).unwrap();
    libvirt_domain.create().unwrap();
    let filler = filesystem.fill();

    let failed = trog_on_pool(pool_name, &["snapshot", "--name", "full", domain]);
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&failed.stdout),
        String::from_utf8_lossy(&failed.stderr)
    );
    assert!(!failed.status.success(), "{said}");
    assert!(said.contains("take snapshot full"), "{said}");
    let (state, reason) = libvirt_domain.state().unwrap();
    assert_eq!(
        state,
        virt::enumutil::Enum::Known(virt::domain::DomainState::Running),
        "the guest runs on, not paused ({reason:?})"
    );
    assert!(libvirt_domain.list_all_snapshots(0).unwrap().is_empty());
    for path in &disk_paths {
        let listed = Command::new("qemu-img")
            .args(["snapshot", "-l", "-U"])
            .arg(path)
            .output()
            .unwrap();
        assert!(listed.status.success(), "{path}");
        assert!(
            !String::from_utf8_lossy(&listed.stdout).contains("full"),
            "{path} kept a partial snapshot:\n{}",
            String::from_utf8_lossy(&listed.stdout)
        );
    }

    // The control: the filled filesystem was the only cause.
    std::fs::remove_file(filler).unwrap();
    let taken = trog_on_pool(pool_name, &["snapshot", "--name", "full", domain]);
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert_eq!(libvirt_domain.list_all_snapshots(0).unwrap().len(), 1);
    assert!(libvirt_domain.is_active().unwrap());
}

/// An ext4 filesystem of its own, in a file mounted through a loop device, that the test can
/// fill to the last block (formatted with no blocks reserved for root, which the tests run as).
/// Unmounted when dropped.
struct SmallFilesystem {
    mount_point: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFilesystem {
    fn mount(size_mib: u64) -> SmallFilesystem {
        let dir = tempfile::Builder::new()
            .prefix("trog-smallfs-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let image = dir.path().join("filesystem.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(size_mib << 20)
            .unwrap();
        let mount_point = dir.path().join("mounted");
        std::fs::create_dir(&mount_point).unwrap();
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&image));
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mount_point));
        SmallFilesystem {
            mount_point,
            _dir: dir,
        }
    }

    /// Takes every free block: the next write that needs room fails with ENOSPC.
    fn fill(&self) -> PathBuf {
        let filler = self.mount_point.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        for chunk in [1 << 20, 4096, 1] {
            let zeros = vec![0u8; chunk];
            while matches!(file.write(&zeros), Ok(written) if written > 0) {}
        }
        let _ = file.sync_all();
        filler
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.mount_point).status();
        if !matches!(unmounted, Ok(status) if status.success()) {
            // Still busy: detached now, freed by the kernel when the last user lets go.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mount_point)
                .status();
        }
    }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
