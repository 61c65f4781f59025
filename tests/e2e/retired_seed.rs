//! Once the guest's first boot is over, its seed (which carries its host private key) is gone:
//! detached from the domain, live and in its definition, and deleted from the pool. A restart
//! afterwards boots without it: cloud-init keeps the instance it set up (no new host keys), and
//! the guest answers SSH with the host key trog pinned.

use super::host_keys::stored_host_keys;
use super::support::*;
use super::{on_guest, try_on_guest, volumes, Installation};
use std::time::{Duration, Instant};

/// How long a restart of the emulated guest may take until SSH answers again.
const RESTART_WITHIN: Duration = Duration::from_secs(300);

fn definition(domain: &str, flags: u32) -> String {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = connection.lookup_domain_by_name(domain).unwrap();
    guest.xml_desc(flags).unwrap()
}

/// The ed25519 host key the guest's sshd answers with, as `type base64`.
fn answered_host_key(address: &str) -> String {
    let scanned = std::process::Command::new("ssh-keyscan")
        .args(["-T", "10", "-t", "ed25519", address])
        .output()
        .unwrap();
    text(&scanned.stdout)
        .lines()
        .find(|line| !line.starts_with('#'))
        .map(|line| {
            line.split_whitespace()
                .skip(1)
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| panic!("no host key from {address}: {}", text(&scanned.stderr)))
}

pub fn the_seed_is_gone_and_a_restart_keeps_the_host_key(
    installation: &Installation,
    address: &str,
) {
    let domain = installation.domain.as_str();
    let seed = trog::plan::resource_names::seed_volume(&installation.domain);
    for (which, flags) in [("running", 0), ("kept", virt::sys::VIR_DOMAIN_XML_INACTIVE)] {
        let xml = definition(domain, flags);
        assert!(
            !xml.contains(&seed) && !xml.contains("device='cdrom'"),
            "the {which} definition still attaches the seed:\n{xml}"
        );
    }
    assert!(
        !volumes(&installation.pool).contains(&seed),
        "{:?}",
        volumes(&installation.pool)
    );
    let pin = on_guest(
        installation,
        address,
        &format!("cat {}", trog::guest::retire_seed::DATASOURCE_PIN_PATH),
    );
    assert_eq!(pin, trog::guest::retire_seed::DATASOURCE_PIN);

    let (pinned_key, _) = stored_host_keys(installation);
    let pinned_key: String = pinned_key
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(answered_host_key(address), pinned_key);
    let instance = on_guest(installation, address, "cat /var/lib/cloud/data/instance-id");
    let booted = on_guest(installation, address, "uptime -s");

    // Restarted through libvirt, without its seed.
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let restarting = Instant::now();
    connection
        .lookup_domain_by_name(domain)
        .unwrap()
        .reboot(0)
        .unwrap();
    loop {
        match try_on_guest(installation, address, "uptime -s") {
            Ok(now) if now != booted => break,
            _ => {}
        }
        assert!(
            restarting.elapsed() < RESTART_WITHIN,
            "the guest did not answer SSH within {RESTART_WITHIN:?} of its restart"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "restarted without its seed: SSH answered after {:.0?}",
        restarting.elapsed()
    );
    assert_eq!(answered_host_key(address), pinned_key);
    assert!(on_guest(installation, address, "cloud-init status --wait").contains("status: done"));
    // What cloud-init did on this boot, for the record (its log since the boot's first stage).
    let this_boot = on_guest(
        installation,
        address,
        r#"sudo awk '/running .init-local./ { boot = "" } { boot = boot $0 "\n" } END { printf "%s", boot }' /var/log/cloud-init.log | grep -iE 'cache|searching|datasource' | head -5 || true"#,
    );
    eprintln!("cloud-init on the restart:\n{}", this_boot.trim_end());
    assert_eq!(
        on_guest(installation, address, "cat /var/lib/cloud/data/instance-id"),
        instance,
        "cloud-init took the restart for a new instance"
    );
    // Still what its declaration says: nothing to do.
    let again = run_verb("provision", installation.dir.path(), &[domain]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains(&format!("{domain}: converged, nothing to do")),
        "{}",
        text(&again.stdout)
    );
}
