//! Printing a failed run: `error: …`, every `Caused by: …`, then `hint: …` on stderr, and with
//! `--json` the same as an `error` event on stdout, so a program reading stdout sees every
//! outcome. What a failure is lives in `diagnose`; this is only how the edge shows it.

use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, ErrorEvent, Event};

/// Reports the failure on stderr (for people and cron's mail) and, with `--json`, as the run's
/// last event on stdout.
pub fn report_failure(failure: &Failure, json: bool) {
    crate::err!("{}", failure.render());
    if json {
        emit(&Event::Error(ErrorEvent::of(failure)));
    }
}

/// The command line could not be parsed. Help and `--version` print as clap prints them; a wrong
/// command line is reported by clap on stderr and, when `--json` was among the arguments, as an
/// `error` event too. A value one of trog's own parsers refused is reported as any failure is,
/// with its hint. Exits with the usage status.
pub fn exit_on_bad_command_line(error: clap::Error) -> ! {
    let wants_json = std::env::args_os()
        .skip(1)
        .take_while(|argument| argument != "--")
        .any(|argument| argument == "--json");
    if let Some(failure) = crate::cli::values::argument_failure(&error) {
        report_failure(&failure, wants_json);
        std::process::exit(failure.status.code());
    }
    if !error.use_stderr() || !wants_json {
        error.exit();
    }
    let _ = error.print();
    let rendered = error.to_string();
    let message = rendered
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string();
    let failure = Failure::new(
        message,
        ExitStatus::Usage,
        Some("`trog help` lists the verbs; `trog VERB --help` what one takes".into()),
    );
    emit(&Event::Error(ErrorEvent::of(&failure)));
    std::process::exit(ExitStatus::Usage.code());
}
