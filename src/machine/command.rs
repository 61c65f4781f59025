//! A command to run on a machine, its output, and how running it can fail.

use crate::untrusted::{untrusted_str, untrusted_text};
use std::path::PathBuf;
use std::time::Duration;

/// How long a command may run when its caller says nothing: long enough for a package install,
/// short enough that a hang is reported within the run rather than found the next morning.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// A command, as an argument vector (quoted for the remote shell by the SSH machine).
#[derive(Clone)]
pub struct MachineCommand {
    pub argv: Vec<String>,
    /// Run through `sudo -n` (or with the run's sudo password, when one was handed in).
    pub as_root: bool,
    /// What is poured into the command's standard input; `None` gives it an empty one.
    pub stdin: Option<Input>,
    pub timeout: Duration,
}

impl std::fmt::Debug for MachineCommand {
    // Standard input may hold a payload or a key: only its size is ever shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineCommand")
            .field("argv", &self.argv)
            .field("as_root", &self.as_root)
            .field("stdin", &self.stdin)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl MachineCommand {
    pub fn new<I, S>(argv: I) -> MachineCommand
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MachineCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            as_root: false,
            stdin: None,
            timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }

    /// A POSIX shell script, run with `sh -c`.
    pub fn shell(script: &str) -> MachineCommand {
        MachineCommand::new(["sh", "-c", script])
    }

    pub fn as_root(mut self, as_root: bool) -> MachineCommand {
        self.as_root = as_root;
        self
    }

    pub fn stdin(mut self, bytes: Vec<u8>) -> MachineCommand {
        self.stdin = Some(Input::Bytes(bytes));
        self
    }

    /// Streams the file at `path` into the command's standard input, read as it goes (a base
    /// image is hundreds of megabytes: it is never held in memory).
    pub fn stdin_file(mut self, path: PathBuf) -> MachineCommand {
        self.stdin = Some(Input::File(path));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> MachineCommand {
        self.timeout = timeout;
        self
    }

    /// The command as one line for a remote shell and for messages.
    pub fn to_shell_line(&self) -> String {
        self.argv
            .iter()
            .map(|word| shell_quote(word))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A command's standard input.
#[derive(Clone, PartialEq, Eq)]
pub enum Input {
    /// Bytes held in memory: a payload, a seed, a file's new contents.
    Bytes(Vec<u8>),
    /// A local file, read while it is poured in.
    File(PathBuf),
}

impl std::fmt::Debug for Input {
    // The bytes may be a payload or a key: only their size, or the file's path, is ever shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Bytes(bytes) => write!(f, "{} bytes", bytes.len()),
            Input::File(path) => write!(f, "the file {}", path.display()),
        }
    }
}

/// Quotes `word` for a POSIX shell, leaving plain words as they are for readable messages.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | '@' | '+' | ',')
        });
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// What a finished command left.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// The command as it was run, for messages.
    pub command_line: String,
    pub host: String,
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandOutput {
    /// The output when the command exited 0, otherwise an error carrying its stderr.
    pub fn success(self) -> Result<CommandOutput, MachineError> {
        if self.status == Some(0) {
            Ok(self)
        } else {
            Err(MachineError::Failed {
                host: self.host.clone(),
                command: self.command_line.clone(),
                status: self.status,
                stderr: untrusted_text(&self.stderr).trim().to_string(),
            })
        }
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("cannot start `{program}` on this machine")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` on {host} did not finish within {}s and was stopped", timeout.as_secs())]
    TimedOut {
        host: String,
        command: String,
        timeout: Duration,
    },
    #[error("`{command}` on {host} was stopped after {}s: {reason}", after.as_secs())]
    Abandoned {
        host: String,
        command: String,
        after: Duration,
        reason: String,
    },
    #[error("`{command}` on {host} failed{}{}", status.map(|code| format!(" with status {code}")).unwrap_or_else(|| " (killed by a signal)".into()), if stderr.is_empty() { String::new() } else { format!(": {}", untrusted_str(stderr)) })]
    Failed {
        host: String,
        command: String,
        status: Option<i32>,
        stderr: String,
    },
    #[error("cannot reach {host} over SSH: {}", untrusted_str(.detail))]
    Unreachable { host: String, detail: String },
    /// The host answered with an SSH host key that is not the one trog gave the guest: nothing
    /// was sent to it.
    #[error(
        "{host} answered with a host key that is not the guest's: refused before anything was sent"
    )]
    HostKeyRefused { host: String },
    #[error("sudo on {host} wants a password for {user}, and there is no terminal to ask at and none was handed in")]
    SudoNeedsPassword { host: String, user: String },
    /// sudo will not run trog's programs for the login at all (no sudoers lines for them, or no
    /// sudo): what it said is kept.
    #[error("sudo on {host} does not let {user} run trog's root programs: {}", untrusted_str(.detail))]
    SudoRefused {
        host: String,
        user: String,
        detail: String,
    },
    #[error("sudo on {host} refused the password handed in for {user}")]
    SudoPasswordRefused { host: String, user: String },
    /// A program trog runs as root on a hypervisor is not installed there.
    #[error("trog's root program {path} is not installed on {host}")]
    RootProgramMissing { host: String, path: String },
    /// The file at a root program's path is not the program this trog embeds.
    #[error(
        "{path} on {host} is not the root program this trog runs (another version's, or changed)"
    )]
    RootProgramDiffers { host: String, path: String },
    #[error("cannot read {} to pour into `{command}` on {host}", path.display())]
    ReadInput {
        host: String,
        command: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` on {host} stopped reading its input before all of it was sent")]
    InputUnread {
        host: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot keep the output of `{command}` on {host}")]
    KeepOutput {
        host: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot exchange data with `{command}` on {host}")]
    Pipe {
        host: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
}

impl crate::diagnose::Diagnose for MachineError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            MachineError::SudoNeedsPassword { .. } | MachineError::SudoPasswordRefused { .. } => {
                crate::exit_status::ExitStatus::Credentials
            }
            MachineError::HostKeyRefused { .. } => crate::exit_status::ExitStatus::UntrustedGuest,
            _ => crate::exit_status::ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            MachineError::SudoNeedsPassword { user, .. } => Some(format!(
                "let {user} run trog's root programs on that host without a password: add the lines\n  trog root-programs sudoers --user {user}\nprints to /etc/sudoers.d there\nor hand the password in: printf 'sudo: %s\\n\\n' \"$SUDO\" | trog --credentials …"
            )),
            MachineError::SudoRefused { user, .. } => Some(format!(
                "add the lines `trog root-programs sudoers --user {user}` prints to /etc/sudoers.d there (sudo itself must be installed)"
            )),
            MachineError::Unreachable { .. } => Some("check that `ssh` to that login works without a password prompt (keys, agent, ~/.ssh/config)".into()),
            MachineError::TimedOut { .. } => Some("the host or the link to it is too slow or stuck; run it again, or look at the host".into()),
            MachineError::HostKeyRefused { .. } => Some("another machine may be answering at the guest's address, or the guest's host key was replaced; find out which before anything else. A guest built before trog pinned host keys is taken once with `trog provision --adopt-host-key DOMAIN`".into()),
            MachineError::RootProgramMissing { host, .. }
            | MachineError::RootProgramDiffers { host, .. } => Some(root_programs_hint(host)),
            MachineError::KeepOutput { .. } => Some("check the free space and permissions where it is written (for a backup, `backup_dir`)".into()),
            MachineError::InputUnread { .. } => Some("the command ended early without saying why (a full disk, a dropped link, a script that stopped); run it again, or look at the host".into()),
            _ => None,
        }
    }
}

/// How to install trog's root programs on `host` (as `Machine::describe` names it).
fn root_programs_hint(host: &str) -> String {
    if host == "this machine" {
        "install them as root: `sudo bin/setup` from a checkout, or `trog root-programs install-script --user \"$(id -un)\" | sudo sh`; `trog preflight` lists what is missing".into()
    } else {
        let login = host
            .split_once('@')
            .map(|(user, _)| user)
            .unwrap_or("LOGIN");
        format!("install them there: `trog root-programs install-script --user {login} | ssh {host} sudo sh` (as a login that may run sudo sh there); `trog preflight` lists what is missing")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_commands_stderr_is_shown_without_escape_sequences() {
        let output = CommandOutput {
            host: "hv1".into(),
            command_line: "true".into(),
            status: Some(1),
            stdout: vec![],
            stderr: b"\x1b[2Jbad \xff".to_vec(),
        };
        let shown = output.success().unwrap_err().to_string();
        assert!(
            shown.ends_with(r"failed with status 1: \x1b[2Jbad \xff"),
            "{shown}"
        );
    }

    #[test]
    fn sudo_that_will_not_run_trogs_programs_names_the_lines_to_add() {
        use crate::diagnose::Diagnose;
        let error = MachineError::SudoRefused {
            host: "hv1".into(),
            user: "admin".into(),
            detail: "sh: 1: sudo: not found".into(),
        };
        assert_eq!(
            error.to_string(),
            "sudo on hv1 does not let admin run trog's root programs: sh: 1: sudo: not found"
        );
        assert!(error
            .hint()
            .unwrap()
            .contains("`trog root-programs sudoers --user admin`"));
        let error = MachineError::SudoNeedsPassword {
            host: "hv1".into(),
            user: "admin".into(),
        };
        assert!(error
            .hint()
            .unwrap()
            .contains("trog root-programs sudoers --user admin"));
    }

    #[test]
    fn quoting_keeps_plain_words_and_protects_the_rest() {
        assert_eq!(shell_quote("/var/lib/trog"), "/var/lib/trog");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(reboot)"), "'$(reboot)'");
    }

    #[test]
    fn debug_never_shows_standard_input() {
        let command = MachineCommand::new(["cat"]).stdin(b"private key".to_vec());
        assert!(!format!("{command:?}").contains("private key"));
        assert!(format!("{command:?}").contains("11 bytes"));
    }
}
