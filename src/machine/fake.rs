//! A [`Machine`] that starts nothing, for unit tests of what runs over one (the finish, the
//! execution of a plan): each command is answered by the first rule whose text occurs in its
//! command line, and every command is recorded for the test to inspect. A command that hangs
//! takes time on a [`FakeClock`], not the test's.

use super::{
    CommandOutput, HeldCommand, Machine, MachineCommand, MachineError, Watch, WATCH_INTERVAL,
};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Time that passes only when a test (or a fake) says so; clones share it.
#[derive(Clone)]
pub struct FakeClock {
    start: Instant,
    passed: Rc<Cell<Duration>>,
}

impl Default for FakeClock {
    fn default() -> FakeClock {
        FakeClock {
            start: Instant::now(),
            passed: Rc::default(),
        }
    }
}

impl FakeClock {
    pub fn now(&self) -> Instant {
        self.start + self.passed.get()
    }

    /// The time passed since the clock was made.
    pub fn passed(&self) -> Duration {
        self.passed.get()
    }

    pub fn advance(&self, by: Duration) {
        self.passed.set(self.passed.get() + by);
    }
}

/// How the fake answers a command.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The command ran and exited with `status`, printing `stdout`.
    Exit(i32, &'static str),
    /// The host could not be reached.
    Unreachable,
    /// The command ran past its timeout.
    TimedOut,
    /// The command never ends by itself: time passes on the machine's clock, the watch is asked
    /// every [`WATCH_INTERVAL`] as a real run asks it, and the command is stopped when the watch
    /// says so or times out at its timeout.
    Hangs,
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
    clock: FakeClock,
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

    /// Hanging commands take their time on `clock`.
    pub fn with_clock(self, clock: &FakeClock) -> FakeMachine {
        self.state.borrow_mut().clock = clock.clone();
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

    fn run_watched(
        &self,
        command: &MachineCommand,
        watch: Watch,
    ) -> Result<CommandOutput, MachineError> {
        let line = command.to_shell_line();
        let (answer, clock) = {
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
            (answer, state.clock.clone())
        };
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
            Answer::Hangs => {
                let started = clock.passed();
                while clock.passed() - started + WATCH_INTERVAL <= command.timeout {
                    clock.advance(WATCH_INTERVAL);
                    if let Some(reason) = watch() {
                        return Err(MachineError::Abandoned {
                            host,
                            command: line,
                            after: clock.passed() - started,
                            reason,
                        });
                    }
                }
                clock.advance(command.timeout - (clock.passed() - started));
                Err(MachineError::TimedOut {
                    host,
                    command: line,
                    timeout: command.timeout,
                })
            }
        }
    }

    /// The fake starts nothing, so it keeps nothing running either.
    fn start(&self, command: &MachineCommand) -> Result<HeldCommand, MachineError> {
        self.state.borrow_mut().ran.push(command.clone());
        Err(MachineError::Spawn {
            program: command.to_shell_line(),
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a fake machine keeps no command running",
            ),
        })
    }
}
