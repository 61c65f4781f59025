//! Finishing a guest over SSH: the payload is poured into `tar` on the guest while cloud-init may
//! still be working; once cloud-init is done, the Makefile's default target runs detached (a
//! dropped connection does not stop it), its log streams back, then the recipes' tests run.
//! Their report (`ok   recipe: test` or `FAIL recipe: test` and its output, one line per test)
//! follows the log when they all pass and is the error when one fails: which checks passed is
//! what tells a person the guest is what its recipes say.

use super::cloud_init::wait_for_cloud_init;
use crate::machine::{Machine, MachineCommand, MachineError};
use crate::render::cloud_init::FIRST_BOOT_COMMANDS_PATH;
use crate::untrusted::{untrusted_str, untrusted_text};
use std::time::{Duration, Instant};

/// Where the payload and the finish's records live on the guest.
pub const GUEST_STATE_DIR: &str = "/var/lib/trog";
/// How long the Makefile's default target may run: package installs and database loads on a
/// slow mirror take minutes, and a finish still running after an hour has stopped progressing.
pub const DEFAULT_FINISH_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long the recipes' tests may take together.
pub const TESTS_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one fetch of the finish's log waits on the guest for make to end before it returns
/// what the log holds so far. The guest answers as soon as make ends, and a running make costs
/// one command every two seconds.
pub const FOLLOW_WAIT_TENTHS: u32 = 20;

/// The lock the shell around make holds while make runs (make itself and what it starts do not
/// inherit it): a fetch waits for make's end on it, asleep in the kernel. Looking for the status
/// file ten times a second instead starts two processes a look, and on an emulated guest with
/// one processor that took a third of the processor from the make it waited for (Python's start
/// measured 2.0 s alone, 2.6 s beside such a loop).
const RUNNING_LOCK: &str = "finish.running";

/// The status `flock` exits with when the wait for [`RUNNING_LOCK`] ran out.
const LOCK_WAIT_RAN_OUT: u8 = 75;

#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    #[error("cloud-init did not finish cleanly on {guest}:\n{}", untrusted_str(.status))]
    CloudInit { guest: String, status: String },
    #[error("cannot ask cloud-init on {guest} whether it is done")]
    CloudInitUnknown {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("cloud-init on {guest} showed no sign of work for {}s (its logs, dpkg's and apt's downloads all stood still); this run stopped waiting after {}s", quiet.as_secs(), waited.as_secs())]
    CloudInitQuiet {
        guest: String,
        quiet: Duration,
        waited: Duration,
    },
    #[error("cloud-init on {guest} was still working after {}s; it goes on there, but this run stops waiting", waited.as_secs())]
    CloudInitTooLong { guest: String, waited: Duration },
    #[error("the first-boot commands failed on {guest}: {}", untrusted_str(.output))]
    FirstBootCommands { guest: String, output: String },
    #[error("cannot unpack the payload on {guest}")]
    Unpack {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("cannot start the Makefile on {guest}")]
    Start {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("cannot follow the finish on {guest}")]
    Follow {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("the Makefile's default target failed on {guest} with status {}; the end of its log:\n{}", untrusted_str(.status), untrusted_str(.log_tail))]
    MakeFailed {
        guest: String,
        status: String,
        log_tail: String,
    },
    #[error("the Makefile on {guest} was still running after {}s; it goes on there, but this run stops waiting", waited.as_secs())]
    TimedOut { guest: String, waited: Duration },
    #[error("cannot remove the payload from {guest} after its finish: it holds the guest's rendered secrets")]
    PayloadLeft {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("the recipes' tests failed on {guest} (`make test` exited with {}):\n{}", status.map(|code| format!("status {code}")).unwrap_or_else(|| "a signal".into()), untrusted_str(.output))]
    TestsFailed {
        guest: String,
        status: Option<i32>,
        output: String,
    },
}

impl crate::diagnose::Diagnose for FinishError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Guest
    }

    fn hint(&self) -> Option<String> {
        if let FinishError::CloudInit { .. } | FinishError::CloudInitUnknown { .. } = self {
            return Some("an `Err:` or `Failed to fetch` line above names a package mirror the guest could not reach (_global's mirror); otherwise the guest's /var/log/cloud-init.log says why; fix the seed's input (users.yaml, packages, mirror) and provision again".into());
        }
        if let FinishError::CloudInitQuiet { .. } = self {
            return Some("the end of the guest's /var/log/cloud-init-output.log shows the step it stopped at (a fetch from a mirror that stopped answering is named there: _global's mirror); once that is fixed, provision again: the guest is finished again without rebuilding its disk".into());
        }
        if let FinishError::FirstBootCommands { .. } = self {
            return Some(format!(
                "they are the distro recipe's `first_boot.commands`; their whole output is {FIRST_BOOT_COMMANDS_PATH}.log on the guest; fix them, and the next provision makes a new root disk with the changed seed"
            ));
        }
        if let FinishError::PayloadLeft { .. } = self {
            return Some(format!(
                "the guest is finished; remove {GUEST_STATE_DIR}/payload on it (as root), or provision again, which removes it after its finish"
            ));
        }
        if let FinishError::CloudInitTooLong { .. } = self {
            return Some("cloud-init goes on in the guest (/var/log/cloud-init-output.log shows how far it is); provision again to wait for it and finish: the disk is not rebuilt".into());
        }
        Some(format!(
            "the whole log is {GUEST_STATE_DIR}/finish.log on the guest; fix the recipe or the site's Makefile and run provision again: it finishes again without rebuilding the disk"
        ))
    }
}

/// What a successful finish reports.
#[derive(Debug, Clone)]
pub struct FinishReport {
    pub make_duration: Duration,
    pub tests_output: String,
}

/// Where on a machine a payload is finished, and whether the machine's first boot is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishPlace {
    /// The directory of the payload and the finish's records ([`GUEST_STATE_DIR`] for a
    /// machine's own; [`dependent_state_dir`] for a domain that runs on another's machine).
    pub state_dir: String,
    /// A guest trog just built may still be in its first boot (cloud-init); a machine that is
    /// converged already, or one trog did not build, is not waited for.
    pub wait_for_cloud_init: bool,
}

impl FinishPlace {
    /// A guest trog builds: its own state directory, after its first boot.
    pub fn guest() -> FinishPlace {
        FinishPlace {
            state_dir: GUEST_STATE_DIR.to_string(),
            wait_for_cloud_init: true,
        }
    }
}

/// Where a domain that runs on another domain's machine keeps its payload and records there:
/// a directory of its own under the machine's, so that two sites' payloads never overwrite each
/// other or the machine's own. A domain name holds nothing the shell reads specially.
pub fn dependent_state_dir(domain: &crate::model::names::DomainName) -> String {
    format!("{GUEST_STATE_DIR}/dependents/{domain}")
}

/// The file a finish on a machine trog does not define (a dependent's, an existing host's)
/// records its payload's digest in once the Makefile and the tests passed: what `status` and the
/// next `provision` compare, where a guest of trog's has its domain's tag.
pub const CONVERGED_DIGEST_FILE: &str = "converged.digest";

/// The shell that unpacks the payload into a directory of its own beside the current one; the
/// start replaces the current one with it. Staging needs nothing of cloud-init, so it happens
/// while cloud-init may still be working.
fn unpack_script(dir: &str) -> String {
    format!(
        "set -e; cd {dir} 2>/dev/null || {{ mkdir -p {dir}; cd {dir}; }}; \
         rm -rf payload.new; mkdir -m 0700 payload.new; tar -xzf - -C payload.new"
    )
}

/// Puts the staged payload in place of the previous one, then starts `make` detached from the
/// SSH session (its own session, no terminal), recording its status when it ends. A make this
/// run stopped waiting for (see [`abandon_script`]) removes the payload itself when it ends.
fn start_script(dir: &str, payload_digest: &str) -> String {
    // The lock is taken here, before this command returns and the first fetch looks, and kept by
    // the detached shell (it inherits the descriptor) until make's status is written. Held by a
    // make an earlier run abandoned, or without `flock`, the fetches look for the status instead.
    format!(
        "set -e; cd {dir}; rm -rf payload; mv payload.new payload; rm -f finish.log finish.status {ABANDONED} {CONVERGED_DIGEST_FILE}; \
         cd payload; echo {payload_digest} > {dir}/finish.digest; \
         exec 9> {dir}/{RUNNING_LOCK}; flock -n 9 2>/dev/null || true; \
         setsid -f sh -c 'make > {dir}/finish.log 2>&1 9>&-; echo $? > {dir}/finish.status.new; \
         mv {dir}/finish.status.new {dir}/finish.status; \
         if [ -f {dir}/{ABANDONED} ]; then rm -rf {dir}/payload; fi' < /dev/null > /dev/null 2>&1"
    )
}

/// The mark a run leaves when it stops waiting for a make that goes on: that make removes the
/// payload when it ends.
const ABANDONED: &str = "finish.abandoned";

/// Removes the payload, and one staged and never started: it holds the guest's rendered
/// `secret:` values, and nothing needs it once make and the tests are done (the next finish
/// sends the whole payload again; what it leaves is finish.digest, finish.status and
/// finish.log).
fn remove_payload_script(dir: &str) -> String {
    format!("cd {dir} && rm -rf payload payload.new")
}

/// For a make still running when this run stops waiting: marks it abandoned, and removes the
/// payload at once if make ended meanwhile. Each side writes before it looks (make its status,
/// this the mark), so whichever looks last sees the other's and the payload goes either way.
fn abandon_script(dir: &str) -> String {
    format!(
        "cd {dir} && touch {ABANDONED} && rm -rf payload.new && \
         if [ -f finish.status ]; then rm -rf payload; fi"
    )
}

/// One fetch of the finish: waits up to [`FOLLOW_WAIT_TENTHS`] for make's status, then prints
/// the status (an empty line while make runs) and the log from byte `log_offset` on. The status
/// is read before the log, so a status comes with the whole of the log. The wait is on
/// [`RUNNING_LOCK`]; only when the lock was free though make has not ended (see
/// [`start_script`]) does it look for the status every tenth of a second.
fn follow_script(dir: &str, log_offset: usize) -> String {
    format!(
        "flock -E {LOCK_WAIT_RAN_OUT} -s -w {}.{} {dir}/{RUNNING_LOCK} true 2>/dev/null; \
         if [ $? -eq {LOCK_WAIT_RAN_OUT} ]; then status=; else \
         status=$(cat {dir}/finish.status 2>/dev/null); n=0; \
         while [ -z \"$status\" ] && [ $n -lt {FOLLOW_WAIT_TENTHS} ]; do \
         sleep 0.1; n=$((n + 1)); status=$(cat {dir}/finish.status 2>/dev/null); done; fi; \
         printf '%s\\n' \"$status\"; tail -c +{} {dir}/finish.log 2>/dev/null; true",
        FOLLOW_WAIT_TENTHS / 10,
        FOLLOW_WAIT_TENTHS % 10,
        log_offset + 1
    )
}

/// Records that the payload of `payload_digest` is converged in `dir`: its Makefile and tests
/// passed.
pub fn record_converged_script(dir: &str, payload_digest: &str) -> String {
    format!(
        "set -e; echo {payload_digest} > {dir}/{CONVERGED_DIGEST_FILE}.new; mv {dir}/{CONVERGED_DIGEST_FILE}.new {dir}/{CONVERGED_DIGEST_FILE}"
    )
}

/// Prints the digest of the payload converged in `dir`, or nothing.
pub fn converged_digest_script(dir: &str) -> String {
    format!("cat {dir}/{CONVERGED_DIGEST_FILE} 2>/dev/null; true")
}

/// Splits a fetch's output into make's status (`None` while it runs) and the new log bytes.
fn split_follow_output(stdout: &[u8]) -> (Option<String>, &[u8]) {
    let (first, log) = match stdout.iter().position(|&byte| byte == b'\n') {
        Some(end) => (&stdout[..end], &stdout[end + 1..]),
        None => (stdout, &stdout[stdout.len()..]),
    };
    let status = String::from_utf8_lossy(first).trim().to_string();
    ((!status.is_empty()).then_some(status), log)
}

/// Sends the payload, runs its Makefile and the tests in the guest's own state directory, after
/// its first boot. `on_log` receives the Makefile's output as it arrives, then the tests' report.
/// Whatever the outcome, the payload (with the guest's rendered secrets) does not stay on the
/// guest: it is removed once make and the tests are done, or, for a make still running when the
/// wait ends, by that make when it ends.
pub fn finish(
    guest: &dyn Machine,
    payload: &[u8],
    payload_digest: &str,
    timeout: Duration,
    on_log: &mut dyn FnMut(&str),
) -> Result<FinishReport, FinishError> {
    finish_at(
        guest,
        &FinishPlace::guest(),
        payload,
        payload_digest,
        timeout,
        on_log,
    )
}

/// [`finish`] in `place`: a state directory of its own, and the first boot waited for or not.
pub fn finish_at(
    guest: &dyn Machine,
    place: &FinishPlace,
    payload: &[u8],
    payload_digest: &str,
    timeout: Duration,
    on_log: &mut dyn FnMut(&str),
) -> Result<FinishReport, FinishError> {
    let name = guest.describe();
    let dir = place.state_dir.as_str();
    let unpack = MachineCommand::shell(&unpack_script(dir))
        .as_root(true)
        .stdin(payload.to_vec());
    let unpacked = guest.run(&unpack).and_then(|output| output.success());
    let finished = match unpacked {
        Ok(_) => finish_unpacked(guest, place, payload_digest, timeout, on_log),
        // Part of it may be there: it is removed like a whole one.
        Err(source) => Err(FinishError::Unpack {
            guest: name.clone(),
            source,
        }),
    };
    let removal = match &finished {
        Err(FinishError::TimedOut { .. }) => abandon_script(dir),
        _ => remove_payload_script(dir),
    };
    let removed = guest
        .run(&MachineCommand::shell(&removal).as_root(true))
        .and_then(|output| output.success());
    match (finished, removed) {
        (Ok(_), Err(source)) => Err(FinishError::PayloadLeft {
            guest: name,
            source,
        }),
        // The finish's own failure is what the user must act on; a machine that could not be
        // reached to remove the payload most likely failed the finish for the same reason.
        (finished, _) => finished,
    }
}

/// [`finish_at`] once the payload is staged: waits for the first boot when `place` says so, runs
/// make, then the tests.
fn finish_unpacked(
    guest: &dyn Machine,
    place: &FinishPlace,
    payload_digest: &str,
    timeout: Duration,
    on_log: &mut dyn FnMut(&str),
) -> Result<FinishReport, FinishError> {
    let name = guest.describe();
    let dir = place.state_dir.as_str();
    if place.wait_for_cloud_init {
        wait_for_cloud_init(guest)?;
    }
    let start = MachineCommand::shell(&start_script(dir, payload_digest)).as_root(true);
    guest
        .run(&start)
        .and_then(|output| output.success())
        .map_err(|source| FinishError::Start {
            guest: name.clone(),
            source,
        })?;

    let started = Instant::now();
    let mut log_offset: usize = 0;
    let mut log_tail = String::new();
    let status = loop {
        let poll = MachineCommand::shell(&follow_script(dir, log_offset)).as_root(true);
        let output = guest
            .run(&poll)
            .and_then(|output| output.success())
            .map_err(|source| FinishError::Follow {
                guest: name.clone(),
                source,
            })?;
        let (status, log) = split_follow_output(&output.stdout);
        // A status means make has ended and its log is whole: take every byte. Otherwise a
        // character cut by the fetch is read whole by the next one.
        let complete = if status.is_some() {
            log.len()
        } else {
            without_cut_character(log)
        };
        if complete > 0 {
            log_offset += complete;
            let text = untrusted_text(&log[..complete]);
            on_log(&text);
            keep_log_tail(&mut log_tail, &text);
        }
        if let Some(status) = status {
            break status;
        }
        if started.elapsed() >= timeout {
            return Err(FinishError::TimedOut {
                guest: name,
                waited: started.elapsed(),
            });
        }
    };
    let make_duration = started.elapsed();
    if status != "0" {
        let lines: Vec<&str> = log_tail.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        return Err(FinishError::MakeFailed {
            guest: name,
            status,
            log_tail: tail,
        });
    }

    let tests = MachineCommand::shell(&format!("cd {dir}/payload && make test 2>&1"))
        .as_root(true)
        .timeout(TESTS_TIMEOUT);
    let output = guest.run(&tests).map_err(|source| FinishError::Follow {
        guest: name.clone(),
        source,
    })?;
    let tests_output = untrusted_text(&output.stdout);
    if output.status != Some(0) {
        // The error carries the whole report: every test, the failed ones with their output.
        return Err(FinishError::TestsFailed {
            guest: name,
            status: output.status,
            output: tests_output,
        });
    }
    on_log(&tests_output);
    Ok(FinishReport {
        make_duration,
        tests_output,
    })
}

/// How many bytes of `bytes` to take now: all, but for a UTF-8 character cut at the end (its rest
/// is still to come). Bytes that are not UTF-8 at all are taken, and shown as `\xNN`.
fn without_cut_character(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(error) if error.error_len().is_none() => error.valid_up_to(),
        _ => bytes.len(),
    }
}

/// Most of the log kept for an error: past this, only the last [`LOG_TAIL_KEPT`] bytes are kept.
const LOG_TAIL_LIMIT: usize = 8192;
/// What is kept when the tail is cut: plenty for the last twenty lines an error shows.
const LOG_TAIL_KEPT: usize = 4096;

/// Appends `text` to the kept tail of the log, cutting it back when it grows past the limit; the
/// cut is moved forward to the next character boundary, since a log is any UTF-8 at all.
fn keep_log_tail(tail: &mut String, text: &str) {
    tail.push_str(text);
    if tail.len() > LOG_TAIL_LIMIT {
        let mut cut = tail.len() - LOG_TAIL_KEPT;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
}

#[cfg(test)]
#[path = "finish_fake_tests.rs"]
mod fake_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::local::LocalMachine;

    #[test]
    fn guest_text_in_a_finish_error_is_shown_not_acted_on() {
        let error = FinishError::MakeFailed {
            guest: "www.example.test".into(),
            status: "2".into(),
            log_tail: "make: *** \x1b]2;title\x07 Error 1\r".into(),
        };
        let shown = error.to_string();
        assert!(
            shown.ends_with(r"make: *** \x1b]2;title\x07 Error 1\x0d"),
            "{shown:?}"
        );
        let error = FinishError::CloudInit {
            guest: "www.example.test".into(),
            status: "\x1b[2Jerror".into(),
        };
        assert!(!error.to_string().contains('\x1b'));
    }

    #[test]
    fn a_long_log_is_cut_at_a_character_boundary() {
        let mut tail = String::new();
        // 'é' is two bytes: over the limit, the cut at len - 4096 falls inside one.
        keep_log_tail(&mut tail, &"é".repeat(4000));
        keep_log_tail(&mut tail, &format!("x{}", "é".repeat(200)));
        assert!(tail.len() <= LOG_TAIL_KEPT);
        assert!(tail.ends_with('é'));
        let mut ascii = String::new();
        keep_log_tail(&mut ascii, &"a".repeat(LOG_TAIL_LIMIT + 1));
        assert_eq!(ascii.len(), LOG_TAIL_KEPT);
    }

    #[test]
    fn a_character_cut_by_a_fetch_waits_for_the_next() {
        let text = "ok é".as_bytes();
        assert_eq!(without_cut_character(text), text.len());
        assert_eq!(without_cut_character(&text[..text.len() - 1]), 3);
        assert_eq!(without_cut_character(b"bad \xff here"), 10);
    }

    /// The scripts run for real against a scratch directory standing in for the guest's.
    fn on_scratch(script: impl Fn(&str) -> String, dir: &std::path::Path) -> String {
        script(dir.to_str().unwrap())
    }

    #[test]
    fn a_fetch_gives_the_status_once_make_ended_and_the_log_from_where_the_last_stopped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("finish.log"), "first\nsecond\n").unwrap();
        let fetch = |offset| {
            let script = on_scratch(|dir| follow_script(dir, offset), dir.path());
            LocalMachine
                .run(&MachineCommand::shell(&script))
                .unwrap()
                .stdout
        };
        let running = fetch(6);
        assert_eq!(split_follow_output(&running), (None, &b"second\n"[..]));
        std::fs::write(dir.path().join("finish.status"), "2\n").unwrap();
        let ended = fetch(0);
        assert_eq!(
            split_follow_output(&ended),
            (Some("2".to_string()), &b"first\nsecond\n"[..])
        );
    }

    /// A gzipped tar holding one Makefile whose default target is `recipe`.
    fn payload_of(recipe: &str) -> Vec<u8> {
        let mut archive = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        let makefile = format!("all:\n\t{recipe}\n");
        let mut header = tar::Header::new_gnu();
        header.set_size(makefile.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        archive
            .append_data(&mut header, "Makefile", makefile.as_bytes())
            .unwrap();
        archive.into_inner().unwrap().finish().unwrap()
    }

    fn run_here(script: impl Fn(&str) -> String, dir: &std::path::Path, stdin: Option<Vec<u8>>) {
        let mut command = MachineCommand::shell(&on_scratch(script, dir));
        if let Some(bytes) = stdin {
            command = command.stdin(bytes);
        }
        LocalMachine.run(&command).unwrap().success().unwrap();
    }

    fn wait_for(path: &std::path::Path, present: bool) {
        for _ in 0..250 {
            if path.exists() == present {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{} exists: {}", path.display(), !present);
    }

    #[test]
    fn the_removal_leaves_only_the_finishs_records() {
        let dir = tempfile::tempdir().unwrap();
        run_here(
            unpack_script,
            dir.path(),
            Some(payload_of("echo secret-value > made.txt")),
        );
        run_here(|dir| start_script(dir, "abc123"), dir.path(), None);
        wait_for(&dir.path().join("finish.status"), true);
        // A payload staged by a run that stopped before its start holds secrets too.
        std::fs::create_dir(dir.path().join("payload.new")).unwrap();
        run_here(remove_payload_script, dir.path(), None);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "finish.digest",
                "finish.log",
                "finish.running",
                "finish.status"
            ]
        );
    }

    #[test]
    fn a_make_abandoned_while_it_runs_removes_the_payload_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        run_here(
            unpack_script,
            dir.path(),
            Some(payload_of(&format!(
                "while [ ! -f {} ]; do sleep 0.05; done",
                release.display()
            ))),
        );
        run_here(|dir| start_script(dir, "abc123"), dir.path(), None);
        run_here(abandon_script, dir.path(), None);
        // Still running: its payload stays under it.
        assert!(dir.path().join("payload/Makefile").exists());
        std::fs::write(&release, "").unwrap();
        wait_for(&dir.path().join("payload"), false);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("finish.status"))
                .unwrap()
                .trim(),
            "0"
        );

        // A make that ended before the mark was made: the mark's own run removes the payload.
        let dir = tempfile::tempdir().unwrap();
        run_here(unpack_script, dir.path(), Some(payload_of("true")));
        run_here(|dir| start_script(dir, "abc123"), dir.path(), None);
        wait_for(&dir.path().join("finish.status"), true);
        assert!(dir.path().join("payload").exists());
        run_here(abandon_script, dir.path(), None);
        assert!(!dir.path().join("payload").exists());
    }

    /// While make runs the lock is held, and a fetch waits on it and says make has not ended;
    /// once make ends the lock is free, also with a process make started still running (make
    /// and what it starts do not hold it), and the fetch gives the status.
    #[test]
    fn a_fetch_waits_on_the_lock_of_a_running_make_and_not_on_what_make_started() {
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        let recipe = format!(
            "@sleep 60 > /dev/null 2>&1 & while [ ! -e {} ]; do sleep 0.05; done; echo made",
            go.display()
        );
        run_here(unpack_script, dir.path(), Some(payload_of(&recipe)));
        run_here(|dir| start_script(dir, "abc123"), dir.path(), None);
        let lock_free = || {
            std::process::Command::new("flock")
                .args(["-n", "-s"])
                .arg(dir.path().join(RUNNING_LOCK))
                .arg("true")
                .status()
                .unwrap()
                .success()
        };
        assert!(!lock_free(), "the start took the lock before it returned");
        let fetch = || {
            let script = on_scratch(|dir| follow_script(dir, 0), dir.path());
            LocalMachine
                .run(&MachineCommand::shell(&script))
                .unwrap()
                .stdout
        };
        assert_eq!(split_follow_output(&fetch()).0, None);
        std::fs::write(&go, "").unwrap();
        let ended = fetch();
        assert_eq!(
            split_follow_output(&ended),
            (Some("0".to_string()), &b"made\n"[..]),
            "{}",
            String::from_utf8_lossy(&ended)
        );
        assert!(lock_free());
    }

    #[test]
    fn unpack_stages_the_payload_and_start_replaces_it_and_records_the_status() {
        let dir = tempfile::tempdir().unwrap();
        let mut archive = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        let makefile = b"all:\n\techo made > made.txt\n";
        let mut header = tar::Header::new_gnu();
        header.set_size(makefile.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        archive
            .append_data(&mut header, "Makefile", &makefile[..])
            .unwrap();
        let payload = archive.into_inner().unwrap().finish().unwrap();

        std::fs::create_dir(dir.path().join("payload")).unwrap();
        std::fs::write(dir.path().join("payload/from_the_last_finish"), "").unwrap();
        let local = LocalMachine;
        local
            .run(&MachineCommand::shell(&on_scratch(unpack_script, dir.path())).stdin(payload))
            .unwrap()
            .success()
            .unwrap();
        // Staged beside the previous payload, which stays until the start replaces it.
        assert!(dir.path().join("payload.new/Makefile").exists());
        assert!(dir.path().join("payload/from_the_last_finish").exists());
        local
            .run(&MachineCommand::shell(&on_scratch(
                |dir| start_script(dir, "abc123"),
                dir.path(),
            )))
            .unwrap()
            .success()
            .unwrap();
        let status_file = dir.path().join("finish.status");
        for _ in 0..250 {
            if status_file.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(std::fs::read_to_string(&status_file).unwrap().trim(), "0");
        assert!(!dir.path().join("payload.new").exists());
        assert!(!dir.path().join("payload/from_the_last_finish").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("payload/made.txt")).unwrap(),
            "made\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("finish.digest"))
                .unwrap()
                .trim(),
            "abc123"
        );
        // Converged only once recorded (after the tests passed), and read back as recorded.
        let converged = |local: &LocalMachine| {
            local
                .run(&MachineCommand::shell(&on_scratch(
                    converged_digest_script,
                    dir.path(),
                )))
                .unwrap()
                .stdout
        };
        assert_eq!(converged(&local), b"");
        local
            .run(&MachineCommand::shell(&on_scratch(
                |dir| record_converged_script(dir, "abc123"),
                dir.path(),
            )))
            .unwrap()
            .success()
            .unwrap();
        assert_eq!(converged(&local), b"abc123\n");
    }
}
