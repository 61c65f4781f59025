//! Five different guests provisioned at once, for real: five `bin/provision` processes started
//! together on one hypervisor's pool, every guest from the same base image. They share the pool,
//! the secret store (each writes its guest's key) and the base image's upload (one uploads, the
//! others wait for it and use it). All five finish; the pool then holds exactly one base image
//! volume, each guest's disks, and no partial upload. They are destroyed afterwards.
//!
//! Software emulation on a small machine: the guests are given little memory and one CPU each.

#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use support::*;

/// How many guests are provisioned at once.
const GUESTS: usize = 5;

fn volumes(pool: &str) -> Vec<String> {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let pool = connection.lookup_storage_pool_by_name(pool).unwrap();
    pool.refresh(0).unwrap();
    let mut names = pool.list_volumes().unwrap();
    names.sort();
    names
}

#[test]
fn five_guests_provisioned_at_once_share_one_base_image() {
    let mirror_root = tempfile::tempdir().unwrap();
    write_empty_archive(mirror_root.path());
    let mirror = MirrorServer::start(
        mirror_root.path(),
        19000 + (std::process::id() % 1000) as u16,
    );
    let dir = tempfile::Builder::new()
        .prefix("trog-five-")
        .tempdir_in("/var/tmp")
        .unwrap();
    // qemu runs as its own user and must reach the pool's directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path();
    let unique = std::process::id();
    let pool = format!("trog-five-{unique}");
    let domains: Vec<String> = (1..=GUESTS)
        .map(|n| format!("five{n}-{unique}.test"))
        .collect();
    // Whatever a failed run left in libvirt goes when the test ends, each guest's domain and the
    // pool with every volume in it.
    let _leftovers: Vec<LibvirtLeftovers> = domains
        .iter()
        .map(|domain| LibvirtLeftovers {
            domain: domain.clone(),
            pool: pool.clone(),
        })
        .collect();
    let image = test_image();
    let digest = sha256_file(&image);
    std::fs::write(
        config.join("hypervisors.conf"),
        format!(
            "# This machine, under software emulation: KVM does not work here.\n[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool}\npool_path = {}\nreserve_memory = 512\nreserve_disk = 1G\ncpu_overcommit = 100\n",
            config.join("pool").display()
        ),
    )
    .unwrap();
    std::fs::write(
        config.join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {}\n    upgrade: false\n",
            mirror.url
        ),
    )
    .unwrap();
    let recipes_d = config.join("recipes.d");
    std::fs::create_dir_all(&recipes_d).unwrap();
    for domain in &domains {
        // 512 MiB: five guests under software emulation on a small machine; the test image's
        // cloud-init and SSH fit in it.
        std::fs::write(
            recipes_d.join(format!("{domain}.yaml")),
            format!(
                "{domain}:\n  _global:\n    memory: 512\n    cpus: 1\n    size: 3G\n    data_volume_size: 1G\n    image:\n      url: file://{}\n      sha256: {digest}\n",
                image.display()
            ),
        )
        .unwrap();
    }

    // Five processes, started together.
    let runs: Vec<_> = domains
        .iter()
        .map(|domain| spawn_verb("provision", config, &[domain]))
        .collect();
    let outputs: Vec<_> = runs
        .into_iter()
        .map(|run| run.wait_with_output().unwrap())
        .collect();
    for (domain, output) in domains.iter().zip(&outputs) {
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(
            output.status.success(),
            "{domain} was not provisioned:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains(&format!("{domain} is on local at ")),
            "{domain}:\n{stdout}\n{stderr}"
        );
        // The five read the base image's kernel out of it at once: each got whole files.
        assert!(
            format!("{stdout}{stderr}").contains("the base image's kernel, started directly"),
            "{domain}:\n{stdout}\n{stderr}"
        );
    }
    let base = trog::plan::resource_names::base_image_volume(&digest);
    let boot_files = [
        base.clone(),
        format!("{base}.cmdline"),
        format!("{base}.initrd"),
        format!("{base}.kernel"),
        format!("{base}.network-stage"),
    ];
    let mut expected = boot_files.to_vec();
    for domain in &domains {
        expected.push(format!("{domain}-root.qcow2"));
        expected.push(format!("{domain}-seed.iso"));
        expected.push(format!("{domain}-data.qcow2"));
    }
    expected.sort();
    assert_eq!(volumes(&pool), expected);

    for domain in &domains {
        let status = run_verb("status", config, &[domain]);
        assert_eq!(
            text(&status.stdout),
            format!("{domain}: on local, converged\n"),
            "{}",
            text(&status.stderr)
        );
    }

    // Destroyed, all of them: only the shared base image (and its kernel) stays in the pool.
    for domain in &domains {
        let purge = run_verb("destroy", config, &["--purge", "--yes", domain]);
        assert!(
            purge.status.success(),
            "{}\n{}",
            text(&purge.stdout),
            text(&purge.stderr)
        );
    }
    assert_eq!(volumes(&pool), boot_files);
}
