//! `debug_boot` against the fake hypervisor: the order of each action's steps, and at each step
//! that fails, what it reports and what it leaves (the definition as it was, the guest running
//! again, the lock let go).

use super::*;
use crate::credentials::HandedInCredentials;
use crate::debug_boot::keys::parse_keys;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::machine::fake::{Answer, FakeMachine};
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};

/// The fake's definition of a guest as provision made it.
const PROVISIONED: &str = "<domain><os></os></domain>";

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn guest(running: bool) -> FakeDomain {
    FakeDomain {
        trogs: true,
        running,
        definition: PROVISIONED.into(),
        disks: vec!["/pool/g.example.test-root.qcow2".into()],
        ..FakeDomain::default()
    }
}

/// A hypervisor holding the guest, running.
fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_domain(domain().as_str(), guest(true))
}

struct Run {
    result: Result<DebugReport, Failure>,
    calls: Vec<String>,
    lines: Vec<String>,
}

fn run_on(fleet: &FakeFleet, action: DebugAction) -> Run {
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let domain = domain();
    let mut lines = Vec::new();
    let result = debug_boot_in(
        fleet,
        DebugRequest {
            domain: &domain,
            hypervisor: None,
            action,
            answer_timeout: Duration::from_secs(1),
        },
        &mut credentials,
        &mut |line| lines.push(line.to_string()),
        &RecordedReport::default(),
    );
    Run {
        result,
        calls: fleet.hypervisor.calls(),
        lines,
    }
}

fn run(hypervisor: &FakeHypervisor, action: DebugAction) -> Run {
    run_on(&FakeFleet::of(hypervisor), action)
}

fn failed(run: Run) -> (Failure, Vec<String>) {
    match run.result {
        Ok(report) => panic!("the action succeeded: {report:?}"),
        Err(failure) => (failure, run.calls),
    }
}

/// The error's own text and its causes, as `error:` and `Caused by:` show them.
fn chain(failure: &Failure) -> String {
    let mut text = failure.error.to_string();
    let mut source = failure.error.source();
    while let Some(cause) = source {
        text.push_str(&format!(" / {cause}"));
        source = cause.source();
    }
    text
}

fn definition_of(hypervisor: &FakeHypervisor) -> String {
    hypervisor.domain(domain().as_str()).unwrap().definition
}

fn running(hypervisor: &FakeHypervisor) -> bool {
    hypervisor.domain(domain().as_str()).unwrap().running
}

const HOLD_DEFINITION: &str = "<domain><os></os></domain> +bootmenu";

#[test]
fn hold_locks_reads_changes_restarts_and_lets_go_in_that_order() {
    let fake = hypervisor();
    let run = run(&fake, DebugAction::Hold);
    let g = domain();
    assert_eq!(
        run.calls,
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".into(),
            format!("presence {g}"),
            format!("definition {g}"),
            format!("is_running {g}"),
            format!("redefine {g} as {HOLD_DEFINITION:?}"),
            format!("is_running {g}"),
            format!("force_off {g}"),
            format!("is_running {g}"),
            format!("start {g}"),
            format!("unlock {g}"),
        ]
    );
    let report = run.result.unwrap();
    assert_eq!(report.hypervisor, "hv1");
    assert!(matches!(report.outcome, DebugOutcome::Hold { .. }));
    assert_eq!(definition_of(&fake), HOLD_DEFINITION);
    assert!(running(&fake));
}

#[test]
fn a_failed_restart_puts_the_definition_back_and_starts_the_guest_again() {
    let fake = hypervisor().failing_nth(Operation::Start, 1);
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    let text = chain(&failure);
    assert!(
        text.starts_with(
            "g.example.test did not start with the change for debugging; the change was taken \
             back: its definition is as it was, and the guest runs again from it"
        ),
        "{text}"
    );
    assert!(
        text.contains("fake on hv1 cannot start g.example.test"),
        "{text}"
    );
    assert_eq!(definition_of(&fake), PROVISIONED);
    assert!(running(&fake));
    let g = domain();
    assert_eq!(
        calls[calls.len() - 5..],
        [
            format!("start {g}"),
            format!("redefine {g} as {PROVISIONED:?}"),
            format!("is_running {g}"),
            format!("start {g}"),
            format!("unlock {g}"),
        ]
    );
}

#[test]
fn a_guest_that_will_not_start_again_is_said_so_with_its_definition_put_back() {
    let fake = hypervisor().failing(Operation::Start);
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    let text = chain(&failure);
    assert!(
        text.contains(
            "its definition is as it was, but starting the guest again failed too (fake on hv1 \
             cannot start g.example.test: start g.example.test: refused by the fake)"
        ),
        "{text}"
    );
    assert_eq!(definition_of(&fake), PROVISIONED);
    assert!(!running(&fake));
    assert_eq!(calls.last().unwrap(), "unlock g.example.test");
}

#[test]
fn when_the_change_cannot_be_taken_back_the_error_says_how_to_take_it_back() {
    let fake = hypervisor()
        .failing(Operation::Start)
        .failing_nth(Operation::Redefine, 2);
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    let text = chain(&failure);
    assert!(
        text.contains("taking the change back failed too")
            && text.contains("`trog debug_boot --restore g.example.test` takes it back"),
        "{text}"
    );
    // Left as the failed redefinition left it: changed, which --restore takes back.
    assert_eq!(definition_of(&fake), HOLD_DEFINITION);
    assert_eq!(calls.last().unwrap(), "unlock g.example.test");
}

#[test]
fn a_refused_redefinition_changes_nothing_and_stops_nothing() {
    let fake = hypervisor().failing(Operation::Redefine);
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert!(
        failure
            .error
            .to_string()
            .starts_with("fake on hv1 cannot redefine g.example.test: "),
        "{}",
        failure.error
    );
    assert_eq!(
        failure.hint.as_deref(),
        Some("check fake's log on that hypervisor")
    );
    assert_eq!(definition_of(&fake), PROVISIONED);
    assert!(running(&fake));
    assert!(!calls.iter().any(|call| call.starts_with("force_off")));
    assert_eq!(calls.last().unwrap(), "unlock g.example.test");
}

#[test]
fn a_definition_that_cannot_be_read_or_edited_is_left_alone() {
    let unreadable = hypervisor().failing(Operation::Definition);
    let (failure, calls) = failed(run(&unreadable, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert!(failure
        .error
        .to_string()
        .contains("cannot read the definition of g.example.test"));
    assert!(!calls.iter().any(|call| call.starts_with("redefine")));
    assert_eq!(calls.last().unwrap(), "unlock g.example.test");

    let hand_made = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            definition: "<domain/>".into(),
            ..guest(true)
        },
    );
    let (failure, calls) = failed(run(&hand_made, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(failure.hint.unwrap().contains("trog provision"));
    assert!(!calls.iter().any(|call| call.starts_with("redefine")));
    assert_eq!(definition_of(&hand_made), "<domain/>");
}

#[test]
fn a_domain_trog_did_not_make_is_refused_before_anything_of_it_is_read() {
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs: false,
            ..guest(true)
        },
    );
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(failure.error.to_string().contains("not created by trog"));
    let g = domain();
    assert_eq!(
        calls,
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".into(),
            format!("presence {g}"),
            format!("unlock {g}"),
        ]
    );
}

#[test]
fn a_guest_that_is_not_there_is_named_with_where_to_look() {
    let (failure, _) = failed(run(&FakeHypervisor::new("hv1"), DebugAction::Shot));
    assert_eq!(failure.status, ExitStatus::Failure);
    assert_eq!(
        failure.error.to_string(),
        "g.example.test is not defined on hv1"
    );
    assert!(failure.hint.unwrap().contains("trog fleet"));
}

#[test]
fn a_lock_another_run_holds_ends_the_action_before_the_hypervisor_is_opened() {
    let fake = hypervisor().failing(Operation::LockGuest);
    let (failure, calls) = failed(run(&fake, DebugAction::Hold));
    assert_eq!(failure.status, ExitStatus::Busy);
    assert_eq!(calls, ["locate g.example.test", "lock g.example.test"]);
    assert_eq!(definition_of(&fake), PROVISIONED);
}

#[test]
fn reading_actions_take_no_lock() {
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            display: Some(("127.0.0.1".into(), 5901)),
            ..guest(true)
        },
    );
    let run = run(&fake, DebugAction::Vnc);
    let g = domain();
    assert_eq!(
        run.calls,
        [
            format!("locate {g}"),
            "open hv1".into(),
            format!("presence {g}"),
            format!("open_vnc_display {g}"),
        ]
    );
    match run.result.unwrap().outcome {
        DebugOutcome::Vnc {
            address, tunneled, ..
        } => {
            assert_eq!(address, "127.0.0.1:5901");
            assert!(!tunneled);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_guest_without_a_display_is_told_to_be_started() {
    let (failure, _) = failed(run(&hypervisor(), DebugAction::Vnc));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert!(failure.hint.unwrap().contains("start the guest first"));
}

#[test]
fn keys_are_pressed_in_order_and_a_refused_one_ends_the_sequence() {
    let keys = parse_keys(&["esc".to_string(), "2".to_string(), "enter".to_string()]).unwrap();
    let fake = hypervisor();
    let report = run(&fake, DebugAction::Keys(keys.clone())).result.unwrap();
    let pressed = fake.domain(domain().as_str()).unwrap().pressed;
    let wanted: Vec<Vec<u32>> = keys.iter().map(|event| event.codes.clone()).collect();
    assert_eq!(pressed, wanted);
    assert!(matches!(report.outcome, DebugOutcome::Keys { sent } if sent.len() == 3));

    let refused = hypervisor().failing_nth(Operation::PressKeys, 2);
    let (failure, calls) = failed(run(&refused, DebugAction::Keys(keys)));
    assert!(failure
        .error
        .to_string()
        .contains("fake on hv1 cannot send keys to g.example.test"));
    assert_eq!(
        refused.domain(domain().as_str()).unwrap().pressed,
        wanted[..1]
    );
    assert_eq!(calls.last().unwrap(), "unlock g.example.test");
}

#[test]
fn a_screenshot_is_made_a_png_or_its_failure_said() {
    // A PPM of two pixels, as QEMU hands a screen over.
    let mut ppm = b"P6\n2 1\n255\n".to_vec();
    ppm.extend([255, 0, 0, 0, 0, 255]);
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            screen: ppm,
            ..guest(true)
        },
    );
    match run(&fake, DebugAction::Shot).result.unwrap().outcome {
        DebugOutcome::Shot { width, height, png } => {
            assert_eq!((width, height), (2, 1));
            assert!(png.starts_with(b"\x89PNG"));
        }
        other => panic!("{other:?}"),
    }

    let garbled = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            screen: b"not a screen".to_vec(),
            ..guest(true)
        },
    );
    let (failure, _) = failed(run(&garbled, DebugAction::Shot));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert!(failure.error.to_string().contains("cannot be made a PNG"));

    let refused = hypervisor().failing(Operation::Screenshot);
    let (failure, _) = failed(run(&refused, DebugAction::Shot));
    assert!(failure
        .error
        .to_string()
        .contains("cannot take a screenshot of g.example.test"));
}

#[test]
fn restore_takes_every_change_back_and_says_which() {
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            definition: format!(
                "{PROVISIONED} +console={} +bootmenu",
                console_capture_path(domain().as_str())
            ),
            ..guest(true)
        },
    );
    let report = run(&fake, DebugAction::Restore).result.unwrap();
    assert_eq!(definition_of(&fake), PROVISIONED);
    match report.outcome {
        DebugOutcome::Restore { undone, grub } => {
            assert_eq!(undone, [DebugChange::ConsoleCapture, DebugChange::BootMenu]);
            // libvirt's test driver has no system whose libguestfs could read the disks.
            assert_eq!(grub, GrubCheck::NoSystem);
        }
        other => panic!("{other:?}"),
    }

    // Nothing to take back: nothing redefined.
    let clean = hypervisor();
    let run = run(&clean, DebugAction::Restore);
    assert!(matches!(
        run.result.unwrap().outcome,
        DebugOutcome::Restore { undone, .. } if undone.is_empty()
    ));
    assert!(!run.calls.iter().any(|call| call.starts_with("redefine")));
}

#[test]
fn restore_on_a_running_guest_leaves_its_grub_configuration_for_later() {
    let fleet = FakeFleet::of(&hypervisor()).with_system(&FakeMachine::new());
    match run_on(&fleet, DebugAction::Restore).result.unwrap().outcome {
        DebugOutcome::Restore { grub, .. } => assert_eq!(grub, GrubCheck::GuestRunning),
        other => panic!("{other:?}"),
    }
}

#[test]
fn console_restarts_with_the_capture_lets_the_lock_go_then_streams_it() {
    let fake = hypervisor();
    let system = FakeMachine::new().answer(
        "read-log after",
        &[Answer::Exit(
            0,
            "SeaBIOS\nDebian GNU/Linux 12 g ttyS0\n\ng login: ",
        )],
    );
    let fleet = FakeFleet::of(&fake).with_system(&system);
    let run = run_on(
        &fleet,
        DebugAction::Console(ConsoleBounds {
            silence: Duration::from_secs(5),
            total: Duration::from_secs(5),
        }),
    );
    let report = run.result.unwrap();
    let capture = console_capture_path(domain().as_str());
    assert!(matches!(
        &report.outcome,
        DebugOutcome::Console { end: ConsoleEnd::LoginPrompt, capture: at } if *at == capture
    ));
    assert_eq!(run.lines.first().unwrap(), "SeaBIOS");
    assert_eq!(run.lines.last().unwrap(), "g login: ");
    assert_eq!(
        definition_of(&fake),
        format!("{PROVISIONED} +console={capture}")
    );
    let g = domain();
    assert_eq!(
        run.calls[run.calls.len() - 2..],
        [format!("start {g}"), format!("unlock {g}")]
    );
    assert_eq!(system.count("read-log after"), 1);
}

#[test]
fn console_without_a_system_changes_nothing() {
    let fake = hypervisor();
    let (failure, calls) = failed(run(&fake, DebugAction::Console(ConsoleBounds::default())));
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert!(failure.error.to_string().contains("test driver"));
    assert_eq!(definition_of(&fake), PROVISIONED);
    assert!(!calls.iter().any(|call| call.starts_with("definition")));
}

#[test]
fn fetch_without_a_capture_says_how_to_make_one() {
    let system = FakeMachine::new().answer("read-log after", &[Answer::Exit(1, "")]);
    let fleet = FakeFleet::of(&hypervisor()).with_system(&system);
    let (failure, calls) = failed(run_on(&fleet, DebugAction::Fetch));
    assert_eq!(failure.status, ExitStatus::Failure);
    assert_eq!(
        failure.hint.unwrap(),
        "capture one first: trog debug_boot --console g.example.test"
    );
    assert!(!calls.iter().any(|call| call.starts_with("lock")));
}

#[test]
fn the_disks_of_a_running_guest_are_neither_read_nor_written() {
    let system = FakeMachine::new();
    let fleet = FakeFleet::of(&hypervisor()).with_system(&system);
    let (failure, calls) = failed(run_on(&fleet, DebugAction::Cat("/etc/fstab".into())));
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(failure.error.to_string().contains("is running"));
    assert!(!calls.iter().any(|call| call.starts_with("disk_files")));
    assert_eq!(system.count("guest-disk"), 0);
}

#[test]
fn a_guest_without_disks_in_a_pool_is_said_so() {
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            disks: Vec::new(),
            ..guest(false)
        },
    );
    let fleet = FakeFleet::of(&fake).with_system(&FakeMachine::new());
    let (failure, _) = failed(run_on(&fleet, DebugAction::Ls("/".into())));
    assert_eq!(failure.status, ExitStatus::Failure);
    assert!(chain(&failure).contains("names no disk of a storage pool"));
}

/// A domain whose file says it runs on another's machine, or on an existing host: every action,
/// reading or changing, is refused before the fleet is asked anything; the namesake's definition
/// and state stay as they were.
#[test]
fn a_dependent_or_an_existing_host_is_refused_before_anything_is_asked() {
    use crate::config::settings::RunsOn;
    let web = DomainName::parse("web.example.test").unwrap();
    for (runs_on, says, hint) in [
        (
            RunsOn::DependsOn(web.clone()),
            "g.example.test has no guest of its own to debug_boot: it depends on web.example.test",
            "`trog debug_boot --console web.example.test`",
        ),
        (
            RunsOn::ExistingHost("192.0.2.7".into()),
            "g.example.test is an existing host (192.0.2.7) that trog did not build",
            "debug its boot with whatever runs it",
        ),
    ] {
        for action in [
            DebugAction::Hold,
            DebugAction::Fetch,
            DebugAction::Shot,
            DebugAction::Restore,
            DebugAction::Single,
        ] {
            let fake = hypervisor();
            let fleet = FakeFleet::of(&fake).running_on(runs_on.clone());
            let (failure, calls) = failed(run_on(&fleet, action));
            assert_eq!(failure.status, ExitStatus::Conflict);
            assert!(chain(&failure).contains(says), "{}", chain(&failure));
            assert!(
                failure.hint.as_deref().unwrap().contains(hint),
                "{:?}",
                failure.hint
            );
            assert!(calls.is_empty(), "{calls:?}");
            assert_eq!(definition_of(&fake), PROVISIONED);
            assert!(running(&fake));
        }
    }
}

/// What the fake system's `guest-disk cat` of the GRUB configuration prints: found, and a kernel
/// line without `single`.
const GRUB_FOUND: &str =
    "true\nset timeout=0\nlinux /boot/vmlinuz root=LABEL=r ro console=ttyS0\nboot\n";

/// A system whose libguestfs reads the guest's GRUB configuration, replaces it and puts the kept
/// one back, each as asked.
fn grub_on_disk(put_back: Answer) -> FakeMachine {
    FakeMachine::new()
        .answer("guest-disk cat", &[Answer::Exit(0, GRUB_FOUND)])
        .answer("guest-disk replace", &[Answer::Exit(0, "")])
        .answer("guest-disk put-back", &[put_back])
}

#[test]
fn single_writes_the_kernel_line_then_starts_the_guest_and_keeps_the_change() {
    let fake = FakeHypervisor::new("hv1").with_domain(domain().as_str(), guest(false));
    let system = grub_on_disk(Answer::Exit(0, "true\n"));
    let fleet = FakeFleet::of(&fake).with_system(&system);
    let run = run_on(&fleet, DebugAction::Single);
    assert!(matches!(
        run.result.unwrap().outcome,
        DebugOutcome::Single { written: true }
    ));
    assert_eq!(system.count("guest-disk replace"), 1);
    assert_eq!(system.count("guest-disk put-back"), 0);
    assert!(running(&fake));
    let g = domain();
    assert_eq!(
        run.calls[run.calls.len() - 2..],
        [format!("start {g}"), format!("unlock {g}")]
    );
}

/// A --single whose start fails takes its GRUB change back, and says so; when the change cannot
/// be taken back, or no kept copy is found, the error says how to take it back.
#[test]
fn a_single_whose_start_fails_takes_its_change_back_or_says_how() {
    for (put_back, says) in [
        (
            Answer::Exit(0, "true\n"),
            "the change was taken back: its GRUB configuration is as it was",
        ),
        (
            Answer::Exit(0, "false\n"),
            "no copy of its GRUB configuration was found to put back: `trog debug_boot --restore g.example.test` checks it",
        ),
        (
            Answer::Exit(1, ""),
            "`trog debug_boot --restore g.example.test` takes it back",
        ),
    ] {
        let fake = FakeHypervisor::new("hv1")
            .with_domain(domain().as_str(), guest(false))
            .failing(Operation::Start);
        let system = grub_on_disk(put_back);
        let fleet = FakeFleet::of(&fake).with_system(&system);
        let (failure, calls) = failed(run_on(&fleet, DebugAction::Single));
        assert_eq!(failure.status, ExitStatus::Hypervisor);
        let text = chain(&failure);
        assert!(
            text.contains("g.example.test did not start with the change for debugging"),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
        assert!(
            text.contains("fake on hv1 cannot start g.example.test"),
            "{text}"
        );
        assert_eq!(system.count("guest-disk replace"), 1);
        assert_eq!(system.count("guest-disk put-back"), 1);
        assert!(!running(&fake));
        assert_eq!(definition_of(&fake), PROVISIONED);
        assert_eq!(calls.last().unwrap(), &format!("unlock {}", domain()));
    }
}

/// A kernel line that has `single` already is not written again, and a start that fails then has
/// nothing to take back.
#[test]
fn a_single_already_on_the_kernel_line_writes_nothing_and_takes_nothing_back() {
    let fake = FakeHypervisor::new("hv1")
        .with_domain(domain().as_str(), guest(false))
        .failing(Operation::Start);
    let system = FakeMachine::new().answer(
        "guest-disk cat",
        &[Answer::Exit(
            0,
            "true\nlinux /boot/vmlinuz root=LABEL=r ro console=ttyS0 single\nboot\n",
        )],
    );
    let fleet = FakeFleet::of(&fake).with_system(&system);
    let (failure, _) = failed(run_on(&fleet, DebugAction::Single));
    let text = chain(&failure);
    assert!(
        text.contains("its kernel command line already had `single`: nothing was changed"),
        "{text}"
    );
    assert_eq!(system.count("guest-disk replace"), 0);
    assert_eq!(system.count("guest-disk put-back"), 0);
}

/// A file or directory libguestfs does not find is named, with the listing to look at, and
/// changes nothing.
#[test]
fn a_path_missing_on_the_disk_is_named_with_where_to_look() {
    let fake = FakeHypervisor::new("hv1").with_domain(domain().as_str(), guest(false));
    let system = FakeMachine::new().answer("guest-disk", &[Answer::Exit(0, "false\n")]);
    let fleet = FakeFleet::of(&fake).with_system(&system);
    let (failure, _) = failed(run_on(&fleet, DebugAction::Cat("/etc/no-such-file".into())));
    assert_eq!(failure.status, ExitStatus::Failure);
    assert_eq!(
        failure.error.to_string(),
        "g.example.test has no file /etc/no-such-file"
    );
    assert_eq!(
        failure.hint.as_deref(),
        Some("see what is there: trog debug_boot --ls /etc g.example.test")
    );
    assert_eq!(definition_of(&fake), PROVISIONED);
}
