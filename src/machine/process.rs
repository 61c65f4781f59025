//! Running one local process with a deadline: standard input poured in from a thread, output
//! collected from threads, and the process killed when the deadline passes.

use crate::machine::command::{CommandOutput, MachineError};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often a running process is checked for having ended. Short enough to add no noticeable
/// latency to quick commands, long enough to cost nothing.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Runs `program` with `args`; `host` and `command_line` name it in errors.
pub fn run_process(
    program: &str,
    args: &[String],
    stdin: Option<&[u8]>,
    timeout: Duration,
    host: &str,
    command_line: &str,
) -> Result<CommandOutput, MachineError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| MachineError::Spawn {
            program: program.to_string(),
            source,
        })?;

    let feeder = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => {
            let bytes = bytes.to_vec();
            Some(std::thread::spawn(move || pipe.write_all(&bytes)))
        }
        _ => None,
    };
    let stdout_reader = collect(child.stdout.take());
    let stderr_reader = collect(child.stderr.take());

    let deadline = Instant::now() + timeout;
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
        // A command that exits without reading all its input is its own failure, reported by
        // its status; a broken pipe here adds nothing.
        let _ = feeder.join();
    }
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    Ok(CommandOutput {
        command_line: command_line.to_string(),
        host: host.to_string(),
        status: status.code(),
        stdout,
        stderr,
    })
}

fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}
