//! How a run's progress (`workflow::progress::Progress`) is shown: a line per step with a
//! spinner and elapsed time on a terminal, plain lines on stderr otherwise, and one JSON event per
//! line on stdout with `--json` (for programs such as a web application's "reprovision" button).

use crate::output::events::{emit, Event};
use crate::workflow::progress::Progress;
use crate::workflow::reporter::Reporter;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How a spinner is redrawn: often enough to look alive, rarely enough to cost nothing.
const SPINNER_TICK: Duration = Duration::from_millis(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    Terminal,
    Plain,
    Json,
}

impl ProgressMode {
    /// `--json` wins; otherwise a spinner when stderr is a terminal.
    pub fn for_run(json: bool) -> ProgressMode {
        if json {
            ProgressMode::Json
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Terminal
        } else {
            ProgressMode::Plain
        }
    }
}

/// A run's progress as this run shows it ([`ProgressMode`]).
pub struct PrintedProgress {
    mode: ProgressMode,
    current: Option<Step>,
}

struct Step {
    guest: String,
    label: String,
    started: Instant,
    spinner: Option<ProgressBar>,
}

impl PrintedProgress {
    pub fn new(mode: ProgressMode) -> PrintedProgress {
        PrintedProgress {
            mode,
            current: None,
        }
    }

    pub fn mode(&self) -> ProgressMode {
        self.mode
    }

    /// One event for programs; ignored unless `--json`.
    pub fn event(&self, event: &Event) {
        if self.mode == ProgressMode::Json {
            emit(event);
        }
    }
}

/// A workflow's lines reach the run's progress: stderr, or `message` events with `--json`.
impl Reporter for PrintedProgress {
    /// A line for people (stderr); a `message` event with `--json`.
    fn say(&self, text: &str) {
        match self.mode {
            ProgressMode::Json => self.event(&Event::Message { text }),
            ProgressMode::Terminal => {
                match self.current.as_ref().and_then(|step| step.spinner.as_ref()) {
                    Some(spinner) => spinner.println(text),
                    None => crate::errln!("{text}"),
                }
            }
            ProgressMode::Plain => crate::errln!("{text}"),
        }
    }
}

impl Progress for PrintedProgress {
    fn start(&mut self, guest: &str, number: usize, total: usize, label: &str) {
        let label = format!("[{number}/{total}] {label}");
        let spinner = (self.mode == ProgressMode::Terminal).then(|| {
            let spinner = ProgressBar::new_spinner();
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .expect("a valid template"),
            );
            spinner.set_message(format!("{guest}: {label}"));
            spinner.enable_steady_tick(SPINNER_TICK);
            spinner
        });
        match self.mode {
            ProgressMode::Plain => crate::errln!("{guest}: {label}"),
            ProgressMode::Json => self.event(&Event::StepStarted {
                guest,
                step: number,
                steps: total,
                label: &label,
            }),
            ProgressMode::Terminal => {}
        }
        self.current = Some(Step {
            guest: guest.to_string(),
            label,
            started: Instant::now(),
            spinner,
        });
    }

    /// The running step is still waiting for `what`.
    fn waiting(&self, what: &str, elapsed: Duration) {
        if let Some(Step {
            guest,
            label,
            spinner: Some(spinner),
            ..
        }) = &self.current
        {
            spinner.set_message(format!(
                "{guest}: {label}: waiting for {what}, {}s",
                elapsed.as_secs()
            ));
        }
    }

    /// Output from the guest (its Makefile's log).
    fn guest_output(&self, text: &str) {
        match self.mode {
            ProgressMode::Json => self.event(&Event::GuestOutput { text }),
            ProgressMode::Terminal => {
                match self.current.as_ref().and_then(|step| step.spinner.as_ref()) {
                    Some(spinner) => spinner.suspend(|| crate::err!("{text}")),
                    None => crate::err!("{text}"),
                }
            }
            ProgressMode::Plain => crate::err!("{text}"),
        }
    }

    /// Ends the running step; returns how long it took.
    fn finish(&mut self, succeeded: bool) -> Duration {
        let Some(step) = self.current.take() else {
            return Duration::ZERO;
        };
        let elapsed = step.started.elapsed();
        let mark = if succeeded { "ok" } else { "FAILED" };
        match self.mode {
            ProgressMode::Terminal => {
                if let Some(spinner) = step.spinner {
                    spinner.finish_and_clear();
                }
                crate::errln!(
                    "{mark:>6} {}: {} ({:.1}s)",
                    step.guest,
                    step.label,
                    elapsed.as_secs_f64()
                );
            }
            ProgressMode::Plain => crate::errln!(
                "{mark:>6} {}: {} ({:.1}s)",
                step.guest,
                step.label,
                elapsed.as_secs_f64()
            ),
            ProgressMode::Json => self.event(&Event::StepFinished {
                guest: &step.guest,
                label: &step.label,
                succeeded,
                seconds: elapsed.as_secs_f64(),
            }),
        }
        elapsed
    }

    /// Spinners of several guests would overwrite each other's line: side by side, each step is
    /// a plain line.
    fn for_another_guest(&self, side_by_side: bool) -> Box<dyn Progress> {
        Box::new(PrintedProgress::new(match self.mode {
            ProgressMode::Terminal if side_by_side => ProgressMode::Plain,
            other => other,
        }))
    }
}
