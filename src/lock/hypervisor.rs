//! Locks on a hypervisor, for what runs from different installations share there: a guest, and
//! the upload of a base image into a pool. A local lock ([`super::Locks::acquire`]) only keeps
//! apart the runs of one installation; two workstations, or a cron job and a web application
//! with installations of their own, meet only on the hypervisor.
//!
//! The lock is an exclusive `flock` on a file in [`HYPERVISOR_LOCK_DIR`] there, taken and held by
//! [`HypervisorOp::HoldLock`]: a process on the hypervisor, started over the same login as
//! every other operation, that holds the lock for as long as this run keeps its standard input
//! open. When the run ends, or dies in any way, the input closes and the lock goes: a dead
//! run's lock is taken over by construction. While holding it, the file records the holder
//! (host, process id, verb, since when), which a waiting run names.

use super::{holder::Holder, LockError, Subject};
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp};
use crate::machine::{HeldCommand, MachineError, NextLine};
use std::time::{Duration, Instant};

/// Where trog's locks live on a hypervisor: `/run/lock` is world-writable with the sticky bit on
/// Debian and every FHS system, and lives in memory, so a reboot (which ends every holder)
/// leaves no file behind.
pub const HYPERVISOR_LOCK_DIR: &str = "/run/lock/trog";

/// How long the hypervisor may stay silent before the lock's process counts as stuck: it answers
/// at once once started, then says every second who holds the lock, so only a login that hangs
/// or a dead link is silent this long.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A lock held on a hypervisor, until dropped (or until this process dies).
#[derive(Debug)]
pub struct HypervisorLock {
    // Dropping it closes the process's input: it lets go and ends.
    _held: HeldCommand,
}

/// `wait` in seconds, rounded up: what is left of the run's `--wait` after its own lock took a
/// moment is still told as the `--wait` it was.
fn whole_seconds(wait: Duration) -> u64 {
    wait.as_millis().div_ceil(1000) as u64
}

/// Who a `busy` line says holds the lock.
fn holder_of(record: &str) -> String {
    let lines = record.split_whitespace().collect::<Vec<_>>().join("\n");
    match Holder::from_record(&lines) {
        Some(holder) => holder.to_string(),
        None => "a process that left no record of itself".to_string(),
    }
}

/// Takes `subject`'s lock on `machine` (the hypervisor named `hypervisor` in messages), waiting
/// up to `wait` for another run to let go; `on_wait` is told once, when a wait begins, what is
/// waited for and who holds it. `verb` is recorded as this run's.
pub fn acquire(
    machine: &HypervisorMachine,
    hypervisor: &str,
    subject: &Subject,
    verb: &str,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorLock, LockError> {
    acquire_in(
        HYPERVISOR_LOCK_DIR,
        machine,
        hypervisor,
        subject,
        verb,
        wait,
        on_wait,
    )
}

/// [`acquire`], with the lock directory `dir`.
fn acquire_in(
    dir: &str,
    machine: &HypervisorMachine,
    hypervisor: &str,
    subject: &Subject,
    verb: &str,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorLock, LockError> {
    let file = subject.hypervisor_file_name();
    let path = format!("{dir}/{file}");
    let failed = |source: MachineError| LockError::OnHypervisor {
        subject: subject.to_string(),
        hypervisor: hypervisor.to_string(),
        source: Box::new(source),
    };
    let mut held = machine
        .keep_running(&HypervisorOp::HoldLock {
            dir: dir.to_string(),
            file,
            host: super::host_name(),
            pid: std::process::id(),
            verb: verb.to_string(),
        })
        .map_err(failed)?;
    match wait_until_held(
        &mut held, machine, hypervisor, subject, &path, wait, on_wait,
    ) {
        Ok(()) => Ok(HypervisorLock { _held: held }),
        Err(error) => {
            // Still waiting for the lock, it does not read its input: it is ended now rather
            // than when it next says who holds the lock.
            held.kill();
            Err(error)
        }
    }
}

/// Reads what the lock's process says until it holds the lock; see [`acquire`].
fn wait_until_held(
    held: &mut HeldCommand,
    machine: &HypervisorMachine,
    hypervisor: &str,
    subject: &Subject,
    path: &str,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<(), LockError> {
    let failed = |source: MachineError| LockError::OnHypervisor {
        subject: subject.to_string(),
        hypervisor: hypervisor.to_string(),
        source: Box::new(source),
    };
    let started = Instant::now();
    let mut last_heard = Instant::now();
    let mut holder: Option<String> = None;
    loop {
        let within = match &holder {
            Some(_) => wait.saturating_sub(started.elapsed()).min(ANSWER_TIMEOUT),
            None => ANSWER_TIMEOUT,
        };
        match held.next_line(within).map_err(failed)? {
            NextLine::Line(line) if line == "held" => return Ok(()),
            NextLine::Line(line) => {
                last_heard = Instant::now();
                if let Some(record) = line.strip_prefix("busy") {
                    let first = holder.is_none();
                    holder = Some(holder_of(record));
                    if first && started.elapsed() < wait {
                        on_wait(&format!(
                            "waiting up to {}s for {subject} on the hypervisor {hypervisor} \
                             (its lock {path} there): {} holds it",
                            whole_seconds(wait),
                            holder.as_deref().unwrap_or_default()
                        ));
                    }
                }
            }
            NextLine::Silent => {}
        }
        if let Some(holder) = &holder {
            if started.elapsed() >= wait {
                return Err(LockError::BusyOnHypervisor {
                    subject: subject.to_string(),
                    hypervisor: hypervisor.to_string(),
                    holder: holder.clone(),
                    waited_seconds: whole_seconds(wait),
                    path: path.to_string(),
                });
            }
        }
        if last_heard.elapsed() >= ANSWER_TIMEOUT {
            return Err(failed(MachineError::TimedOut {
                host: machine.describe(),
                command: format!("flock {path}"),
                timeout: ANSWER_TIMEOUT,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn take(
        dir: &str,
        verb: &str,
        wait: Duration,
        said: &mut Vec<String>,
    ) -> Result<HypervisorLock, LockError> {
        acquire_in(
            dir,
            &HypervisorMachine::local().into_dyn(),
            "hv1",
            &Subject::Guest("www.example.test".into()),
            verb,
            wait,
            &mut |text| said.push(text.to_string()),
        )
    }

    /// The real operation on this machine: one holder at a time, a waiting run told who holds
    /// it and for how long it waits, the holder's end letting the next one in.
    #[test]
    fn a_lock_held_on_the_hypervisor_keeps_the_next_run_waiting_until_it_is_let_go() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("trog");
        let dir = dir.to_str().unwrap();
        let mut said = Vec::new();
        let first = take(dir, "provision", Duration::from_secs(5), &mut said).unwrap();
        assert!(
            said.is_empty(),
            "a free lock is taken without a wait: {said:?}"
        );
        let mode = std::fs::metadata(dir).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o7777,
            0o1777,
            "as /run/lock: every login locks there"
        );
        let record = std::fs::read_to_string(format!("{dir}/guest-www.example.test.lock")).unwrap();
        let holder = Holder::from_record(&record).unwrap();
        assert_eq!(
            (holder.pid, holder.verb.as_str(), holder.host),
            (std::process::id(), "provision", super::super::host_name())
        );

        let at_once = take(dir, "destroy", Duration::ZERO, &mut said).unwrap_err();
        assert!(
            matches!(at_once, LockError::BusyOnHypervisor { .. }),
            "{at_once:?}"
        );
        assert!(said.is_empty(), "no wait announced for --wait 0: {said:?}");
        let busy = take(dir, "destroy", Duration::from_secs(1), &mut said).unwrap_err();
        let LockError::BusyOnHypervisor {
            holder,
            path,
            waited_seconds,
            ..
        } = &busy
        else {
            panic!("{busy:?}")
        };
        assert!(
            holder.starts_with(&format!("`trog provision` (process {}", std::process::id())),
            "{holder}"
        );
        assert_eq!(*waited_seconds, 1);
        assert_eq!(path, &format!("{dir}/guest-www.example.test.lock"));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "waiting up to 1s for the guest www.example.test on the hypervisor hv1"
            ),
            "{said:?}"
        );
        assert_eq!(
            crate::diagnose::Diagnose::exit_status(&busy),
            crate::exit_status::ExitStatus::Busy
        );

        let waiter = {
            let dir = dir.to_string();
            std::thread::spawn(move || {
                take(&dir, "snapshot", Duration::from_secs(20), &mut Vec::new()).map(|_| ())
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
        waiter.join().unwrap().unwrap();
        assert_eq!(
            std::fs::read_to_string(format!("{dir}/guest-www.example.test.lock")).unwrap(),
            "",
            "a lock let go names nobody"
        );
    }

    #[test]
    fn a_busy_line_names_the_holder_or_says_it_left_no_record() {
        assert_eq!(
            holder_of(" host=ws-b.example.test pid=4242 verb=provision since=0 "),
            "`trog provision` (process 4242 on ws-b.example.test, since 1970-01-01 00:00:00 UTC)"
        );
        assert_eq!(holder_of(" "), "a process that left no record of itself");
    }

    #[test]
    fn file_names_on_the_hypervisor_leave_out_what_differs_between_installations() {
        let upload = Subject::BaseImageUpload {
            hypervisor: "hv1".into(),
            pool: "trog".into(),
            volume: "trog-base-0123.qcow2".into(),
        };
        // Two installations may name one hypervisor differently; its pool and volume are its own.
        assert_eq!(
            upload.hypervisor_file_name(),
            "image-trog-trog-base-0123.qcow2.lock"
        );
        assert_eq!(
            Subject::Guest("www.example.test".into()).hypervisor_file_name(),
            "guest-www.example.test.lock"
        );
        let filters = Subject::NetworkFilters {
            hypervisor: "hv1".into(),
        };
        assert_eq!(filters.hypervisor_file_name(), "network-filters.lock");
        assert_eq!(filters.file_name(), "network-filters-hv1.lock");
    }
}
