//! Everything trog does on a host that is not a libvirt call: run a command, write a file, read
//! a file. One trait, [`Machine`], implemented for this machine ([`local::LocalMachine`]) and for
//! another one over OpenSSH ([`ssh::SshMachine`]); the guest is reached the same way.
//!
//! This is the only part of trog that starts processes.

pub mod command;
#[cfg(test)]
pub mod fake;
pub mod held;
pub mod hypervisor_ops;
pub mod local;
mod process;
pub mod ssh;
pub mod ssh_masters;

pub use command::{CommandOutput, MachineCommand, MachineError};
pub use held::{HeldCommand, NextLine, StreamedOutput};

use std::time::Duration;

/// A host trog acts on.
pub trait Machine {
    /// How the host is named in messages (`someadmin@hv1.example.test`, `this machine`).
    fn describe(&self) -> String;

    /// Whether commands here already run as root (then `as_root` needs no sudo).
    fn is_root(&self) -> bool {
        false
    }

    /// Runs `command` and waits for it, at most `command.timeout`.
    fn run(&self, command: &MachineCommand) -> Result<CommandOutput, MachineError> {
        self.run_watched(command, &mut || None)
    }

    /// Runs `command` as [`Machine::run`] does, asking `watch` every [`WATCH_INTERVAL`] while it
    /// runs: once `watch` gives a reason to stop (the guest the command tries to reach is gone),
    /// the command is stopped and the error ([`MachineError::Abandoned`]) carries that reason.
    fn run_watched(
        &self,
        command: &MachineCommand,
        watch: Watch,
    ) -> Result<CommandOutput, MachineError>;

    /// Starts `command` and leaves it running, its standard input held open until the returned
    /// [`HeldCommand`] is dropped or this process dies (`command.timeout` does not apply: the
    /// holder bounds each wait for its output).
    fn start(&self, command: &MachineCommand) -> Result<HeldCommand, MachineError>;

    /// Runs `command` with an empty input, pouring its standard output into `sink` as it comes
    /// (a backup of gigabytes is never held whole: [`held::STREAM_CHUNK_BYTES`]), at most
    /// `command.timeout`; its status and standard error are the caller's to judge.
    fn run_streamed(
        &self,
        command: &MachineCommand,
        sink: &mut dyn std::io::Write,
    ) -> Result<StreamedOutput, MachineError> {
        self.start(command)?.stream_output(sink, command.timeout)
    }

    /// Writes `contents` to `path` by pouring them into the standard input of a command on the
    /// host (never sftp, which hangs when the far side refuses a write), with `sudo -n` in front
    /// of the write when `as_root`.
    fn write_file(
        &self,
        path: &str,
        contents: &[u8],
        mode: u32,
        as_root: bool,
    ) -> Result<(), MachineError> {
        let script = format!(
            "umask 077 && cat > {path}.trog-new && chmod {mode:o} {path}.trog-new && mv -f {path}.trog-new {path}",
            path = command::shell_quote(path)
        );
        let command = MachineCommand::shell(&script)
            .as_root(as_root)
            .stdin(contents.to_vec())
            .timeout(FILE_TRANSFER_TIMEOUT);
        self.run(&command)?.success()?;
        Ok(())
    }

    /// Reads the file at `path`.
    fn read_file(&self, path: &str, as_root: bool) -> Result<Vec<u8>, MachineError> {
        let command = MachineCommand::new(["cat", path])
            .as_root(as_root)
            .timeout(FILE_TRANSFER_TIMEOUT);
        Ok(self.run(&command)?.success()?.stdout)
    }
}

/// Asked while a watched command runs: `Some(reason)` stops it.
pub type Watch<'w> = &'w mut dyn FnMut() -> Option<String>;

/// How often a watched command's watch is asked. Asking is one libvirt call (whether a domain
/// still runs), cheap enough twice a second; a guest that died is then noticed within half a
/// second, not when a login attempt of up to a minute gives up.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How long a single file write or read may take. Payloads and seeds are megabytes at most; a
/// transfer still going after five minutes is a link that has stopped moving.
pub const FILE_TRANSFER_TIMEOUT: Duration = Duration::from_secs(300);
