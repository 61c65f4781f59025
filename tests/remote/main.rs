//! A hypervisor reached over SSH, for real, without booting a guest: tests/services/remote-host.sh
//! puts an sshd in a network namespace of its own in front of this machine's libvirtd, with a
//! login that has passwordless sudo and one whose sudo wants a password. Through
//! `qemu+ssh://LOGIN@10.213.0.2/system`: without a password and without a terminal a provision
//! fails within seconds with the NOPASSWD hint; preflight reports a healthy and a broken host; a
//! tunnel reaches what the hypervisor sees. (Guests through such a hypervisor are checks of
//! tests/shared_guests, on its fleet: a rebuild and a snapshot with memory with sudo's password
//! handed in and seen in no process listing, a shared folder, a destroy through the login that
//! needs no password.)

#[path = "../support/remote_host.rs"]
mod remote_host;
#[path = "../e2e/support.rs"]
#[allow(dead_code)]
mod support;

use remote_host::RemoteHost;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use support::*;

/// The one address of the installation's `address_range` on libvirt's default network: the guest
/// a refused run would have been given it (no guest is booted here), outside dnsmasq's pool and
/// every other test's range.
const GUEST_ADDRESS: &str = "192.168.122.243";
/// How long a run without a sudo password may take to refuse (key generation and the seed are
/// built first; no guest is booted).
const REFUSAL_DEADLINE: Duration = Duration::from_secs(60);
const REFUSAL_EXPECTED_WITHIN: Duration = Duration::from_secs(30);

/// The second host, set up once per test binary.
fn remote_host() -> &'static RemoteHost {
    static HOST: OnceLock<RemoteHost> = OnceLock::new();
    HOST.get_or_init(RemoteHost::set_up)
}

struct Installation {
    dir: tempfile::TempDir,
    domain: String,
    pool: String,
    pool_path: PathBuf,
    /// The guest file's `image` lines.
    image: String,
}

impl Installation {
    fn new(tag: &str, image_url: &str, image_sha256: &str, mirror_url: &str) -> Installation {
        let dir = tempfile::Builder::new()
            .prefix(&format!("trog-remote-{tag}-"))
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let unique = std::process::id();
        let domain = format!("remote-{tag}-{unique}.test");
        let pool = format!("trog-remote-{tag}-{unique}");
        let pool_path = dir.path().join("pool");
        std::fs::write(
            dir.path().join("recipes.yaml"),
            format!(
                "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror_url}\n    upgrade: false\n    gateway: 192.168.122.1\n    resolvers: [192.168.122.1]\n    address_range: {GUEST_ADDRESS}-{GUEST_ADDRESS}/24\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("recipes.d")).unwrap();
        let installation = Installation {
            dir,
            domain,
            pool,
            pool_path,
            image: format!("    image:\n      url: {image_url}\n      sha256: {image_sha256}\n"),
        };
        installation.write_guest("");
        installation
    }

    /// The guest's file, with `more` added to its `_global` lines.
    fn write_guest(&self, more: &str) {
        let domain = &self.domain;
        std::fs::write(
            self.dir
                .path()
                .join("recipes.d")
                .join(format!("{domain}.yaml")),
            format!(
                "{domain}:\n  _global:\n    memory: 768\n    cpus: 1\n    size: 4G\n{}{more}",
                self.image
            ),
        )
        .unwrap();
    }

    /// One hypervisor, `remote`, reached as `user` at `uri_path` (`/system`). It is this
    /// machine, whose libvirtd other test binaries' guests share: overcommitting CPUs keeps this
    /// test's guests placeable beside them.
    fn hypervisor(&self, uri: &str) {
        std::fs::write(
            self.dir.path().join("hypervisors.conf"),
            format!(
                "# This machine's libvirtd behind the sshd of a network namespace.\n[remote]\nlibvirt_uri = {uri}\ndomain_type = qemu\npool_name = {}\npool_path = {}\nreserve_memory = 512\nreserve_disk = 1G\ncpu_overcommit = 100\n",
                self.pool,
                self.pool_path.display()
            ),
        )
        .unwrap();
    }

    /// Starts a verb in a session of its own (no controlling terminal), `credentials` written
    /// to its standard input, which is left open.
    fn spawn(
        &self,
        verb: &str,
        args: &[&str],
        credentials: &str,
    ) -> (Child, std::process::ChildStdin) {
        let mut child = Command::new("setsid")
            .arg("--wait")
            .arg(checkout().join("bin").join(verb))
            .arg("--credentials")
            .args(args)
            .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
            .env("TROG_RUN_AS_CALLER", "1")
            .env("TROG_PROVISIONER_CONFIG", self.dir.path())
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(credentials.as_bytes()).unwrap();
        stdin.flush().unwrap();
        (child, stdin)
    }

    fn run(&self, verb: &str, args: &[&str], credentials: &str) -> Output {
        let (child, stdin) = self.spawn(verb, args, credentials);
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        support::root_warning::output_without_root_warning(output)
    }
}

fn keepass_only() -> String {
    format!("keepass: {PASSPHRASE}\n\n")
}

/// The tunnel `debug_boot --vnc` opens through a remote hypervisor: a client on this machine's end
/// reaches a server as the hypervisor sees it (here the namespace's own sshd, whose greeting is
/// read), and the tunnel closes with its handle. (tests/shared_guests runs `debug_boot --vnc`
/// itself through this host, to a guest's display.)
#[test]
fn a_tunnel_reaches_what_the_hypervisor_sees_and_closes_with_its_handle() {
    let host = remote_host();
    let uri = trog::model::hypervisor::LibvirtUri::parse(&host.uri(&host.user_nopasswd, "/system"))
        .unwrap();
    let machine = trog::workflow::hypervisor_machine::ssh_machine_for(&uri)
        .unwrap()
        .unwrap();
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tunnel = machine.tunnel(port, &host.address, 22).unwrap();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut greeting = [0u8; 8];
    std::io::Read::read_exact(&mut stream, &mut greeting).unwrap();
    assert_eq!(&greeting, b"SSH-2.0-");
    drop(stream);
    drop(tunnel);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn without_a_terminal_or_a_sudo_password_the_run_stops_within_seconds() {
    let host = remote_host();
    // Nothing is booted, so the image is never fetched: any digest will do.
    let installation = Installation::new(
        "refused",
        "file:///nonexistent/image.qcow2",
        &"a".repeat(64),
        "http://192.168.122.1:9/debian",
    );
    let _leftovers = LibvirtLeftovers {
        domain: installation.domain.clone(),
        pool: installation.pool.clone(),
    };
    installation.hypervisor(&host.uri(&host.user_password, "/system"));
    let started = Instant::now();
    // The passphrase is handed in, the sudo password is not, and standard input stays open.
    let (mut child, stdin) = installation.spawn(
        "provision",
        &[installation.domain.as_str()],
        &keepass_only(),
    );
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > REFUSAL_DEADLINE {
            let _ = child.kill();
            panic!("provision was still running after {REFUSAL_DEADLINE:?}: it waits for input nobody can give");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let elapsed = started.elapsed();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(elapsed < REFUSAL_EXPECTED_WITHIN, "took {elapsed:?}");
    assert!(
        stderr.contains(&format!(
            "sudo on {} wants a password for {}",
            host.address, host.user_password
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "trog root-programs sudoers --user {}",
            host.user_password
        )),
        "{stderr}"
    );
    assert!(!domain_exists(&installation.domain), "something was built");
}

/// A pool whose directory is a filesystem of its own, as a quota'd dataset would be: `/dev/shm`,
/// a tmpfs mounted on every such machine and seen from the namespace too (a mount made now here
/// would not be: `ip netns exec` gave sshd a mount namespace of its own). Preflight only reads
/// it; the pool is undefined when dropped and the directory left as it was.
struct LimitedPool {
    name: String,
    path: PathBuf,
}

impl LimitedPool {
    fn create(name: &str) -> LimitedPool {
        let path = PathBuf::from("/dev/shm");
        virt::error::clear_error_callback();
        let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
        let xml = format!(
            "<pool type='dir'><name>{name}</name><target><path>{}</path></target></pool>",
            path.display()
        );
        let pool = connection.define_storage_pool_xml(&xml, 0).unwrap();
        pool.create(0).unwrap();
        LimitedPool {
            name: name.to_string(),
            path,
        }
    }
}

impl Drop for LimitedPool {
    fn drop(&mut self) {
        virt::error::clear_error_callback();
        if let Ok(connection) = virt::connect::Connect::open(Some("qemu:///system")) {
            if let Ok(pool) = connection.lookup_storage_pool_by_name(&self.name) {
                let _ = pool.destroy();
                let _ = pool.undefine();
            }
        }
    }
}

fn preflight_snapshot(
    installation: &Installation,
    name: &str,
    credentials: &str,
) -> (Option<i32>, String) {
    let output = installation.run("preflight", &["--hypervisor", name], credentials);
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("Hypervisor"),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    (output.status.code(), stdout)
}

#[test]
fn preflight_on_a_healthy_and_a_broken_host() {
    let host = remote_host();
    let installation = Installation::new(
        "preflight",
        "file:///nonexistent/image.qcow2",
        &"a".repeat(64),
        "http://192.168.122.1:9/debian",
    );
    let pool = LimitedPool::create(&installation.pool);
    std::fs::write(
        installation.dir.path().join("hypervisors.conf"),
        format!(
            "[healthy]\nlibvirt_uri = {healthy}\npool_name = {pool}\npool_path = {path}\ndomain_type = qemu\n\n\
             [broken]\nlibvirt_uri = {broken}\npool_name = {pool}\npool_path = {path}\n\n\
             [nopool]\nlibvirt_uri = {healthy}\npool_name = {pool}-missing\npool_path = {path}-missing\ndomain_type = qemu\n",
            healthy = host.uri(&host.user_nopasswd, "/system"),
            broken = host.uri(&host.user_password, "/systen"),
            pool = pool.name,
            path = pool.path.display(),
        ),
    )
    .unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(
        &regex_escape(&installation.dir.path().display().to_string()),
        "[INSTALLATION]",
    );
    settings.add_filter(&regex_escape(&host.keyfile), "[KEYFILE]");
    settings.add_filter(&regex_escape(&host.address), "[ADDRESS]");
    settings.add_filter(&format!("-{}", std::process::id()), "-[PID]");
    settings.add_filter(r"\d+\.\d+\.\d+", "[VERSION]");
    settings.add_filter(r"\d+\.\d GiB", "[SIZE]");
    // With domain_type = qemu the KVM check passes either way; what it found depends on the
    // machine the tests run on (ok when KVM does not work, a note when it does).
    settings.add_filter(
        r"(?m)^(  ok   KVM does not work on .*| note  KVM works on .*\n.*)$",
        "[KVM: not a failure under domain_type qemu]",
    );
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        let (status, stdout) = preflight_snapshot(&installation, "healthy", "\n");
        assert_eq!(status, Some(0), "{stdout}");
        insta::assert_snapshot!("healthy", stdout);

        let (status, stdout) = preflight_snapshot(&installation, "broken", "\n");
        assert_eq!(status, Some(1), "{stdout}");
        insta::assert_snapshot!("broken", stdout);

        let (status, stdout) = preflight_snapshot(&installation, "nopool", "\n");
        assert_eq!(status, Some(0), "{stdout}");
        insta::assert_snapshot!("missing_pool", stdout);

        // The password handed in makes sudo pass for the login that wants one.
        let credentials = format!("sudo: {}\n\n", host.sudo_password());
        let output = installation.run(
            "preflight",
            &["--hypervisor", "broken", "--json"],
            &credentials,
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["worth_starting"], false);
        let checks = &report["hypervisors"][0]["checks"];
        assert_eq!(checks[1]["outcome"], "ok", "{checks}");
        assert!(
            checks[1]["summary"]
                .as_str()
                .unwrap()
                .contains("works with the password handed in"),
            "{checks}"
        );
        // The root programs are this trog's; libvirt itself is what is broken there.
        assert_eq!(checks[2]["outcome"], "ok", "{checks}");
        assert_eq!(checks[3]["outcome"], "failed", "{checks}");
        assert!(
            checks[3]["summary"]
                .as_str()
                .unwrap()
                .starts_with("libvirt does not answer"),
            "{checks}"
        );
    });
    drop(pool);
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}
