//! `restore` against the fake hypervisor: the order of its steps, that the guest's lock is held
//! through the wait for SSH, and at each step that fails, what it returns and what it leaves.

use super::*;
use crate::credentials::HandedInCredentials;
use crate::exit_status::ExitStatus;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::model::names::DomainName;
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};
use crate::workflow::progress::RecordedProgress;
use std::cell::RefCell;

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn record(name: &str, created_unix: i64, running: bool) -> SnapshotRecord {
    SnapshotRecord {
        name: name.into(),
        created_unix,
        running,
        capture: if running {
            Capture::WithMemory
        } else {
            Capture::Offline
        },
        tag: None,
    }
}

/// A shut-off guest of trog's with a snapshot taken running (`up`) and one shut off (`down`).
fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs: true,
            running: false,
            snapshots: vec![record("up", 1, true), record("down", 2, false)],
            ..FakeDomain::default()
        },
    )
}

/// Restores `which`; the wait for SSH answers `waited` and records whether the guest's lock was
/// held while it waited.
fn restore_on(
    fake: &FakeHypervisor,
    which: Which,
    waited: Result<String, Failure>,
    held_during_wait: &RefCell<Option<bool>>,
) -> Result<Reverted, Failure> {
    let domain = domain();
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let mut waited = Some(waited);
    restore_in(
        &FakeFleet::of(fake),
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: std::time::Duration::from_secs(1),
        },
        &which,
        &RecordedProgress::default(),
        &mut credentials,
        &RecordedReport::default(),
        &mut |session| {
            let calls = fake.calls();
            *held_during_wait.borrow_mut() =
                Some(!calls.contains(&format!("unlock {}", session.domain)));
            waited.take().expect("one wait")
        },
    )
}

#[test]
fn a_snapshot_of_a_running_guest_is_restored_and_waited_for_under_the_lock() {
    let fake = hypervisor();
    let held = RefCell::new(None);
    let reverted = restore_on(
        &fake,
        Which::Named("up".into()),
        Ok("10.0.0.5".into()),
        &held,
    )
    .unwrap();
    let g = domain();
    assert_eq!(
        fake.calls(),
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".to_string(),
            format!("snapshots {g}"),
            format!("revert_snapshot {g} up"),
            format!("is_running {g}"),
            format!("unlock {g}"),
        ]
    );
    assert_eq!(*held.borrow(), Some(true));
    assert!(reverted.running);
    assert_eq!(reverted.address.as_deref(), Some("10.0.0.5"));
    assert_eq!(reverted.snapshot.name, "up");
    assert_eq!(reverted.session.hypervisor_name(), "hv1");
    assert!(fake.domain(g.as_str()).unwrap().running);
}

#[test]
fn a_snapshot_of_a_shut_off_guest_is_not_waited_for() {
    let fake = hypervisor();
    let held = RefCell::new(None);
    let reverted = restore_on(&fake, Which::Latest, Ok("unused".into()), &held).unwrap();
    assert_eq!(reverted.snapshot.name, "down");
    assert!(!reverted.running);
    assert_eq!(reverted.address, None);
    assert_eq!(*held.borrow(), None);
}

/// (the failing step, the exit status, whether the snapshot was reverted)
#[test]
fn a_failed_step_of_a_restore_ends_it_with_its_status_and_the_lock_let_go() {
    let cases = [
        (Operation::Locate, ExitStatus::Failure, false),
        (Operation::LockGuest, ExitStatus::Busy, false),
        (Operation::Open, ExitStatus::Hypervisor, false),
        (Operation::Snapshots, ExitStatus::Hypervisor, false),
        (Operation::RevertSnapshot, ExitStatus::Hypervisor, false),
        (Operation::IsRunning, ExitStatus::Hypervisor, true),
    ];
    for (failing, status, reverted) in cases {
        let fake = hypervisor().failing(failing);
        let held = RefCell::new(None);
        let failure = restore_on(&fake, Which::Named("up".into()), Ok("x".into()), &held)
            .err()
            .unwrap();
        assert_eq!(failure.status, status, "{failing:?}");
        assert_eq!(
            fake.domain(domain().as_str()).unwrap().running,
            reverted,
            "{failing:?}"
        );
        assert_eq!(*held.borrow(), None, "{failing:?}: never waited");
        let calls = fake.calls();
        if calls.contains(&format!("lock {}", domain())) && failing != Operation::LockGuest {
            assert_eq!(calls.last().unwrap(), &format!("unlock {}", domain()));
        }
    }
}

#[test]
fn a_failure_to_ask_whether_it_runs_says_what_was_asked() {
    let fake = hypervisor().failing(Operation::IsRunning);
    let failure = restore_on(&fake, Which::Latest, Ok("x".into()), &RefCell::new(None))
        .err()
        .unwrap();
    assert_eq!(
        failure.chain()[0],
        format!(
            "fake on hv1 could not ask whether the domain runs of {}",
            domain()
        )
    );
}

#[test]
fn an_unknown_snapshot_is_refused_before_anything_changes() {
    let fake = hypervisor();
    let failure = restore_on(
        &fake,
        Which::Named("nope".into()),
        Ok("x".into()),
        &RefCell::new(None),
    )
    .err()
    .unwrap();
    assert_eq!(failure.status, ExitStatus::Failure);
    assert!(!fake.calls().iter().any(|call| call.starts_with("revert")));
}

#[test]
fn a_guest_that_does_not_answer_after_the_restore_is_the_restores_failure() {
    let fake = hypervisor();
    let held = RefCell::new(None);
    let silent = Failure::new("no answer", ExitStatus::Guest, None);
    let failure = restore_on(&fake, Which::Named("up".into()), Err(silent), &held)
        .err()
        .unwrap();
    assert_eq!(failure.status, ExitStatus::Guest);
    assert_eq!(*held.borrow(), Some(true));
    assert_eq!(
        fake.calls().last().unwrap(),
        &format!("unlock {}", domain())
    );
}

/// A domain whose file says it runs on another's machine, or on an existing host: refused before
/// the fleet is asked anything, nothing reverted, no wait.
#[test]
fn a_dependent_or_an_existing_host_is_refused_before_anything_is_asked() {
    use crate::config::settings::RunsOn;
    let web = DomainName::parse("web.example.test").unwrap();
    for (runs_on, says, hint) in [
        (
            RunsOn::DependsOn(web.clone()),
            "g.example.test has no guest of its own to restore: it depends on web.example.test",
            "`trog restore --latest web.example.test`",
        ),
        (
            RunsOn::ExistingHost("192.0.2.7".into()),
            "g.example.test is an existing host (192.0.2.7) that trog did not build",
            "restore it with whatever runs it",
        ),
    ] {
        let fake = hypervisor();
        let domain = domain();
        let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
        let failure = restore_in(
            &FakeFleet::of(&fake).running_on(runs_on),
            &GuestAddress {
                domain: &domain,
                hypervisor: None,
                answer_timeout: std::time::Duration::from_secs(1),
            },
            &Which::Latest,
            &RecordedProgress::default(),
            &mut credentials,
            &RecordedReport::default(),
            &mut |_| panic!("nothing is waited for"),
        )
        .err()
        .expect("refused");
        assert_eq!(failure.status, ExitStatus::Conflict);
        assert!(failure.chain()[0].contains(says), "{:?}", failure.chain());
        assert!(
            failure.hint.as_deref().unwrap().contains(hint),
            "{:?}",
            failure.hint
        );
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
        assert_eq!(fake.snapshot_names_of(domain.as_str()), ["up", "down"]);
    }
}
