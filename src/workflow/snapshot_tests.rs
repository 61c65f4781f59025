//! `snapshot` (take, `--keep`, `--delete`, `--list`) against the fake hypervisor: the order of
//! its steps, and at each step that fails, what it returns and what it leaves.

use super::*;
use crate::credentials::HandedInCredentials;
use crate::exit_status::ExitStatus;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::model::names::DomainName;
use crate::snapshot::{Capture, SnapshotRecord};
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};
use std::time::Duration;

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn record(name: &str, created_unix: i64) -> SnapshotRecord {
    SnapshotRecord {
        name: name.into(),
        created_unix,
        running: true,
        capture: Capture::WithMemory,
        tag: None,
    }
}

/// A running guest of trog's with snapshots `old` and `older`.
fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs: true,
            running: true,
            snapshots: vec![record("older", 1), record("old", 2)],
            ..FakeDomain::default()
        },
    )
}

fn credentials() -> CredentialSource<TerminalPrompter> {
    CredentialSource::new(HandedInCredentials::none(), TerminalPrompter)
}

fn take(
    fake: &FakeHypervisor,
    name: Option<&str>,
    keep: Option<usize>,
) -> Result<TakenSnapshot, Failure> {
    let domain = domain();
    take_snapshot_in(
        &FakeFleet::of(fake),
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        &NewSnapshot {
            name,
            keep,
            now_unix: 1_800_000_000,
        },
        &mut credentials(),
        &RecordedReport::default(),
    )
}

fn delete(fake: &FakeHypervisor, name: &str) -> Result<String, Failure> {
    let domain = domain();
    delete_snapshot_in(
        &FakeFleet::of(fake),
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        name,
        &mut credentials(),
        &RecordedReport::default(),
    )
}

#[test]
fn a_snapshot_is_taken_under_the_guests_lock_and_keep_deletes_the_oldest() {
    let fake = hypervisor();
    let taken = take(&fake, Some("new"), Some(2)).unwrap();
    let g = domain();
    assert_eq!(
        fake.calls(),
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".to_string(),
            format!("snapshots {g}"),
            format!("take_snapshot {g} new"),
            format!("snapshots {g}"),
            format!("delete_snapshot {g} older"),
            format!("unlock {g}"),
        ]
    );
    assert_eq!(
        (
            taken.name.as_str(),
            taken.capture,
            taken.hypervisor.as_str()
        ),
        ("new", Capture::WithMemory, "hv1")
    );
    assert_eq!(taken.deleted, ["older"]);
    assert_eq!(fake.snapshot_names_of(g.as_str()), ["old", "new"]);
}

#[test]
fn a_snapshot_without_a_name_is_named_by_the_time() {
    let fake = hypervisor();
    let taken = take(&fake, None, None).unwrap();
    assert_eq!(taken.name, "20270115T080000Z");
    assert_eq!(
        fake.snapshot_names_of(domain().as_str()),
        ["older", "old", "20270115T080000Z"]
    );
}

/// (the failing step, the exit status, the snapshots the guest has afterwards)
#[test]
fn a_failed_step_of_taking_a_snapshot_ends_it_with_its_status_and_the_lock_let_go() {
    let cases = [
        (Operation::Locate, ExitStatus::Failure, vec!["older", "old"]),
        (Operation::LockGuest, ExitStatus::Busy, vec!["older", "old"]),
        (
            Operation::Open,
            ExitStatus::Hypervisor,
            vec!["older", "old"],
        ),
        (
            Operation::Snapshots,
            ExitStatus::Hypervisor,
            vec!["older", "old"],
        ),
        (
            Operation::TakeSnapshot,
            ExitStatus::Hypervisor,
            vec!["older", "old"],
        ),
        // The new snapshot stays when deleting the old ones fails: it is what was asked for.
        (
            Operation::DeleteSnapshot,
            ExitStatus::Hypervisor,
            vec!["older", "old", "new"],
        ),
    ];
    for (failing, status, left) in cases {
        let fake = hypervisor().failing(failing);
        let failure = take(&fake, Some("new"), Some(1)).err().unwrap();
        assert_eq!(failure.status, status, "{failing:?}");
        assert_eq!(
            fake.snapshot_names_of(domain().as_str()),
            left,
            "{failing:?}"
        );
        let calls = fake.calls();
        let locked = calls.contains(&format!("lock {}", domain()));
        assert_eq!(
            calls.contains(&format!("unlock {}", domain())),
            locked && failing != Operation::LockGuest,
            "{failing:?}: {calls:?}"
        );
    }
}

#[test]
fn keep_stops_at_the_first_snapshot_it_cannot_delete() {
    let fake = hypervisor().failing_nth(Operation::DeleteSnapshot, 2);
    let failure = take(&fake, Some("new"), Some(1)).err().unwrap();
    assert_eq!(
        failure.chain(),
        [
            format!("fake on hv1 could not delete snapshot old of {}", domain()),
            format!("delete_snapshot {} old: refused by the fake", domain()),
        ]
    );
    assert_eq!(fake.snapshot_names_of(domain().as_str()), ["old", "new"]);
}

#[test]
fn a_taken_name_or_a_foreign_domain_is_refused_before_anything_is_taken() {
    let fake = hypervisor();
    let failure = take(&fake, Some("old"), None).err().unwrap();
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(!fake
        .calls()
        .iter()
        .any(|call| call.starts_with("take_snapshot")));

    let foreign = FakeHypervisor::new("hv1").with_domain(domain().as_str(), FakeDomain::default());
    let failure = take(&foreign, None, None).err().unwrap();
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(failure.chain()[0].contains("was not created by trog"));
    assert!(foreign.snapshot_names_of(domain().as_str()).is_empty());
}

#[test]
fn a_snapshot_is_deleted_by_name_and_an_unknown_name_lists_the_ones_there_are() {
    let fake = hypervisor();
    assert_eq!(delete(&fake, "older").unwrap(), "hv1");
    assert_eq!(fake.snapshot_names_of(domain().as_str()), ["old"]);
    assert_eq!(
        fake.calls()[3..],
        [
            format!("snapshots {}", domain()),
            format!("delete_snapshot {} older", domain()),
            format!("unlock {}", domain()),
        ]
    );

    let fake = hypervisor();
    let failure = delete(&fake, "nope").err().unwrap();
    assert_eq!(failure.status, ExitStatus::Failure);
    assert_eq!(
        failure.chain()[0],
        format!(
            "{} has no snapshot named nope; it has: older, old",
            domain()
        )
    );
    assert_eq!(fake.snapshot_names_of(domain().as_str()), ["older", "old"]);

    let fake = hypervisor().failing(Operation::DeleteSnapshot);
    let failure = delete(&fake, "old").err().unwrap();
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert_eq!(fake.snapshot_names_of(domain().as_str()), ["older", "old"]);
    assert_eq!(
        fake.calls().last().unwrap(),
        &format!("unlock {}", domain())
    );
}

#[test]
fn a_listing_takes_no_lock_and_says_why_it_has_no_sizes() {
    let fake = hypervisor();
    let installation = tempfile::tempdir().unwrap();
    let paths = InstallationPaths::resolve(installation.path().to_str(), None, None);
    let domain = domain();
    let listing = list_snapshots_in(
        &FakeFleet::of(&fake),
        &paths,
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        &mut credentials(),
        &RecordedReport::default(),
    )
    .unwrap();
    assert_eq!(
        fake.calls(),
        [
            format!("locate {domain}"),
            "open hv1".to_string(),
            format!("snapshots {domain}"),
        ]
    );
    let names: Vec<&str> = listing
        .snapshots
        .iter()
        .map(|listed| listed.record.name.as_str())
        .collect();
    assert_eq!(names, ["older", "old"]);
    assert!(listing.declaration_unread.is_some());
    assert_eq!(
        listing.sizes_unread.as_deref(),
        Some("libvirt's test driver has no hypervisor system to ask")
    );

    let failing = hypervisor().failing(Operation::Snapshots);
    let failure = list_snapshots_in(
        &FakeFleet::of(&failing),
        &paths,
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        &mut credentials(),
        &RecordedReport::default(),
    )
    .err()
    .unwrap();
    assert_eq!(failure.status, ExitStatus::Hypervisor);
}

/// A domain whose file says it runs on another's machine, or on an existing host: every
/// snapshot verb refuses it before the fleet is asked anything, and its namesake's snapshots on
/// the hypervisor stay as they were.
#[test]
fn a_dependent_or_an_existing_host_is_refused_before_anything_is_asked() {
    use crate::config::settings::RunsOn;
    let web = DomainName::parse("web.example.test").unwrap();
    for (runs_on, says, hint) in [
        (
            RunsOn::DependsOn(web.clone()),
            "g.example.test has no guest of its own to snapshot: it depends on web.example.test",
            "`trog snapshot web.example.test`; the snapshot covers the whole guest, every site on it included",
        ),
        (
            RunsOn::ExistingHost("192.0.2.7".into()),
            "g.example.test is an existing host (192.0.2.7) that trog did not build",
            "trog only finishes g.example.test over SSH",
        ),
    ] {
        let fake = hypervisor();
        let fleet = FakeFleet::of(&fake).running_on(runs_on);
        let address = GuestAddress {
            domain: &domain(),
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        };
        let reporter = RecordedReport::default();
        let results = [
            take_snapshot_in(
                &fleet,
                &address,
                &NewSnapshot {
                    name: Some("new"),
                    keep: Some(1),
                    now_unix: 1_800_000_000,
                },
                &mut credentials(),
                &reporter,
            )
            .map(|_| ()),
            list_snapshots_in(
                &fleet,
                &InstallationPaths::resolve(Some("/nonexistent/installation"), None, None),
                &address,
                &mut credentials(),
                &reporter,
            )
            .map(|_| ()),
            delete_snapshot_in(&fleet, &address, "old", &mut credentials(), &reporter).map(|_| ()),
        ];
        for result in results {
            let failure = result.expect_err("refused");
            assert_eq!(failure.status, ExitStatus::Conflict);
            assert!(failure.chain()[0].contains(says), "{:?}", failure.chain());
            assert!(
                failure.hint.as_deref().unwrap().contains(hint),
                "{:?}",
                failure.hint
            );
        }
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
        assert_eq!(fake.snapshot_names_of(domain().as_str()), ["older", "old"]);
        assert!(reporter.0.borrow().is_empty());
    }
}
