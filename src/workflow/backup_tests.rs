//! `backup` against the fake hypervisor: what it asks before it reaches the guest over SSH, and
//! how each refusal ends it. (Reading the guest's paths needs a guest: tests/e2e.)

use super::*;
use crate::credentials::HandedInCredentials;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::model::names::DomainName;
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn guest(trogs: bool, running: bool) -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs,
            running,
            ..FakeDomain::default()
        },
    )
}

fn back_up_on(fleet: &FakeFleet) -> Result<TakenBackup, Failure> {
    let installation = tempfile::tempdir().unwrap();
    let paths = InstallationPaths::resolve(installation.path().to_str(), None, None);
    let domain = domain();
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    back_up_in(
        fleet,
        &paths,
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        0,
        &mut credentials,
        &RecordedReport::default(),
    )
}

fn error_of(result: Result<TakenBackup, Failure>) -> (ExitStatus, String) {
    let failure = result.expect_err("the backup is refused");
    (failure.status, failure.chain()[0].clone())
}

#[test]
fn a_guest_on_libvirts_test_driver_is_refused_before_its_hypervisor_is_asked() {
    let fake = guest(true, true);
    let (status, message) = error_of(back_up_on(&FakeFleet::of(&fake)));
    assert_eq!(status, ExitStatus::Guest);
    assert!(message.contains("test driver"), "{message}");
    let g = domain();
    assert_eq!(
        fake.calls(),
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".to_string(),
            format!("unlock {g}"),
        ]
    );
}

/// (the guest, what fails, the exit status, the start of the message)
#[test]
fn each_refusal_before_the_guest_is_reached_ends_the_backup_with_its_status() {
    let g = domain();
    let cases = [
        (
            guest(true, true),
            Some(Operation::Locate),
            ExitStatus::Failure,
            format!("{g} is on no hypervisor"),
        ),
        (
            guest(true, true),
            Some(Operation::LockGuest),
            ExitStatus::Busy,
            format!("the guest {g} is busy"),
        ),
        (
            guest(true, true),
            Some(Operation::Open),
            ExitStatus::Hypervisor,
            "cannot connect".to_string(),
        ),
        (
            guest(false, true),
            None,
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            FakeHypervisor::new("hv1"),
            None,
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            guest(true, true),
            Some(Operation::Presence),
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            guest(true, false),
            None,
            ExitStatus::Guest,
            format!("{g} is not running (shut off (shutdown))"),
        ),
    ];
    for (fake, failing, status, message) in cases {
        let fake = match failing {
            Some(operation) => fake.failing(operation),
            None => fake,
        };
        let (got_status, got_message) = error_of(back_up_on(&FakeFleet::of(&fake).remote()));
        assert_eq!(got_status, status, "{failing:?}: {got_message}");
        assert!(got_message.starts_with(&message), "{got_message}");
        let calls = fake.calls();
        if calls.contains(&format!("lock {g}")) && failing != Some(Operation::LockGuest) {
            assert_eq!(calls.last().unwrap(), &format!("unlock {g}"), "{failing:?}");
        }
    }
}

#[test]
fn a_running_guest_is_asked_for_no_more_before_its_configuration_is_read() {
    let fake = guest(true, true);
    let (status, _) = error_of(back_up_on(&FakeFleet::of(&fake).remote()));
    // The installation of the test has no configuration of the guest.
    assert_eq!(status, ExitStatus::Configuration);
    let g = domain();
    assert_eq!(
        fake.calls()[3..],
        [
            format!("presence {g}"),
            format!("stopped_state {g}"),
            format!("unlock {g}"),
        ]
    );
}
