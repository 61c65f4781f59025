//! Waiting for a new guest: first for an address, then for SSH to answer there. Every wait is
//! bounded (by the guest's console standing still, and in all: [`BootWait`]), named, and on timeout
//! says what it waited for, for how long, and what the guest's console said last. A guest whose
//! domain stops is not waited for: the wait asks before every attempt, and an attempt in progress
//! (a login may take a minute on a loaded host) is itself stopped within half a second of the
//! domain's end. Nor is one whose console shows its boot stuck where it stays (a kernel panic,
//! systemd's rescue shell): the domain runs on then, and the console is what tells.

use crate::debug_boot::console::{end_shown_by, ConsoleEnd};
use crate::untrusted::untrusted_str;
use std::time::{Duration, Instant};

/// How long a wait for a booting guest may go on. It follows the guest's serial console: a boot
/// that still prints is still going, however slow its hypervisor (several emulated guests booting
/// at once on two cores take minutes each); one whose console stood still for `quiet` has stopped
/// (a kernel panic, a boot prompt, a guest up but without the admin's key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootWait {
    /// Given up once the console has not changed for this long; a console that cannot be read
    /// never changes, so this is then a bound from the start.
    pub quiet: Duration,
    /// Given up after this long, whatever the console does.
    pub limit: Duration,
}

impl BootWait {
    /// A wait bounded by `bound` alone, whatever the console does.
    pub const fn fixed(bound: Duration) -> BootWait {
        BootWait {
            quiet: bound,
            limit: bound,
        }
    }
}

/// How long a new guest gets to ask for an address and answer SSH. Measured boots take 25–40 s
/// under software emulation on an idle machine and several minutes on a loaded one: five minutes
/// of a silent console is a boot that stopped, twenty in all a boot that loops.
pub const DEFAULT_BOOT_WAIT: BootWait = BootWait {
    quiet: Duration::from_secs(300),
    limit: Duration::from_secs(1200),
};
/// How often the wait reads the console for a sign of progress: a read is one command on the
/// hypervisor, over SSH for a remote one.
pub const CONSOLE_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// How often the address and SSH are tried again while waiting. A round costs two libvirt calls
/// and, once there is an address, one refused TCP connection: cheap enough to try often, and
/// the guest is reached within half a second of its SSH answering instead of up to two.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);
/// Lines of the serial console shown when a guest never answered.
pub const CONSOLE_TAIL_LINES: usize = 30;
/// How many times a wait starts a guest again whose emulator crashed before SSH answered.
/// QEMU's software emulation (TCG) with more than one vCPU has been seen to abort on an
/// assertion of its own (`iotlb_to_section`) while the guest's kernel set up its PCI devices,
/// in about one boot of twenty: a race inside the emulator, which the next start does not meet
/// again. Once only: an emulator that crashes twice in a row has something else wrong.
pub const EMULATOR_RESTARTS: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("{guest} stopped while it was waited for: libvirt says it is {state}, after {}s{}{}{}", waited.as_secs(), restarts_said(*.restarts), hypervisor_log_tail(.hypervisor_log), console_tail(.console))]
    Stopped {
        guest: String,
        state: String,
        waited: Duration,
        /// How many times the wait had started it again after its emulator crashed.
        restarts: u32,
        hypervisor_log: Option<String>,
        console: Option<String>,
    },
    /// The boot got somewhere it stays (a kernel panic, systemd's rescue shell) while the domain
    /// runs on, so libvirt never says it stopped: the console is what tells.
    #[error("{guest} will not answer: {end}, seen {}s into the wait: {}{}", waited.as_secs(), untrusted_str(.line), console_tail(.console))]
    StuckBoot {
        guest: String,
        end: ConsoleEnd,
        /// The console's line saying so.
        line: String,
        waited: Duration,
        console: Option<String>,
    },
    #[error("{guest} never asked for an address: waited {}s for a DHCP lease on MAC {mac}{}{}", waited.as_secs(), gave_up_said(*.gave_up), console_tail(.console))]
    NoAddress {
        guest: String,
        mac: String,
        waited: Duration,
        gave_up: GaveUp,
        console: Option<String>,
    },
    /// What answered at the guest's address showed a host key that is not the guest's: the
    /// wait ends at once, since a key that is wrong now stays wrong, and nothing was sent.
    #[error("{address} answered for {guest} with a host key that is not the guest's: refused before anything was sent")]
    HostKeyRefused { guest: String, address: String },
    #[error("{guest} has {addresses} but SSH did not answer there: waited {}s{}{}", waited.as_secs(), gave_up_said(*.gave_up), console_tail(.console))]
    NoSsh {
        guest: String,
        addresses: String,
        waited: Duration,
        gave_up: GaveUp,
        last_error: String,
        console: Option<String>,
    },
}

/// Why a wait for a booting guest gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// Its console had not changed for this many seconds.
    QuietFor(u32),
    /// The most a boot is waited for had passed (or its console could not be read).
    Limit,
}

fn gave_up_said(gave_up: GaveUp) -> String {
    match gave_up {
        GaveUp::QuietFor(seconds) => format!(", its console unchanged for the last {seconds}s"),
        GaveUp::Limit => ", the longest a boot is waited for".into(),
    }
}

fn restarts_said(restarts: u32) -> String {
    match restarts {
        0 => String::new(),
        1 => " (it had been started again once, after its emulator crashed)".into(),
        n => format!(" (it had been started again {n} times, after its emulator crashed)"),
    }
}

/// Whether libvirt's state and reason (as [`GuestProbe::stopped`] gives them) say the emulator
/// itself ended abnormally, rather than the guest powering off or someone stopping it.
fn emulator_crashed(state: &str) -> bool {
    state.ends_with("(crashed)") || state.starts_with("crashed")
}

/// The line of the emulator's log that says why it ended: its last line of QEMU's own
/// (`qemu-system-x86_64: …`, which libvirt may stamp with a time), if it wrote one. A QEMU killed
/// by a signal it could not catch wrote none.
fn emulator_last_word(log: Option<&str>) -> Option<&str> {
    log?.lines().rev().map(str::trim).find(|line| {
        line.split_whitespace()
            .any(|word| word.starts_with("qemu-system-") && word.ends_with(':'))
    })
}

fn hypervisor_log_tail(log: &Option<String>) -> String {
    match log {
        Some(text) if !text.trim().is_empty() => {
            format!(
                "\nlast lines of its QEMU log on the hypervisor:\n{}",
                untrusted_str(text.trim_end())
            )
        }
        _ => String::new(),
    }
}

fn console_tail(console: &Option<String>) -> String {
    match console {
        Some(text) if !text.trim().is_empty() => {
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(CONSOLE_TAIL_LINES);
            format!(
                "\nlast lines of its serial console:\n{}",
                untrusted_str(&lines[start..].join("\n"))
            )
        }
        _ => String::new(),
    }
}

impl crate::diagnose::Diagnose for WaitError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            WaitError::HostKeyRefused { .. } => crate::exit_status::ExitStatus::UntrustedGuest,
            _ => crate::exit_status::ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            WaitError::Stopped { guest, .. } => format!("the lines above say why QEMU ended; `trog debug_boot {guest} --console` starts it again and shows the whole boot"),
            WaitError::StuckBoot { guest, .. } => format!("the lines above say where its boot stopped; the guest still runs, and stays there, until `trog debug_boot {guest} --console` restarts it and shows the whole boot, or `trog destroy {guest}`"),
            WaitError::NoAddress { guest, .. } => format!("the guest did not boot far enough to use its network: `trog debug_boot {guest} --console` shows the whole boot"),
            WaitError::HostKeyRefused { guest, .. } => format!("another machine may be answering at that address, or the guest's host key was replaced: find out which first. A guest built before trog pinned host keys is taken once, on purpose, with `trog provision --adopt-host-key {guest}`"),
            WaitError::NoSsh { guest, last_error, .. } => format!("the last attempt said: {}\ncloud-init may have failed to install the admin key; it reports on the console: `trog debug_boot {guest} --console`", untrusted_str(last_error)),
        })
    }
}

/// Why an SSH attempt did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptFailed {
    /// Nothing answered, or the login failed: what the attempt said.
    NoAnswer(String),
    /// The guest's domain stopped during the attempt, which was given up: libvirt's state and
    /// reason, as [`GuestProbe::stopped`] gives them.
    GuestStopped(String),
    /// What answered showed a host key the guest does not have.
    HostKeyRefused,
}

/// What a wait needs from the world, so the logic can be tested without a guest.
pub trait GuestProbe {
    /// The addresses the guest may have now (from DHCP leases, or the declared static one).
    fn candidate_addresses(&mut self) -> Vec<String>;
    /// Tries SSH at `address`, giving up as soon as the guest's domain stops.
    fn try_ssh(&mut self, address: &str) -> Result<(), AttemptFailed>;
    /// The guest's serial console so far: its changes tell the wait the boot goes on, and its
    /// end is in the message when the wait gives up.
    fn console(&mut self) -> Option<String>;
    /// `Some(state and reason)` once the guest's domain no longer runs (crashed, shut off).
    fn stopped(&mut self) -> Option<String> {
        None
    }
    /// The end of the hypervisor's log of the guest's emulator, for the message when it stopped.
    fn hypervisor_log(&mut self) -> Option<String> {
        None
    }
    /// Called every round, with the time spent so far (progress on a terminal).
    fn waiting(&mut self, _what: &str, _elapsed: Duration) {}
    /// Starts the guest's domain again after its emulator crashed, then tells whoever watches
    /// the run `note`; `Err` says why it could not.
    fn start_again(&mut self, _note: &str) -> Result<(), String> {
        Err("this wait cannot start a guest".into())
    }
}

/// Waits until SSH answers at one of the guest's addresses and returns that address.
pub fn wait_for_ssh(
    probe: &mut dyn GuestProbe,
    guest: &str,
    mac: &str,
    bounds: BootWait,
    clock: &dyn Fn() -> Instant,
    pause: &dyn Fn(Duration),
) -> Result<String, WaitError> {
    let started = clock();
    let mut console = ConsoleWatch::new(started);
    let mut last_error = String::from("no attempt finished");
    let mut seen_addresses: Vec<String> = Vec::new();
    let mut restarts = 0;
    // A guest whose domain stopped: started again when its emulator crashed and restarts are
    // left (the wait goes on), otherwise the wait's error.
    let mut on_stop = |probe: &mut dyn GuestProbe, state: String| -> Result<(), WaitError> {
        let waited = clock() - started;
        let log = probe.hypervisor_log();
        if emulator_crashed(&state) && restarts < EMULATOR_RESTARTS {
            let said = emulator_last_word(log.as_deref())
                .map(|line| format!(": {line}"))
                .unwrap_or_default();
            let note = format!(
                "{guest}: its emulator crashed {}s into the wait, before SSH answered (libvirt: {state}){said}; started the guest again",
                waited.as_secs()
            );
            if probe.start_again(&note).is_ok() {
                restarts += 1;
                return Ok(());
            }
        }
        Err(WaitError::Stopped {
            guest: guest.into(),
            state,
            waited,
            restarts,
            hypervisor_log: log,
            console: probe.console(),
        })
    };
    'round: loop {
        let addresses = probe.candidate_addresses();
        for address in &addresses {
            if !seen_addresses.contains(address) {
                seen_addresses.push(address.clone());
            }
            // Before every attempt: an attempt at a guest that is gone is wasted time.
            if let Some(state) = probe.stopped() {
                on_stop(probe, state)?;
                continue 'round;
            }
            match probe.try_ssh(address) {
                Ok(()) => return Ok(address.clone()),
                Err(AttemptFailed::GuestStopped(state)) => {
                    on_stop(probe, state)?;
                    continue 'round;
                }
                Err(AttemptFailed::NoAnswer(error)) => last_error = error,
                Err(AttemptFailed::HostKeyRefused) => {
                    return Err(WaitError::HostKeyRefused {
                        guest: guest.into(),
                        address: address.clone(),
                    })
                }
            }
        }
        if let Some(state) = probe.stopped() {
            on_stop(probe, state)?;
            continue;
        }
        let now = clock();
        let elapsed = now - started;
        let quiet = console.quiet(probe, now);
        if let Some((end, line)) = console.stuck.take() {
            return Err(WaitError::StuckBoot {
                guest: guest.into(),
                end,
                line,
                waited: elapsed,
                console: console.last_text.clone(),
            });
        }
        if quiet >= bounds.quiet || elapsed >= bounds.limit {
            let gave_up = if quiet >= bounds.quiet && console.seen() {
                GaveUp::QuietFor(u32::try_from(quiet.as_secs()).unwrap_or(u32::MAX))
            } else {
                GaveUp::Limit
            };
            let console = probe.console();
            return Err(if seen_addresses.is_empty() {
                WaitError::NoAddress {
                    guest: guest.into(),
                    mac: mac.into(),
                    waited: elapsed,
                    gave_up,
                    console,
                }
            } else {
                WaitError::NoSsh {
                    guest: guest.into(),
                    addresses: seen_addresses.join(", "),
                    waited: elapsed,
                    gave_up,
                    last_error,
                    console,
                }
            });
        }
        probe.waiting(
            if addresses.is_empty() {
                "an address"
            } else {
                "SSH"
            },
            elapsed,
        );
        pause(RETRY_INTERVAL);
    }
}

/// When the guest's console last changed, read every [`CONSOLE_CHECK_INTERVAL`].
struct ConsoleWatch {
    last_read: Option<Instant>,
    last_text: Option<String>,
    last_moved: Instant,
    /// Where the boot got stuck, and the line saying so, as of the last text read.
    stuck: Option<(ConsoleEnd, String)>,
}

impl ConsoleWatch {
    fn new(started: Instant) -> ConsoleWatch {
        ConsoleWatch {
            last_read: None,
            last_text: None,
            last_moved: started,
            stuck: None,
        }
    }

    /// How long the console has not changed, reading it again when it is time to.
    fn quiet(&mut self, probe: &mut dyn GuestProbe, now: Instant) -> Duration {
        let due = self
            .last_read
            .is_none_or(|read| now - read >= CONSOLE_CHECK_INTERVAL);
        if due {
            self.last_read = Some(now);
            let text = probe.console();
            if text.is_some() && text != self.last_text {
                self.stuck = text.as_deref().and_then(stuck_in);
                self.last_text = text;
                self.last_moved = now;
            }
        }
        now - self.last_moved
    }

    /// Whether the console could be read at all.
    fn seen(&self) -> bool {
        self.last_text.is_some()
    }
}

/// Where the boot got stuck, and the line saying so, if `console` shows it somewhere it stays
/// other than a login prompt (which SSH follows).
fn stuck_in(console: &str) -> Option<(ConsoleEnd, String)> {
    console.lines().find_map(|line| {
        end_shown_by(line)
            .filter(|end| matches!(end, ConsoleEnd::KernelPanic | ConsoleEnd::RescueShell))
            .map(|end| (end, line.trim().to_string()))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_ssh_error_reaches_the_hint_without_its_escape_sequences() {
        use crate::diagnose::Diagnose;
        let error = WaitError::NoSsh {
            guest: "www.example.test".into(),
            addresses: "192.0.2.10".into(),
            waited: Duration::from_secs(3),
            gave_up: GaveUp::Limit,
            last_error: "banner \x1b]0;owned\x07".into(),
            console: None,
        };
        let hint = error.hint().unwrap();
        assert!(hint.contains(r"banner \x1b]0;owned\x07"), "{hint:?}");
    }

    #[test]
    fn a_console_tail_reaches_the_error_without_its_escape_sequences() {
        let error = WaitError::NoAddress {
            guest: "www.example.test".into(),
            mac: "52:54:00:00:00:01".into(),
            waited: Duration::from_secs(3),
            gave_up: GaveUp::Limit,
            console: Some("Booting\x1b[2J\x1b]0;owned\x07\rfake ok\r\n".into()),
        };
        let shown = error.to_string();
        assert!(!shown.contains(['\x1b', '\x07', '\r']), "{shown:?}");
        assert!(
            shown.ends_with(r"Booting\x1b[2J\x1b]0;owned\x07\x0dfake ok"),
            "{shown:?}"
        );
    }

    use super::*;
    use std::cell::Cell;

    struct ScriptedGuest {
        address_after_round: usize,
        ssh_after_round: usize,
        round: usize,
        /// The round after which the domain no longer runs.
        stops_after_round: usize,
        /// The round after which the domain stops during an SSH attempt.
        stops_during_attempt_of_round: usize,
        /// libvirt's state and reason once the domain stopped.
        stopped_state: &'static str,
        /// Whether starting it again works.
        can_start_again: bool,
        /// The notes of every start again.
        notes: Vec<String>,
        /// Whether it crashes again (two rounds after each start again).
        crashes_every_time: bool,
        /// The end of its emulator's log on the hypervisor.
        emulator_log: &'static str,
        /// The round until which its console gains a line every round (then it stands still).
        console_moves_until_round: usize,
        /// The round after which its console's last line is `stuck_line`.
        stuck_after_round: usize,
        stuck_line: &'static str,
        wrong_host_key_from_round: usize,
    }

    impl Default for ScriptedGuest {
        fn default() -> ScriptedGuest {
            ScriptedGuest {
                address_after_round: usize::MAX,
                ssh_after_round: usize::MAX,
                round: 0,
                stops_after_round: usize::MAX,
                stops_during_attempt_of_round: usize::MAX,
                stopped_state: "shut off (crashed)",
                can_start_again: false,
                notes: Vec::new(),
                crashes_every_time: false,
                emulator_log: "qemu-system-x86_64: terminating on signal 9\n",
                console_moves_until_round: 0,
                stuck_after_round: usize::MAX,
                stuck_line: "[    0.064000] Kernel panic - not syncing: IO-APIC + timer doesn't work!  Boot with apic=debug and send a report.",
                wrong_host_key_from_round: usize::MAX,
            }
        }
    }

    impl GuestProbe for ScriptedGuest {
        fn candidate_addresses(&mut self) -> Vec<String> {
            self.round += 1;
            if self.round > self.address_after_round {
                vec!["192.168.122.50".into()]
            } else {
                vec![]
            }
        }
        fn try_ssh(&mut self, _address: &str) -> Result<(), AttemptFailed> {
            if self.round > self.wrong_host_key_from_round {
                Err(AttemptFailed::HostKeyRefused)
            } else if self.round > self.ssh_after_round {
                Ok(())
            } else if self.round > self.stops_during_attempt_of_round {
                Err(AttemptFailed::GuestStopped(self.stopped_state.into()))
            } else {
                Err(AttemptFailed::NoAnswer("Connection refused".into()))
            }
        }
        fn stopped(&mut self) -> Option<String> {
            (self.round > self.stops_after_round).then(|| self.stopped_state.to_string())
        }
        fn hypervisor_log(&mut self) -> Option<String> {
            Some(self.emulator_log.into())
        }
        fn start_again(&mut self, note: &str) -> Result<(), String> {
            if !self.can_start_again {
                return Err("cannot".into());
            }
            self.notes.push(note.to_string());
            self.stops_after_round = if self.crashes_every_time {
                self.round + 2
            } else {
                usize::MAX
            };
            self.stops_during_attempt_of_round = usize::MAX;
            Ok(())
        }
        fn console(&mut self) -> Option<String> {
            let mut lines: Vec<String> = (1..=40 + self.round.min(self.console_moves_until_round))
                .map(|n| format!("boot line {n}"))
                .collect();
            if self.round > self.stuck_after_round {
                lines.push(self.stuck_line.into());
            }
            Some(lines.join("\n"))
        }
    }

    /// A clock that advances only when the wait pauses: the test takes no time.
    fn run(guest: &mut ScriptedGuest, timeout: Duration) -> Result<String, WaitError> {
        run_bounded(guest, BootWait::fixed(timeout))
    }

    fn run_bounded(guest: &mut ScriptedGuest, bounds: BootWait) -> Result<String, WaitError> {
        let start = Instant::now();
        let offset = Cell::new(Duration::ZERO);
        let clock = || start + offset.get();
        let pause = |step: Duration| offset.set(offset.get() + step);
        wait_for_ssh(
            guest,
            "www.example.test",
            "52:54:00:aa:bb:cc",
            bounds,
            &clock,
            &pause,
        )
    }

    /// What a wait of five minutes that fails says.
    fn failure_of(guest: &mut ScriptedGuest) -> String {
        run(guest, Duration::from_secs(300))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_guest_that_stops_is_reported_at_once_with_its_state_and_qemu_log() {
        let mut guest = ScriptedGuest {
            stops_after_round: 3,
            ..ScriptedGuest::default()
        };
        let error = run(&mut guest, Duration::from_secs(300)).unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("www.example.test stopped while it was waited for: libvirt says it is shut off (crashed), after 1s"),
            "{text}"
        );
        assert!(text.contains("terminating on signal 9"), "{text}");
        assert!(text.contains("boot line 40"), "{text}");
        assert_eq!(
            guest.round, 4,
            "it stopped waiting at the first round after the stop"
        );
    }

    #[test]
    fn a_host_key_that_is_not_the_guests_ends_the_wait_at_once_with_its_own_status() {
        use crate::diagnose::Diagnose;
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            ssh_after_round: 5,
            wrong_host_key_from_round: 1,
            ..ScriptedGuest::default()
        };
        let error = run(&mut guest, Duration::from_secs(300)).unwrap_err();
        assert!(
            matches!(&error, WaitError::HostKeyRefused { address, .. } if address == "192.168.122.50"),
            "{error:?}"
        );
        assert_eq!(guest.round, 2, "no round after the refused key");
        assert_eq!(
            error.exit_status(),
            crate::exit_status::ExitStatus::UntrustedGuest
        );
        assert!(error
            .hint()
            .unwrap()
            .contains("trog provision --adopt-host-key www.example.test"));
    }

    #[test]
    fn a_guest_that_stops_during_an_attempt_ends_the_wait_with_the_attempts_word() {
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            stops_during_attempt_of_round: 2,
            ..ScriptedGuest::default()
        };
        let text = failure_of(&mut guest);
        assert!(
            text.starts_with("www.example.test stopped while it was waited for: libvirt says it is shut off (crashed)"),
            "{text}"
        );
        assert!(text.contains("terminating on signal 9"), "{text}");
        assert_eq!(guest.round, 3, "no round after the attempt that saw it");
    }

    #[test]
    fn returns_the_address_once_ssh_answers() {
        let mut guest = ScriptedGuest {
            address_after_round: 3,
            ssh_after_round: 6,
            ..ScriptedGuest::default()
        };
        assert_eq!(
            run(&mut guest, Duration::from_secs(60)).unwrap(),
            "192.168.122.50"
        );
    }

    #[test]
    fn a_slow_boot_whose_console_moves_is_waited_for_past_five_minutes() {
        let mut guest = ScriptedGuest {
            // An address after 350 s, SSH after 355 s: five emulated guests booting at once.
            address_after_round: 700,
            ssh_after_round: 710,
            console_moves_until_round: usize::MAX,
            ..ScriptedGuest::default()
        };
        assert_eq!(
            run_bounded(&mut guest, DEFAULT_BOOT_WAIT).unwrap(),
            "192.168.122.50"
        );
    }

    #[test]
    fn a_console_that_stands_still_ends_the_wait_that_long_after_its_last_change() {
        let mut guest = ScriptedGuest {
            // Lines until about 20 s in, then nothing.
            console_moves_until_round: 40,
            ..ScriptedGuest::default()
        };
        let bounds = BootWait {
            quiet: Duration::from_secs(30),
            limit: Duration::from_secs(600),
        };
        let text = run_bounded(&mut guest, bounds).unwrap_err().to_string();
        assert!(
            text.starts_with("www.example.test never asked for an address: waited 50s for a DHCP lease on MAC 52:54:00:aa:bb:cc, its console unchanged for the last 30s"),
            "{text}"
        );
    }

    #[test]
    fn a_kernel_that_panicked_ends_the_wait_at_the_next_look_at_its_console() {
        // The guest keeps running (a panicked kernel spins), its console still: without looking
        // for the panic the wait would go on for the whole quiet bound.
        let mut guest = ScriptedGuest {
            console_moves_until_round: 60,
            stuck_after_round: 60,
            ..ScriptedGuest::default()
        };
        let error = run_bounded(&mut guest, DEFAULT_BOOT_WAIT).unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("www.example.test will not answer: the kernel panicked, seen 30s into the wait: [    0.064000] Kernel panic - not syncing: IO-APIC + timer doesn't work!"),
            "{text}"
        );
        assert!(text.contains("boot line 100"), "{text}");
        assert!(matches!(error, WaitError::StuckBoot { .. }));
        let hint = crate::diagnose::Diagnose::hint(&error).unwrap();
        assert!(
            hint.contains("trog debug_boot www.example.test --console"),
            "{hint}"
        );
    }

    #[test]
    fn a_guest_in_its_rescue_shell_ends_the_wait_a_login_prompt_does_not() {
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            console_moves_until_round: 10,
            stuck_after_round: 10,
            stuck_line: "Give root password for maintenance",
            ..ScriptedGuest::default()
        };
        let text = run_bounded(&mut guest, DEFAULT_BOOT_WAIT)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("www.example.test will not answer: the guest is in its rescue shell, seen 10s into the wait: Give root password for maintenance"),
            "{text}"
        );
        // A login prompt is where a booted guest waits: SSH comes after it (or the quiet bound).
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            ssh_after_round: 100,
            stuck_after_round: 10,
            stuck_line: "www login: ",
            ..ScriptedGuest::default()
        };
        assert_eq!(
            run_bounded(&mut guest, DEFAULT_BOOT_WAIT).unwrap(),
            "192.168.122.50"
        );
    }

    #[test]
    fn a_console_that_never_stops_ends_the_wait_at_the_limit() {
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            console_moves_until_round: usize::MAX,
            ..ScriptedGuest::default()
        };
        let bounds = BootWait {
            quiet: Duration::from_secs(10),
            limit: Duration::from_secs(60),
        };
        let text = run_bounded(&mut guest, bounds).unwrap_err().to_string();
        assert!(
            text.starts_with("www.example.test has 192.168.122.50 but SSH did not answer there: waited 60s, the longest a boot is waited for"),
            "{text}"
        );
    }

    #[test]
    fn a_guest_without_a_lease_is_reported_with_its_console() {
        let mut guest = ScriptedGuest::default();
        let error = run(&mut guest, Duration::from_secs(10)).unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("www.example.test never asked for an address: waited 10s for a DHCP lease on MAC 52:54:00:aa:bb:cc"), "{text}");
        assert!(
            text.contains("boot line 40")
                && text.contains("boot line 11")
                && !text.contains("boot line 10\n"),
            "{text}"
        );
    }

    #[test]
    fn an_address_without_ssh_says_so() {
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            ..ScriptedGuest::default()
        };
        let error = run(&mut guest, Duration::from_secs(10)).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "www.example.test has 192.168.122.50 but SSH did not answer there: waited 10s"
            ),
            "{error}"
        );
    }

    /// What QEMU 10.0's log on the hypervisor says when TCG aborts in a boot.
    const TCG_ABORT: &str = "char device redirected to /dev/pts/0 (label charserial0)\n\
        qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.\n\
        2026-12-01 23:37:14.421+0000: shutting down, reason=crashed\n";

    #[test]
    fn a_guest_whose_emulator_crashed_is_started_again_once_and_the_run_says_so() {
        let mut guest = ScriptedGuest {
            address_after_round: 6,
            ssh_after_round: 8,
            stops_after_round: 2,
            can_start_again: true,
            emulator_log: TCG_ABORT,
            ..ScriptedGuest::default()
        };
        assert_eq!(
            run(&mut guest, Duration::from_secs(300)).unwrap(),
            "192.168.122.50"
        );
        assert_eq!(
            guest.notes,
            [
                "www.example.test: its emulator crashed 1s into the wait, before SSH answered \
              (libvirt: shut off (crashed)): qemu-system-x86_64: system/physmem.c:2678: \
              iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.; \
              started the guest again"
            ]
        );
    }

    #[test]
    fn an_emulator_that_crashes_again_ends_the_wait_and_the_error_says_it_was_restarted() {
        let mut guest = ScriptedGuest {
            address_after_round: 1,
            stops_after_round: 3,
            can_start_again: true,
            crashes_every_time: true,
            emulator_log: TCG_ABORT,
            ..ScriptedGuest::default()
        };
        let text = failure_of(&mut guest);
        assert_eq!(guest.notes.len(), EMULATOR_RESTARTS as usize);
        assert!(
            text.starts_with("www.example.test stopped while it was waited for: libvirt says it is shut off (crashed), after 2s (it had been started again once, after its emulator crashed)"),
            "{text}"
        );
        assert!(text.contains("iotlb_to_section"), "{text}");
    }

    #[test]
    fn a_guest_that_was_shut_off_or_destroyed_is_not_started_again() {
        for state in [
            "shut off (shutdown)",
            "shut off (destroyed)",
            "undefined: the domain no longer exists",
        ] {
            let mut guest = ScriptedGuest {
                stops_after_round: 1,
                stopped_state: state,
                can_start_again: true,
                ..ScriptedGuest::default()
            };
            let text = failure_of(&mut guest);
            assert!(guest.notes.is_empty(), "{state}");
            assert!(text.contains(state), "{text}");
        }
    }

    #[test]
    fn a_crash_the_probe_cannot_restart_ends_the_wait() {
        let mut guest = ScriptedGuest {
            stops_after_round: 1,
            emulator_log: TCG_ABORT,
            ..ScriptedGuest::default()
        };
        let text = failure_of(&mut guest);
        assert!(guest.notes.is_empty());
        assert!(!text.contains("started again"), "{text}");
    }

    #[test]
    fn the_emulators_last_word_is_its_own_line_not_libvirts() {
        assert_eq!(
            emulator_last_word(Some(TCG_ABORT)),
            Some("qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.")
        );
        assert_eq!(emulator_last_word(Some("\n")), None);
        // Killed by SIGKILL: libvirt's lines and the command line, nothing of QEMU's own.
        assert_eq!(
            emulator_last_word(Some("/usr/bin/qemu-system-x86_64 \\\n-msg timestamp=on\nchar device redirected to /dev/pts/0 (label charserial0)\n2026-12-01 23:37:14.421+0000: shutting down, reason=crashed\n")),
            None
        );
        assert_eq!(
            emulator_last_word(Some("2026-12-01T23:38:54.446564Z qemu-system-x86_64: terminating on signal 15 from pid 5627 (libvirtd)\n2026-12-01 23:38:56.474+0000: shutting down, reason=shutdown\n")),
            Some("2026-12-01T23:38:54.446564Z qemu-system-x86_64: terminating on signal 15 from pid 5627 (libvirtd)")
        );
        assert_eq!(emulator_last_word(None), None);
        assert!(emulator_crashed("shut off (crashed)"));
        assert!(emulator_crashed("crashed (panicked)"));
        assert!(!emulator_crashed("shut off (destroyed)"));
    }
}
