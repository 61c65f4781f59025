//! Waiting for cloud-init to finish every stage on a guest, so the Makefile never races its
//! package installs (the apt lock) or the SSH restart it makes when it changes sshd's
//! configuration.
//!
//! A guest's first boot installs the seed's packages: seconds from a warm mirror, the better part
//! of an hour from a slow one on an emulated guest. No single bound fits both, so the wait goes in
//! rounds and watches cloud-init work: it gives up when nothing has moved for
//! [`CLOUD_INIT_QUIET_LIMIT`] (cloud-init's logs, dpkg's and apt's, and the downloads apt has
//! under way all stood still), or after [`CLOUD_INIT_LIMIT`] in all, and it ends at once when
//! cloud-init has ended, cleanly or not.

use super::finish::FinishError;
use crate::machine::{CommandOutput, Machine, MachineCommand, MachineError};
use crate::model::direct_boot::CLOUD_INIT_FINAL_UNIT;
use crate::render::cloud_init::FIRST_BOOT_COMMANDS_PATH;
use std::time::{Duration, Instant};

/// How long cloud-init may go without any sign of work (no log line, no dpkg step, no byte
/// downloaded) before the wait gives up: a package's configure step under emulation runs a few
/// minutes without a line; ten of silence is a guest that stopped.
pub const CLOUD_INIT_QUIET_LIMIT: Duration = Duration::from_secs(600);
/// The most the wait takes whatever cloud-init does: as long as the Makefile may run.
pub const CLOUD_INIT_LIMIT: Duration = super::finish::DEFAULT_FINISH_TIMEOUT;
/// How long one round waits on the guest before it reports how far cloud-init has come. The
/// guest answers as soon as cloud-init ends, so the round's length costs no time.
const ROUND_S: u32 = 20;
/// How much longer than a round its command may take: the SSH session, counting what cloud-init
/// and apt wrote, and, when the shell cannot read the answer itself, `cloud-init status` (a
/// Python start: seconds under emulation, tens of them on a loaded host). A round that takes
/// longer still counts as one that saw no progress, not as an error.
const ROUND_SLACK: Duration = Duration::from_secs(100);
/// How often the guest looks again for cloud-init's result while it boots, in seconds, and so
/// how many looks a second of the round holds. The round is counted in looks, not read from the
/// clock: `date` in the loop's condition started two more processes a look, and beside such a
/// loop an emulated guest's processor did a tenth less of the boot's work (Python's start: 2.0 s
/// alone, 2.2 s beside it, 2.05 s beside the looks with their `sleep` alone).
const POLL_S: &str = "0.2";
const LOOKS_PER_S: u32 = 5;
/// Every how many looks the guest asks systemd whether it is still booting: each question starts
/// `systemctl`, which costs more than a look on an emulated guest.
const BOOT_CHECK_EVERY: u32 = 10;

/// Where cloud-init writes what its modules print: apt's own lines among them.
const OUTPUT_LOG: &str = "/var/log/cloud-init-output.log";
/// What cloud-init writes when its last stage has ended, with the errors of every stage.
const RESULT: &str = "/run/cloud-init/result.json";
/// What cloud-init writes at each stage's start and end, with that stage's errors.
const STATUS: &str = "/run/cloud-init/status.json";
/// The kernel's command line: a first boot that left cloud-init's final stage to trog says so
/// there (`model::direct_boot`).
const KERNEL_CMDLINE: &str = "/proc/cmdline";
/// Where the first-boot commands' script goes once started, their output and their status: the
/// record of a first boot's commands, kept like the finish's own.
fn commands_started() -> String {
    format!("{FIRST_BOOT_COMMANDS_PATH}.started")
}
fn commands_log() -> String {
    format!("{FIRST_BOOT_COMMANDS_PATH}.log")
}
fn commands_status() -> String {
    format!("{FIRST_BOOT_COMMANDS_PATH}.status")
}
/// Made once the deferred final stage is started, so that it is started once a boot (a
/// directory: `mkdir` makes it or fails, in one step; /run is root's alone and gone at the next
/// boot).
const FINAL_STAGE_STARTED: &str = "/run/trog-cloud-final-started";
/// The transient unit that runs a deferred final stage.
const FINAL_STAGE_UNIT: &str = "trog-cloud-final";
/// Files that grow while cloud-init works: its own logs, and dpkg's and apt's while the seed's
/// packages install.
const PROGRESS_FILES: [&str; 4] = [
    OUTPUT_LOG,
    "/var/log/cloud-init.log",
    "/var/log/dpkg.log",
    "/var/log/apt/term.log",
];
/// Where apt keeps the packages it is downloading: a long download grows here and nowhere else.
const APT_PARTIAL: &str = "/var/cache/apt/archives/partial";

/// The round's exit status when cloud-init is still working (EX_TEMPFAIL); its output is then
/// the progress count.
const STILL_WORKING: i32 = 75;
/// The round's exit status when the first-boot commands failed; its output is then their status
/// and the end of their output.
const COMMANDS_FAILED: i32 = 3;

/// One round on the guest. Exits 0 when the first boot is over cleanly (or cloud-init is not
/// installed), 1 when cloud-init ended in error (printing its long status, then apt's errors
/// from the first boot: a mirror the guest cannot reach is named there, `Err:` / `Failed to
/// fetch` with its URL, and the guest's sources list no other archive to fall back to),
/// [`COMMANDS_FAILED`] when the first-boot commands did, and [`STILL_WORKING`] with the count
/// of bytes in [`PROGRESS_FILES`], the commands' output and [`APT_PARTIAL`] when the round ran
/// out first.
///
/// `cloud-init status --wait` is a Python program: starting it takes seconds on a guest without
/// hardware acceleration (4.6 s measured on an idle one), taken from the boot it waits for. So
/// the shell watches for the result file while systemd is still booting, and accepts it when it
/// lists no errors; only an answer the shell cannot read (errors, no result once the boot has
/// ended, no systemd) asks cloud-init itself, for at most the rest of the round. `status --wait`
/// exits 2 for "done, with recoverable errors" (warnings, deprecated keys): done is done.
///
/// A first boot that masked cloud-init's final stage (`model::direct_boot`) has no result file
/// before that stage runs: its cloud-init is over when the local stage, the only one it ran,
/// has finished without errors (`status.json`), and `cloud-init status` would wait for the
/// final stage forever.
///
/// Once cloud-init is over, the seed's first-boot commands run (a seed of
/// [`SeedRevision::CommandsAfterCloudInit`](crate::render::cloud_init::SeedRevision)), once: the
/// script is renamed before it starts, and its status, written when it ends, is read by every
/// round after, so a failure stays one as cloud-init's own errors do. They run detached from
/// the session, so a round that ends first only counts their output as progress. Then a
/// deferred final stage is started, at the processor's and the disks' idle priority: it holds
/// nothing the finish needs, and runs in the time the finish leaves, so that cloud-init's record
/// of the boot (`result.json`, `cloud-init status`) is complete soon after, as on any boot.
fn round_script() -> String {
    round_script_of(ROUND_S)
}

fn round_script_of(round_s: u32) -> String {
    let files = PROGRESS_FILES.join(" ");
    let looks = round_s * LOOKS_PER_S;
    let pending = FIRST_BOOT_COMMANDS_PATH;
    let (started, log, status) = (commands_started(), commands_log(), commands_status());
    format!(
        "command -v cloud-init >/dev/null || exit 0; \
         progress() {{ {{ stat -c %s {files} {log} 2>/dev/null; find {APT_PARTIAL} -type f -printf '%s\\n' 2>/dev/null; }} | awk '{{ n += $1 }} END {{ print n + 0 }}'; }}; \
         booting() {{ command -v systemctl >/dev/null && case $(systemctl is-system-running 2>/dev/null) in initializing|starting) true;; *) false;; esac; }}; \
         deferred() {{ grep -qs 'systemd.mask={CLOUD_INIT_FINAL_UNIT}' {KERNEL_CMDLINE}; }}; \
         local_ended() {{ awk '/\"init-local\"/ {{ s = 1 }} s && /\"finished\"/ {{ v = $2; exit }} END {{ exit !(v ~ /^[0-9]/) }}' {STATUS} 2>/dev/null; }}; \
         ended() {{ [ -e {RESULT} ] || {{ deferred && local_ended; }}; }}; \
         failed() {{ cloud-init status --long; grep -E '^(Err:|E: |W: Failed to fetch)' {OUTPUT_LOG} 2>/dev/null | tail -n 8; exit 1; }}; \
         over() {{ \
         if [ -f {pending} ]; then mv -f {pending} {started} && setsid -f sh -c 'sh {started} > {log} 2>&1; echo $? > {status}.new; mv -f {status}.new {status}' < /dev/null > /dev/null 2>&1; fi; \
         if [ -e {started} ]; then \
         while [ ! -e {status} ] && [ $n -lt {looks} ]; do sleep {POLL_S}; n=$((n + 1)); done; \
         [ -e {status} ] || {{ progress; exit {STILL_WORKING}; }}; \
         if [ \"$(cat {status})\" != 0 ]; then echo \"status $(cat {status}); the end of their output:\"; tail -n 20 {log}; exit {COMMANDS_FAILED}; fi; fi; \
         if deferred && [ ! -e {RESULT} ] && mkdir {FINAL_STAGE_STARTED} 2>/dev/null; then \
         systemd-run --no-block --quiet --unit={FINAL_STAGE_UNIT} --description='cloud-init final stage, after trog finished the first boot' \
         -p CPUSchedulingPolicy=idle -p IOSchedulingClass=idle /usr/bin/cloud-init modules --mode=final \
         || {{ rmdir {FINAL_STAGE_STARTED}; echo 'cannot start cloud-init final stage'; exit 1; }}; fi; \
         exit 0; }}; \
         n=0; \
         while ! ended && [ $n -lt {looks} ]; do \
         if [ $((n % {BOOT_CHECK_EVERY})) -eq 0 ] && ! booting; then break; fi; sleep {POLL_S}; n=$((n + 1)); done; \
         if [ -e {RESULT} ]; then grep -Eqs '\"errors\": ?\\[\\]' {RESULT} && over; \
         elif deferred && local_ended; then [ \"$(grep -c '\"errors\":' {STATUS})\" = \"$(grep -c '\"errors\": \\[\\]' {STATUS})\" ] && over; failed; \
         elif booting; then progress; exit {STILL_WORKING}; \
         elif deferred; then failed; fi; \
         timeout {round_s} cloud-init status --wait >/dev/null 2>&1; case $? in 0|2) over;; 124) progress; exit {STILL_WORKING};; esac; \
         failed"
    )
}

/// What one round found.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    Done,
    Failed(String),
    /// The first-boot commands failed: their status and the end of their output.
    CommandsFailed(String),
    /// Still working; the count grows as long as cloud-init does.
    Working(u64),
    /// No answer within the round's bound.
    Unseen,
}

/// Whether to wait another round, given what the rounds have found so far. Pure: the clock is
/// handed in.
#[derive(Debug)]
struct Watch {
    started: Instant,
    last_progress: Option<u64>,
    last_moved: Instant,
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    WaitOn,
    Quiet { quiet: Duration, waited: Duration },
    TooLong { waited: Duration },
}

impl Watch {
    fn new(now: Instant) -> Watch {
        Watch {
            started: now,
            last_progress: None,
            last_moved: now,
        }
    }

    /// Takes in what a round counted (`None`: it could not count) and says whether to go on.
    fn observe(&mut self, progress: Option<u64>, now: Instant) -> Verdict {
        if progress.is_some() && self.last_progress != progress {
            self.last_progress = progress;
            self.last_moved = now;
        }
        let waited = now.duration_since(self.started);
        let quiet = now.duration_since(self.last_moved);
        if quiet >= CLOUD_INIT_QUIET_LIMIT {
            Verdict::Quiet { quiet, waited }
        } else if waited >= CLOUD_INIT_LIMIT {
            Verdict::TooLong { waited }
        } else {
            Verdict::WaitOn
        }
    }
}

/// Reads a round's answer; any other is an error naming the command and its status.
fn read_round(output: CommandOutput) -> Result<Round, MachineError> {
    let text = output.stdout_text();
    match (output.status, text.trim().parse::<u64>()) {
        (Some(0), _) => Ok(Round::Done),
        (Some(1), _) => Ok(Round::Failed(text.trim().to_string())),
        (Some(COMMANDS_FAILED), _) => Ok(Round::CommandsFailed(text.trim().to_string())),
        (Some(STILL_WORKING), Ok(progress)) => Ok(Round::Working(progress)),
        // Not an answer a round gives: the error names the command and how it ended.
        _ => output.success().map(|_| Round::Done),
    }
}

/// Waits (bounded, as above) until cloud-init has finished every stage on the guest, and says
/// how it ended when not cleanly.
pub fn wait_for_cloud_init(guest: &dyn Machine) -> Result<(), FinishError> {
    let name = guest.describe();
    let round = MachineCommand::shell(&round_script())
        .as_root(true)
        .timeout(Duration::from_secs(ROUND_S.into()) + ROUND_SLACK);
    let mut watch = Watch::new(Instant::now());
    loop {
        let found = match guest.run(&round).and_then(read_round) {
            Ok(found) => found,
            // A guest too loaded to answer within the round's bound has not been seen to move.
            Err(MachineError::TimedOut { .. }) => Round::Unseen,
            Err(source) => {
                return Err(FinishError::CloudInitUnknown {
                    guest: name,
                    source,
                })
            }
        };
        let progress = match found {
            Round::Done => return Ok(()),
            Round::Failed(status) => {
                return Err(FinishError::CloudInit {
                    guest: name,
                    status,
                })
            }
            Round::CommandsFailed(output) => {
                return Err(FinishError::FirstBootCommands {
                    guest: name,
                    output,
                })
            }
            Round::Working(progress) => Some(progress),
            Round::Unseen => None,
        };
        match watch.observe(progress, Instant::now()) {
            Verdict::WaitOn => {}
            Verdict::Quiet { quiet, waited } => {
                return Err(FinishError::CloudInitQuiet {
                    guest: name,
                    quiet,
                    waited,
                })
            }
            Verdict::TooLong { waited } => {
                return Err(FinishError::CloudInitTooLong {
                    guest: name,
                    waited,
                })
            }
        }
    }
}

#[cfg(test)]
#[path = "cloud_init_tests.rs"]
mod tests;
