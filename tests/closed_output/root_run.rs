//! The specification's rule, "DO NOT USE ROOT TO RUN THIS!": trog run as root says so once, on
//! every run (here without a terminal, as cron and the web button run it), and still works; run
//! as anyone else it says nothing of the kind. The installer's verbs, run as root by design (they
//! touch no guest and no hypervisor), do not warn.

use crate::root_warning::is_root_warning;
use std::process::{Command, Output, Stdio};

fn recipes(command: &mut Command, json: bool) -> Output {
    if json {
        command.arg("--json");
    }
    command
        .arg("recipes")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_root_run_without_a_terminal_is_warned_once_and_works() {
    if !running_as_root() {
        eprintln!("skipped: this test runs trog as root, and it is not root");
        return;
    }
    for json in [false, true] {
        let output = recipes(&mut Command::new(env!("CARGO_BIN_EXE_trog")), json);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert_eq!(
            stderr.lines().collect::<Vec<_>>(),
            [trog::commands::ROOT_WARNING],
            "json {json}"
        );
        let events = stdout.lines().filter(|line| is_root_warning(line)).count();
        assert_eq!(events, usize::from(json), "json {json}: {stdout}");
        if json {
            let first: serde_json::Value =
                serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
            assert_eq!(first["event"], "message", "{stdout}");
            assert!(stdout.contains(r#""event":"recipes""#), "{stdout}");
        } else {
            assert!(!stdout.is_empty(), "the recipes are listed");
        }
    }
}

#[test]
fn a_run_as_another_account_is_not_warned() {
    if !running_as_root() {
        eprintln!("skipped: changing to another account needs root, and this test is not root");
        return;
    }
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_trog"))
        .env("HOME", "/nonexistent");
    let output = recipes(&mut command, false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
    assert!(!output.stdout.is_empty(), "the recipes are listed");
}

#[test]
fn the_installers_verbs_run_as_root_by_design_without_the_warning() {
    if !running_as_root() {
        eprintln!("skipped: this test runs trog as root, and it is not root");
        return;
    }
    for verb in [
        &["root-programs", "sudoers", "--user", "trog"][..],
        &["completions", "bash"][..],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_trog"))
            .args(verb)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{verb:?}: {stderr}");
        assert!(!output.stdout.is_empty(), "{verb:?}");
        assert!(
            !stderr.lines().any(is_root_warning),
            "{verb:?} warned: {stderr}"
        );
    }
}
