//! A fresh guest's provisioning killed with SIGKILL at every step of its plan, one guest's life
//! carrying every kill: the first run is killed when its first step starts, its rerun when the
//! next step starts, and so on. Each kill point is reached honestly: the test reads the run's
//! `--json` events as they come and kills the moment the run says the step started.
//!
//! Kill points covered here, in order (the action names of the `plan` event):
//!  1. `define_pool`: define storage pool
//!  2. `start_pool`: start storage pool
//!  3. `define_domain`: define the domain
//!  4. `create_data_volume`: create data volume
//!  5. `create_root_volume`: create root disk
//!  6. `set_autostart`: start the guest with the hypervisor
//!  7. `start_domain`: start the guest
//!
//! The e2e test then kills the run at the two remaining points, `wait_for_ssh` and `finish`, and
//! its last rerun converges: one domain, exactly the guest's volumes and the base image in the
//! pool (no partial volume), the guest finished.
//!
//! Not kill points: `upload_base_image` and `upload_seed`, the two steps that send a volume
//! through a libvirt upload stream (the step opens it as it starts). A client killed while its
//! upload stream is open leaves libvirt 11.3's daemon with the pool's upload job never ended (the
//! pool can no longer be stopped), or with its event loop deadlocked (every later call hangs): a
//! test that did it would take this machine's libvirtd down with it. The runs here upload both
//! whole before they are killed at a later step.
//!
//! Every rerun runs with `--wait 0`: a lock still held by the killed run (the guest's) would end
//! it at once with exit status 10. That each rerun goes on proves the kernel dropped the dead
//! run's lock and the rerun took it over at once.

use super::support::*;
use super::Installation;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a run is given to reach the step it is killed in (the first run verifies the image).
const REACH_TIMEOUT: Duration = Duration::from_secs(300);

/// The kill points of this chain, in the order a fresh guest's runs reach them: a run is killed
/// when the step of its plan doing this action has started.
pub const BEFORE_THE_WAIT: [&str; 7] = [
    "define_pool",
    "start_pool",
    "define_domain",
    "create_data_volume",
    "create_root_volume",
    "set_autostart",
    "start_domain",
];

/// Runs `provision --json --wait 0` and SIGKILLs it once the step doing `action` has started. `--wait 0`: a lock the previous,
/// killed run still held would end this run at once with exit status 10.
pub fn provision_killed_at(installation: &Installation, action: &str) {
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
    assert!(
        killed,
        "provision ended ({status}) before reaching `{action}`:\n{events}\n{stderr}"
    );
    assert!(
        !events.contains("waiting up to") && !stderr.contains("waiting up to"),
        "the run waited for a lock a killed run held:\n{events}\n{stderr}"
    );
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
