//! The second host of the remote-hypervisor tests: tests/services/remote-host.sh puts an sshd in a
//! network namespace of its own in front of this machine's libvirtd, with a login whose sudo
//! needs no password and one whose sudo wants one, so that
//! `qemu+ssh://LOGIN@ADDRESS/system?keyfile=KEYFILE` is a hypervisor reached over SSH.
//! The script is idempotent and serialised by a lock: every test binary that needs the host sets
//! it up through [`RemoteHost::set_up`], whichever comes first.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long remote-host.sh may take: its lock waits up to 120 s for another binary's setup,
/// which itself takes seconds.
const SET_UP_WITHIN: Duration = Duration::from_secs(180);

/// What remote-host.sh set up.
pub struct RemoteHost {
    /// The namespace host's address, where its sshd listens.
    pub address: String,
    /// The private key both logins accept.
    pub keyfile: String,
    /// The script's state directory (the host key, the sudo password).
    pub state: String,
    /// The network namespace the sshd runs in.
    pub namespace: String,
    /// The login whose sudo needs no password.
    pub user_nopasswd: String,
    /// The login whose sudo wants the password in `STATE/sudo-password`.
    pub user_password: String,
}

impl RemoteHost {
    /// Runs remote-host.sh (setting the host up if it is not yet) and reads what it printed.
    /// It runs on a thread of its own, so that a setup that never ends (or a daemon it started
    /// that kept its output open) fails the test after [`SET_UP_WITHIN`] instead of holding it.
    pub fn set_up() -> RemoteHost {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(
                Command::new(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/services/remote-host.sh"
                ))
                .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
                .output()
                .unwrap(),
            );
        });
        let output = finished
            .recv_timeout(SET_UP_WITHIN)
            .unwrap_or_else(|_| panic!("remote-host.sh did not finish within {SET_UP_WITHIN:?}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "remote-host.sh failed:\n{stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let value = |key: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("remote-host.sh printed no {key}:\n{stdout}"))
                .to_string()
        };
        RemoteHost {
            address: value("ADDRESS"),
            keyfile: value("KEYFILE"),
            state: value("STATE"),
            namespace: value("NAMESPACE"),
            user_nopasswd: value("USER_NOPASSWD"),
            user_password: value("USER_PASSWORD"),
        }
    }

    /// The libvirt URI of this host as `user`, at `path` (`/system`).
    pub fn uri(&self, user: &str, path: &str) -> String {
        format!(
            "qemu+ssh://{user}@{}{path}?keyfile={}",
            self.address, self.keyfile
        )
    }

    /// The password sudo wants of [`RemoteHost::user_password`].
    pub fn sudo_password(&self) -> String {
        std::fs::read_to_string(Path::new(&self.state).join("sudo-password"))
            .unwrap()
            .trim()
            .to_string()
    }
}
