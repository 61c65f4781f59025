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

use super::{holder::Holder, FoundDir, LockError, Subject};
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp};
use crate::machine::{HeldCommand, MachineError, NextLine};
use std::time::{Duration, Instant};

/// Where trog's locks live on a hypervisor: in `/run/lock`, which lives in memory, so a reboot
/// (which ends every holder) leaves no file behind. The directory is root's, of
/// [`HYPERVISOR_LOCK_GROUP`], mode 2770 ([`HypervisorOp::MakeLockDir`] makes it): only trog's
/// logins can put anything in it, so no other user can plant a link where a lock file goes, or
/// hold or rewrite a lock.
pub const HYPERVISOR_LOCK_DIR: &str = "/run/lock/trog";

/// The group of trog's logins on a hypervisor, which may lock there: libvirt's, whose members may
/// use its system socket (`unix_sock_group` on Debian, Ubuntu and Fedora). Every login trog uses
/// there is root or in it, and a member can already do anything libvirt can.
pub const HYPERVISOR_LOCK_GROUP: &str = "libvirt";

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
        LockPlace {
            dir: HYPERVISOR_LOCK_DIR,
            group: HYPERVISOR_LOCK_GROUP,
        },
        machine,
        hypervisor,
        subject,
        verb,
        wait,
        on_wait,
    )
}

/// Where the locks are on a hypervisor: their directory and the group of the logins that lock
/// there.
#[derive(Debug, Clone, Copy)]
struct LockPlace<'a> {
    dir: &'a str,
    group: &'a str,
}

/// How a start of the lock's process ended, when it did not fail.
enum Start {
    Held(HeldCommand),
    /// The directory does not exist yet.
    NoDirectory,
}

/// [`acquire`], in `place`. A missing directory is made as root once, and the lock tried again.
fn acquire_in(
    place: LockPlace,
    machine: &HypervisorMachine,
    hypervisor: &str,
    subject: &Subject,
    verb: &str,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HypervisorLock, LockError> {
    let started = Instant::now();
    let held = match start_holding(place, machine, hypervisor, subject, verb, wait, on_wait)? {
        Start::Held(held) => held,
        Start::NoDirectory => {
            make_lock_dir(place, machine, hypervisor)?;
            let left = wait.saturating_sub(started.elapsed());
            match start_holding(place, machine, hypervisor, subject, verb, left, on_wait)? {
                Start::Held(held) => held,
                Start::NoDirectory => {
                    return Err(LockError::NoDirOnHypervisor {
                        hypervisor: hypervisor.to_string(),
                        dir: place.dir.to_string(),
                    })
                }
            }
        }
    };
    Ok(HypervisorLock { _held: held })
}

/// Makes the lock directory on the hypervisor, as root.
fn make_lock_dir(
    place: LockPlace,
    machine: &HypervisorMachine,
    hypervisor: &str,
) -> Result<(), LockError> {
    machine
        .run(&HypervisorOp::MakeLockDir {
            dir: place.dir.to_string(),
            group: place.group.to_string(),
        })
        .and_then(|output| output.success())
        .map(|_| ())
        .map_err(|source| LockError::MakeDirOnHypervisor {
            hypervisor: hypervisor.to_string(),
            dir: place.dir.to_string(),
            group: place.group.to_string(),
            source: Box::new(source),
        })
}

/// Starts the lock's process and waits until it holds the lock, says the directory is missing,
/// or fails.
fn start_holding(
    place: LockPlace,
    machine: &HypervisorMachine,
    hypervisor: &str,
    subject: &Subject,
    verb: &str,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<Start, LockError> {
    let file = subject.hypervisor_file_name();
    let path = format!("{}/{file}", place.dir);
    let failed = |source: MachineError| LockError::OnHypervisor {
        subject: subject.to_string(),
        hypervisor: hypervisor.to_string(),
        source: Box::new(source),
    };
    let mut held = machine
        .keep_running(&HypervisorOp::HoldLock {
            dir: place.dir.to_string(),
            file,
            host: super::host_name(),
            pid: std::process::id(),
            verb: verb.to_string(),
            group: place.group.to_string(),
        })
        .map_err(failed)?;
    let waited = wait_until_held(
        &mut held, machine, hypervisor, subject, &path, wait, on_wait,
    );
    match waited {
        Ok(Said::Held) => Ok(Start::Held(held)),
        Ok(Said::NoDirectory) => Ok(Start::NoDirectory),
        Ok(Said::Unsafe(record)) => Err(unsafe_place(place, hypervisor, &record)),
        Err(error) => {
            // Still waiting for the lock, it does not read its input: it is ended now rather
            // than when it next says who holds the lock.
            held.kill();
            Err(error)
        }
    }
}

/// What the lock's process said last, when it stopped waiting.
enum Said {
    Held,
    NoDirectory,
    /// `unsafe-directory …`: the rest of its line.
    Unsafe(String),
}

/// The refusal of a lock directory (or its parent) that `record` describes: `which=lock|parent
/// owner=… group=… mode=… type=…`, the type last (it may have a space).
fn unsafe_place(place: LockPlace, hypervisor: &str, record: &str) -> LockError {
    let value = |key: &str| {
        let start = record.find(&format!("{key}="))? + key.len() + 1;
        let rest = &record[start..];
        Some(match key {
            "type" => rest.trim().to_string(),
            _ => rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string(),
        })
    };
    let parent = value("which").as_deref() == Some("parent");
    let path = match parent {
        true => match place.dir.rsplit_once('/') {
            Some(("", _)) => "/".to_string(),
            Some((parent, _)) => parent.to_string(),
            None => ".".to_string(),
        },
        false => place.dir.to_string(),
    };
    LockError::UnsafeDirOnHypervisor {
        hypervisor: hypervisor.to_string(),
        found: Box::new(FoundDir {
            path,
            parent,
            owner: value("owner").unwrap_or_default(),
            group: value("group").unwrap_or_default(),
            mode: value("mode").unwrap_or_default(),
            kind: value("type").unwrap_or_default(),
        }),
        lock_group: place.group.to_string(),
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
) -> Result<Said, LockError> {
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
            NextLine::Line(line) if line == "held" => return Ok(Said::Held),
            NextLine::Line(line) if line == "no-directory" => return Ok(Said::NoDirectory),
            NextLine::Line(line) if line.starts_with("unsafe-directory ") => {
                return Ok(Said::Unsafe(line["unsafe-directory ".len()..].to_string()))
            }
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
#[path = "hypervisor_tests.rs"]
mod tests;
