//! The fleet's second installation: another installation that knows one guest of the fleet,
//! shop-a, and reaches the fleet's hypervisor not as the fleet does (`qemu:///system`) but over
//! SSH, through the login of tests/services/remote-host.sh whose sudo wants a password, handed in
//! with `--credentials` as cron would. The same libvirtd and the same pool, so its runs act on the
//! fleet's own guest: a snapshot of the running guest with its memory, restored, the list of
//! snapshots with their sizes read as root on the hypervisor through sudo, and the snapshot
//! deleted; then a root-disk rebuild (`isolation.rs`) that also gives the guest a folder of the
//! hypervisor, the sudo password seen in no process listing meanwhile; and last the guest
//! destroyed through the login whose sudo needs no password.

use crate::fleet::Fleet;
use crate::local_services::hypervisors_conf;
use crate::remote_host::RemoteHost;
use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use trog::model::names::DomainName;

pub struct SecondInstallation {
    pub dir: tempfile::TempDir,
    /// The one guest it knows.
    pub guest: DomainName,
    /// The `sudo:` line of its credentials.
    sudo_credentials: String,
    /// The fleet's hypervisor through the login whose sudo needs no password.
    nopasswd_uri: String,
    pool: String,
    pool_path: PathBuf,
    /// The hypervisor's folder the rebuilt guest shares, holding a file written there.
    pub shared: tempfile::TempDir,
}

impl SecondInstallation {
    /// The name its hypervisors.conf gives the fleet's hypervisor.
    pub const HYPERVISOR: &'static str = "remote";

    /// An installation on the fleet's pool, through `host`, that knows only `guest` (given a
    /// 5G root disk and a shared folder): its own ips.db holds that guest's address and tenant
    /// and nothing else; it shares the fleet's secret store (the guest's key) and image cache.
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
        let shared = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::write(
            shared.path().join("from-hypervisor"),
            "written on the hypervisor\n",
        )
        .unwrap();
        std::fs::write(
            recipes_d.join(format!("{guest}.yaml")),
            first.replace(
                "    size: 4G\n",
                &format!(
                    "    size: 5G\n    shared_folders: [{{name: exchange, source: {}, mount: /srv/exchange}}]\n",
                    shared.path().display()
                ),
            ),
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
            nopasswd_uri: host.uri(&host.user_nopasswd, "/system"),
            pool: fleet.pool.clone(),
            pool_path: fleet.config().join("pool"),
            shared,
        }
    }

    /// Runs a verb of this installation, the passphrase and the sudo password handed in.
    pub fn run(&self, verb: &str, args: &[&str]) -> Output {
        run_verb_handing_in(verb, self.dir.path(), args, &self.sudo_credentials)
    }

    /// The sudo password its runs hand in.
    fn sudo_password(&self) -> &str {
        self.sudo_credentials
            .trim_start_matches("sudo: ")
            .trim_end_matches('\n')
    }

    /// Provisions its guest while sampling every process listing of this machine: neither the
    /// sudo password nor the store's passphrase shows in any of them.
    pub fn provision_watching_process_listings(&self) -> Output {
        let listings = ProcessListings::start();
        let output = self.run("provision", &[self.guest.as_str()]);
        let seen = listings.finish();
        assert!(
            seen.iter().any(|line| line.contains("ssh ")),
            "no ssh seen in the listings"
        );
        for line in &seen {
            assert!(
                !line.contains(self.sudo_password()),
                "the sudo password is visible: {line}"
            );
            assert!(
                !line.contains(PASSPHRASE),
                "the passphrase is visible: {line}"
            );
        }
        output
    }

    /// Its list of `domain`'s snapshots is empty.
    fn has_no_snapshot_of(&self, domain: &str) {
        let (stdout, _) = self.must_run("snapshot", &["--json", "--list", domain]);
        let listing: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            listing["snapshots"].as_array().map(Vec::len),
            Some(0),
            "{listing}"
        );
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
/// answering at its address; the list reads each snapshot's size and the disk's as root there;
/// the snapshot is deleted (the rebuild after replaces the root disk it belongs to).
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
    // Deleted through it too: the rebuild after replaces the root disk, which a snapshot would
    // make a conflict (--force).
    second.must_run("snapshot", &["--delete", "remote-1", domain]);
    second.has_no_snapshot_of(domain);
}

/// Samples `ps -eo args` until stopped, keeping every line seen.
struct ProcessListings {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<String>>>,
    sampler: Option<std::thread::JoinHandle<()>>,
}

impl ProcessListings {
    fn start() -> ProcessListings {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop_flag, lines) = (stop.clone(), seen.clone());
        let sampler = std::thread::spawn(move || {
            while !stop_flag.load(Ordering::Relaxed) {
                let listing = Command::new("ps").args(["-eo", "args"]).output().unwrap();
                lines
                    .lock()
                    .unwrap()
                    .extend(text(&listing.stdout).lines().map(str::to_string));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        ProcessListings {
            stop,
            seen,
            sampler: Some(sampler),
        }
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// The rebuilt guest reads the hypervisor's file in its shared folder and its own write shows on
/// the hypervisor; a snapshot of the running guest is refused before libvirt is asked to take
/// it. Last, the guest is destroyed through the login whose sudo needs no password, the
/// passphrase alone handed in.
pub fn a_shared_folder_then_a_destroy_without_a_password(
    fleet: &Fleet,
    second: &SecondInstallation,
) {
    let (guest, address) = fleet.ready(&second.guest);
    let domain = guest.as_str();
    shared_folder_works(fleet, second, &guest, &address);

    // --purge: the address goes back to the installation's range, its DHCP reservation goes.
    std::fs::write(
        second.dir.path().join("hypervisors.conf"),
        hypervisors_conf(
            SecondInstallation::HYPERVISOR,
            &second.nopasswd_uri,
            &second.pool,
            &second.pool_path,
        ),
    )
    .unwrap();
    let destroy = run_verb("destroy", second.dir.path(), &["--purge", "--yes", domain]);
    assert!(
        destroy.status.success(),
        "{}\n{}",
        text(&destroy.stdout),
        text(&destroy.stderr)
    );
    assert!(!domain_exists(domain));
}

/// The guest at `address` sees the hypervisor's file in its shared folder, its own write there
/// shows on the hypervisor, and a snapshot of it is refused while it runs with the folder.
fn shared_folder_works(
    fleet: &Fleet,
    second: &SecondInstallation,
    guest: &DomainName,
    address: &str,
) {
    assert_eq!(
        fleet
            .must(guest, address, "findmnt -n -o FSTYPE,SOURCE /srv/exchange")
            .trim(),
        "virtiofs exchange"
    );
    assert_eq!(
        fleet.must(guest, address, "cat /srv/exchange/from-hypervisor"),
        "written on the hypervisor\n"
    );
    fleet.must(
        guest,
        address,
        "echo written on the guest | sudo tee /srv/exchange/from-guest >/dev/null",
    );
    assert_eq!(
        std::fs::read_to_string(second.shared.path().join("from-guest")).unwrap(),
        "written on the guest\n"
    );
    let domain = guest.as_str();
    let refused = second.run("snapshot", &["--name", "shared-1", domain]);
    let said = format!("{}\n{}", text(&refused.stdout), text(&refused.stderr));
    assert_eq!(refused.status.code(), Some(7), "{said}");
    assert!(
        said.contains("runs with shared folders (virtiofs)"),
        "{said}"
    );
    assert!(said.contains("hint: shut the guest down"), "{said}");
    second.has_no_snapshot_of(domain);
}
