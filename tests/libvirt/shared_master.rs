//! Runs against a hypervisor over SSH (tests/services/remote-host.sh), one after another, make
//! one SSH connection to it between them: libvirt's transport and trog's own commands there ride
//! the login's shared master, which outlives a run for a while. Without a private place for it,
//! every run connects again and leaves no master behind.
//!
//! Connections are counted where they are made: the URI's `command` is an ssh whose
//! LocalCommand notes each new one once it is up (a session over a master makes none).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// An installation whose one hypervisor is the remote host, reached through a counting ssh.
struct Counted {
    dir: tempfile::TempDir,
    login: String,
    key: String,
}

impl Counted {
    fn new() -> Counted {
        let host = crate::remote_host::RemoteHost::set_up();
        let (address, user, key) = (host.address, host.user_nopasswd, host.keyfile);
        let dir = tempfile::tempdir().unwrap();
        let connections = dir.path().join("connections");
        let ssh = dir.path().join("counting-ssh");
        std::fs::write(
            &ssh,
            format!(
                "#!/bin/sh\necho \"$*\" | cut -c1-300 >> {}\nexec ssh -o PermitLocalCommand=yes -o \"LocalCommand=echo connect >> {}\" \"$@\"\n",
                dir.path().join("invocations").display(),
                connections.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            dir.path().join("hypervisors.conf"),
            format!(
                "[far]\nlibvirt_uri = qemu+ssh://{user}@{address}/system?keyfile={key}&command={}\ndomain_type = qemu\npool_name = trog-shared-master\n",
                ssh.display()
            ),
        )
        .unwrap();
        Counted {
            dir,
            login: format!("{user}@{address}"),
            key,
        }
    }

    /// Every ssh started through the URI's command, one line each.
    fn invocations(&self) -> String {
        std::fs::read(self.dir.path().join("invocations"))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_else(|error| format!("no invocations: {error}"))
    }

    fn connections(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("connections"))
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }

    /// `trog ARGS` on this installation with `env` (and nothing else of this process's
    /// XDG_RUNTIME_DIR or HOME).
    fn trog(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
        command
            .args(args)
            .env("TROG_PROVISIONER_CONFIG", self.dir.path())
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("HOME")
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    }
}

/// The shared master under `runtime`, closed when the test ends however it ends.
struct MasterIn<'a> {
    counted: &'a Counted,
    sockets: PathBuf,
}

impl MasterIn<'_> {
    fn sockets(&self) -> Vec<String> {
        std::fs::read_dir(&self.sockets)
            .map(|entries| {
                entries
                    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| !name.starts_with("libvirt-ssh-"))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for MasterIn<'_> {
    fn drop(&mut self) {
        let _ = Command::new("ssh")
            .args(["-o", &format!("ControlPath={}/%C", self.sockets.display())])
            .args(["-i", &self.counted.key, "-O", "exit", &self.counted.login])
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn runs_one_after_another_make_one_ssh_connection_to_the_hypervisor() {
    let counted = Counted::new();
    let runtime = tempfile::tempdir().unwrap();
    // A session's runtime directory is its user's alone.
    std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let master = MasterIn {
        counted: &counted,
        sockets: runtime.path().join("trog/ssh"),
    };
    let env = [("XDG_RUNTIME_DIR", runtime.path())];

    // preflight runs commands there (reach, sudo, the pool's folder) and asks libvirt: one
    // connection carries both.
    let first = counted.trog(&["preflight"], &env);
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        said.contains("Reached"),
        "{said}\n{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(said.contains("libvirt answers"), "{said}");
    assert_eq!(
        counted.connections(),
        1,
        "{said}\n{}",
        counted.invocations()
    );
    assert_eq!(
        master.sockets().len(),
        1,
        "one master, kept for the next run"
    );

    // The next runs, libvirt alone and both again, ride it.
    let fleet = counted.trog(&["fleet"], &env);
    assert!(
        fleet.status.success(),
        "{}",
        String::from_utf8_lossy(&fleet.stderr)
    );
    let again = counted.trog(&["preflight"], &env);
    assert!(String::from_utf8_lossy(&again.stdout).contains("libvirt answers"));
    assert_eq!(counted.connections(), 1);
    assert_eq!(master.sockets().len(), 1);
}

#[test]
fn without_a_private_place_each_run_connects_and_keeps_nothing() {
    let counted = Counted::new();
    // A home others may write to is no place for sockets and a program libvirt runs.
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let env = [("HOME", home.path())];

    for run in 1..=2 {
        let output = counted.trog(&["preflight"], &env);
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            said.contains("libvirt answers"),
            "{said}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // libvirt's connection and the run's own master for its commands.
        assert_eq!(counted.connections(), 2 * run, "{said}");
    }
    assert!(!home.path().join(".cache").exists());
}
