//! Credentials in real processes: the test binary runs one of its own tests again, either in a
//! new session (`setsid`), which has no controlling terminal, with standard input a pipe left open
//! like a caller that never closes its end (how trog runs under cron or behind a web button), or
//! on a pseudo-terminal (`script`) where a person types the answer.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use trog::credentials::{
    terminal_is_available, CredentialName, CredentialSource, CredentialsError, HandedInCredentials,
    PromptError, Prompter, TerminalPrompter,
};

/// Set in a child run of a test: its checks hold only there, where the terminal is known.
const RUNNING_AS_CHILD: &str = "TROG_TEST_RUNNING_AS_CHILD";

/// How long the child may take; a child that blocks on its standard input never finishes.
const CHILD_DEADLINE: Duration = Duration::from_secs(30);

/// Runs `test` of this binary in a new session without a terminal, `stdin` written to its
/// standard input and the pipe kept open until it exits; fails if the test fails there or blocks.
fn run_without_terminal(test: &str, stdin: &[u8]) {
    let this_binary = std::env::current_exe().unwrap();
    let mut child = Command::new("setsid")
        .arg("--wait")
        .arg(&this_binary)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(RUNNING_AS_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setsid (util-linux) runs");
    let mut open_end = child.stdin.take().unwrap();
    open_end.write_all(stdin).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHILD_DEADLINE {
            child.kill().unwrap();
            panic!("{test} was still running after {CHILD_DEADLINE:?}: it is blocked reading standard input");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(open_end);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.success(),
        "{test} failed without a terminal:\n{stdout}{stderr}"
    );
    assert!(
        stdout.contains("1 passed"),
        "{test} did not run in the child:\n{stdout}"
    );
}

/// Runs `test` of this binary on a new pseudo-terminal (`script`), and types `answer` on it once
/// `prompt` has appeared; returns what the terminal showed.
fn run_on_a_terminal(test: &str, prompt: &str, answer: &str) -> String {
    let this_binary = std::env::current_exe().unwrap();
    let command_line = format!(
        "{} --exact {test} --nocapture --test-threads=1",
        this_binary.display()
    );
    let mut child = Command::new("script")
        .args([
            "--quiet",
            "--return",
            "--command",
            &command_line,
            "/dev/null",
        ])
        .env(RUNNING_AS_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    let mut keyboard = child.stdin.take().unwrap();
    let mut screen = child.stdout.take().unwrap();
    let (shown_sender, shown) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(length @ 1..) = screen.read(&mut chunk) {
            if shown_sender.send(chunk[..length].to_vec()).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut transcript = Vec::new();
    let mut typed = false;
    loop {
        while let Ok(chunk) = shown.try_recv() {
            transcript.extend_from_slice(&chunk);
        }
        // Typing only once the prompt is up: earlier, the terminal would still echo.
        if !typed && String::from_utf8_lossy(&transcript).contains(prompt) {
            keyboard.write_all(answer.as_bytes()).unwrap();
            keyboard.flush().unwrap();
            typed = true;
        }
        if let Some(status) = child.try_wait().unwrap() {
            // The screen reader ends at the end of the output, now that the terminal is gone.
            transcript.extend(shown.iter().flatten());
            let transcript = String::from_utf8_lossy(&transcript).into_owned();
            assert!(
                status.success(),
                "{test} failed on a terminal:\n{transcript}"
            );
            assert!(
                transcript.contains("1 passed"),
                "{test} did not run in the child:\n{transcript}"
            );
            return transcript;
        }
        if started.elapsed() > CHILD_DEADLINE {
            child.kill().unwrap();
            panic!(
                "{test} was still running after {CHILD_DEADLINE:?}:\n{}",
                String::from_utf8_lossy(&transcript)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn in_child() -> bool {
    std::env::var_os(RUNNING_AS_CHILD).is_some()
}

#[test]
fn without_a_terminal_nothing_is_asked_and_the_error_says_how_to_hand_in() {
    if !in_child() {
        return run_without_terminal(
            "without_a_terminal_nothing_is_asked_and_the_error_says_how_to_hand_in",
            b"",
        );
    }
    assert!(!terminal_is_available());
    assert!(matches!(
        TerminalPrompter.ask("Passphrase: "),
        Err(PromptError::NoTerminal)
    ));
    let mut source = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let error = source
        .get(CredentialName::Keepass, "to unlock /etc/trog/secrets.kdbx")
        .unwrap_err();
    assert!(
        matches!(
            error,
            CredentialsError::NoTerminal {
                name: CredentialName::Keepass,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn with_the_flag_credentials_are_read_up_to_the_blank_line_of_a_pipe_left_open() {
    if !in_child() {
        return run_without_terminal(
            "with_the_flag_credentials_are_read_up_to_the_blank_line_of_a_pipe_left_open",
            b"sudo: handed in\n\n",
        );
    }
    let mut source =
        CredentialSource::for_run(Some(trog::credentials::DEFAULT_HANDED_IN_WAIT)).unwrap();
    assert_eq!(
        source
            .get(CredentialName::Sudo, "for sudo")
            .unwrap()
            .expose(),
        "handed in"
    );
    assert!(matches!(
        source.get(CredentialName::Keepass, "to unlock"),
        Err(CredentialsError::NoTerminal { .. })
    ));
}

#[test]
fn without_the_flag_standard_input_is_never_read() {
    if !in_child() {
        return run_without_terminal(
            "without_the_flag_standard_input_is_never_read",
            b"sudo: handed in\n\n",
        );
    }
    let mut source = CredentialSource::for_run(None).unwrap();
    assert!(!source.was_handed_in(CredentialName::Sudo));
    let error = source
        .get(
            CredentialName::Sudo,
            "for sudo as admin on hv1.example.test",
        )
        .unwrap_err();
    assert!(
        matches!(error, CredentialsError::NoTerminal { .. }),
        "{error:?}"
    );
}

#[test]
fn on_a_terminal_the_answer_is_read_without_echo() {
    if !in_child() {
        let transcript = run_on_a_terminal(
            "on_a_terminal_the_answer_is_read_without_echo",
            "Passphrase of the secret store (to unlock the test store): ",
            "typed passphrase\n",
        );
        assert!(
            !transcript.contains("typed passphrase"),
            "the answer was echoed:\n{transcript}"
        );
        return;
    }
    assert!(terminal_is_available());
    let mut source = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let answer = source
        .get(CredentialName::Keepass, "to unlock the test store")
        .unwrap();
    assert_eq!(answer.expose(), "typed passphrase");
}
