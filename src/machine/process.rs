//! Running one local process with a deadline: standard input poured in from a thread, output
//! collected from threads, and the process killed when the deadline passes, or as soon as its
//! watch says it is pointless to go on.

use crate::machine::command::{CommandOutput, Input, MachineError};
use crate::machine::{Watch, WATCH_INTERVAL};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often a running process is checked for having ended. Short enough to add no noticeable
/// latency to quick commands, long enough to cost nothing.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How long output is still read after the process ended, when its pipes stay open: ssh's master
/// (and the ProxyCommand it keeps, a jump host's `ssh -W`) holds on to the standard error of the
/// command that started it for as long as it lives. What the process itself wrote is in the pipe
/// by then and read at once.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// What a process's standard input gets: `prefix` (a sudo password line, which the program in
/// front reads first), then the command's own input.
pub struct Feed<'a> {
    pub prefix: &'a [u8],
    pub input: Option<&'a Input>,
}

/// The standard input, owned, ready to be poured from a thread.
enum Source {
    Bytes(zeroize::Zeroizing<Vec<u8>>),
    File(
        zeroize::Zeroizing<Vec<u8>>,
        std::fs::File,
        std::path::PathBuf,
    ),
}

/// How pouring the standard input failed: the local file could not be read, or the pipe took no
/// more (the command exited, or closed its input, before reading it all).
enum PourError {
    Read(std::path::PathBuf, std::io::Error),
    Write(std::io::Error),
}

/// The size of the pieces a file is poured in: the most of it held in memory at once.
const POUR_CHUNK: usize = 64 * 1024;

impl Source {
    /// Opens the file to pour before anything starts, so that a missing one is this command's
    /// error rather than a command fed nothing.
    fn open(feed: &Feed, host: &str, command_line: &str) -> Result<Source, MachineError> {
        let mut bytes = zeroize::Zeroizing::new(feed.prefix.to_vec());
        match feed.input {
            None => Ok(Source::Bytes(bytes)),
            Some(Input::Bytes(input)) => {
                bytes.extend_from_slice(input);
                Ok(Source::Bytes(bytes))
            }
            Some(Input::File(path)) => std::fs::File::open(path)
                .map(|file| Source::File(bytes, file, path.clone()))
                .map_err(|source| MachineError::ReadInput {
                    host: host.to_string(),
                    command: command_line.to_string(),
                    path: path.clone(),
                    source,
                }),
        }
    }

    fn pour(self, pipe: &mut impl Write) -> Result<(), PourError> {
        match self {
            Source::Bytes(bytes) => pipe.write_all(&bytes).map_err(PourError::Write),
            Source::File(prefix, mut file, path) => {
                pipe.write_all(&prefix).map_err(PourError::Write)?;
                let mut chunk = vec![0u8; POUR_CHUNK];
                loop {
                    let read = match file.read(&mut chunk) {
                        Ok(0) => return Ok(()),
                        Ok(read) => read,
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(error) => return Err(PourError::Read(path, error)),
                    };
                    pipe.write_all(&chunk[..read]).map_err(PourError::Write)?;
                }
            }
        }
    }
}

/// What an unfinished pour means once the command's status is known. A file that could not be
/// read is always an error: the command got part of it and may have taken that for all of it.
/// A pipe that took no more is an error when the command still exited 0 (it left input unread
/// and claims success: `head -c1`, a script that stopped early); a command that failed is
/// reported by its own status and standard error, which say more than a broken pipe.
fn pour_failure(
    poured: Result<(), PourError>,
    status: Option<i32>,
    host: &str,
    command_line: &str,
) -> Option<MachineError> {
    match poured {
        Ok(()) => None,
        Err(PourError::Read(path, source)) => Some(MachineError::ReadInput {
            host: host.to_string(),
            command: command_line.to_string(),
            path,
            source,
        }),
        Err(PourError::Write(_)) if status != Some(0) => None,
        Err(PourError::Write(source)) => Some(MachineError::InputUnread {
            host: host.to_string(),
            command: command_line.to_string(),
            source,
        }),
    }
}

/// Starts `program` with `args`, `stdin` as given and both outputs piped to this process.
pub(crate) fn spawn_with_output_piped(
    program: &str,
    args: &[String],
    stdin: Stdio,
) -> Result<Child, MachineError> {
    Command::new(program)
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| MachineError::Spawn {
            program: program.to_string(),
            source,
        })
}

/// Runs `program` with `args`; `host` and `command_line` name it in errors. `watch` is asked
/// every [`WATCH_INTERVAL`] while the process runs; once it gives a reason, the process is killed
/// and the error carries that reason.
pub fn run_process(
    program: &str,
    args: &[String],
    stdin: Option<Feed>,
    timeout: Duration,
    host: &str,
    command_line: &str,
    watch: Watch,
) -> Result<CommandOutput, MachineError> {
    let source = stdin
        .map(|feed| Source::open(&feed, host, command_line))
        .transpose()?;
    let mut child = spawn_with_output_piped(
        program,
        args,
        if source.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        },
    )?;

    let feeder = match (source, child.stdin.take()) {
        (Some(source), Some(mut pipe)) => Some(std::thread::spawn(move || source.pour(&mut pipe))),
        _ => None,
    };
    let stdout_reader = collect(child.stdout.take());
    let stderr_reader = collect(child.stderr.take());

    let started = Instant::now();
    let deadline = started + timeout;
    let mut next_watch = started + WATCH_INTERVAL;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(MachineError::TimedOut {
                    host: host.to_string(),
                    command: command_line.to_string(),
                    timeout,
                });
            }
            Ok(None) if Instant::now() >= next_watch => {
                next_watch = Instant::now() + WATCH_INTERVAL;
                if let Some(reason) = watch() {
                    // The output readers are left to end with the pipes: a process the killed
                    // one forked (ssh's background master) may hold them open.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(MachineError::Abandoned {
                        host: host.to_string(),
                        command: command_line.to_string(),
                        after: started.elapsed(),
                        reason,
                    });
                }
            }
            Ok(None) => std::thread::sleep(POLL_INTERVAL),
            Err(source) => {
                return Err(MachineError::Pipe {
                    host: host.to_string(),
                    command: command_line.to_string(),
                    source,
                })
            }
        }
    };
    if let Some(feeder) = feeder {
        let poured = feeder
            .join()
            .unwrap_or_else(|_| Err(PourError::Write(std::io::ErrorKind::Other.into())));
        if let Some(error) = pour_failure(poured, status.code(), host, command_line) {
            return Err(error);
        }
    }
    let grace_ends = Instant::now() + OUTPUT_GRACE;
    let stdout = stdout_reader.take(grace_ends);
    let stderr = stderr_reader.take(grace_ends);
    Ok(CommandOutput {
        command_line: command_line.to_string(),
        host: host.to_string(),
        status: status.code(),
        stdout,
        stderr,
    })
}

/// A pipe's bytes, read by a thread of its own as they come.
struct Collected {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Disconnected once the pipe has closed.
    closed: std::sync::mpsc::Receiver<()>,
}

impl Collected {
    /// Everything read, once the pipe has closed or at `grace_ends`.
    fn take(self, grace_ends: Instant) -> Vec<u8> {
        let _ = self
            .closed
            .recv_timeout(grace_ends.saturating_duration_since(Instant::now()));
        let mut bytes = self
            .bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::take(&mut *bytes)
    }
}

fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> Collected {
    let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (signal, closed) = std::sync::mpsc::channel::<()>();
    let filled = std::sync::Arc::clone(&bytes);
    std::thread::spawn(move || {
        // Dropped when the pipe closes (or fails), which is what `take` waits for.
        let _signal = signal;
        let Some(mut pipe) = pipe else { return };
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => filled
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    Collected { bytes, closed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_whose_child_keeps_its_pipes_is_done_when_it_exits() {
        let started = Instant::now();
        let output = run_process(
            "sh",
            &[
                "-c".into(),
                "echo out; echo err >&2; sleep 30 & exit 3".into(),
            ],
            None,
            Duration::from_secs(20),
            "this machine",
            "sh -c …",
            &mut || None,
        )
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(output.status, Some(3));
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
    }

    #[test]
    fn output_is_read_to_its_end() {
        let output = run_process(
            "sh",
            &[
                "-c".into(),
                "head -c 300000 /dev/zero; echo done >&2".into(),
            ],
            None,
            Duration::from_secs(20),
            "this machine",
            "sh -c …",
            &mut || None,
        )
        .unwrap();
        assert_eq!(output.stdout.len(), 300000);
        assert_eq!(output.stderr, b"done\n");
    }

    /// More than a pipe's buffer, so the pour is still going when the command ends.
    fn large_input() -> Input {
        Input::Bytes(vec![b'x'; 4 << 20])
    }

    fn run_with_large_input(script: &str) -> Result<CommandOutput, MachineError> {
        let input = large_input();
        run_process(
            "sh",
            &["-c".into(), script.into()],
            Some(Feed {
                prefix: &[],
                input: Some(&input),
            }),
            Duration::from_secs(20),
            "this machine",
            "sh -c …",
            &mut || None,
        )
    }

    #[test]
    fn a_command_that_succeeds_without_reading_its_input_is_an_error() {
        for script in ["head -c1 >/dev/null", "true"] {
            let error = run_with_large_input(script).unwrap_err();
            assert!(
                matches!(&error, MachineError::InputUnread { host, .. } if host == "this machine"),
                "{script}: {error}"
            );
        }
    }

    #[test]
    fn a_command_that_fails_without_reading_its_input_is_reported_by_its_status() {
        let output = run_with_large_input("echo pool full >&2; exit 4").unwrap();
        assert_eq!(output.status, Some(4));
        assert_eq!(output.stderr, b"pool full\n");
    }

    #[test]
    fn a_command_that_reads_all_its_input_succeeds() {
        let output = run_with_large_input("wc -c").unwrap();
        assert_eq!(output.stdout_text().trim(), (4 << 20).to_string());
    }
}
