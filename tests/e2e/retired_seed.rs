//! Once the guest's first boot is over, its seed (which carries its host private key) is gone:
//! detached from the domain, live and in its definition, and deleted from the pool. A restart
//! afterwards boots without it: cloud-init keeps the instance it set up (no new host keys), and
//! the guest answers SSH with the host key trog pinned. The restart is the one a change of the
//! guest's machine makes (machine_change.rs), from a definition trog wrote again: the suite
//! spends no boot of its own on this.

use super::host_keys::stored_host_keys;
use super::support::*;
use super::{on_guest, volumes, Installation};

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

/// What the guest was before the restart: the host key trog pinned, and cloud-init's instance.
pub struct BeforeTheRestart {
    pinned_key: String,
    instance: String,
}

/// The seed is gone from both definitions and the pool, cloud-init is pinned to what it has,
/// and the guest answers with the pinned host key; what it was is kept for
/// [`kept_across_the_restart`].
pub fn gone_before_a_restart(installation: &Installation, address: &str) -> BeforeTheRestart {
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
    BeforeTheRestart {
        pinned_key,
        instance: on_guest(installation, address, "cat /var/lib/cloud/data/instance-id"),
    }
}

/// After the guest was restarted without its seed: the same host key, cloud-init done with the
/// same instance.
pub fn kept_across_the_restart(
    installation: &Installation,
    address: &str,
    before: &BeforeTheRestart,
) {
    assert_eq!(answered_host_key(address), before.pinned_key);
    assert!(on_guest(installation, address, "cloud-init status --wait").contains("status: done"));
    let this_boot = on_guest(
        installation,
        address,
        r#"sudo awk '/running .init-local./ { boot = "" } { boot = boot $0 "\n" } END { printf "%s", boot }' /var/log/cloud-init.log | grep -iE 'cache|searching|datasource' | head -5 || true"#,
    );
    eprintln!("cloud-init on the restart:\n{}", this_boot.trim_end());
    assert_eq!(
        on_guest(installation, address, "cat /var/lib/cloud/data/instance-id"),
        before.instance,
        "cloud-init took the restart for a new instance"
    );
}
