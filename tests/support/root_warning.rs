//! trog run as root says so, once, on every run: on stderr, and with `--json` as a `message`
//! event on stdout. The test suite runs trog as root; a test that compares what trog printed
//! takes that one warning out first, here, and sees everything else as a user would.
//! (tests/closed_output/root_run.rs checks the warning itself.)

#![allow(dead_code)]

use std::process::Output;

/// `text` without the one line of the root warning trog prints first when run as root (the
/// plain line on stderr, or its `message` event on stdout); any other line, a second warning
/// included, stays.
pub fn without_root_warning(text: &str) -> String {
    let mut taken = false;
    let mut kept = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        if !taken && is_root_warning(bare) {
            taken = true;
            continue;
        }
        kept.push_str(line);
    }
    kept
}

/// Whether `line` (without its newline) is the root warning: the plain line trog prints on
/// stderr, or its `message` event on stdout.
pub fn is_root_warning(line: &str) -> bool {
    let event = trog::output::events::to_line(&trog::output::events::Event::Message {
        text: trog::commands::ROOT_WARNING,
    });
    line == trog::commands::ROOT_WARNING || line == event
}

/// `output` with [`without_root_warning`] applied to stdout and stderr.
pub fn output_without_root_warning(output: Output) -> Output {
    Output {
        status: output.status,
        stdout: without_root_warning(&String::from_utf8_lossy(&output.stdout)).into_bytes(),
        stderr: without_root_warning(&String::from_utf8_lossy(&output.stderr)).into_bytes(),
    }
}
