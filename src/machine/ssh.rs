//! Another machine over OpenSSH, as a [`Machine`].
//!
//! The system `ssh` client is used, so `~/.ssh/config` (aliases, jump hosts, identities) and the
//! agent work as they do for the user. One multiplexed master connection per host carries every
//! command of the run. A guest's is the run's own: closed when the [`SshMachine`] is dropped, and
//! closing itself after [`MASTER_IDLE_LIMIT`] if the run was killed before it could. A
//! hypervisor's is the login's shared master ([`super::ssh_masters`]), which libvirt's transport
//! rides too and which outlives the run for a while.

use crate::machine::command::{CommandOutput, MachineCommand, MachineError};
use crate::machine::held::{start_held, HeldCommand};
use crate::machine::process::{run_process, Feed};
use crate::machine::ssh_masters::SharedMasters;
use crate::machine::{Machine, Watch};
use std::path::PathBuf;
use std::time::Duration;

/// How long a connection attempt may take before the host counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the master connection outlives its last command. It is closed explicitly at the end
/// of a run; this only bounds what a killed run leaves behind.
pub const MASTER_IDLE_LIMIT: Duration = Duration::from_secs(120);
/// ssh's own exit status for "could not connect or authenticate".
const SSH_CONNECTION_FAILURE: i32 = 255;

/// Where to connect: what a libvirt URI or a guest's address names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl SshTarget {
    pub fn login(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// Which host keys a connection trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeys {
    /// The user's own known_hosts and configuration: for hypervisors, which are long-lived hosts
    /// the user already trusts.
    UserKnownHosts,
    /// A guest: only the keys in `known_hosts` under `alias` (the host keys trog gave it, kept in
    /// the secret store); a host answering with any other key is refused before anything is sent.
    Pinned { known_hosts: PathBuf, alias: String },
    /// A guest built before trog made host keys, adopted on purpose (`provision
    /// --adopt-host-key`): whatever key it answers with is taken and written into `known_hosts`
    /// under `alias`, for trog to read and keep.
    AdoptInto { known_hosts: PathBuf, alias: String },
}

/// What ssh says when the host's key is not one the connection accepts.
const HOST_KEY_REFUSED_MARKERS: [&str; 3] = [
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "No ED25519 host key is known",
];

/// Options that keep a guest connection from lending the guest anything of this machine's, and
/// from taking what the user's ssh_config says for other hosts: given on the command line, they
/// come before any configuration file (ssh keeps the first value it reads).
const GUEST_CONNECTION_OPTIONS: [&str; 8] = [
    "ForwardAgent=no",
    "ForwardX11=no",
    "PermitLocalCommand=no",
    "UpdateHostKeys=no",
    "CheckHostIP=no",
    "HashKnownHosts=no",
    "GlobalKnownHostsFile=/dev/null",
    "HostKeyAlgorithms=ssh-ed25519",
];

/// A sudo password handed in for the run. Never printed; only poured into sudo's stdin, and
/// overwritten with zeros when dropped.
#[derive(Clone)]
pub struct SudoPassword(zeroize::Zeroizing<Vec<u8>>);

impl SudoPassword {
    /// Held as the line sudo reads: the password and its newline.
    pub fn new(password: impl Into<Vec<u8>>) -> SudoPassword {
        let mut line = password.into();
        line.push(b'\n');
        SudoPassword(zeroize::Zeroizing::new(line))
    }
}

impl std::fmt::Debug for SudoPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SudoPassword(<redacted>)")
    }
}

/// The socket of a run's own master, in its folder.
fn private_socket(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("master")
}

/// Where a machine's master connection lives.
#[derive(Debug)]
enum Master {
    /// This run's alone: a folder of its own holds the socket.
    Private(tempfile::TempDir),
    /// The login's shared master, kept for the next run.
    Shared(SharedMasters),
}

#[derive(Debug)]
pub struct SshMachine {
    /// The ssh client: `ssh`, or the command a hypervisor's URI names in its `command` parameter.
    program: String,
    target: SshTarget,
    identity_file: Option<PathBuf>,
    host_keys: HostKeys,
    master: Master,
    sudo_password: Option<SudoPassword>,
}

impl SshMachine {
    pub fn new(
        target: SshTarget,
        identity_file: Option<PathBuf>,
        host_keys: HostKeys,
    ) -> Result<SshMachine, MachineError> {
        let control_dir = tempfile::Builder::new()
            .prefix("trog-ssh-")
            .tempdir()
            .map_err(|source| MachineError::Spawn {
                program: "ssh".into(),
                source,
            })?;
        Ok(SshMachine {
            program: "ssh".into(),
            target,
            identity_file,
            host_keys,
            master: Master::Private(control_dir),
            sudo_password: None,
        })
    }

    /// A machine whose commands go over the login's shared master (a hypervisor's), opening it
    /// when there is none.
    pub fn sharing_master(
        target: SshTarget,
        identity_file: Option<PathBuf>,
        host_keys: HostKeys,
        masters: SharedMasters,
    ) -> SshMachine {
        SshMachine {
            program: "ssh".into(),
            target,
            identity_file,
            host_keys,
            master: Master::Shared(masters),
            sudo_password: None,
        }
    }

    /// Runs `program` instead of `ssh`: a command that takes ssh's arguments (a hypervisor's URI may
    /// name one for libvirt, and trog's own commands there go through it too).
    pub fn through(mut self, program: String) -> SshMachine {
        self.program = program;
        self
    }

    /// Uses `password` for sudo on this host for the rest of the run.
    pub fn remember_sudo_password(&mut self, password: SudoPassword) {
        self.sudo_password = Some(password);
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The socket of this run's own master; none for a shared one.
    fn private_control_path(&self) -> Option<PathBuf> {
        match &self.master {
            Master::Private(dir) => Some(private_socket(dir)),
            Master::Shared(_) => None,
        }
    }

    /// The options every ssh invocation of this machine shares.
    fn ssh_options(&self) -> Vec<String> {
        let mut options: Vec<String> = vec!["-o".into(), "BatchMode=yes".into()];
        match &self.master {
            Master::Shared(masters) => options.extend(masters.ssh_options()),
            Master::Private(dir) => options.extend(
                [
                    format!("ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()),
                    "ControlMaster=auto".into(),
                    format!("ControlPath={}", private_socket(dir).display()),
                    format!("ControlPersist={}", MASTER_IDLE_LIMIT.as_secs()),
                    "ServerAliveInterval=15".into(),
                    "ServerAliveCountMax=4".into(),
                ]
                .into_iter()
                .flat_map(|option| ["-o".to_string(), option]),
            ),
        }
        if let Some(identity) = &self.identity_file {
            options.extend([
                "-o".into(),
                "IdentitiesOnly=yes".into(),
                "-i".into(),
                identity.display().to_string(),
            ]);
        }
        let guest = match &self.host_keys {
            HostKeys::UserKnownHosts => None,
            HostKeys::Pinned { known_hosts, alias } => Some(("yes", known_hosts, alias)),
            HostKeys::AdoptInto { known_hosts, alias } => Some(("accept-new", known_hosts, alias)),
        };
        if let Some((strict, known_hosts, alias)) = guest {
            let mut guest_options = vec![
                format!("StrictHostKeyChecking={strict}"),
                format!("UserKnownHostsFile={}", known_hosts.display()),
                format!("HostKeyAlias={alias}"),
            ];
            guest_options.extend(GUEST_CONNECTION_OPTIONS.map(String::from));
            options.extend(
                guest_options
                    .into_iter()
                    .flat_map(|option| ["-o".to_string(), option]),
            );
        }
        if let Some(port) = self.target.port {
            options.extend(["-p".into(), port.to_string()]);
        }
        options
    }

    /// The line the remote shell runs, and what goes into ssh's standard input before the
    /// command's own: the sudo password line, when one was handed in.
    fn remote_line(&self, command: &MachineCommand) -> (String, &[u8]) {
        let line = command.to_shell_line();
        // A guest or existing host logged into as root (an existing host whose admin_user is
        // left out) has nothing to become: it need not have sudo at all. A hypervisor's login
        // keeps going through sudo, which its root programs are allowed by.
        let guest_as_root = self.target.user.as_deref() == Some("root")
            && !matches!(self.host_keys, HostKeys::UserKnownHosts);
        if !command.as_root || guest_as_root {
            return (line, &[]);
        }
        match &self.sudo_password {
            None => (format!("sudo -n -- {line}"), &[]),
            // sudo -S reads the password line from standard input one byte at a time, so
            // whatever follows the newline is left for the command itself.
            // -k: cached credentials are ignored, so sudo always reads the password line
            // and never leaves it for the command.
            Some(SudoPassword(line_with_newline)) => (
                format!("sudo -S -k -p '' -- {line}"),
                line_with_newline.as_slice(),
            ),
        }
    }

    /// Forwards `127.0.0.1:local_port` on this machine to `remote_host:remote_port` as seen from
    /// the host, through a connection of its own that lasts as long as the returned
    /// [`PortForward`] (and never outlives this process). Returns once the forward listens, or
    /// with why it could not.
    pub fn forward_local_port(
        &self,
        local_port: u16,
        remote_host: &str,
        remote_port: u16,
    ) -> Result<PortForward, MachineError> {
        use std::os::unix::process::CommandExt;
        // Its own connection, not the master's: the tunnel must end with this process. These come
        // first because ssh keeps the first value it is given for an option.
        let mut args: Vec<String> = [
            "-o",
            "ControlMaster=no",
            "-o",
            "ControlPath=none",
            "-o",
            "ExitOnForwardFailure=yes",
        ]
        .map(String::from)
        .to_vec();
        args.extend(self.ssh_options());
        args.extend([
            "-N".into(),
            "-L".into(),
            format!("127.0.0.1:{local_port}:{remote_host}:{remote_port}"),
            self.target.login(),
        ]);
        let mut command = std::process::Command::new(&self.program);
        command
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // SAFETY: prctl is async-signal-safe; it asks the kernel to end the tunnel with its
        // parent, so an interrupted or killed run leaves no ssh behind.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|source| MachineError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                return Err(MachineError::Unreachable {
                    host: self.describe(),
                    detail: format!("the tunnel ended ({status}): {}", stderr.trim()),
                });
            }
            if std::net::TcpStream::connect(("127.0.0.1", local_port)).is_ok() {
                return Ok(PortForward { child });
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(MachineError::TimedOut {
                    host: self.describe(),
                    command: format!("ssh -L {local_port}:{remote_host}:{remote_port}"),
                    timeout: CONNECT_TIMEOUT,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Closes this run's own master connection. Done on drop; a shared master is left to close
    /// itself once idle.
    fn close(&self) {
        let mut args = self.ssh_options();
        args.extend(["-O".into(), "exit".into(), self.target.login()]);
        let _ = run_process(
            &self.program,
            &args,
            None,
            CONNECT_TIMEOUT,
            &self.describe(),
            "ssh -O exit",
            &mut || None,
        );
    }
}

impl Machine for SshMachine {
    fn describe(&self) -> String {
        self.target.login()
    }

    fn run_watched(
        &self,
        command: &MachineCommand,
        watch: Watch,
    ) -> Result<CommandOutput, MachineError> {
        let (line, prefix) = self.remote_line(command);
        let mut args = self.ssh_options();
        args.extend([self.target.login(), "--".into(), line]);
        let stdin = (!prefix.is_empty() || command.stdin.is_some()).then_some(Feed {
            prefix,
            input: command.stdin.as_ref(),
        });
        let output = run_process(
            &self.program,
            &args,
            stdin,
            command.timeout,
            &self.describe(),
            &command.to_shell_line(),
            watch,
        )?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status == Some(SSH_CONNECTION_FAILURE)
            && !matches!(self.host_keys, HostKeys::UserKnownHosts)
            && HOST_KEY_REFUSED_MARKERS
                .iter()
                .any(|marker| stderr.contains(marker))
        {
            return Err(MachineError::HostKeyRefused {
                host: self.describe(),
            });
        }
        if output.status == Some(SSH_CONNECTION_FAILURE) {
            return Err(MachineError::Unreachable {
                host: self.describe(),
                detail: stderr.trim().to_string(),
            });
        }
        if command.as_root && output.status != Some(0) {
            let user = self
                .target
                .user
                .clone()
                .unwrap_or_else(|| "the login".into());
            if stderr.contains("a password is required") {
                return Err(MachineError::SudoNeedsPassword {
                    host: self.target.host.clone(),
                    user,
                });
            }
            if self.sudo_password.is_some()
                && (stderr.contains("incorrect password") || stderr.contains("Sorry, try again"))
            {
                return Err(MachineError::SudoPasswordRefused {
                    host: self.target.host.clone(),
                    user,
                });
            }
        }
        Ok(output)
    }

    /// Over the run's master connection, like every command: the session ends when its input
    /// closes, and the master (closed when this machine is dropped) must outlive it.
    fn start(&self, command: &MachineCommand) -> Result<HeldCommand, MachineError> {
        let (line, prefix) = self.remote_line(command);
        let mut args = self.ssh_options();
        args.extend([self.target.login(), "--".into(), line]);
        start_held(
            &self.program,
            &args,
            prefix,
            &self.describe(),
            &command.to_shell_line(),
        )
    }
}

/// An SSH tunnel from a port of this machine; closed when dropped.
#[derive(Debug)]
pub struct PortForward {
    child: std::process::Child,
}

impl PortForward {
    /// Waits until the tunnel ends (its connection drops, or this process is interrupted).
    pub fn hold(mut self) -> Result<(), MachineError> {
        self.child
            .wait()
            .map(|_| ())
            .map_err(|source| MachineError::Pipe {
                host: "this machine".into(),
                command: "ssh -L".into(),
                source,
            })
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SshMachine {
    fn drop(&mut self) {
        if self
            .private_control_path()
            .is_some_and(|path| path.exists())
        {
            self.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(host_keys: HostKeys) -> Vec<String> {
        let target = SshTarget {
            user: Some("admin".into()),
            host: "192.0.2.10".into(),
            port: None,
        };
        SshMachine::new(target, Some("/run/key".into()), host_keys)
            .unwrap()
            .ssh_options()
    }

    fn has(options: &[String], option: &str) -> bool {
        options
            .windows(2)
            .any(|pair| pair[0] == "-o" && pair[1] == option)
    }

    #[test]
    fn a_guest_is_held_to_its_pinned_key_and_lent_nothing() {
        let pinned = options(HostKeys::Pinned {
            known_hosts: "/run/trog-key-x/known_hosts".into(),
            alias: "trog-guest.www.example.test".into(),
        });
        for option in [
            "StrictHostKeyChecking=yes",
            "UserKnownHostsFile=/run/trog-key-x/known_hosts",
            "HostKeyAlias=trog-guest.www.example.test",
            "GlobalKnownHostsFile=/dev/null",
            "ForwardAgent=no",
            "ForwardX11=no",
            "UpdateHostKeys=no",
            "IdentitiesOnly=yes",
        ] {
            assert!(has(&pinned, option), "{option} missing from {pinned:?}");
        }
        assert!(!pinned.iter().any(|option| option.contains("accept-new")));
        let adopting = options(HostKeys::AdoptInto {
            known_hosts: "/run/trog-key-x/adopted".into(),
            alias: "trog-guest.www.example.test".into(),
        });
        assert!(has(&adopting, "StrictHostKeyChecking=accept-new"));
        assert!(has(&adopting, "ForwardAgent=no"));
        // A hypervisor is the user's own host: their known_hosts and configuration decide.
        let hypervisor = options(HostKeys::UserKnownHosts);
        assert!(!hypervisor
            .iter()
            .any(|option| option.starts_with("StrictHostKeyChecking")
                || option.starts_with("HostKeyAlias")));
    }

    #[test]
    fn a_guest_logged_into_as_root_runs_as_root_without_sudo_and_another_through_it() {
        let machine = |user: &str, host_keys: HostKeys| {
            SshMachine::new(
                SshTarget {
                    user: Some(user.into()),
                    host: "192.0.2.10".into(),
                    port: None,
                },
                None,
                host_keys,
            )
            .unwrap()
        };
        let pinned = || HostKeys::Pinned {
            known_hosts: "/run/trog-key-x/known_hosts".into(),
            alias: "trog-guest.old.example.test".into(),
        };
        let command = MachineCommand::new(["id", "-u"]).as_root(true);
        assert_eq!(machine("root", pinned()).remote_line(&command).0, "id -u");
        assert_eq!(
            machine("admin", pinned()).remote_line(&command).0,
            "sudo -n -- id -u"
        );
        // A hypervisor's root login still goes through sudo, as its sudoers lines expect.
        assert_eq!(
            machine("root", HostKeys::UserKnownHosts)
                .remote_line(&command)
                .0,
            "sudo -n -- id -u"
        );
    }
}
