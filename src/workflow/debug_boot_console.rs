//! `debug_boot --console` and `--fetch`: reading a guest's console capture on its hypervisor,
//! streaming it line by line while the guest boots, until the boot ends somewhere (a login
//! prompt, a kernel panic, a rescue shell), goes silent, or takes too long.

use crate::debug_boot::console::{end_shown_by, ConsoleEnd, LineCutter};
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp};
use crate::machine::MachineError;
use std::time::{Duration, Instant};

/// How long the console may be silent before the capture stops: under software emulation a
/// kernel or systemd can be quiet for tens of seconds and still be booting; two minutes of nothing
/// is a hang.
pub const SILENCE_BOUND: Duration = Duration::from_secs(120);

/// How long a whole capture may take: a slow boot under software emulation takes a few minutes.
pub const TOTAL_BOUND: Duration = Duration::from_secs(600);

/// How often the capture is read while the guest boots.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The bounds of one capture.
#[derive(Debug, Clone, Copy)]
pub struct ConsoleBounds {
    pub silence: Duration,
    pub total: Duration,
}

impl Default for ConsoleBounds {
    fn default() -> Self {
        ConsoleBounds {
            silence: SILENCE_BOUND,
            total: TOTAL_BOUND,
        }
    }
}

/// Reads `capture` on `hypervisor` as it grows, handing every line to `on_line`, until the boot
/// ends somewhere or a bound is reached; says which.
pub fn stream_capture(
    hypervisor: &HypervisorMachine,
    capture: &str,
    bounds: ConsoleBounds,
    on_line: &mut dyn FnMut(&str),
) -> Result<ConsoleEnd, MachineError> {
    let started = Instant::now();
    let mut last_news = Instant::now();
    let mut offset = 0u64;
    let mut cutter = LineCutter::default();
    loop {
        let output = hypervisor.run(&HypervisorOp::ReadConsoleCapture {
            path: capture.to_string(),
            from_byte: offset,
        })?;
        // Until the guest has started, the file may not exist yet: nothing new, not a failure.
        if output.status == Some(0) && !output.stdout.is_empty() {
            offset += output.stdout.len() as u64;
            last_news = Instant::now();
            for line in cutter.feed(&output.stdout) {
                on_line(&line);
                if let Some(end) = end_shown_by(&line) {
                    return Ok(end);
                }
            }
            // A prompt waits on an unfinished line.
            if let Some(end) = end_shown_by(&cutter.unfinished()) {
                if let Some(line) = cutter.finish() {
                    on_line(&line);
                }
                return Ok(end);
            }
        }
        let end = if last_news.elapsed() >= bounds.silence {
            Some(ConsoleEnd::silence(bounds.silence))
        } else if started.elapsed() >= bounds.total {
            Some(ConsoleEnd::total(bounds.total))
        } else {
            None
        };
        if let Some(end) = end {
            if let Some(line) = cutter.finish() {
                on_line(&line);
            }
            return Ok(end);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The whole capture as it is now, in lines.
pub fn fetch_capture(
    hypervisor: &HypervisorMachine,
    capture: &str,
) -> Result<Option<Vec<String>>, MachineError> {
    let output = hypervisor.run(&HypervisorOp::ReadConsoleCapture {
        path: capture.to_string(),
        from_byte: 0,
    })?;
    if output.status != Some(0) {
        return Ok(None);
    }
    let mut cutter = LineCutter::default();
    let mut lines = cutter.feed(&output.stdout);
    lines.extend(cutter.finish());
    Ok(Some(lines))
}
