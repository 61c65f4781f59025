//! Asking every hypervisor at once, each within a bounded time, through a [`HypervisorObserver`]
//! (whichever backend answers). A hypervisor that fails or does not answer in time is reported
//! with why, and the others still count; a thread that has not answered by the deadline is
//! abandoned, never waited for.

use crate::config::hypervisors_conf::BuildFleet;
use crate::hypervisor::observer::HypervisorObserver;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::{DomainName, HypervisorName};
use crate::placement::observed::{FleetObservation, Observation, ObservedHypervisor};
use serde::Serialize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a hypervisor has to answer. A healthy one answers over SSH in a second or two; 20
/// seconds allows a slow link or a busy libvirtd, while a cron job or the web application's
/// button still gets an answer well within a minute when one hypervisor is down.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// Asks `question` of every hypervisor at once, one thread each, and returns the answers in
/// the order given; `Err` holds why a hypervisor gave none (an error, or silence past `timeout`).
pub fn ask_fleet<T, E, Q>(
    hypervisors: &[HypervisorConfig],
    timeout: Duration,
    question: Q,
) -> Vec<Result<T, String>>
where
    T: Send + 'static,
    E: std::fmt::Display,
    Q: Fn(&HypervisorConfig) -> Result<T, E> + Send + Sync + 'static,
{
    let deadline = Instant::now() + timeout;
    let question = Arc::new(question);
    let (sender, receiver) = mpsc::channel();
    for (index, hypervisor) in hypervisors.iter().enumerate() {
        let (thread_sender, question, hypervisor) =
            (sender.clone(), Arc::clone(&question), hypervisor.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("ask-{}", hypervisor.name))
            .spawn(move || {
                let answer = catch_unwind(AssertUnwindSafe(|| {
                    question(&hypervisor).map_err(|error| error.to_string())
                }))
                .unwrap_or_else(|_| {
                    Err(format!(
                        "{}: cannot observe the hypervisor: the observer panicked",
                        hypervisor.libvirt_uri.uri
                    ))
                });
                // The receiver is gone when this answer came too late; nobody needs it then.
                let _ = thread_sender.send((index, answer));
            });
        if let Err(error) = spawned {
            let _ = sender.send((
                index,
                Err(format!("could not start a thread to ask it: {error}")),
            ));
        }
    }
    drop(sender);
    let mut answers: Vec<Option<Result<T, String>>> =
        (0..hypervisors.len()).map(|_| None).collect();
    let mut missing = hypervisors.len();
    while missing > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok((index, answer)) => {
                answers[index] = Some(answer);
                missing -= 1;
            }
            Err(_) => break, // the deadline passed, or every thread has finished
        }
    }
    answers
        .into_iter()
        .map(|answer| {
            answer
                .unwrap_or_else(|| Err(format!("did not answer within {}s", timeout.as_secs_f64())))
        })
        .collect()
}

/// What every hypervisor of the fleet has and has promised, asked all at once.
pub fn observe_fleet(
    fleet: &BuildFleet,
    observer: Arc<dyn HypervisorObserver>,
    timeout: Duration,
) -> FleetObservation {
    let hypervisors = &fleet.fleet.hypervisors;
    let answers = ask_fleet(hypervisors, timeout, move |hypervisor| {
        observer.capacity(hypervisor)
    });
    FleetObservation {
        source: fleet.source.clone(),
        hypervisors: hypervisors
            .iter()
            .zip(answers)
            .map(|(config, answer)| ObservedHypervisor {
                config: config.clone(),
                observation: match answer {
                    Ok(capacity) => Observation::Answered(capacity),
                    Err(reason) => Observation::Unreachable { reason },
                },
            })
            .collect(),
    }
}

/// What placement sees of the fleet: every hypervisor asked at once or, when `--hypervisor` names
/// one, that one only — naming a hypervisor skips the search, so a slow or unreachable host
/// elsewhere does not delay the run. A name the fleet does not have asks nobody; placement then
/// refuses it, listing the names there are.
pub fn observe_for_placement(
    fleet: &BuildFleet,
    named: Option<&HypervisorName>,
    observer: Arc<dyn HypervisorObserver>,
    timeout: Duration,
) -> FleetObservation {
    let Some(name) = named else {
        return observe_fleet(fleet, observer, timeout);
    };
    let Some(hypervisor) = fleet.fleet.hypervisors.iter().find(|h| &h.name == name) else {
        return FleetObservation {
            source: fleet.source.clone(),
            hypervisors: fleet
                .fleet
                .hypervisors
                .iter()
                .map(|config| ObservedHypervisor {
                    config: config.clone(),
                    observation: Observation::Unreachable {
                        reason: "not asked: --hypervisor names another".into(),
                    },
                })
                .collect(),
        };
    };
    observe_fleet(&fleet.narrowed_to(hypervisor), observer, timeout)
}

/// Which hypervisors have a guest, and which could not say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestWhereabouts {
    pub holders: Vec<HypervisorName>,
    pub unreachable: Vec<(HypervisorName, String)>,
}

/// Asks every hypervisor at once whether it has `guest`.
pub fn find_guest(
    fleet: &BuildFleet,
    guest: &DomainName,
    observer: Arc<dyn HypervisorObserver>,
    timeout: Duration,
) -> GuestWhereabouts {
    let hypervisors = &fleet.fleet.hypervisors;
    let wanted = guest.clone();
    let answers = ask_fleet(hypervisors, timeout, move |hypervisor| {
        observer.holds_guest(hypervisor, &wanted)
    });
    let mut whereabouts = GuestWhereabouts {
        holders: Vec::new(),
        unreachable: Vec::new(),
    };
    for (config, answer) in hypervisors.iter().zip(answers) {
        match answer {
            Ok(true) => whereabouts.holders.push(config.name.clone()),
            Ok(false) => {}
            Err(reason) => whereabouts.unreachable.push((config.name.clone(), reason)),
        }
    }
    whereabouts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hypervisor::LibvirtUri;

    fn hypervisor(name: &str) -> HypervisorConfig {
        HypervisorConfig::with_defaults(
            HypervisorName::parse(name).unwrap(),
            LibvirtUri::parse("test:///default").unwrap(),
        )
    }

    #[test]
    fn a_silent_hypervisor_is_abandoned_at_the_deadline_and_the_others_count() {
        let fleet = [
            hypervisor("quick"),
            hypervisor("silent"),
            hypervisor("failing"),
        ];
        let (release, held) = mpsc::channel::<()>();
        let held = std::sync::Mutex::new(held);
        let started = Instant::now();
        let answers = ask_fleet(&fleet, Duration::from_millis(300), move |hv| {
            match hv.name.as_str() {
                "quick" => Ok(7),
                // Blocks until the test ends: stands for a hypervisor that never answers.
                "silent" => {
                    let _ = held.lock().unwrap().recv();
                    Ok(0)
                }
                _ => Err("cannot connect to test:///x: refused"),
            }
        });
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(answers[0], Ok(7));
        assert_eq!(answers[1], Err("did not answer within 0.3s".to_string()));
        assert_eq!(
            answers[2],
            Err("cannot connect to test:///x: refused".to_string())
        );
        drop(release);
    }

    #[test]
    fn a_panicking_observer_is_reported_not_waited_for() {
        let answers: Vec<Result<u8, String>> = ask_fleet(
            &[hypervisor("hv1")],
            Duration::from_secs(30),
            |_| -> Result<u8, String> { panic!("boom") },
        );
        assert_eq!(
            answers[0],
            Err(
                "test:///default: cannot observe the hypervisor: the observer panicked".to_string()
            )
        );
    }
}
