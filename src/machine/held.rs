//! A command left running while trog does other work: its standard input is held open, its
//! output read line by line as it comes. It ends when its input closes: when the
//! [`HeldCommand`] is dropped, or when this process dies for any reason (the kernel closes the
//! pipe), which is what lets a hypervisor's lock outlive no run that held it.

use crate::machine::command::MachineError;
use crate::machine::process::spawn_with_output_piped;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a held command gets to end after its input closed, before it is killed: it only has
/// to notice the end of its input and exit (over SSH, one round trip).
const END_GRACE: Duration = Duration::from_secs(10);
/// How often an ending command is checked for having ended.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A running command; see the module documentation.
pub struct HeldCommand {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
    host: String,
    command_line: String,
}

/// What the command said next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextLine {
    /// A line of its standard output, without its newline.
    Line(String),
    /// Nothing within the time given; it is still running.
    Silent,
}

impl std::fmt::Debug for HeldCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldCommand")
            .field("host", &self.host)
            .field("command", &self.command_line)
            .finish()
    }
}

/// Starts `program` with `args`, its standard input a pipe kept open (after `prefix`, a sudo
/// password line when one goes first); `host` and `command_line` name it in errors.
pub fn start_held(
    program: &str,
    args: &[String],
    prefix: &[u8],
    host: &str,
    command_line: &str,
) -> Result<HeldCommand, MachineError> {
    let mut child = spawn_with_output_piped(program, args, Stdio::piped())?;
    let mut stdin = child.stdin.take();
    // A line; the pipe's buffer takes it whole without blocking, unless the command has already
    // ended (ssh that could not connect), which is reported below once it is known how.
    let refused = match stdin.as_mut() {
        Some(pipe) if !prefix.is_empty() => {
            pipe.write_all(prefix).and_then(|()| pipe.flush()).err()
        }
        _ => None,
    };
    let (sender, lines) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    });
    let mut held = HeldCommand {
        child,
        stdin,
        lines,
        stderr,
        host: host.to_string(),
        command_line: command_line.to_string(),
    };
    match refused {
        None => Ok(held),
        Some(source) => Err(held.refused_input(source)),
    }
}

impl HeldCommand {
    /// The next line of its output, waiting at most `within`. A command that ended is an error
    /// carrying its status and what it said on its standard error.
    pub fn next_line(&mut self, within: Duration) -> Result<NextLine, MachineError> {
        match self.lines.recv_timeout(within) {
            Ok(line) => Ok(NextLine::Line(line)),
            Err(RecvTimeoutError::Timeout) => Ok(NextLine::Silent),
            Err(RecvTimeoutError::Disconnected) => Err(self.ended()),
        }
    }

    /// The command ended on its own (its output closed): waits for it, briefly, and reports it.
    fn ended(&mut self) -> MachineError {
        let status = self.stop();
        let stderr = self
            .stderr
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        MachineError::Failed {
            host: self.host.clone(),
            command: self.command_line.clone(),
            status,
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        }
    }

    /// The command did not take what was written to its input: it ended first. Its failure
    /// (status and standard error) says why when it failed; a command that exited 0 without
    /// reading its input is reported as such.
    fn refused_input(&mut self, source: std::io::Error) -> MachineError {
        match self.ended() {
            MachineError::Failed {
                status: Some(0), ..
            } => MachineError::InputUnread {
                host: self.host.clone(),
                command: self.command_line.clone(),
                source,
            },
            failed => failed,
        }
    }

    /// Ends it at once, without waiting for it to notice that its input closed (a command that
    /// is not reading its input, still waiting for what it was started to get).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes its input and waits up to [`END_GRACE`] for it to end, then kills it; its exit
    /// status, if it exited.
    fn stop(&mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + END_GRACE;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.code(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL_INTERVAL),
                _ => {
                    let _ = self.child.kill();
                    return self.child.wait().ok().and_then(|status| status.code());
                }
            }
        }
    }
}

impl Drop for HeldCommand {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More than a pipe's buffer, so the write is still going when the command ends.
    fn large_prefix() -> Vec<u8> {
        vec![b'x'; 4 << 20]
    }

    #[test]
    fn a_command_that_ends_without_reading_its_input_is_an_error_not_a_signal() {
        let error = start_held("true", &[], &large_prefix(), "this machine", "true").unwrap_err();
        assert!(
            matches!(&error, MachineError::InputUnread { host, command, .. } if host == "this machine" && command == "true"),
            "{error}"
        );
    }

    #[test]
    fn a_command_that_failed_before_reading_its_input_says_why() {
        let error = start_held(
            "sh",
            &["-c".into(), "echo no route >&2; exit 255".into()],
            &large_prefix(),
            "this machine",
            "sh -c …",
        )
        .unwrap_err();
        assert!(
            matches!(&error, MachineError::Failed { status: Some(255), stderr, .. } if stderr == "no route"),
            "{error}"
        );
    }
}
