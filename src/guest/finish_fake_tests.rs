//! The finish's failure paths, against a fake guest.

use super::*;
use crate::machine::fake::{Answer, FakeMachine};

const CLOUD_INIT: &str = "cloud-init status";
const UNPACK: &str = "tar -xzf";
/// The start: the staged payload put in place of the last one.
const START: &str = "mv payload.new payload";
/// One fetch of the finish: its answer is make's status line (empty while it runs), then the log.
const FOLLOW: &str = "tail -c +";
const TESTS: &str = "make test";
/// The payload's removal once make and the tests are done.
const REMOVE: &str = "rm -rf payload payload.new";
/// The mark that has a make this run stopped waiting for remove the payload when it ends.
const ABANDON: &str = "touch finish.abandoned";

/// Whether the payload was removed after everything else the finish ran, and only then.
fn removed_last(guest: &FakeMachine) -> bool {
    let lines = guest.command_lines();
    guest.count(REMOVE) == 1 && lines.last().is_some_and(|line| line.contains(REMOVE))
}

fn run(guest: &FakeMachine, timeout: Duration) -> (Result<FinishReport, FinishError>, String) {
    let mut log = String::new();
    let result = finish(guest, b"payload", "digest", timeout, &mut |text| {
        log.push_str(text)
    });
    (result, log)
}

#[test]
fn a_finish_that_goes_well_runs_every_stage_in_order() {
    let guest = FakeMachine::new()
        .answer(
            FOLLOW,
            &[Answer::Exit(0, "\nbuild"), Answer::Exit(0, "0\ning\n")],
        )
        .answer(TESTS, &[Answer::Exit(0, "ok nginx_answers\n")]);
    let (result, log) = run(&guest, Duration::from_secs(60));
    assert_eq!(result.unwrap().tests_output, "ok nginx_answers\n");
    // The tests' report follows the Makefile's log: a run shows which checks passed.
    assert_eq!(log, "building\nok nginx_answers\n");
    let order: Vec<usize> = [UNPACK, CLOUD_INIT, START, FOLLOW, TESTS, REMOVE]
        .iter()
        .map(|needle| {
            guest
                .command_lines()
                .iter()
                .position(|line| line.contains(needle))
                .unwrap()
        })
        .collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{order:?}");
}

#[test]
fn a_failing_make_gives_its_status_and_the_end_of_its_log_and_runs_no_tests() {
    let guest = FakeMachine::new().answer(
        FOLLOW,
        &[
            Answer::Exit(0, "\napt-get install nginx\n"),
            Answer::Exit(
                0,
                "2\nE: Unable to locate package nginx\nmake: *** [all] Error 100\n",
            ),
        ],
    );
    let (result, log) = run(&guest, Duration::from_secs(60));
    let error = result.unwrap_err();
    assert!(matches!(&error, FinishError::MakeFailed { status, .. } if status == "2"));
    let text = error.to_string();
    assert!(
        text.starts_with("the Makefile's default target failed on fake.example.test with status 2")
            && text.contains("apt-get install nginx\nE: Unable to locate package nginx"),
        "{text}"
    );
    assert!(log.ends_with("Error 100\n"), "{log}");
    assert_eq!(guest.count(TESTS), 0);
    assert!(removed_last(&guest), "{:?}", guest.command_lines());
}

#[test]
fn a_failing_recipe_test_gives_its_status_its_name_and_output() {
    let guest = FakeMachine::new()
        .answer(FOLLOW, &[Answer::Exit(0, "0\n")])
        .answer(
            TESTS,
            &[Answer::Exit(
                2,
                "ok base_ssh\nFAIL nginx_answers: curl: (7) Failed to connect to localhost port 80\n",
            )],
        );
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert!(matches!(
        &error,
        FinishError::TestsFailed {
            status: Some(2),
            ..
        }
    ));
    assert_eq!(
        error.to_string(),
        "the recipes' tests failed on fake.example.test (`make test` exited with status 2):\n\
         ok base_ssh\nFAIL nginx_answers: curl: (7) Failed to connect to localhost port 80\n"
    );
    assert_eq!(
        crate::diagnose::Failure::from(error).status,
        crate::exit_status::ExitStatus::Guest
    );
}

#[test]
fn a_payload_upload_that_fails_stops_before_make_starts() {
    for answer in [Answer::Unreachable, Answer::Exit(2, "")] {
        let guest = FakeMachine::new().answer(UNPACK, &[answer]);
        let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("cannot unpack the payload on fake.example.test"),
            "{error}"
        );
        assert!(
            std::error::Error::source(&error).is_some(),
            "the cause is kept"
        );
        assert_eq!(guest.count(START), 0);
        assert_eq!(guest.count(FOLLOW), 0);
    }
}

#[test]
fn a_make_that_never_ends_is_waited_for_a_bounded_time() {
    let guest = FakeMachine::new();
    let error = run(&guest, Duration::ZERO).0.unwrap_err();
    assert!(matches!(error, FinishError::TimedOut { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("the Makefile on fake.example.test was still running after 0s"),
        "{error}"
    );
    assert_eq!(guest.count(TESTS), 0);
}

#[test]
fn a_connection_lost_while_following_is_named() {
    let guest = FakeMachine::new().answer(FOLLOW, &[Answer::TimedOut]);
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot follow the finish on fake.example.test"
    );
    assert_eq!(guest.count(TESTS), 0);
}

#[test]
fn cloud_init_that_failed_stops_the_finish_before_make() {
    let guest = FakeMachine::new().answer(CLOUD_INIT, &[Answer::Exit(1, "status: error\n")]);
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert_eq!(
        error.to_string(),
        "cloud-init did not finish cleanly on fake.example.test:\nstatus: error"
    );
    // The payload was staged while cloud-init worked; it does not replace the last one.
    assert_eq!(guest.count(UNPACK), 1);
    assert_eq!(guest.count(START), 0);
}

#[test]
fn a_make_that_cannot_start_is_named() {
    let guest = FakeMachine::new().answer(START, &[Answer::Exit(1, "")]);
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot start the Makefile on fake.example.test"
    );
    assert_eq!(guest.count(FOLLOW), 0);
}

#[test]
fn the_payload_goes_once_make_and_the_tests_are_done_whatever_their_outcome() {
    let outcomes = [
        (
            "passed",
            FakeMachine::new().answer(FOLLOW, &[Answer::Exit(0, "0\n")]),
        ),
        (
            "tests failed",
            FakeMachine::new()
                .answer(FOLLOW, &[Answer::Exit(0, "0\n")])
                .answer(TESTS, &[Answer::Exit(2, "FAIL nginx_answers\n")]),
        ),
        (
            "make failed",
            FakeMachine::new().answer(FOLLOW, &[Answer::Exit(0, "2\n")]),
        ),
        (
            "cloud-init failed, the payload staged",
            FakeMachine::new().answer(CLOUD_INIT, &[Answer::Exit(1, "status: error\n")]),
        ),
        (
            "make not started",
            FakeMachine::new().answer(START, &[Answer::Exit(1, "")]),
        ),
        (
            "unpack cut short",
            FakeMachine::new().answer(UNPACK, &[Answer::Exit(2, "")]),
        ),
    ];
    for (outcome, guest) in outcomes {
        let _ = run(&guest, Duration::from_secs(60));
        assert!(
            removed_last(&guest),
            "{outcome}: {:?}",
            guest.command_lines()
        );
        assert_eq!(guest.count(ABANDON), 0, "{outcome}");
    }
}

#[test]
fn a_make_still_running_when_the_wait_ends_removes_the_payload_itself() {
    let guest = FakeMachine::new();
    let error = run(&guest, Duration::ZERO).0.unwrap_err();
    assert!(matches!(error, FinishError::TimedOut { .. }), "{error}");
    // Not removed under a running make: marked, so that make removes it when it ends.
    let lines = guest.command_lines();
    assert!(lines.last().unwrap().contains(ABANDON), "{lines:?}");
    assert!(lines.iter().all(|line| !line.contains(REMOVE)), "{lines:?}");
}

#[test]
fn a_payload_that_cannot_be_removed_fails_a_finish_that_went_well() {
    let guest = FakeMachine::new()
        .answer(FOLLOW, &[Answer::Exit(0, "0\n")])
        .answer(REMOVE, &[Answer::Exit(1, "")]);
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert!(matches!(error, FinishError::PayloadLeft { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "cannot remove the payload from fake.example.test after its finish: it holds the guest's rendered secrets"
    );
    let failure = crate::diagnose::Failure::from(error);
    assert_eq!(failure.status, crate::exit_status::ExitStatus::Guest);
    assert!(
        failure
            .hint
            .as_deref()
            .is_some_and(|hint| hint.contains("/var/lib/trog/payload")),
        "{:?}",
        failure.hint
    );
}

#[test]
fn a_failed_finish_is_reported_as_itself_when_the_payload_cannot_be_removed_either() {
    let guest = FakeMachine::new()
        .answer(FOLLOW, &[Answer::Exit(0, "2\n")])
        .answer(REMOVE, &[Answer::Unreachable]);
    let error = run(&guest, Duration::from_secs(60)).0.unwrap_err();
    assert!(matches!(error, FinishError::MakeFailed { .. }), "{error}");
}
