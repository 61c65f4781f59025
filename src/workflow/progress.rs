//! A run's steps as they happen, told by the workflows and shown by the edge:
//! `output::progress` prints them (a spinner on a terminal, plain lines, or JSON events with
//! `--json`); a test records them. Nothing here prints.

use crate::workflow::reporter::Reporter;
use std::time::Duration;

/// What a run that takes steps (provision, restore's wait) tells while it works, beside the
/// lines any workflow says ([`Reporter`]).
pub trait Progress: Reporter + Send {
    /// Step `number` of `total` of `guest`'s plan begins.
    fn start(&mut self, guest: &str, number: usize, total: usize, label: &str);
    /// The running step is still waiting for `what`, since `elapsed`.
    fn waiting(&self, what: &str, elapsed: Duration);
    /// Output from the guest (its Makefile's log), as it comes.
    fn guest_output(&self, text: &str);
    /// Ends the running step; how long it took.
    fn finish(&mut self, succeeded: bool) -> Duration;
    /// The progress of one more guest of the same run, told the same way; `side_by_side` when
    /// guests converge at once, where their lines must not overwrite each other.
    fn for_another_guest(&self, side_by_side: bool) -> Box<dyn Progress>;
}

/// A progress that keeps every line it is told, for tests.
#[cfg(test)]
#[derive(Default)]
pub struct RecordedProgress {
    pub lines: std::sync::Mutex<Vec<String>>,
}

#[cfg(test)]
impl RecordedProgress {
    fn record(&self, line: String) {
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(line);
    }
}

#[cfg(test)]
impl Reporter for RecordedProgress {
    fn say(&self, line: &str) {
        self.record(line.to_string());
    }
}

#[cfg(test)]
impl Progress for RecordedProgress {
    fn start(&mut self, guest: &str, number: usize, total: usize, label: &str) {
        self.record(format!("{guest}: [{number}/{total}] {label}"));
    }

    fn waiting(&self, what: &str, _elapsed: Duration) {
        self.record(format!("waiting for {what}"));
    }

    fn guest_output(&self, text: &str) {
        self.record(text.to_string());
    }

    fn finish(&mut self, succeeded: bool) -> Duration {
        self.record(if succeeded { "ok" } else { "FAILED" }.to_string());
        Duration::ZERO
    }

    fn for_another_guest(&self, _side_by_side: bool) -> Box<dyn Progress> {
        Box::new(RecordedProgress::default())
    }
}
