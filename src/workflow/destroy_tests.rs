//! `destroy` against the fake hypervisor: the order of its steps, and at each step that fails,
//! what it returns and what it leaves.

use super::*;
use crate::credentials::{HandedInCredentials, TerminalPrompter};
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};
use std::net::Ipv4Addr;

const MAC: &str = "52:54:00:aa:bb:cc";
const PINNED: Ipv4Addr = Ipv4Addr::new(192, 168, 122, 50);
const FILTER: &str = "trog-tenant-a";

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn root() -> String {
    resource_names::root_volume(&domain())
}

fn seed() -> String {
    resource_names::seed_volume(&domain())
}

fn data() -> String {
    resource_names::data_volume(&domain())
}

/// A running guest of trog's with a snapshot, its three volumes, a pinned lease and a filter
/// only it uses.
fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1")
        .with_domain(
            domain().as_str(),
            FakeDomain {
                trogs: true,
                running: true,
                snapshots: vec![crate::snapshot::SnapshotRecord {
                    name: "s1".into(),
                    created_unix: 1,
                    running: false,
                    capture: crate::snapshot::Capture::Offline,
                    tag: None,
                }],
                interfaces: vec![("default".into(), MAC.into())],
                ..FakeDomain::default()
            },
        )
        .with_volumes("trog", &[&root(), &seed(), &data()])
        .with_reservation("default", MAC, PINNED)
        .with_filter(FILTER, &[domain().as_str()])
}

struct Run {
    result: Result<DestroyReport, Failure>,
    calls: Vec<String>,
}

fn destroy_on(hypervisor: &FakeHypervisor, purge: bool, grace: Duration) -> Run {
    let installation = tempfile::tempdir().unwrap();
    let paths = InstallationPaths::resolve(installation.path().to_str(), None, None);
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let domain = domain();
    let result = destroy_in(
        &FakeFleet::of(hypervisor),
        &paths,
        &DestroyRequest {
            domain: &domain,
            hypervisor: None,
            purge,
            answer_timeout: Duration::from_secs(1),
            now_unix: 0,
        },
        grace,
        &mut credentials,
        &RecordedReport::default(),
    );
    Run {
        result,
        calls: hypervisor.calls(),
    }
}

fn outcome(run: Run) -> DestroyOutcome {
    run.result
        .expect("the destroy ends with an outcome")
        .outcome
}

fn left_behind(run: Run) -> Vec<String> {
    outcome(run)
        .left_behind
        .into_iter()
        .map(|(what, _)| what)
        .collect()
}

#[test]
fn a_destroy_takes_its_steps_in_order_and_removes_everything_but_the_data() {
    let fake = hypervisor();
    let run = destroy_on(&fake, false, Duration::from_secs(5));
    let g = domain();
    assert_eq!(
        run.calls,
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".into(),
            // The last backup is refused on libvirt's test driver before anything is asked.
            format!("network_interfaces {g}"),
            format!("presence {g}"),
            format!("is_running {g}"),
            format!("shut_down {g}"),
            format!("is_running {g}"),
            format!("snapshot_names {g}"),
            format!("delete_snapshot {g} s1"),
            format!("undefine {g}"),
            "refresh_pool trog".into(),
            format!("delete_volume trog {}", root()),
            format!("delete_volume trog {}", seed()),
            format!("volume_exists trog {}", data()),
            "volume_names trog".into(),
            "lock network filters".into(),
            "remove_unused_filters".into(),
            "unlock network filters".into(),
            format!("release_pins default {MAC}"),
            format!("unlock {g}"),
        ]
    );
    let report = run.result.unwrap();
    assert_eq!(report.hypervisor, "hv1");
    assert!(
        matches!(&report.last_backup, LastBackup::NotTaken { why } if why.contains("test driver")),
        "{:?}",
        report.last_backup
    );
    assert_eq!(
        report.outcome,
        DestroyOutcome {
            removed: vec![
                "snapshot s1".into(),
                format!("domain {g}"),
                format!("volume {}", root()),
                format!("volume {}", seed()),
                format!("network filter {FILTER}"),
                format!("pinned lease of {PINNED} in network default"),
            ],
            kept: vec![format!("data volume {} (--purge deletes it)", data())],
            left_behind: vec![],
        }
    );
    assert!(fake.domain(g.as_str()).is_none());
    assert_eq!(fake.volumes("trog"), [data()]);
    assert!(fake.filters().is_empty());
    assert!(fake.reservations("default").is_empty());
}

#[test]
fn purge_deletes_the_data_volume_too() {
    let fake = hypervisor();
    let removed = outcome(destroy_on(&fake, true, Duration::ZERO)).removed;
    assert!(
        removed.contains(&format!("volume {}", data())),
        "{removed:?}"
    );
    assert!(fake.volumes("trog").is_empty());
}

#[test]
fn a_purge_forces_the_guest_off_at_once_for_nothing_of_it_is_kept() {
    let fake = hypervisor();
    let run = destroy_on(&fake, true, Duration::from_secs(3600));
    let g = domain();
    assert!(
        run.calls.contains(&format!("force_off {g}")),
        "{:?}",
        run.calls
    );
    assert!(
        !run.calls.contains(&format!("shut_down {g}")),
        "{:?}",
        run.calls
    );
    assert!(fake.domain(g.as_str()).is_none());
}

#[test]
fn a_guest_that_ignores_the_shutdown_is_forced_off_once_its_grace_is_over() {
    let fake = FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs: true,
            running: true,
            ignores_shutdown: true,
            ..FakeDomain::default()
        },
    );
    let run = destroy_on(&fake, false, Duration::ZERO);
    assert!(run.calls.contains(&format!("force_off {}", domain())));
    assert_eq!(outcome(run).removed, [format!("domain {}", domain())]);
}

/// A destroy that fails before it acts returns the error with its exit status, and changes
/// nothing; the guest's lock, once taken, is let go.
#[test]
fn a_failure_before_the_guest_is_touched_ends_the_destroy_and_changes_nothing() {
    let g = domain();
    let cases = [
        (
            Operation::Locate,
            ExitStatus::Failure,
            vec![format!("locate {g}")],
        ),
        (
            Operation::LockGuest,
            ExitStatus::Busy,
            vec![format!("locate {g}"), format!("lock {g}")],
        ),
        (
            Operation::Open,
            ExitStatus::Hypervisor,
            vec![
                format!("locate {g}"),
                format!("lock {g}"),
                "open hv1".into(),
                format!("unlock {g}"),
            ],
        ),
    ];
    for (failing, status, calls) in cases {
        let fake = hypervisor().failing(failing);
        let run = destroy_on(&fake, false, Duration::ZERO);
        let failure = run.result.expect_err("the destroy fails");
        assert_eq!(failure.status, status, "{failing:?}");
        assert_eq!(run.calls, calls, "{failing:?}");
        assert!(fake.domain(g.as_str()).is_some());
        assert_eq!(fake.volumes("trog").len(), 3);
    }
}

#[test]
fn a_domain_that_cannot_be_looked_up_or_is_not_trogs_is_left_alone() {
    let fake = hypervisor().failing(Operation::Presence);
    let run = destroy_on(&fake, false, Duration::ZERO);
    let failure = run.result.err().unwrap();
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    assert_eq!(
        failure.chain()[0],
        format!("fake on hv1 could not look up {}", domain())
    );
    assert_eq!(run.calls.last().unwrap(), &format!("unlock {}", domain()));
    assert_eq!(fake.volumes("trog").len(), 3);

    let foreign = FakeHypervisor::new("hv1")
        .with_domain(domain().as_str(), FakeDomain::default())
        .with_volumes("trog", &[&root()]);
    let failure = destroy_on(&foreign, false, Duration::ZERO)
        .result
        .err()
        .unwrap();
    assert_eq!(failure.status, ExitStatus::Conflict);
    assert!(failure.hint.unwrap().contains("virsh undefine"));
    assert!(foreign.domain(domain().as_str()).is_some());
    assert_eq!(foreign.volumes("trog"), [root()]);
}

#[test]
fn a_guest_that_is_not_there_leaves_its_volumes_to_delete() {
    let fake = FakeHypervisor::new("hv1").with_volumes("trog", &[&root(), &seed()]);
    let run = outcome(destroy_on(&fake, false, Duration::ZERO));
    assert_eq!(
        run.removed,
        [format!("volume {}", root()), format!("volume {}", seed())]
    );
    assert!(run.left_behind.is_empty());
}

/// A step that fails once the guest is being removed is named as left behind, and the rest
/// goes on: (the failing step, what is named, whether the domain is gone, the volumes left).
#[test]
fn a_failed_removal_step_is_left_behind_and_the_rest_goes_on() {
    let g = domain();
    let running = format!("domain {g} (running)");
    let cases: Vec<(Operation, Vec<String>, bool, Vec<String>)> = vec![
        (
            Operation::IsRunning,
            vec![running.clone()],
            true,
            vec![data()],
        ),
        (Operation::ForceOff, vec![running], true, vec![data()]),
        (
            Operation::SnapshotNames,
            vec!["the guest's snapshots".into()],
            true,
            vec![data()],
        ),
        (
            Operation::DeleteSnapshot,
            vec!["snapshot s1".into()],
            true,
            vec![data()],
        ),
        (
            Operation::Undefine,
            vec![format!("domain {g}")],
            false,
            vec![data()],
        ),
        (
            Operation::RefreshPool,
            vec!["the volumes in pool trog".into()],
            true,
            vec![data(), root(), seed()],
        ),
        (
            Operation::DeleteVolume,
            vec![format!("volume {}", root()), format!("volume {}", seed())],
            true,
            vec![data(), root(), seed()],
        ),
        (Operation::VolumeExists, vec![], true, vec![data()]),
        (
            Operation::LockNetworkFilters,
            vec![UNUSED_FILTERS.into()],
            true,
            vec![data()],
        ),
        (
            Operation::RemoveUnusedFilters,
            vec![UNUSED_FILTERS.into()],
            true,
            vec![data()],
        ),
        (
            Operation::ReleasePins,
            vec![format!("pinned lease of {MAC} in network default")],
            true,
            vec![data()],
        ),
    ];
    for (failing, named, domain_gone, volumes) in cases {
        let fake = hypervisor().failing(failing);
        let run = destroy_on(&fake, false, Duration::ZERO);
        assert_eq!(
            run.calls.last().unwrap(),
            &format!("unlock {g}"),
            "{failing:?}"
        );
        assert_eq!(left_behind(run), named, "{failing:?}");
        assert_eq!(
            fake.domain(g.as_str()).is_none(),
            domain_gone,
            "{failing:?}"
        );
        let mut left = fake.volumes("trog");
        left.sort();
        let mut expected = volumes;
        expected.sort();
        assert_eq!(left, expected, "{failing:?}");
    }
}

#[test]
fn only_the_volume_that_failed_is_left_behind() {
    let fake = hypervisor().failing_nth(Operation::DeleteVolume, 1);
    let run = destroy_on(&fake, false, Duration::ZERO);
    let outcome = outcome(run);
    assert_eq!(outcome.left_behind.len(), 1);
    assert_eq!(outcome.left_behind[0].0, format!("volume {}", root()));
    assert!(outcome.left_behind[0].1.contains("refused by the fake"));
    assert!(outcome.removed.contains(&format!("volume {}", seed())));
    let mut left = fake.volumes("trog");
    left.sort();
    let mut expected = vec![root(), data()];
    expected.sort();
    assert_eq!(left, expected);
}

/// A guest with an extra disk it declares, one it no longer declares, and beside them a volume of
/// another guest whose name begins like theirs.
fn hypervisor_with_extra_disks() -> FakeHypervisor {
    hypervisor().with_volumes(
        "trog",
        &[
            &resource_names::extra_disk_volume(&domain(), "db"),
            &resource_names::extra_disk_volume(&domain(), "old"),
            "g.example.test-disk-h.example.test-root.qcow2",
        ],
    )
}

#[test]
fn a_destroy_keeps_the_extra_disks_and_names_them() {
    let fake = hypervisor_with_extra_disks();
    let kept = outcome(destroy_on(&fake, false, Duration::ZERO)).kept;
    assert_eq!(
        kept,
        [
            format!("data volume {} (--purge deletes it)", data()),
            "disk volume g.example.test-disk-db.qcow2 (--purge deletes it)".to_string(),
            "disk volume g.example.test-disk-old.qcow2 (--purge deletes it)".to_string(),
        ]
    );
    assert_eq!(fake.volumes("trog").len(), 4);
}

#[test]
fn purge_deletes_every_extra_disk_and_nothing_of_another_guest() {
    let fake = hypervisor_with_extra_disks();
    let removed = outcome(destroy_on(&fake, true, Duration::ZERO)).removed;
    for disk in ["db", "old"] {
        let volume = resource_names::extra_disk_volume(&domain(), disk);
        assert!(removed.contains(&format!("volume {volume}")), "{removed:?}");
    }
    assert_eq!(
        fake.volumes("trog"),
        ["g.example.test-disk-h.example.test-root.qcow2"]
    );
}

#[test]
fn a_purge_that_cannot_list_the_pool_or_delete_a_disk_says_what_it_left() {
    let fake = hypervisor_with_extra_disks().failing(Operation::VolumeNames);
    let left = left_behind(destroy_on(&fake, true, Duration::ZERO));
    assert!(
        left.iter()
            .any(|entry| entry.starts_with("the extra disks in pool trog")),
        "{left:?}"
    );
    // The fourth deletion is the first extra disk's (root, seed and data come first).
    let fake = hypervisor_with_extra_disks().failing_nth(Operation::DeleteVolume, 4);
    let run = destroy_on(&fake, true, Duration::ZERO);
    let report = outcome(run);
    assert!(
        report
            .left_behind
            .iter()
            .any(|(what, _)| what == "volume g.example.test-disk-db.qcow2"),
        "{report:?}"
    );
    assert!(
        report
            .removed
            .contains(&"volume g.example.test-disk-old.qcow2".to_string()),
        "{report:?}"
    );
}
