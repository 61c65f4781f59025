//! Asking a person for a credential: the terminal, behind a trait so that tests (and the lead's
//! command tests) can put a fake in its place.

use super::secret::Secret;
use std::fs::OpenOptions;
use std::io::{self, IsTerminal};

/// Why a prompt did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("there is no terminal to ask on")]
    NoTerminal,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Something that can ask a person for a secret.
pub trait Prompter {
    /// Shows `prompt` and reads one line without echoing it.
    fn ask(&mut self, prompt: &str) -> Result<Secret, PromptError>;
}

/// Where a person would type: the controlling terminal.
const TERMINAL_DEVICE: &str = "/dev/tty";

/// Whether a person can be asked: the controlling terminal can be opened, and standard input or
/// standard error is a terminal.
///
/// Both halves matter. The prompt is read from `/dev/tty`, so without one there is nowhere to
/// read; but a controlling terminal alone is not a person watching: a job started in the
/// background from someone's shell, or a web application's worker launched from one, inherits a
/// terminal nobody looks at, and would hang there on a prompt. A run someone watches has its
/// standard error on the terminal (where the prompt is written) or its standard input (a plain
/// interactive run); `--credentials` takes standard input for the pipe, which is why either one is
/// enough: handing in `sudo` and typing the passphrase works when somebody is there.
pub fn terminal_is_available() -> bool {
    let terminal_opens = OpenOptions::new()
        .read(true)
        .write(true)
        .open(TERMINAL_DEVICE)
        .is_ok();
    decide_terminal_is_available(
        terminal_opens,
        io::stdin().is_terminal(),
        io::stderr().is_terminal(),
    )
}

/// The decision of [`terminal_is_available`], apart from the facts it is made of.
pub fn decide_terminal_is_available(
    terminal_opens: bool,
    stdin_is_terminal: bool,
    stderr_is_terminal: bool,
) -> bool {
    terminal_opens && (stdin_is_terminal || stderr_is_terminal)
}

/// Asks on the terminal: the prompt goes to standard error (standard output carries data), the
/// answer is read from `/dev/tty` without echo.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalPrompter;

impl Prompter for TerminalPrompter {
    fn ask(&mut self, prompt: &str) -> Result<Secret, PromptError> {
        if !terminal_is_available() {
            return Err(PromptError::NoTerminal);
        }
        let config = rpassword::ConfigBuilder::new()
            .input_file_path(TERMINAL_DEVICE)
            .output_writer(io::stderr())
            .build();
        let answer = rpassword::prompt_password_with_config(prompt, config)?;
        Ok(Secret::new(answer))
    }
}

/// A prompter for tests: either no terminal at all, or one where a person types the given answers
/// in order. It remembers every prompt shown.
#[derive(Debug, Default)]
pub struct FakePrompter {
    terminal: bool,
    answers: Vec<String>,
    pub prompts_shown: Vec<String>,
}

impl FakePrompter {
    pub fn without_terminal() -> FakePrompter {
        FakePrompter {
            terminal: false,
            answers: Vec::new(),
            prompts_shown: Vec::new(),
        }
    }

    pub fn answering<S: Into<String>>(answers: impl IntoIterator<Item = S>) -> FakePrompter {
        let mut answers: Vec<String> = answers.into_iter().map(Into::into).collect();
        answers.reverse();
        FakePrompter {
            terminal: true,
            answers,
            prompts_shown: Vec::new(),
        }
    }
}

impl Prompter for FakePrompter {
    fn ask(&mut self, prompt: &str) -> Result<Secret, PromptError> {
        if !self.terminal {
            return Err(PromptError::NoTerminal);
        }
        self.prompts_shown.push(prompt.to_string());
        match self.answers.pop() {
            Some(answer) => Ok(Secret::new(answer)),
            None => Err(PromptError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the person typed Ctrl-D",
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_needs_the_device_and_stdin_or_stderr_on_it() {
        assert!(decide_terminal_is_available(true, true, true));
        assert!(
            decide_terminal_is_available(true, false, true),
            "--credentials piped, person at stderr"
        );
        assert!(
            decide_terminal_is_available(true, true, false),
            "stderr redirected to a log"
        );
        assert!(
            !decide_terminal_is_available(true, false, false),
            "background job with a stale terminal"
        );
        assert!(
            !decide_terminal_is_available(false, true, true),
            "no controlling terminal to read from"
        );
    }

    #[test]
    fn the_fake_answers_in_order_and_then_reports_end_of_input() {
        let mut prompter = FakePrompter::answering(["first", "second"]);
        assert_eq!(prompter.ask("one: ").unwrap().expose(), "first");
        assert_eq!(prompter.ask("two: ").unwrap().expose(), "second");
        assert!(matches!(prompter.ask("three: "), Err(PromptError::Io(_))));
        assert_eq!(prompter.prompts_shown, vec!["one: ", "two: ", "three: "]);
        assert!(matches!(
            FakePrompter::without_terminal().ask("x: "),
            Err(PromptError::NoTerminal)
        ));
    }
}
