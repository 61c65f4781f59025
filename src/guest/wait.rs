//! Waiting for a new guest: first for an address, then for SSH to answer there. Every wait is
//! bounded, named, and on timeout says what it waited for, for how long, and what the guest's
//! console said last. A guest whose domain stops is not waited for: the wait asks before every
//! attempt, and an attempt in progress (a login may take a minute on a loaded host) is itself
//! stopped within half a second of the domain's end.

use std::time::{Duration, Instant};

/// How long a new guest gets to ask for an address and answer SSH. Measured boots take 25–40 s
/// under software emulation; five minutes leaves room for a slow first boot (cloud-init
/// installing packages) without leaving a broken guest unnoticed for long.
pub const DEFAULT_SSH_WAIT: Duration = Duration::from_secs(300);
/// How often the address and SSH are tried again while waiting. A round costs two libvirt calls
/// and, once there is an address, one refused TCP connection: cheap enough to try often, and
/// the guest is reached within half a second of its SSH answering instead of up to two.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);
/// Lines of the serial console shown when a guest never answered.
pub const CONSOLE_TAIL_LINES: usize = 30;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("{guest} stopped while it was waited for: libvirt says it is {state}, after {}s{}{}", waited.as_secs(), hypervisor_log_tail(.hypervisor_log), console_tail(.console))]
    Stopped {
        guest: String,
        state: String,
        waited: Duration,
        hypervisor_log: Option<String>,
        console: Option<String>,
    },
    #[error("{guest} never asked for an address: waited {}s for a DHCP lease on MAC {mac}{}", waited.as_secs(), console_tail(.console))]
    NoAddress {
        guest: String,
        mac: String,
        waited: Duration,
        console: Option<String>,
    },
    #[error("{guest} has {addresses} but SSH did not answer there: waited {}s{}", waited.as_secs(), console_tail(.console))]
    NoSsh {
        guest: String,
        addresses: String,
        waited: Duration,
        last_error: String,
        console: Option<String>,
    },
}

fn hypervisor_log_tail(log: &Option<String>) -> String {
    match log {
        Some(text) if !text.trim().is_empty() => {
            format!(
                "\nlast lines of its QEMU log on the hypervisor:\n{}",
                text.trim_end()
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
                lines[start..].join("\n")
            )
        }
        _ => String::new(),
    }
}

impl crate::diagnose::Diagnose for WaitError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Guest
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            WaitError::Stopped { guest, .. } => format!("the lines above say why QEMU ended; `trog debug_boot {guest} --console` starts it again and shows the whole boot"),
            WaitError::NoAddress { guest, .. } => format!("the guest did not boot far enough to use its network: `trog debug_boot {guest} --console` shows the whole boot"),
            WaitError::NoSsh { guest, last_error, .. } => format!("the last attempt said: {last_error}\ncloud-init may have failed to install the admin key; it reports on the console: `trog debug_boot {guest} --console`"),
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
}

/// What a wait needs from the world, so the logic can be tested without a guest.
pub trait GuestProbe {
    /// The addresses the guest may have now (from DHCP leases, or the declared static one).
    fn candidate_addresses(&mut self) -> Vec<String>;
    /// Tries SSH at `address`, giving up as soon as the guest's domain stops.
    fn try_ssh(&mut self, address: &str) -> Result<(), AttemptFailed>;
    /// The guest's serial console so far, for the timeout message.
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
}

/// Waits until SSH answers at one of the guest's addresses and returns that address.
pub fn wait_for_ssh(
    probe: &mut dyn GuestProbe,
    guest: &str,
    mac: &str,
    timeout: Duration,
    clock: &dyn Fn() -> Instant,
    pause: &dyn Fn(Duration),
) -> Result<String, WaitError> {
    let started = clock();
    let mut last_error = String::from("no attempt finished");
    let mut seen_addresses: Vec<String> = Vec::new();
    let stopped = |probe: &mut dyn GuestProbe, state: String| WaitError::Stopped {
        guest: guest.into(),
        state,
        waited: clock() - started,
        hypervisor_log: probe.hypervisor_log(),
        console: probe.console(),
    };
    loop {
        let addresses = probe.candidate_addresses();
        for address in &addresses {
            if !seen_addresses.contains(address) {
                seen_addresses.push(address.clone());
            }
            // Before every attempt: an attempt at a guest that is gone is wasted time.
            if let Some(state) = probe.stopped() {
                return Err(stopped(probe, state));
            }
            match probe.try_ssh(address) {
                Ok(()) => return Ok(address.clone()),
                Err(AttemptFailed::GuestStopped(state)) => return Err(stopped(probe, state)),
                Err(AttemptFailed::NoAnswer(error)) => last_error = error,
            }
        }
        let elapsed = clock() - started;
        if let Some(state) = probe.stopped() {
            return Err(stopped(probe, state));
        }
        if elapsed >= timeout {
            let console = probe.console();
            return Err(if seen_addresses.is_empty() {
                WaitError::NoAddress {
                    guest: guest.into(),
                    mac: mac.into(),
                    waited: elapsed,
                    console,
                }
            } else {
                WaitError::NoSsh {
                    guest: guest.into(),
                    addresses: seen_addresses.join(", "),
                    waited: elapsed,
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

#[cfg(test)]
mod tests {
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
            if self.round > self.ssh_after_round {
                Ok(())
            } else if self.round > self.stops_during_attempt_of_round {
                Err(AttemptFailed::GuestStopped("shut off (crashed)".into()))
            } else {
                Err(AttemptFailed::NoAnswer("Connection refused".into()))
            }
        }
        fn stopped(&mut self) -> Option<String> {
            (self.round > self.stops_after_round).then(|| "shut off (crashed)".to_string())
        }
        fn hypervisor_log(&mut self) -> Option<String> {
            Some("qemu-system-x86_64: terminating on signal 9\n".into())
        }
        fn console(&mut self) -> Option<String> {
            Some(
                (1..=40)
                    .map(|n| format!("boot line {n}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
    }

    /// A clock that advances only when the wait pauses: the test takes no time.
    fn run(guest: &mut ScriptedGuest, timeout: Duration) -> Result<String, WaitError> {
        let start = Instant::now();
        let offset = Cell::new(Duration::ZERO);
        let clock = || start + offset.get();
        let pause = |step: Duration| offset.set(offset.get() + step);
        wait_for_ssh(
            guest,
            "www.example.test",
            "52:54:00:aa:bb:cc",
            timeout,
            &clock,
            &pause,
        )
    }

    #[test]
    fn a_guest_that_stops_is_reported_at_once_with_its_state_and_qemu_log() {
        let mut guest = ScriptedGuest {
            address_after_round: usize::MAX,
            ssh_after_round: usize::MAX,
            round: 0,
            stops_after_round: 3,
            stops_during_attempt_of_round: usize::MAX,
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
    fn a_guest_that_stops_during_an_attempt_ends_the_wait_with_the_attempts_word() {
        let mut guest = ScriptedGuest {
            address_after_round: 0,
            ssh_after_round: usize::MAX,
            round: 0,
            stops_after_round: usize::MAX,
            stops_during_attempt_of_round: 2,
        };
        let text = run(&mut guest, Duration::from_secs(300))
            .unwrap_err()
            .to_string();
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
            round: 0,
            stops_after_round: usize::MAX,
            stops_during_attempt_of_round: usize::MAX,
        };
        assert_eq!(
            run(&mut guest, Duration::from_secs(60)).unwrap(),
            "192.168.122.50"
        );
    }

    #[test]
    fn a_guest_without_a_lease_is_reported_with_its_console() {
        let mut guest = ScriptedGuest {
            address_after_round: usize::MAX,
            ssh_after_round: usize::MAX,
            round: 0,
            stops_after_round: usize::MAX,
            stops_during_attempt_of_round: usize::MAX,
        };
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
            ssh_after_round: usize::MAX,
            round: 0,
            stops_after_round: usize::MAX,
            stops_during_attempt_of_round: usize::MAX,
        };
        let error = run(&mut guest, Duration::from_secs(10)).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "www.example.test has 192.168.122.50 but SSH did not answer there: waited 10s"
            ),
            "{error}"
        );
    }
}
