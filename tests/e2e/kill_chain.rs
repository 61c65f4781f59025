//! A fresh guest's provisioning killed with SIGKILL at every step of its plan, one guest's life
//! carrying every kill: the first run is killed when its first step starts, its rerun when the
//! next step starts, and so on. Each kill point is reached honestly: the test reads the run's
//! `--json` events as they come and kills the moment the run says the step started, or, in the
//! middle of the base image's write, the moment it has seen the partial file in the pool's
//! directory grow.
//!
//! Kill points covered here, in order (the action names of the `plan` event):
//!  1. `define_pool`: define storage pool
//!  2. `start_pool`: start storage pool
//!  3. `upload_base_image`: the write of the base image into the pool, as it starts
//!  4. the middle of that write: its partial file (`<base>.part-<host>`) seen growing, not whole
//!  5. `remove_partial_base_image`: the removal of what the killed write left
//!  6. `define_domain`: define the domain
//!  7. `create_data_volume`: create data volume
//!  8. `create_root_volume`: create root disk
//!  9. `upload_seed`: the write of the cloud-init seed
//! 10. `set_autostart`: start the guest with the hypervisor
//! 11. `start_domain`: start the guest
//!
//! The e2e test then kills the run at the two remaining points, `wait_for_ssh` and `finish`, and
//! its last rerun converges: one domain, exactly the guest's volumes and the base image in the
//! pool (no partial file), the guest finished, and libvirtd still answering.
//!
//! The base image and the seed are written into the pool by the hypervisor's own system, not
//! through a libvirt upload stream (a client killed with a stream open can deadlock libvirtd):
//! a kill there leaves only a partial file.
//!
//! Every rerun runs with `--wait 0`: a lock still held by the killed run (the guest's, the
//! base image upload's) would end it at once with exit status 10. That each rerun goes on proves
//! the kernel dropped the dead run's lock and the rerun took it over at once.

use super::support::*;
use super::{collect, Installation};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a run is given to reach the step it is killed in (the first run verifies the image;
/// a step after the guest's boot is many minutes away on a loaded emulated host). The wait ends
/// when the run ends.
const REACH_TIMEOUT: Duration = Duration::from_secs(900);

/// A kill point of the chain: a step of the plan as it starts, or the middle of the base
/// image's write.
pub enum KillPoint {
    StepStarted(&'static str),
    MidBaseImageWrite,
}

/// The kill points of this chain, in the order a fresh guest's runs reach them.
pub const BEFORE_THE_WAIT: [KillPoint; 11] = [
    KillPoint::StepStarted("define_pool"),
    KillPoint::StepStarted("start_pool"),
    KillPoint::StepStarted("upload_base_image"),
    KillPoint::MidBaseImageWrite,
    KillPoint::StepStarted("remove_partial_base_image"),
    KillPoint::StepStarted("define_domain"),
    KillPoint::StepStarted("create_data_volume"),
    KillPoint::StepStarted("create_root_volume"),
    KillPoint::StepStarted("upload_seed"),
    KillPoint::StepStarted("set_autostart"),
    KillPoint::StepStarted("start_domain"),
];

/// Kills a run at `point`.
pub fn provision_killed(installation: &Installation, point: &KillPoint) {
    match point {
        KillPoint::StepStarted(action) => provision_killed_at(installation, action),
        KillPoint::MidBaseImageWrite => provision_killed_mid_write(installation),
    }
}

/// Runs `provision --json --wait 0` and SIGKILLs it while it writes the base image into the
/// pool: once the partial file in the pool's directory has been seen to grow and is not whole.
/// The partial file stays behind, and the whole image is not there.
fn provision_killed_mid_write(installation: &Installation) {
    let image = test_image();
    let whole = std::fs::metadata(&image).unwrap().len();
    let base = trog::plan::resource_names::base_image_volume(&sha256_file(&image));
    let mut child = Reaped(spawn_verb(
        "provision",
        installation.dir.path(),
        &["--json", "--wait", "0", installation.domain.as_str()],
    ));
    let pid = child.0.id() as i32;
    let (events, out_reader) = collect(child.0.stdout.take().unwrap());
    let (stderr, err_reader) = collect(child.0.stderr.take().unwrap());
    let started = Instant::now();
    let mut sizes_seen: Vec<u64> = Vec::new();
    let partial = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!(
                "provision ended ({status}) before its base image write was seen growing (sizes seen: {sizes_seen:?}):\n{}\n{}",
                events.lock().unwrap(),
                stderr.lock().unwrap()
            );
        }
        assert!(
            started.elapsed() < REACH_TIMEOUT,
            "the base image write was not seen growing within {REACH_TIMEOUT:?} (sizes seen: {sizes_seen:?}):\n{}",
            events.lock().unwrap()
        );
        assert!(
            !installation.pool_path.join(&base).exists(),
            "the base image write ended before it was seen growing (sizes seen: {sizes_seen:?})"
        );
        if let Some((path, size)) = partial_file(&installation.pool_path, &base) {
            if size > 0 && size < whole && sizes_seen.last().is_some_and(|&last| last < size) {
                sigkill(pid);
                KILLED.lock().unwrap().push(pid as u32);
                sizes_seen.push(size);
                break path;
            }
            if size < whole {
                sizes_seen.push(size);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let status = child.0.wait().unwrap();
    let _ = (out_reader.join(), err_reader.join());
    let events = events.lock().unwrap().clone();
    record_printed("events of a provision killed mid-write", &events);
    record_printed(
        "stderr of a provision killed mid-write",
        &stderr.lock().unwrap(),
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "{events}"
    );
    assert!(
        events.contains("\"upload_base_image\""),
        "killed in a run that did not plan the write:\n{events}"
    );
    assert!(
        partial.exists(),
        "the killed write leaves its partial file (sizes seen: {sizes_seen:?})"
    );
    assert!(
        !installation.pool_path.join(&base).exists(),
        "a killed write never puts the image under its final name"
    );
    eprintln!(
        "killed in the middle of the base image write: {} grew through {sizes_seen:?} of {whole} bytes",
        partial.display()
    );
}

/// The partial file of the base image `base` in the pool directory, with its size.
fn partial_file(pool_dir: &Path, base: &str) -> Option<(PathBuf, u64)> {
    std::fs::read_dir(pool_dir)
        .ok()?
        .filter_map(Result::ok)
        .find(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{base}.part-"))
        })
        .and_then(|entry| Some((entry.path(), entry.metadata().ok()?.len())))
}

/// Runs `provision --json --wait 0` and SIGKILLs it once the step doing `action` has started.
/// `--wait 0`: a lock the previous, killed run still held would end this run at once with exit
/// status 10. A hypervisor-wide lock (the network filters') held for a moment by a live run of
/// another installation on this libvirtd is not that: the run is tried again, a bounded number
/// of times.
pub fn provision_killed_at(installation: &Installation, action: &str) {
    const TRIES: u32 = 60;
    for _ in 1..TRIES {
        match try_provision_killed_at(installation, action) {
            Ok(()) => return,
            Err(Busy { holder }) => {
                KILLED.lock().unwrap().iter().for_each(|killed| {
                    assert_ne!(
                        *killed, holder,
                        "a rerun found a lock still held by the run killed before it"
                    )
                });
                eprintln!("[kill chain] a live run (process {holder}) held a hypervisor-wide lock: trying again");
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }
    try_provision_killed_at(installation, action)
        .unwrap_or_else(|busy| panic!("process {} held a lock {TRIES} times", busy.holder));
}

/// The process ids of the runs this chain killed.
static KILLED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A run that ended at once because another live run held a hypervisor-wide lock.
struct Busy {
    holder: u32,
}

/// The holder of the lock a `busy` error event names, when the run ended with one.
fn busy_holder(events: &str) -> Option<u32> {
    events.lines().find_map(|line| {
        let event: serde_json::Value = serde_json::from_str(line).ok()?;
        (event["event"] == "error" && event["exit_status"]["name"] == "busy").then_some(())?;
        let message = event["message"].as_str()?;
        let after = &message[message.find("(process ")? + "(process ".len()..];
        after.split(' ').next()?.parse().ok()
    })
}

fn try_provision_killed_at(installation: &Installation, action: &str) -> Result<(), Busy> {
    let mut child = Reaped(spawn_verb(
        "provision",
        installation.dir.path(),
        &["--json", "--wait", "0", installation.domain.as_str()],
    ));
    let pid = child.0.id() as i32;
    let stdout = child.0.stdout.take().unwrap();
    let stderr_pipe = child.0.stderr.take().unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let stderr_reader = {
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr_pipe).read_to_string(&mut text);
            stderr.lock().unwrap().push_str(&text);
        })
    };
    let started = Instant::now();
    let mut events = String::new();
    let mut planned: Vec<String> = Vec::new();
    let mut killed = false;
    let mut lines = BufReader::new(stdout).lines();
    // Read events until the step starts; the kill follows at once, from this thread.
    for line in lines.by_ref().map_while(Result::ok) {
        events.push_str(&line);
        events.push('\n');
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("not a JSON event ({error}): {line}"));
        match event["event"].as_str() {
            Some("plan") => {
                planned = event["plan"]["actions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|action| action["action"].as_str().unwrap_or_default().to_string())
                    .collect();
                assert!(
                    planned.iter().any(|planned| planned == action),
                    "the run's plan has no `{action}` step (the previous kill landed after it was done):\n{events}"
                );
            }
            Some("step_started") => {
                let number = event["step"].as_u64().unwrap_or(0) as usize;
                if planned.get(number.wrapping_sub(1)).map(String::as_str) == Some(action) {
                    sigkill(pid);
                    KILLED.lock().unwrap().push(pid as u32);
                    killed = true;
                    break;
                }
            }
            _ => {}
        }
        assert!(
            started.elapsed() < REACH_TIMEOUT,
            "provision did not reach `{action}` within {REACH_TIMEOUT:?}:\n{events}"
        );
    }
    for line in lines.map_while(Result::ok) {
        events.push_str(&line);
        events.push('\n');
    }
    let status = child.0.wait().unwrap();
    let _ = stderr_reader.join();
    let stderr = stderr.lock().unwrap().clone();
    record_printed(
        &format!("events of a provision killed at {action}"),
        &events,
    );
    record_printed(
        &format!("stderr of a provision killed at {action}"),
        &stderr,
    );
    if !killed {
        if let Some(holder) = busy_holder(&events) {
            return Err(Busy { holder });
        }
    }
    assert!(
        killed,
        "provision ended ({status}) before reaching `{action}`:\n{events}\n{stderr}"
    );
    assert!(
        !events.contains("waiting up to") && !stderr.contains("waiting up to"),
        "the run waited for a lock a killed run held:\n{events}\n{stderr}"
    );
    Ok(())
}

/// A run that does not outlive a failed assertion: it is killed and reaped when dropped.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigkill(pid: i32) {
    // SAFETY: a plain signal to the child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
}
