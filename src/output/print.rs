//! Writing to stdout and stderr without a panic and without SIGPIPE.
//!
//! trog leaves SIGPIPE ignored (Rust's default), so that a command on the far side of a pipe
//! that stops reading (a full pool, a lost link) is an error trog reports and cleans up after,
//! not a signal that kills it mid-step. The price is that a write to a closed stdout fails, and
//! `println!` panics on a failed write. So everything trog prints goes through here: once the
//! reader of stdout has gone (`trog recipes | head -1`), the rest of stdout is dropped quietly
//! and the run ends with its own status; any other failure to write stdout (a full disk under
//! `> file`) is kept for `main` to report once the command is done.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::io::Write;
use std::sync::Mutex;

/// What has become of stdout.
enum StdoutState {
    Open,
    /// The reader went away: nothing more is written, and nothing is reported.
    ReaderGone,
    /// A write failed for another reason, kept for [`finish_stdout`].
    Failed(std::io::Error),
}

static STDOUT: Mutex<StdoutState> = Mutex::new(StdoutState::Open);

/// `print!` that neither panics nor raises SIGPIPE; see the module documentation.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::print::write_stdout(format_args!($($arg)*), false)
    };
}

/// `println!` that neither panics nor raises SIGPIPE; see the module documentation.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::print::write_stdout(format_args!($($arg)*), true)
    };
}

/// `eprintln!` that does not panic when stderr is closed (`trog … 2>&1 | head`): a line that
/// cannot be shown has nowhere else to go.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::print::write_stderr(format_args!($($arg)*), true)
    };
}

/// `eprint!`, as [`errln!`].
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::output::print::write_stderr(format_args!($($arg)*), false)
    };
}

fn state() -> std::sync::MutexGuard<'static, StdoutState> {
    STDOUT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes `text` (and a newline) to stdout, unless stdout has already failed.
pub fn write_stdout(text: std::fmt::Arguments, newline: bool) {
    write_stdout_with(&mut std::io::stdout().lock(), |out| {
        out.write_fmt(text)?;
        if newline {
            out.write_all(b"\n")?;
        }
        Ok(())
    });
}

/// Writes `bytes` to stdout and flushes them, unless stdout has already failed (a JSON event,
/// which a reader must see as it happens; a file's bytes).
pub fn write_stdout_bytes(bytes: &[u8]) {
    write_stdout_with(&mut std::io::stdout().lock(), |out| {
        out.write_all(bytes)?;
        out.flush()
    });
}

fn write_stdout_with<W: Write>(out: &mut W, write: impl FnOnce(&mut W) -> std::io::Result<()>) {
    let mut state = state();
    if !matches!(*state, StdoutState::Open) {
        return;
    }
    if let Err(error) = write(out) {
        *state = closed_or_failed(error);
    }
}

fn closed_or_failed(error: std::io::Error) -> StdoutState {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutState::ReaderGone
    } else {
        StdoutState::Failed(error)
    }
}

/// Writes `text` (and a newline) to stderr; a failure is dropped (see [`errln!`]).
pub fn write_stderr(text: std::fmt::Arguments, newline: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_fmt(text).and_then(|()| {
        if newline {
            stderr.write_all(b"\n")
        } else {
            Ok(())
        }
    });
}

#[derive(Debug, thiserror::Error)]
pub enum PrintError {
    #[error("cannot write the output to standard output")]
    Stdout {
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for PrintError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some("check where standard output goes (a full disk, a file that cannot grow)".into())
    }
}

/// Flushes stdout at the end of a run: `Err` when some of it could not be written for a reason
/// other than its reader going away.
pub fn finish_stdout() -> Result<(), PrintError> {
    write_stdout_with(&mut std::io::stdout().lock(), |out| out.flush());
    let mut state = state();
    match std::mem::replace(&mut *state, StdoutState::ReaderGone) {
        StdoutState::Failed(source) => Err(PrintError::Stdout { source }),
        StdoutState::Open | StdoutState::ReaderGone => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_reader_is_quiet_and_another_failure_is_kept() {
        assert!(matches!(
            closed_or_failed(std::io::ErrorKind::BrokenPipe.into()),
            StdoutState::ReaderGone
        ));
        assert!(matches!(
            closed_or_failed(std::io::ErrorKind::StorageFull.into()),
            StdoutState::Failed(_)
        ));
    }
}
