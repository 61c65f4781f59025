//! The world an end-to-end run needs: a temporary installation, an apt mirror on the libvirt
//! bridge, the real `bin/` entry points, and cleanup of whatever a failed run left in libvirt.

#[path = "../support/root_warning.rs"]
pub mod root_warning;

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

/// A static HTTP server for the mirror on the libvirt bridge, stopped when dropped. It can be told
/// to fail requests ([`MirrorServer::fail_next`]), as a cache whose upstream hiccups does, and it
/// keeps every path it was asked for, so a test sees which mirror apt on the guest really asked.
pub struct MirrorServer {
    pub url: String,
    state: std::sync::Arc<MirrorState>,
    address: std::net::SocketAddr,
}

#[derive(Default)]
struct MirrorState {
    /// How many of the next requests are answered 503.
    failures_left: std::sync::Mutex<usize>,
    /// Every path asked for, in order, with whether it was failed.
    asked: std::sync::Mutex<Vec<(String, bool)>>,
    stopped: std::sync::atomic::AtomicBool,
}

impl MirrorServer {
    pub fn start(root: &Path, port: u16) -> MirrorServer {
        let listener = std::net::TcpListener::bind((BRIDGE_ADDRESS, port))
            .unwrap_or_else(|error| panic!("the test mirror on {BRIDGE_ADDRESS}:{port}: {error}"));
        let address = listener.local_addr().unwrap();
        let state = std::sync::Arc::new(MirrorState::default());
        let (root, serving) = (root.to_path_buf(), state.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if serving.stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (root, state) = (root.clone(), serving.clone());
                std::thread::spawn(move || answer(stream, &root, &state));
            }
        });
        MirrorServer {
            url: format!("http://{BRIDGE_ADDRESS}:{port}/debian"),
            state,
            address,
        }
    }

    /// Answers the next `count` requests with 503 Service Unavailable.
    pub fn fail_next(&self, count: usize) {
        *self.state.failures_left.lock().unwrap() = count;
    }

    /// The paths asked for so far, in order, each with whether it was failed.
    pub fn asked(&self) -> Vec<(String, bool)> {
        self.state.asked.lock().unwrap().clone()
    }
}

/// One connection: one request, answered with the file under `root`, a 404, or a 503 while
/// failures are due; the connection is closed after it (apt opens another).
fn answer(stream: std::net::TcpStream, root: &Path, state: &MirrorState) {
    use std::io::BufRead;
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(60)));
    let mut reader = std::io::BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut header = String::new();
    while reader
        .read_line(&mut header)
        .map(|n| n > 2)
        .unwrap_or(false)
    {
        header.clear();
    }
    let mut words = request_line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let path = target.split('?').next().unwrap_or("/").to_string();
    let fail = {
        let mut left = state.failures_left.lock().unwrap();
        let fail = *left > 0;
        *left = left.saturating_sub(1);
        fail
    };
    state.asked.lock().unwrap().push((path.clone(), fail));
    let file = (!path.split('/').any(|part| part == ".."))
        .then(|| std::fs::read(root.join(path.trim_start_matches('/'))).ok())
        .flatten();
    let (status, body) = match (fail, file) {
        (true, _) => ("503 Service Unavailable", Vec::new()),
        (false, Some(bytes)) => ("200 OK", bytes),
        (false, None) => ("404 Not Found", Vec::new()),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        response.extend_from_slice(&body);
    }
    let mut stream = &stream;
    let _ = stream.write_all(&response);
}

impl Drop for MirrorServer {
    fn drop(&mut self) {
        // The accepting thread ends at its next connection: this one.
        self.state
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.address);
    }
}

/// Runs a `bin/` entry point with the installation and credentials on standard input; what it
/// printed is recorded for the secret scan.
pub fn run_verb(verb: &str, installation: &Path, args: &[&str]) -> Output {
    run_verb_handing_in(verb, installation, args, "")
}

/// [`run_verb`], with `more_credentials` (lines of `--credentials`, each ending in a newline:
/// `sudo: PASSWORD\n`) handed in after the passphrase.
pub fn run_verb_handing_in(
    verb: &str,
    installation: &Path,
    args: &[&str],
    more_credentials: &str,
) -> Output {
    let started = std::time::Instant::now();
    let output = root_warning::output_without_root_warning(
        spawn_verb_handing_in(verb, installation, args, more_credentials)
            .wait_with_output()
            .unwrap(),
    );
    let command = format!("{verb} {}", args.join(" "));
    // Where a binary's time goes, in its log (tests/run prints it): one line a verb.
    eprintln!(
        "[verb] {command}: exit {:?} after {:.0?}",
        output.status.code(),
        started.elapsed()
    );
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

/// The unprivileged account a test binary runs trog as, once [`run_verbs_as`] named it; unset,
/// trog runs as the test (root) itself.
static RUN_AS: std::sync::OnceLock<TestAccount> = std::sync::OnceLock::new();

/// From now on, every verb of this test binary runs as `account` instead of as root.
pub fn run_verbs_as(account: TestAccount) {
    assert!(
        RUN_AS.set(account).is_ok(),
        "the account verbs run as is named once"
    );
}

/// The account verbs run as ([`run_verbs_as`]), if one was named.
pub fn verbs_run_as() -> Option<&'static TestAccount> {
    RUN_AS.get()
}

/// An ordinary local account as a site makes one for trog: a system user in group `libvirt`
/// and nothing else, no login shell, allowed through sudo exactly what
/// `trog root-programs sudoers --user NAME` prints.
#[derive(Debug)]
pub struct TestAccount {
    pub name: &'static str,
    pub uid: u32,
}

impl TestAccount {
    /// Makes the account if this machine does not have it yet, then installs the root programs
    /// and its sudoers file with the install script of the trog under test, and checks that it
    /// is in no group but its own and `libvirt` and that sudo allows it those programs and
    /// nothing more.
    pub fn ensure(name: &'static str) -> TestAccount {
        let exists = |name: &str| {
            Command::new("id")
                .arg(name)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success()
        };
        if !exists(name) {
            let made = Command::new("useradd")
                .args(["--system", "--home-dir", "/nonexistent", "--no-create-home"])
                .args(["--shell", "/usr/sbin/nologin", "--groups", "libvirt", name])
                .output()
                .unwrap();
            // A concurrent run may have made it meanwhile.
            assert!(made.status.success() || exists(name), "{made:?}");
        }
        let groups = command_text(Command::new("id").args(["-Gn", name]));
        let mut groups: Vec<&str> = groups.split_whitespace().collect();
        groups.sort();
        let mut expected = vec![name, "libvirt"];
        expected.sort();
        assert_eq!(
            groups, expected,
            "{name} is in group libvirt and nothing else"
        );

        let trog = env!("CARGO_BIN_EXE_trog");
        let script = command_text(Command::new(trog).args([
            "root-programs",
            "install-script",
            "--user",
            name,
        ]));
        let mut installer = Command::new("sh")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        installer
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let installed = installer.wait_with_output().unwrap();
        assert!(installed.status.success(), "{installed:?}");

        // What sudo itself says the account may run: the printed lines' programs, no other.
        let printed =
            command_text(Command::new(trog).args(["root-programs", "sudoers", "--user", name]));
        let prefix = format!("{name} ALL=(root) NOPASSWD: ");
        let mut allowed: Vec<String> = printed
            .lines()
            .map(|line| line.strip_prefix(&prefix).unwrap_or(line).to_string())
            .collect();
        let listed = command_text(Command::new("sudo").args(["-l", "-U", name]));
        let mut granted: Vec<String> = listed
            .lines()
            .skip_while(|line| !line.contains("may run the following commands"))
            .skip(1)
            .map(|line| line.trim().to_string())
            .filter(|line| !line.is_empty())
            .collect();
        allowed.sort();
        granted.sort();
        let allowed: Vec<String> = allowed
            .iter()
            .map(|program| format!("(root) NOPASSWD: {program}"))
            .collect();
        assert_eq!(granted, allowed, "sudo -l -U {name}:\n{listed}");

        let uid = command_text(Command::new("id").args(["-u", name]))
            .trim()
            .parse()
            .unwrap();
        TestAccount { name, uid }
    }

    /// Gives the installation `dir` and everything in it to the account, with a private home
    /// and cache of its own inside it.
    pub fn hand_over(&self, dir: &Path) {
        use std::os::unix::fs::DirBuilderExt;
        for private in [home_of(dir), dir.join("cache")] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&private)
                .unwrap();
        }
        let given = Command::new("chown")
            .args(["-R", &format!("{}:", self.name)])
            .arg(dir)
            .output()
            .unwrap();
        assert!(given.status.success(), "{given:?}");
    }
}

/// The account's home while it runs trog on the installation `dir`.
fn home_of(installation: &Path) -> PathBuf {
    installation.join("home")
}

/// What `command` printed; it must succeed.
fn command_text(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(output.status.success(), "{command:?}: {output:?}");
    text(&output.stdout)
}

pub fn spawn_verb(verb: &str, installation: &Path, args: &[&str]) -> Child {
    spawn_verb_handing_in(verb, installation, args, "")
}

fn spawn_verb_handing_in(
    verb: &str,
    installation: &Path,
    args: &[&str],
    more_credentials: &str,
) -> Child {
    let entry_point = checkout().join("bin").join(verb);
    let mut command = match verbs_run_as() {
        // setpriv execs (no process stays between): killing the child kills trog itself.
        Some(account) => {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={}", account.name))
                .arg(format!("--regid={}", account.name))
                .arg("--init-groups")
                .arg(entry_point)
                .env("HOME", home_of(installation))
                .env("USER", account.name)
                .env("LOGNAME", account.name)
                .env_remove("XDG_RUNTIME_DIR")
                .env_remove("SSH_AUTH_SOCK");
            command
        }
        None => {
            let mut command = Command::new(entry_point);
            // The installations are this (root's) test's temporary folders: trog runs as the
            // caller, not as the account bin/setup makes.
            command.env("TROG_RUN_AS_CALLER", "1");
            command
        }
    };
    let mut child = command
        .arg("--credentials")
        .args(args)
        .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
        .env("TROG_PROVISIONER_CONFIG", installation)
        .env("XDG_CACHE_HOME", installation.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    write!(stdin, "keepass: {PASSPHRASE}\n{more_credentials}\n").unwrap();
    child
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether this machine's libvirtd has a domain of that name.
pub fn domain_exists(name: &str) -> bool {
    virt::error::clear_error_callback();
    virt::connect::Connect::open(Some("qemu:///system"))
        .unwrap()
        .lookup_domain_by_name(name)
        .is_ok()
}

/// Switches the domain `name` off at once when it runs (libvirt's destroy).
pub fn force_off(name: &str) {
    virt::error::clear_error_callback();
    let domain = virt::connect::Connect::open(Some("qemu:///system"))
        .unwrap()
        .lookup_domain_by_name(name)
        .unwrap();
    if domain.is_active().unwrap() {
        domain.destroy().unwrap();
    }
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
