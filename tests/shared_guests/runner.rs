//! What the trogrunner guest needs from this machine: a hypervisor it can reach over SSH, and a
//! release of trog to download.
//!
//! The hypervisor is this machine's libvirtd behind a second sshd, started here on the bridge
//! address (guests reach nothing else), with the host key and the passwordless login of
//! tests/services/remote-host.sh, whose private key is the one the runner is given.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the sshd started here is given to listen.
const SSHD_START_TIMEOUT: Duration = Duration::from_secs(10);

/// The login remote-host.sh set up with passwordless sudo, and its files.
pub struct Hypervisor {
    pub login: String,
    pub private_key: String,
    pub host_key_public: String,
    pub port: u16,
    sshd: Child,
    _dir: tempfile::TempDir,
}

impl Hypervisor {
    /// Sets up remote-host.sh's logins and keys, then an sshd for them on `address`.
    pub fn start(checkout: &Path, address: &str) -> Hypervisor {
        let output = Command::new(checkout.join("tests/services/remote-host.sh"))
            .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "tests/services/remote-host.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        let value = |key: &str| {
            said.lines()
                .find_map(|line| line.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("remote-host.sh printed no {key}:\n{said}"))
                .to_string()
        };
        let state = PathBuf::from(value("STATE"));
        let login = value("USER_NOPASSWD");
        let private_key = std::fs::read_to_string(value("KEYFILE")).unwrap();
        let host_key_public = std::fs::read_to_string(state.join("host_key.pub")).unwrap();
        let host_key_public = host_key_public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");

        let port = {
            let probe = std::net::TcpListener::bind((address, 0)).unwrap();
            probe.local_addr().unwrap().port()
        };
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {address}\nPort {port}\nHostKey {}\nPidFile {}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin no\nUsePAM no\nAllowUsers {login}\n",
                state.join("host_key").display(),
                dir.path().join("sshd.pid").display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let sshd = Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-f")
            .arg(&config)
            .arg("-E")
            .arg(dir.path().join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + SSHD_START_TIMEOUT;
        while std::net::TcpStream::connect((address, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {address}:{port} within {SSHD_START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Hypervisor {
            login,
            private_key,
            host_key_public,
            port,
            sshd,
            _dir: dir,
        }
    }
}

impl Drop for Hypervisor {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

/// A release as the trogrunner recipe takes it: the trog binary (without its debug sections)
/// and the checkout's recipes, in one .tar.gz. Returns its bytes.
pub fn release_archive(checkout: &Path, binary: &Path) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(binary)
        .arg(dir.path().join("trog"))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "objcopy could not strip {}",
        binary.display()
    );
    let archive = dir.path().join("release.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .arg("trog")
        .arg("-C")
        .arg(checkout)
        .arg("recipes")
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(archive).unwrap()
}
