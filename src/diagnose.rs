//! The vocabulary of failure every layer shares: [`Diagnose`] (which exit status an error ends a
//! run with, and what the user can do about it) and [`Failure`], the error ready to report.
//!
//! It sits at the bottom beside `exit_status`, so the core and the backends can say how they fail
//! without knowing about the command line; `report` (the edge) only prints.

use crate::exit_status::ExitStatus;
use std::error::Error as StdError;

/// What an error knows about itself beyond its message.
pub trait Diagnose: StdError + Send + Sync + 'static {
    /// The exit status a run that ends with this error exits with.
    fn exit_status(&self) -> ExitStatus;
    /// What to do about it, when there is something useful to say.
    fn hint(&self) -> Option<String> {
        None
    }
}

/// A failed command, ready to be reported.
#[derive(Debug)]
pub struct Failure {
    pub error: Box<dyn StdError + Send + Sync + 'static>,
    pub hint: Option<String>,
    pub status: ExitStatus,
}

impl Failure {
    pub fn new(
        error: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
        status: ExitStatus,
        hint: Option<String>,
    ) -> Failure {
        Failure {
            error: error.into(),
            hint,
            status,
        }
    }

    /// The error and its causes, outermost first; a value quoted in one is shortened when it is
    /// long (see [`shorten_quoted`]).
    pub fn chain(&self) -> Vec<String> {
        let mut messages = vec![shorten_quoted(&self.error.to_string())];
        let mut source = self.error.source();
        while let Some(cause) = source {
            messages.push(shorten_quoted(&cause.to_string()));
            source = cause.source();
        }
        messages
    }

    /// The whole report as printed on stderr.
    pub fn render(&self) -> String {
        let mut text = String::new();
        let chain = self.chain();
        text.push_str(&format!("error: {}\n", chain[0]));
        for cause in &chain[1..] {
            for (index, line) in cause.lines().enumerate() {
                let lead = if index == 0 {
                    "  Caused by: "
                } else {
                    "             "
                };
                text.push_str(lead);
                text.push_str(line);
                text.push('\n');
            }
        }
        if let Some(hint) = &self.hint {
            for (index, line) in hint.lines().enumerate() {
                text.push_str(if index == 0 { "hint: " } else { "      " });
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

/// The most characters of a quoted value a message shows: a value written wrong is often one that
/// runs on (a pasted file, a number of a hundred thousand digits), and a message that repeats it
/// in full buries the rest of the report.
const LONGEST_QUOTED: usize = 80;

/// `message` with every `` `…` `` span longer than [`LONGEST_QUOTED`] characters cut to its
/// start, saying how long it was.
pub fn shorten_quoted(message: &str) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    // Odd-numbered parts lie between a pair of backticks; a last unpaired one is left alone.
    let paired = if parts.len() % 2 == 0 {
        parts.len() - 1
    } else {
        parts.len()
    };
    let mut shortened = String::with_capacity(message.len().min(4096));
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            shortened.push('`');
        }
        let length = part.chars().count();
        if index % 2 == 1 && index < paired && length > LONGEST_QUOTED {
            shortened.extend(part.chars().take(LONGEST_QUOTED));
            shortened.push_str(&format!("… ({length} characters)"));
        } else {
            shortened.push_str(part);
        }
    }
    shortened
}

impl<E: Diagnose> From<E> for Failure {
    fn from(error: E) -> Failure {
        let status = error.exit_status();
        let hint = error.hint();
        Failure {
            error: Box::new(error),
            hint,
            status,
        }
    }
}

/// How a run failed, for programs: the exit status it ends with, every message from the outermost
/// error down to its first cause, and what to do.
#[derive(Debug, serde::Serialize)]
pub struct ErrorEvent {
    pub exit_status: ExitStatusJson,
    pub message: String,
    pub causes: Vec<String>,
    pub hint: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub struct ExitStatusJson {
    pub code: i32,
    pub name: &'static str,
}

impl ErrorEvent {
    pub fn of(failure: &Failure) -> ErrorEvent {
        let mut chain = failure.chain();
        let message = chain.remove(0);
        ErrorEvent {
            exit_status: ExitStatusJson {
                code: failure.status.code(),
                name: failure.status.name(),
            },
            message,
            causes: chain,
            hint: failure.hint.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read the fleet file /etc/x")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn long_quoted_values_are_shortened_and_the_rest_kept() {
        let long = "é".repeat(200);
        let shortened = shorten_quoted(&format!("a `{long}` and `short` and `open"));
        assert_eq!(
            shortened,
            format!(
                "a `{}… (200 characters)` and `short` and `open",
                "é".repeat(80)
            )
        );
        assert_eq!(shorten_quoted("no quotes"), "no quotes");
    }

    #[test]
    fn render_prints_error_causes_and_hint() {
        let failure = Failure::new(
            Outer(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            )),
            ExitStatus::Configuration,
            Some("create it, or set TROG_PROVISIONER_CONFIG".into()),
        );
        assert_eq!(
            failure.render(),
            "error: cannot read the fleet file /etc/x\n  Caused by: no such file\nhint: create it, or set TROG_PROVISIONER_CONFIG\n"
        );
    }
}
