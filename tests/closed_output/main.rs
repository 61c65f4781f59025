//! trog's own output read by a program that stops early (`trog … | head -c1`): SIGPIPE stays
//! ignored so that a remote command that stops reading is an error trog reports, which means a
//! write to a closed stdout fails instead of killing trog. The run must still end quietly with
//! its own status: no panic, no 141, nothing on stderr.

mod root_run;
#[path = "../support/root_warning.rs"]
mod root_warning;

use std::io::Read;
use std::process::{Command, Stdio};

/// Runs trog with `args`, its stdout a pipe of which one byte is read before the read end is
/// closed; its exit status and standard error.
fn run_with_stdout_closed_early(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (
        child.wait().unwrap(),
        root_warning::without_root_warning(&stderr),
    )
}

/// Runs trog with `args`, its stdout a pipe whose read end was closed before it started: its
/// first write already fails.
fn run_with_stdout_closed(args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut ends = [0; 2];
    // SAFETY: `pipe` fills `ends` with two new descriptors, each owned once below.
    assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    drop(read_end);
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        output.status,
        root_warning::without_root_warning(&String::from_utf8_lossy(&output.stderr)),
    )
}

fn assert_quiet_success(args: &[&str], (status, stderr): (std::process::ExitStatus, String)) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), None, "{args:?}: killed by a signal");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    assert_eq!(stderr, "", "{args:?}");
}

#[test]
fn output_to_a_closed_pipe_ends_quietly_with_the_commands_status() {
    for args in [
        &["completions", "bash"][..],
        &["recipes"][..],
        &["--json", "recipes"][..],
    ] {
        assert_quiet_success(args, run_with_stdout_closed(args));
    }
}

#[test]
fn output_cut_short_ends_quietly_with_the_commands_status() {
    for args in [&["completions", "bash"][..], &["recipes"][..]] {
        assert_quiet_success(args, run_with_stdout_closed_early(args));
    }
}
