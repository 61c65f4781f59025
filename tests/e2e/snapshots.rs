//! Snapshots of the real guest: markers on its root disk and data volume survive a change and a
//! `restore`, for a snapshot taken while it runs (with memory, its guest agent stopped) and one
//! taken shut off; the shared base image is never written.

use super::support::*;
use super::{on_guest, try_on_guest, Installation};
use std::time::{Duration, Instant};

/// How long the guest's console may stand still while the test waits for it to shut down, or to
/// boot and answer SSH again: a boot on a loaded emulated host prints every few seconds, however
/// slow it is (25–40 s on an idle one, many minutes beside other guests).
const CONSOLE_QUIET: Duration = Duration::from_secs(180);
/// The most such a wait takes, whatever the console does.
const GUEST_STATE_CHANGE_LIMIT: Duration = Duration::from_secs(900);

const MARKERS: &str = "cat /var/lib/trog-marker /srv/data/trog-marker";

fn write_markers(installation: &Installation, address: &str, word: &str) {
    on_guest(
        installation,
        address,
        &format!(
            "echo {word} | sudo tee /var/lib/trog-marker /srv/data/trog-marker >/dev/null && sync"
        ),
    );
}

fn libvirt_domain(name: &str) -> virt::domain::Domain {
    virt::error::clear_error_callback();
    virt::connect::Connect::open(Some("qemu:///system"))
        .unwrap()
        .lookup_domain_by_name(name)
        .unwrap()
}

/// Waits until `done`, for as long as `domain`'s serial console keeps growing.
fn wait_until(what: &str, domain: &str, mut done: impl FnMut() -> bool) {
    let console = trog::generate::desired::serial_log_path(
        &trog::model::names::DomainName::parse(domain).unwrap(),
    );
    let console_size = || std::fs::metadata(&console).map_or(0, |meta| meta.len());
    let started = Instant::now();
    let mut size = console_size();
    let mut grew = started;
    while !done() {
        if console_size() != size {
            size = console_size();
            grew = Instant::now();
        }
        assert!(
            grew.elapsed() < CONSOLE_QUIET && started.elapsed() < GUEST_STATE_CHANGE_LIMIT,
            "{what}: not after {:?} (its console unchanged for {:?})",
            started.elapsed(),
            grew.elapsed()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

fn base_image_digest(installation: &Installation) -> String {
    let base = trog::plan::resource_names::base_image_volume(&sha256_file(&test_image()));
    sha256_file(&installation.pool_path.join(base))
}

pub fn snapshot_and_restore(installation: &Installation, address: &str) {
    let config = installation.dir.path();
    let domain = installation.domain.as_str();
    let base_digest = base_image_digest(installation);
    let said = |output: &std::process::Output| {
        format!("{}\n{}", text(&output.stdout), text(&output.stderr))
    };

    // Running, with the guest agent stopped: a running guest's snapshot carries its memory and
    // never asks the agent (docs/BACKUPS.md), so it is taken the same way; changed; restored
    // --latest, and the guest answers at once.
    write_markers(installation, address, "before-running");
    on_guest(
        installation,
        address,
        "sudo systemctl stop qemu-guest-agent && ! systemctl is-active --quiet qemu-guest-agent",
    );
    let taken = run_verb("snapshot", config, &["--name", "running-1", domain]);
    assert!(taken.status.success(), "{}", said(&taken));
    assert!(said(&taken).contains("(with memory)"), "{}", said(&taken));
    write_markers(installation, address, "changed");
    let restored = run_verb("restore", config, &["--latest", domain]);
    assert!(restored.status.success(), "{}", said(&restored));
    let stdout = text(&restored.stdout);
    assert!(
        stdout.contains(&format!(
            "{domain}: restored snapshot running-1 on local (with memory)"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{domain}: running, SSH answers at")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{domain}: converged with today's declaration")),
        "{stdout}"
    );
    assert_eq!(
        on_guest(installation, address, MARKERS),
        "before-running\nbefore-running\n"
    );
    // Restored as it was in the snapshot: with the agent stopped; the rest of the guest's life
    // has it again.
    on_guest(
        installation,
        address,
        "! systemctl is-active --quiet qemu-guest-agent && sudo systemctl start qemu-guest-agent",
    );

    // Shut off: taken offline; booted and changed; restored --name, and the guest is shut off
    // again with the markers it had.
    write_markers(installation, address, "before-off");
    let guest = libvirt_domain(domain);
    guest.shutdown().unwrap();
    wait_until("the guest shuts down", domain, || {
        !guest.is_active().unwrap()
    });
    let taken = run_verb("snapshot", config, &["--name", "off-1", domain]);
    assert!(taken.status.success(), "{}", said(&taken));
    assert!(said(&taken).contains("(offline)"), "{}", said(&taken));
    guest.create().unwrap();
    wait_until("the guest answers SSH", domain, || {
        try_on_guest(installation, address, "true").is_ok()
    });
    write_markers(installation, address, "changed");
    let restored = run_verb("restore", config, &["--name", "off-1", domain]);
    assert!(restored.status.success(), "{}", said(&restored));
    assert!(
        text(&restored.stdout).contains(&format!("{domain}: shut off, as it was in the snapshot")),
        "{}",
        said(&restored)
    );
    assert!(!guest.is_active().unwrap());
    guest.create().unwrap();
    wait_until("the guest answers SSH", domain, || {
        try_on_guest(installation, address, "true").is_ok()
    });
    assert_eq!(
        on_guest(installation, address, MARKERS),
        "before-off\nbefore-off\n"
    );
    // A later boot keeps the package sources the finish wrote: cloud-init runs the seed's
    // bootcmd on every boot, and what that removes is the image's own sources file.
    let sources = on_guest(
        installation,
        address,
        "apt-get indextargets --no-release-info --format '$(SITE)' | sort -u",
    );
    assert_eq!(
        sources, "mirror+file:/etc/apt/mirrors/trog-debian.list\n",
        "apt on the rebooted guest reads these sources"
    );

    // An unknown name lists the snapshots there are; the base image was never written.
    let unknown = run_verb("restore", config, &["--name", "nope", domain]);
    assert_eq!(unknown.status.code(), Some(1), "{}", said(&unknown));
    assert!(
        said(&unknown).contains("has no snapshot named nope; it has: running-1, off-1"),
        "{}",
        said(&unknown)
    );
    assert_eq!(base_image_digest(installation), base_digest);
}
