//! The fleet's second installation: another installation that knows one guest of the fleet,
//! shop-a, and reaches the fleet's hypervisor not as the fleet does (`qemu:///system`) but over
//! SSH, through the login of tests/services/remote-host.sh whose sudo wants a password, handed in
//! with `--credentials` as cron would. The same libvirtd and the same pool, so its runs act on the
//! fleet's own guest: a root-disk rebuild (`isolation.rs`), then a snapshot of the running guest
//! with its memory, restored, and the list of snapshots with their sizes, read as root on the
//! hypervisor through sudo.

use crate::fleet::Fleet;
use crate::local_services::hypervisors_conf;
use crate::remote_host::RemoteHost;
use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use trog::model::names::DomainName;

pub struct SecondInstallation {
    pub dir: tempfile::TempDir,
    /// The one guest it knows.
    pub guest: DomainName,
    /// The `sudo:` line of its credentials.
    sudo_credentials: String,
}

impl SecondInstallation {
    /// The name its hypervisors.conf gives the fleet's hypervisor.
    pub const HYPERVISOR: &'static str = "remote";

    /// An installation on the fleet's pool, through `host`, that knows only `guest` (given a
    /// 5G root disk): its own ips.db holds that guest's address and tenant and nothing else; it
    /// shares the fleet's secret store (the guest's key) and image cache.
    pub fn new(fleet: &Fleet, guest: &DomainName, host: &RemoteHost) -> SecondInstallation {
        let dir = tempfile::Builder::new()
            .prefix("trog-shared-second-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // The fleet's libvirtd, behind the sshd of a network namespace.
        std::fs::write(
            dir.path().join("hypervisors.conf"),
            hypervisors_conf(
                Self::HYPERVISOR,
                &host.uri(&host.user_password, "/system"),
                &fleet.pool,
                &fleet.config().join("pool"),
            ),
        )
        .unwrap();
        for file in ["recipes.yaml", "secrets.kdbx"] {
            std::fs::copy(fleet.config().join(file), dir.path().join(file)).unwrap();
        }
        // Copied by SQLite itself: the fleet's ips.db is in WAL mode.
        rusqlite::Connection::open(fleet.config().join("ips.db"))
            .unwrap()
            .execute(
                "VACUUM INTO ?1",
                [dir.path().join("ips.db").to_str().unwrap()],
            )
            .unwrap();
        std::os::unix::fs::symlink(fleet.config().join("cache"), dir.path().join("cache")).unwrap();
        let recipes_d = dir.path().join("recipes.d");
        std::fs::create_dir_all(&recipes_d).unwrap();
        let first = std::fs::read_to_string(fleet.config().join(format!("recipes.d/{guest}.yaml")))
            .unwrap();
        assert!(first.contains("    size: 4G\n"), "{first}");
        std::fs::write(
            recipes_d.join(format!("{guest}.yaml")),
            first.replace("    size: 4G\n", "    size: 5G\n"),
        )
        .unwrap();
        let ips_db = rusqlite::Connection::open(dir.path().join("ips.db")).unwrap();
        for table in ["holdings", "tenants"] {
            ips_db
                .execute(
                    &format!("DELETE FROM {table} WHERE guest != ?1"),
                    [guest.as_str()],
                )
                .unwrap();
        }
        SecondInstallation {
            dir,
            guest: guest.clone(),
            sudo_credentials: format!("sudo: {}\n", host.sudo_password()),
        }
    }

    /// Runs a verb of this installation, the passphrase and the sudo password handed in.
    pub fn run(&self, verb: &str, args: &[&str]) -> Output {
        run_verb_handing_in(verb, self.dir.path(), args, &self.sudo_credentials)
    }

    /// Runs a verb and returns what it printed, both streams; a failure fails the check.
    fn must_run(&self, verb: &str, args: &[&str]) -> (String, String) {
        let output = self.run(verb, args);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(
            output.status.success(),
            "{verb} {args:?} failed:\n{stdout}\n{stderr}"
        );
        (stdout, stderr)
    }
}

/// Through the hypervisor reached over SSH, with sudo's password handed in: a snapshot of the
/// running guest takes its memory; restoring it brings the guest back running where it was, SSH
/// answering at its address; the list reads each snapshot's size and the disk's as root there.
pub fn a_snapshot_with_memory_through_a_remote_hypervisor(
    fleet: &Fleet,
    second: &SecondInstallation,
) {
    let (guest, address) = fleet.ready(&second.guest);
    let domain = guest.as_str();
    let (stdout, stderr) = second.must_run("snapshot", &["--name", "remote-1", domain]);
    assert!(
        format!("{stdout}{stderr}").contains(&format!(
            "{domain}: snapshot remote-1 taken on {} (with memory)",
            SecondInstallation::HYPERVISOR
        )),
        "{stdout}\n{stderr}"
    );
    fleet.must(
        &guest,
        &address,
        "echo after the snapshot > /tmp/trog-after-snapshot",
    );
    let (stdout, stderr) = second.must_run("restore", &["--latest", domain]);
    assert!(
        format!("{stdout}{stderr}")
            .contains(&format!("{domain}: running, SSH answers at {address}")),
        "{stdout}\n{stderr}"
    );
    // The memory came back from before the file was written: the guest runs where it was.
    assert_eq!(
        fleet
            .must(
                &guest,
                &address,
                "test -e /tmp/trog-after-snapshot && echo written || echo absent"
            )
            .trim(),
        "absent"
    );
    let (stdout, stderr) = second.must_run("snapshot", &["--json", "--list", domain]);
    let listing: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("{error}:\n{stdout}\n{stderr}"));
    assert!(listing["sizes_unread"].is_null(), "{listing}");
    assert!(listing["disk_bytes"].as_u64().unwrap() > 0, "{listing}");
    assert_eq!(listing["snapshots"][0]["name"], "remote-1", "{listing}");
    assert!(
        listing["snapshots"][0]["memory_bytes"].as_u64().unwrap() > 0,
        "{listing}"
    );
}
