//! A [`Machine`] that starts nothing, for unit tests of what runs over one (the finish, the
//! execution of a plan): each command is answered by the first rule whose text occurs in its
//! command line, and every command is recorded for the test to inspect.

use super::{CommandOutput, Machine, MachineCommand, MachineError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// How the fake answers a command.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The command ran and exited with `status`, printing `stdout`.
    Exit(i32, &'static str),
    /// The host could not be reached.
    Unreachable,
    /// The command ran past its timeout.
    TimedOut,
}

struct Rule {
    needle: String,
    /// Answered in turn; the last one answers every later command.
    answers: VecDeque<Answer>,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    ran: Vec<MachineCommand>,
}

/// A host scripted by rules. Clones share their rules and record: a test keeps one while the code
/// under test owns another.
#[derive(Clone, Default)]
pub struct FakeMachine {
    state: Rc<RefCell<State>>,
}

impl FakeMachine {
    pub fn new() -> FakeMachine {
        FakeMachine::default()
    }

    /// Commands whose command line contains `needle` get `answers`, in turn. A command no rule
    /// matches exits 0 and prints nothing.
    pub fn answer(self, needle: &str, answers: &[Answer]) -> FakeMachine {
        assert!(!answers.is_empty(), "a rule needs an answer");
        self.state.borrow_mut().rules.push(Rule {
            needle: needle.to_string(),
            answers: answers.iter().cloned().collect(),
        });
        self
    }

    /// The command lines run so far, in order.
    pub fn command_lines(&self) -> Vec<String> {
        self.state
            .borrow()
            .ran
            .iter()
            .map(MachineCommand::to_shell_line)
            .collect()
    }

    /// How many commands run so far contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.command_lines()
            .iter()
            .filter(|line| line.contains(needle))
            .count()
    }
}

impl Machine for FakeMachine {
    fn describe(&self) -> String {
        "fake.example.test".into()
    }

    fn run(&self, command: &MachineCommand) -> Result<CommandOutput, MachineError> {
        let line = command.to_shell_line();
        let mut state = self.state.borrow_mut();
        state.ran.push(command.clone());
        let answer = state
            .rules
            .iter_mut()
            .find(|rule| line.contains(&rule.needle))
            .map(|rule| {
                if rule.answers.len() > 1 {
                    rule.answers.pop_front().expect("not empty")
                } else {
                    rule.answers[0].clone()
                }
            })
            .unwrap_or(Answer::Exit(0, ""));
        let host = self.describe();
        match answer {
            Answer::Exit(status, stdout) => Ok(CommandOutput {
                command_line: line,
                host,
                status: Some(status),
                stdout: stdout.as_bytes().to_vec(),
                stderr: Vec::new(),
            }),
            Answer::Unreachable => Err(MachineError::Unreachable {
                host,
                detail: "Connection reset by peer".into(),
            }),
            Answer::TimedOut => Err(MachineError::TimedOut {
                host,
                command: line,
                timeout: Duration::from_secs(300),
            }),
        }
    }
}
