//! The world an end-to-end run needs: a temporary installation, an apt mirror on the libvirt
//! bridge, the real `bin/` entry points, and cleanup of whatever a failed run left in libvirt.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The address of this machine on libvirt's default NAT network, where guests can reach it.
pub const BRIDGE_ADDRESS: &str = "192.168.122.1";
/// The passphrase of the test installation's secret store.
pub const PASSPHRASE: &str = "e2e-passphrase";

pub fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The test guest image built by tests/image/ensure-image.sh (exported by tests/run).
pub fn test_image() -> PathBuf {
    let path = std::env::var("TROG_TEST_IMAGE").expect(
        "TROG_TEST_IMAGE names the test guest image: run the suite through tests/run, which builds it",
    );
    PathBuf::from(path)
}

pub fn sha256_file(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// An empty apt archive for the guest's mirror: every suite cloud-init's Debian template and the
/// debian recipe name exists, with binary and source indexes listing nothing, so `apt-get update`
/// succeeds and installing what the image already has is a no-op.
pub fn write_empty_archive(root: &Path) {
    let empty = hex::encode(Sha256::digest(b""));
    for suite in [
        "bookworm",
        "bookworm-updates",
        "bookworm-security",
        "bookworm-backports",
    ] {
        let dists = root.join("debian/dists").join(suite);
        for index in ["main/binary-amd64/Packages", "main/source/Sources"] {
            let path = dists.join(index);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let release = format!(
            "Suite: {suite}\nCodename: {suite}\nComponents: main\nArchitectures: amd64\nDate: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n {empty} 0 main/binary-amd64/Packages\n {empty} 0 main/source/Sources\n"
        );
        std::fs::write(dists.join("Release"), release).unwrap();
    }
}

/// A static HTTP server for the mirror, stopped when dropped.
pub struct MirrorServer {
    child: Child,
    pub url: String,
}

impl MirrorServer {
    pub fn start(root: &Path, port: u16) -> MirrorServer {
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                BRIDGE_ADDRESS,
                "--directory",
            ])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 serves the test mirror");
        let url = format!("http://{BRIDGE_ADDRESS}:{port}/debian");
        let server = MirrorServer { child, url };
        for _ in 0..100 {
            if std::net::TcpStream::connect((BRIDGE_ADDRESS, port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test mirror did not start on {BRIDGE_ADDRESS}:{port} within 5s");
    }
}

impl Drop for MirrorServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a `bin/` entry point with the installation and credentials on standard input; what it
/// printed is recorded for the secret scan.
pub fn run_verb(verb: &str, installation: &Path, args: &[&str]) -> Output {
    let output = spawn_verb(verb, installation, args)
        .wait_with_output()
        .unwrap();
    let command = format!("{verb} {}", args.join(" "));
    record_printed(&format!("stdout of {command}"), &text(&output.stdout));
    record_printed(&format!("stderr of {command}"), &text(&output.stderr));
    output
}

/// Everything the verbs of this test binary printed, with where it came from.
static PRINTED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Keeps `text` for the secret scan at the end of the guest's life.
pub fn record_printed(what: &str, text: &str) {
    PRINTED
        .lock()
        .unwrap()
        .push((what.to_string(), text.to_string()));
}

/// What was recorded so far.
pub fn printed() -> Vec<(String, String)> {
    PRINTED.lock().unwrap().clone()
}

pub fn spawn_verb(verb: &str, installation: &Path, args: &[&str]) -> Child {
    let mut child = Command::new(checkout().join("bin").join(verb))
        .arg("--credentials")
        .args(args)
        .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
        // The installations are this (root's) test's temporary folders: trog runs as the caller,
        // not as the account bin/setup makes.
        .env("TROG_RUN_AS_CALLER", "1")
        .env("TROG_PROVISIONER_CONFIG", installation)
        .env("XDG_CACHE_HOME", installation.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "keepass: {PASSPHRASE}\n").unwrap();
    child
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Removes what a run left in libvirt, whatever state it stopped in.
pub struct LibvirtLeftovers {
    pub domain: String,
    pub pool: String,
}

impl Drop for LibvirtLeftovers {
    fn drop(&mut self) {
        virt::error::clear_error_callback();
        let Ok(connection) = virt::connect::Connect::open(Some("qemu:///system")) else {
            return;
        };
        // The guest's DHCP reservations (its pinned lease) go with it, as `trog destroy` would
        // remove them: read from its definition before it is gone.
        let interfaces =
            trog::libvirt::lease_pin::domain_network_interfaces(&connection, &self.domain);
        if let Ok(domain) = connection.lookup_domain_by_name(&self.domain) {
            let _ = domain.destroy();
            // A run that failed after its snapshots were taken leaves them: libvirt refuses to
            // undefine a domain with snapshots unless their metadata goes too.
            let _ = domain.undefine_flags(
                virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM
                    | virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA,
            );
        }
        for (network, mac) in interfaces {
            let _ = trog::libvirt::lease_pin::release_pins(
                &connection,
                "qemu:///system",
                &network,
                &mac,
                &[],
            );
        }
        if let Ok(pool) = connection.lookup_storage_pool_by_name(&self.pool) {
            for volume in pool.list_all_volumes(0).unwrap_or_default() {
                let _ = volume.delete(0);
            }
            let _ = pool.destroy();
            let _ = pool.undefine();
        }
    }
}

/// Runs `command` on the guest `domain` at `address` as its admin (`trogadmin`), with the guest's
/// key read from the installation's secret store; `Err` carries ssh's stderr.
pub fn ssh_as_admin(
    installation: &Path,
    domain: &trog::model::names::DomainName,
    address: &str,
    command: &str,
) -> Result<String, String> {
    let mut store = trog::secrets::SecretStore::open(
        &installation.join("secrets.kdbx"),
        &trog::credentials::Secret::new(PASSPHRASE),
    )
    .unwrap();
    let keypair = trog::secrets::guest_keypair(&mut store, domain, &mut rand::rngs::OsRng).unwrap();
    let key = trog::secrets::PrivateKeyFile::write(&keypair).unwrap();
    let output = Command::new("ssh")
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=10",
            "-i",
        ])
        .arg(key.path())
        .arg(format!("trogadmin@{address}"))
        .arg(command)
        .output()
        .unwrap();
    if output.status.success() {
        Ok(text(&output.stdout))
    } else {
        Err(text(&output.stderr))
    }
}
