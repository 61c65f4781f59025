//! The round script runs for real against a scratch directory standing in for the guest's; the
//! watch's verdicts are pure; the loop runs against a fake guest.

use super::*;
use crate::machine::fake::{Answer, FakeMachine};
use crate::machine::local::LocalMachine;
use std::path::PathBuf;

/// How `cloud-init status --wait` of the stand-in ends.
#[derive(Clone, Copy)]
enum Wait {
    Exits(i32),
    /// Still waiting when the round runs out.
    Hangs,
}

/// A guest's cloud-init and systemd, stood in for by scripts in a scratch directory: the stand-in
/// `cloud-init` answers `status --wait` as told, `status --long` with a line the error must carry,
/// and notes every call; `systemctl is-system-running` answers what the file `system_state`
/// holds. The guest's /var and /run are folders of the scratch directory.
struct CloudInitStandIn {
    dir: tempfile::TempDir,
}

impl CloudInitStandIn {
    fn new(wait: Wait, output_log: &str, system_state: &str) -> CloudInitStandIn {
        CloudInitStandIn::with_systemctl_delay(wait, output_log, system_state, 0)
    }

    /// As [`CloudInitStandIn::new`], its `systemctl` taking `delay_s` to answer (a loaded guest).
    fn with_systemctl_delay(
        wait: Wait,
        output_log: &str,
        system_state: &str,
        delay_s: u32,
    ) -> CloudInitStandIn {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let stand_in = CloudInitStandIn { dir };
        let path = stand_in.dir.path();
        for folder in [
            "bin",
            "run/cloud-init",
            "var/log/apt",
            "var/cache/apt/archives/partial",
            "var/lib/trog",
            "proc",
        ] {
            std::fs::create_dir_all(path.join(folder)).unwrap();
        }
        std::fs::write(stand_in.guest_path(OUTPUT_LOG), output_log).unwrap();
        std::fs::write(path.join("system_state"), system_state).unwrap();
        std::fs::write(stand_in.guest_path(KERNEL_CMDLINE), "root=LABEL=r ro\n").unwrap();
        let on_wait = match wait {
            Wait::Exits(status) => format!("exit {status}"),
            Wait::Hangs => "exec sleep 30".into(),
        };
        let scripts = [
            (
                "cloud-init",
                format!(
                    "#!/bin/sh\necho \"$*\" >> {}\ncase \"$2\" in --wait) {on_wait};; --long) echo 'status: error';; esac\n",
                    path.join("calls").display()
                ),
            ),
            (
                "systemd-run",
                format!(
                    "#!/bin/sh\necho \"$*\" >> {}\n",
                    path.join("systemd-run-calls").display()
                ),
            ),
            (
                "systemctl",
                format!(
                    "#!/bin/sh\nsleep {delay_s}\ncat {}\n",
                    path.join("system_state").display()
                ),
            ),
        ];
        for (name, text) in scripts {
            let file = path.join("bin").join(name);
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        stand_in
    }

    /// Where a path of the guest's is in the scratch directory.
    fn guest_path(&self, path: &str) -> PathBuf {
        self.dir.path().join(path.trim_start_matches('/'))
    }

    /// One round of one second.
    fn run(&self) -> (Option<i32>, String) {
        self.run_round(1)
    }

    /// One round of `round_s`: long enough, where a test changes the guest during it, that a
    /// loaded test machine does not end the round first.
    fn run_round(&self, round_s: u32) -> (Option<i32>, String) {
        let path = self.dir.path().display();
        let script = format!(
            "PATH={path}/bin:$PATH; {}",
            round_script_of(round_s)
                .replace("/var/", &format!("{path}/var/"))
                .replace("/run/", &format!("{path}/run/"))
                .replace("/proc/", &format!("{path}/proc/"))
        );
        let output = LocalMachine.run(&MachineCommand::shell(&script)).unwrap();
        (output.status, output.stdout_text())
    }

    /// What the round asked `systemd-run` to start, a line each time.
    fn systemd_runs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("systemd-run-calls")).unwrap_or_default()
    }

    /// A first boot that masked cloud-init's final stage, its local stage ended as `status.json`
    /// says (`init_local_errors`: that stage's errors, JSON).
    fn deferring_the_final_stage(&self, init_local_finished: bool, init_local_errors: &str) {
        std::fs::write(
            self.guest_path(KERNEL_CMDLINE),
            "root=LABEL=r ro systemd.mask=cloud-init.service systemd.mask=cloud-config.service systemd.mask=cloud-final.service\n",
        )
        .unwrap();
        let finished = if init_local_finished {
            "1796606948.732037"
        } else {
            "null"
        };
        std::fs::write(
            self.guest_path(STATUS),
            format!(
                "{{\n \"v1\": {{\n  \"datasource\": \"DataSourceNoCloud [seed=/dev/sr0][dsmode=local]\",\n  \"init\": {{\n   \"errors\": [],\n   \"finished\": null,\n   \"start\": null\n  }},\n  \"init-local\": {{\n   \"errors\": {init_local_errors},\n   \"finished\": {finished},\n   \"start\": 1796606941.8471458\n  }},\n  \"modules-final\": {{\n   \"errors\": [],\n   \"finished\": null,\n   \"start\": null\n  }},\n  \"stage\": null\n }}\n}}"
            ),
        )
        .unwrap();
    }

    /// Puts the seed's first-boot commands where the seed writes them.
    fn with_commands(&self, script: &str) {
        std::fs::write(self.guest_path(FIRST_BOOT_COMMANDS_PATH), script).unwrap();
    }

    /// Whether the round asked cloud-init itself (the slow way).
    fn asked_cloud_init(&self) -> bool {
        self.dir.path().join("calls").exists()
    }
}

/// What cloud-init 22.4 writes at the end of its last stage.
const RESULT_WITHOUT_ERRORS: &str =
    "{\n \"v1\": {\n  \"datasource\": \"DataSourceNoCloud [seed=/dev/sr0][dsmode=net]\",\n  \"errors\": []\n }\n}";

fn after_the_boot(wait: Wait, output_log: &str) -> (Option<i32>, String) {
    CloudInitStandIn::new(wait, output_log, "running").run()
}

#[test]
fn a_round_after_the_boot_asks_cloud_init_and_reports_how_it_ended() {
    assert_eq!(after_the_boot(Wait::Exits(0), ""), (Some(0), String::new()));
    assert_eq!(
        after_the_boot(Wait::Exits(1), ""),
        (Some(1), "status: error\n".to_string())
    );
    // Done with recoverable errors (warnings, deprecated keys) is done.
    assert_eq!(after_the_boot(Wait::Exits(2), ""), (Some(0), String::new()));
}

#[test]
fn a_result_without_errors_is_enough_and_cloud_init_is_not_started() {
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "running");
    std::fs::write(guest.guest_path(RESULT), RESULT_WITHOUT_ERRORS).unwrap();
    assert_eq!(guest.run(), (Some(0), String::new()));
    assert!(!guest.asked_cloud_init());
}

#[test]
fn a_result_with_errors_is_told_by_cloud_init_itself() {
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "degraded");
    std::fs::write(
        guest.guest_path(RESULT),
        RESULT_WITHOUT_ERRORS.replace("[]", "[\"('scripts_user', RuntimeError())\"]"),
    )
    .unwrap();
    assert_eq!(guest.run(), (Some(1), "status: error\n".to_string()));
    assert!(guest.asked_cloud_init());
}

#[test]
fn while_the_guest_boots_the_round_watches_for_the_result() {
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "starting");
    let result = guest.guest_path(RESULT);
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        std::fs::write(result, RESULT_WITHOUT_ERRORS).unwrap();
    });
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    writer.join().unwrap();
    assert!(!guest.asked_cloud_init());
}

#[test]
fn a_boot_that_ended_without_a_result_asks_cloud_init() {
    let guest = CloudInitStandIn::new(Wait::Exits(0), "", "starting");
    let state = guest.dir.path().join("system_state");
    let boot_ends = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        std::fs::write(state, "degraded").unwrap();
    });
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    boot_ends.join().unwrap();
    assert!(guest.asked_cloud_init());
}

/// Writes `bytes` bytes to a file of the guest's.
fn grow(guest: &CloudInitStandIn, path: &str, bytes: usize) {
    std::fs::write(guest.guest_path(path), "x".repeat(bytes)).unwrap();
}

#[test]
fn a_round_that_runs_out_while_the_guest_boots_counts_what_cloud_init_and_apt_wrote() {
    let guest = CloudInitStandIn::new(Wait::Exits(0), "0123456789", "starting");
    grow(&guest, "/var/log/dpkg.log", 5);
    grow(&guest, &format!("{APT_PARTIAL}/nginx.deb"), 7);
    assert_eq!(guest.run(), (Some(STILL_WORKING), "22\n".to_string()));
    // The boot is still on: nobody started cloud-init's slow status.
    assert!(!guest.asked_cloud_init());
    grow(&guest, "/var/log/apt/term.log", 3);
    assert_eq!(guest.run(), (Some(STILL_WORKING), "25\n".to_string()));
}

#[test]
fn a_round_ends_on_time_however_slowly_systemd_answers() {
    // Each question to systemd takes two seconds: a round of one second asks it twice (once in
    // its loop, once at its end), not once for every look at the result file.
    let guest = CloudInitStandIn::with_systemctl_delay(Wait::Exits(0), "log", "starting", 2);
    let started = Instant::now();
    assert_eq!(guest.run(), (Some(STILL_WORKING), "3\n".to_string()));
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_round_whose_cloud_init_status_is_still_waiting_reports_progress() {
    let guest = CloudInitStandIn::new(Wait::Hangs, "log", "running");
    assert_eq!(guest.run(), (Some(STILL_WORKING), "3\n".to_string()));
    assert!(guest.asked_cloud_init());
}

#[test]
fn an_unreachable_mirror_is_named_when_first_boot_failed() {
    let log = "Reading package lists...\n\
               Err:1 http://192.0.2.1:3142/deb.debian.org/debian bookworm InRelease\n  Could not connect to 192.0.2.1:3142\n\
               W: Failed to fetch http://192.0.2.1:3142/deb.debian.org/debian/dists/bookworm/InRelease  Could not connect\n\
               E: Unable to locate package nginx\n";
    let (status, said) = after_the_boot(Wait::Exits(1), log);
    assert_eq!(status, Some(1));
    assert_eq!(
        said,
        "status: error\n\
         Err:1 http://192.0.2.1:3142/deb.debian.org/debian bookworm InRelease\n\
         W: Failed to fetch http://192.0.2.1:3142/deb.debian.org/debian/dists/bookworm/InRelease  Could not connect\n\
         E: Unable to locate package nginx\n"
    );
    // A first boot that went well says nothing, whatever its log holds.
    assert_eq!(
        after_the_boot(Wait::Exits(0), log),
        (Some(0), String::new())
    );
}

#[test]
fn the_first_boot_commands_are_in_the_guests_state_directory() {
    assert!(FIRST_BOOT_COMMANDS_PATH
        .starts_with(&format!("{}/", crate::guest::finish::GUEST_STATE_DIR)));
}

/// Commands that count their runs in a file beside them, and exit as told.
fn counting_commands(guest: &CloudInitStandIn, status: i32) -> PathBuf {
    let runs = guest.dir.path().join("commands-ran");
    guest.with_commands(&format!(
        "#!/bin/sh\necho started\necho run >> {}\nexit {status}\n",
        runs.display()
    ));
    runs
}

fn runs_of(file: &PathBuf) -> usize {
    std::fs::read_to_string(file).map_or(0, |text| text.lines().count())
}

#[test]
fn a_boot_that_deferred_the_final_stage_is_over_with_its_local_stage() {
    let guest = CloudInitStandIn::new(Wait::Hangs, "", "running");
    guest.deferring_the_final_stage(true, "[]");
    let runs = counting_commands(&guest, 0);
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    // cloud-init's own status would wait for the final stage: it is not asked.
    assert!(!guest.asked_cloud_init());
    assert_eq!(runs_of(&runs), 1);
    // The final stage is started once, at idle priority, with what its own unit runs.
    let started = guest.systemd_runs();
    assert_eq!(started.lines().count(), 1, "{started}");
    assert!(started.contains("--unit=trog-cloud-final"), "{started}");
    assert!(started.contains("-p CPUSchedulingPolicy=idle -p IOSchedulingClass=idle"));
    assert!(started.ends_with("/usr/bin/cloud-init modules --mode=final\n"));
    // A later round of the same boot (the finish's, a provision's again) runs neither again.
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    assert_eq!(runs_of(&runs), 1);
    assert_eq!(guest.systemd_runs().lines().count(), 1);
    // Once the final stage has written its result, that is what is read.
    std::fs::write(guest.guest_path(RESULT), RESULT_WITHOUT_ERRORS).unwrap();
    assert_eq!(guest.run(), (Some(0), String::new()));
    assert_eq!(guest.systemd_runs().lines().count(), 1);
}

#[test]
fn a_deferring_boot_whose_local_stage_failed_or_never_ended_is_an_error() {
    let guest = CloudInitStandIn::new(Wait::Hangs, "", "running");
    guest.deferring_the_final_stage(true, "[\n    \"('growpart', OSError())\"\n   ]");
    let runs = counting_commands(&guest, 0);
    assert_eq!(guest.run(), (Some(1), "status: error\n".to_string()));
    assert_eq!(runs_of(&runs), 0);
    assert_eq!(guest.systemd_runs(), "");

    let guest = CloudInitStandIn::new(Wait::Hangs, "", "starting");
    guest.deferring_the_final_stage(false, "[]");
    assert_eq!(guest.run(), (Some(STILL_WORKING), "0\n".to_string()));
    // The boot is over and the local stage never ended: waiting on would wait for nothing.
    std::fs::write(guest.dir.path().join("system_state"), "degraded").unwrap();
    assert_eq!(guest.run(), (Some(1), "status: error\n".to_string()));
}

#[test]
fn the_first_boot_commands_run_once_after_cloud_init_whatever_its_stages() {
    // A seed that installs packages: the final stage runs on the boot, the commands after it.
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "running");
    std::fs::write(guest.guest_path(RESULT), RESULT_WITHOUT_ERRORS).unwrap();
    let runs = counting_commands(&guest, 0);
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
    assert_eq!(runs_of(&runs), 1);
    assert_eq!(
        std::fs::read_to_string(guest.guest_path(&commands_log())).unwrap(),
        "started\n"
    );
    // Nothing was deferred: nothing is started.
    assert_eq!(guest.systemd_runs(), "");
}

#[test]
fn failed_first_boot_commands_fail_every_round_after_with_their_output() {
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "running");
    std::fs::write(guest.guest_path(RESULT), RESULT_WITHOUT_ERRORS).unwrap();
    let runs = counting_commands(&guest, 7);
    let failed = (
        Some(COMMANDS_FAILED),
        "status 7; the end of their output:\nstarted\n".to_string(),
    );
    assert_eq!(guest.run_round(10), failed);
    assert_eq!(guest.run_round(10), failed);
    assert_eq!(runs_of(&runs), 1);
}

#[test]
fn first_boot_commands_longer_than_a_round_count_as_progress() {
    let guest = CloudInitStandIn::new(Wait::Exits(1), "", "running");
    std::fs::write(guest.guest_path(RESULT), RESULT_WITHOUT_ERRORS).unwrap();
    let go_on = guest.dir.path().join("go-on");
    guest.with_commands(&format!(
        "#!/bin/sh\necho working\nwhile [ ! -e {} ]; do sleep 0.1; done\n",
        go_on.display()
    ));
    assert_eq!(guest.run(), (Some(STILL_WORKING), "8\n".to_string()));
    std::fs::write(&go_on, "").unwrap();
    assert_eq!(guest.run_round(10), (Some(0), String::new()));
}

fn minutes(count: u64) -> Duration {
    Duration::from_secs(count * 60)
}

#[test]
fn the_watch_waits_on_while_anything_moves_however_long_each_step_is() {
    let start = Instant::now();
    let mut watch = Watch::new(start);
    // Nine minutes between signs of work, for most of an hour: a slow mirror, never a stall.
    for step in 0..6 {
        assert_eq!(
            watch.observe(Some(step), start + minutes(9 * step)),
            Verdict::WaitOn
        );
    }
}

#[test]
fn the_watch_gives_up_after_ten_minutes_without_a_sign_of_work() {
    let start = Instant::now();
    let mut watch = Watch::new(start);
    assert_eq!(watch.observe(Some(100), start), Verdict::WaitOn);
    assert_eq!(
        watch.observe(Some(200), start + minutes(3)),
        Verdict::WaitOn
    );
    assert_eq!(
        watch.observe(Some(200), start + minutes(12)),
        Verdict::WaitOn
    );
    assert_eq!(
        watch.observe(Some(200), start + minutes(13)),
        Verdict::Quiet {
            quiet: minutes(10),
            waited: minutes(13)
        }
    );
}

#[test]
fn the_watch_gives_up_after_an_hour_whatever_moves() {
    let start = Instant::now();
    let mut watch = Watch::new(start);
    assert_eq!(watch.observe(Some(1), start + minutes(59)), Verdict::WaitOn);
    assert_eq!(
        watch.observe(Some(2), start + minutes(60)),
        Verdict::TooLong {
            waited: minutes(60)
        }
    );
}

#[test]
fn a_round_that_could_not_count_is_no_sign_of_work() {
    let start = Instant::now();
    let mut watch = Watch::new(start);
    assert_eq!(watch.observe(Some(100), start), Verdict::WaitOn);
    assert_eq!(watch.observe(None, start + minutes(5)), Verdict::WaitOn);
    assert_eq!(
        watch.observe(None, start + minutes(10)),
        Verdict::Quiet {
            quiet: minutes(10),
            waited: minutes(10)
        }
    );
}

const ROUND: &str = "cloud-init status --wait";

#[test]
fn the_wait_goes_round_after_round_until_cloud_init_is_done() {
    let guest = FakeMachine::new().answer(
        ROUND,
        &[
            Answer::Exit(STILL_WORKING, "100\n"),
            Answer::Exit(STILL_WORKING, "250\n"),
            Answer::Exit(0, ""),
        ],
    );
    wait_for_cloud_init(&guest).unwrap();
    assert_eq!(guest.count(ROUND), 3);
}

#[test]
fn a_round_that_times_out_is_waited_past() {
    let guest = FakeMachine::new().answer(
        ROUND,
        &[
            Answer::Exit(STILL_WORKING, "100\n"),
            Answer::TimedOut,
            Answer::Exit(0, ""),
        ],
    );
    wait_for_cloud_init(&guest).unwrap();
    assert_eq!(guest.count(ROUND), 3);
}

#[test]
fn cloud_init_that_ended_in_error_is_told_with_its_status() {
    let guest = FakeMachine::new().answer(
        ROUND,
        &[
            Answer::Exit(STILL_WORKING, "100\n"),
            Answer::Exit(1, "status: error\n"),
        ],
    );
    let error = wait_for_cloud_init(&guest).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cloud-init did not finish cleanly on fake.example.test:\nstatus: error"
    );
}

#[test]
fn failed_first_boot_commands_are_told_with_their_output() {
    let guest = FakeMachine::new().answer(
        ROUND,
        &[Answer::Exit(
            COMMANDS_FAILED,
            "status 7; the end of their output:\nno atd\n",
        )],
    );
    let error = wait_for_cloud_init(&guest).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the first-boot commands failed on fake.example.test: status 7; the end of their output:\nno atd"
    );
    assert!(crate::diagnose::Diagnose::hint(&error)
        .unwrap()
        .contains("first_boot.commands"));
}

#[test]
fn an_answer_no_round_gives_is_an_error_naming_the_command() {
    for answer in [Answer::Exit(2, ""), Answer::Exit(STILL_WORKING, "lots\n")] {
        let guest = FakeMachine::new().answer(ROUND, &[answer]);
        let error = wait_for_cloud_init(&guest).unwrap_err();
        assert!(
            matches!(&error, FinishError::CloudInitUnknown { source, .. } if source.to_string().contains("cloud-init status --wait")),
            "{error:?}"
        );
    }
    let guest = FakeMachine::new().answer(ROUND, &[Answer::Unreachable]);
    assert!(matches!(
        wait_for_cloud_init(&guest).unwrap_err(),
        FinishError::CloudInitUnknown { .. }
    ));
}

#[test]
fn a_quiet_or_long_cloud_init_says_how_long_and_what_to_do() {
    use crate::diagnose::Diagnose;
    let quiet = FinishError::CloudInitQuiet {
        guest: "web.example.test".into(),
        quiet: minutes(10),
        waited: minutes(25),
    };
    assert_eq!(
        quiet.to_string(),
        "cloud-init on web.example.test showed no sign of work for 600s (its logs, dpkg's and apt's downloads all stood still); this run stopped waiting after 1500s"
    );
    assert!(quiet
        .hint()
        .unwrap()
        .contains("/var/log/cloud-init-output.log"));
    let long = FinishError::CloudInitTooLong {
        guest: "web.example.test".into(),
        waited: minutes(60),
    };
    assert!(long.to_string().contains("still working after 3600s"));
    assert!(long.hint().unwrap().contains("provision again"));
}

#[test]
fn the_looks_of_a_round_fill_its_seconds() {
    let pause: f64 = POLL_S.parse().unwrap();
    assert!((pause * f64::from(LOOKS_PER_S) - 1.0).abs() < 1e-9);
}
