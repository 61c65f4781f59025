//! A command left running while trog does other work: its standard input is held open, its
//! output read line by line as it comes. It ends when its input closes: when the
//! [`HeldCommand`] is dropped, or when this process dies for any reason (the kernel closes the
//! pipe), which is what lets a hypervisor's lock outlive no run that held it.

use crate::machine::command::MachineError;
use crate::machine::process::spawn_with_output_piped;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a held command gets to end after its input closed, before it is killed: it only has
/// to notice the end of its input and exit (over SSH, one round trip).
const END_GRACE: Duration = Duration::from_secs(10);
/// How often an ending command is checked for having ended.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How much of a streamed output is read at once, and how many such pieces may wait for the
/// sink: together the most of it ever held in memory (4 MiB), whatever its size. A backup of a
/// site is gigabytes; a piece this size keeps a slow disk and a fast link both busy.
pub const STREAM_CHUNK_BYTES: usize = 256 * 1024;
const STREAM_CHUNKS_WAITING: usize = 16;

/// A running command; see the module documentation.
pub struct HeldCommand {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its output, until it is read line by line ([`HeldCommand::next_line`]) or streamed
    /// ([`HeldCommand::stream_output`]).
    stdout: Option<ChildStdout>,
    lines: Option<Receiver<String>>,
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
    let stdout = child.stdout.take();
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
        stdout,
        lines: None,
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
        let lines = self
            .lines
            .get_or_insert_with(|| read_lines(self.stdout.take()));
        match lines.recv_timeout(within) {
            Ok(line) => Ok(NextLine::Line(line)),
            Err(RecvTimeoutError::Timeout) => Ok(NextLine::Silent),
            Err(RecvTimeoutError::Disconnected) => Err(self.ended()),
        }
    }

    /// Closes its input and pours its standard output into `sink` as it comes, until it ends or
    /// `timeout` passes; at most [`STREAM_CHUNK_BYTES`] × 16 of it is in memory at any time.
    /// Its exit status is the caller's to judge (with its standard error), as with
    /// [`crate::machine::Machine::run`].
    pub fn stream_output(
        mut self,
        sink: &mut dyn Write,
        timeout: Duration,
    ) -> Result<StreamedOutput, MachineError> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        let chunks = read_chunks(self.stdout.take());
        loop {
            match chunks.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Ok(chunk)) => {
                    if let Err(source) = sink.write_all(&chunk) {
                        let _ = self.child.kill();
                        return Err(MachineError::KeepOutput {
                            host: self.host.clone(),
                            command: self.command_line.clone(),
                            source,
                        });
                    }
                }
                Ok(Err(source)) => {
                    let _ = self.child.kill();
                    return Err(MachineError::Pipe {
                        host: self.host.clone(),
                        command: self.command_line.clone(),
                        source,
                    });
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    return Err(MachineError::TimedOut {
                        host: self.host.clone(),
                        command: self.command_line.clone(),
                        timeout,
                    });
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let (status, stderr) = self.stop_and_collect_stderr();
        Ok(StreamedOutput { status, stderr })
    }

    /// Stops the command (it ended, or is ended now) and takes what it wrote to standard error.
    fn stop_and_collect_stderr(&mut self) -> (Option<i32>, String) {
        let status = self.stop();
        let stderr = self
            .stderr
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&stderr).into_owned())
    }

    /// The command ended on its own (its output closed): waits for it, briefly, and reports it.
    fn ended(&mut self) -> MachineError {
        let (status, stderr) = self.stop_and_collect_stderr();
        MachineError::Failed {
            host: self.host.clone(),
            command: self.command_line.clone(),
            status,
            stderr: stderr.trim().to_string(),
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

/// What a command whose output was streamed left besides it.
#[derive(Debug, Clone)]
pub struct StreamedOutput {
    pub status: Option<i32>,
    pub stderr: String,
}

/// `stdout`'s lines, read by a thread of their own as they come; the channel disconnects when
/// it closes.
fn read_lines(stdout: Option<ChildStdout>) -> Receiver<String> {
    let (sender, lines) = mpsc::channel();
    if let Some(stdout) = stdout {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
    }
    lines
}

/// `stdout`'s bytes in pieces, read by a thread of their own no further ahead of the reader of
/// the channel than [`STREAM_CHUNKS_WAITING`] pieces; it disconnects when the pipe closes.
fn read_chunks(stdout: Option<ChildStdout>) -> Receiver<std::io::Result<Vec<u8>>> {
    let (sender, chunks) = mpsc::sync_channel(STREAM_CHUNKS_WAITING);
    if let Some(mut stdout) = stdout {
        std::thread::spawn(move || loop {
            let mut chunk = vec![0u8; STREAM_CHUNK_BYTES];
            let sent = match stdout.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => {
                    chunk.truncate(read);
                    sender.send(Ok(chunk))
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => sender.send(Err(error)),
            };
            if sent.is_err() {
                break;
            }
        });
    }
    chunks
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

    /// A sink that keeps nothing but counts: what a stream holds in memory is the stream's.
    #[derive(Default)]
    struct Counting {
        total: usize,
        writes: usize,
        largest_write: usize,
        refuse: bool,
    }

    impl Write for Counting {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.refuse {
                return Err(std::io::ErrorKind::StorageFull.into());
            }
            self.total += bytes.len();
            self.writes += 1;
            self.largest_write = self.largest_write.max(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn start_script(script: &str) -> HeldCommand {
        start_held(
            "sh",
            &["-c".into(), script.into()],
            &[],
            "this machine",
            "sh -c …",
        )
        .unwrap()
    }

    #[test]
    fn a_streamed_output_reaches_the_sink_in_bounded_pieces() {
        let mut sink = Counting::default();
        let output = start_script("head -c 8388608 /dev/zero; echo done >&2; exit 1")
            .stream_output(&mut sink, Duration::from_secs(60))
            .unwrap();
        assert_eq!(sink.total, 8 << 20);
        assert!(
            sink.largest_write <= STREAM_CHUNK_BYTES,
            "{}",
            sink.largest_write
        );
        assert!(
            sink.writes >= (8 << 20) / STREAM_CHUNK_BYTES,
            "{}",
            sink.writes
        );
        assert_eq!(output.status, Some(1));
        assert_eq!(output.stderr, "done\n");
    }

    #[test]
    fn a_stream_stops_at_its_deadline_or_when_its_sink_refuses() {
        let error = start_script("sleep 30")
            .stream_output(&mut Counting::default(), Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(error, MachineError::TimedOut { .. }), "{error}");
        let mut full = Counting {
            refuse: true,
            ..Counting::default()
        };
        let error = start_script("head -c 1000000 /dev/zero")
            .stream_output(&mut full, Duration::from_secs(60))
            .unwrap_err();
        assert!(matches!(error, MachineError::KeepOutput { .. }), "{error}");
    }
}
