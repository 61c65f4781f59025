//! `image prune`'s removal of a baked image's copy from a pool, against the fake hypervisor:
//! removed only when nothing uses it, kept (and named) otherwise, and a hypervisor that fails
//! leaves the copy where it is.

use super::*;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::model::hypervisor::LibvirtUri;
use crate::model::names::HypervisorName;
use std::time::Duration;

const COPY: &str = "trog-base-5555555555555555.qcow2";

fn config() -> HypervisorConfig {
    HypervisorConfig::with_defaults(
        HypervisorName::parse("hv1").unwrap(),
        LibvirtUri::parse("test:///default").unwrap(),
    )
}

/// Prunes `COPY` from the fake's pool; the outcome and the volumes the pool has after.
fn prune_on(fake: &FakeHypervisor, dry_run: bool) -> (Option<CopyOutcome>, Vec<String>) {
    let config = config();
    let dir = tempfile::tempdir().unwrap();
    let locks = Locks::new(dir.path().join("locks"), Duration::from_secs(1), "prune");
    let outcome = prune_copy(fake, &config, COPY, &locks, dry_run);
    (outcome, fake.volumes(&config.pool_name))
}

fn pool() -> String {
    config().pool_name
}

#[test]
fn a_copy_nothing_uses_is_removed() {
    let fake = FakeHypervisor::new("hv1").with_volumes(&pool(), &[COPY]);
    let (outcome, left) = prune_on(&fake, false);
    assert_eq!(outcome, Some(CopyOutcome::Removed));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_boot_files_kept_beside_a_removed_copy_go_with_it() {
    let kept = resource_names::kept_beside_base_image(COPY);
    let mut volumes: Vec<&str> = kept.iter().map(String::as_str).collect();
    volumes.extend([COPY, "trog-base-6666666666666666.qcow2.kernel"]);
    let fake = FakeHypervisor::new("hv1").with_volumes(&pool(), &volumes);
    let (outcome, left) = prune_on(&fake, false);
    assert_eq!(outcome, Some(CopyOutcome::Removed));
    assert_eq!(left, ["trog-base-6666666666666666.qcow2.kernel"]);
}

#[test]
fn a_boot_file_that_cannot_be_removed_keeps_the_copy_for_the_next_prune() {
    let kernel = format!("{COPY}.kernel");
    let fake = FakeHypervisor::new("hv1")
        .with_volumes(&pool(), &[COPY, &kernel])
        .failing(Operation::DeleteVolume);
    let (outcome, left) = prune_on(&fake, false);
    assert!(
        matches!(&outcome, Some(CopyOutcome::Unasked { .. })),
        "{outcome:?}"
    );
    assert!(left.contains(&COPY.to_string()), "{left:?}");
}

#[test]
fn a_dry_run_says_the_copy_would_go_and_leaves_it() {
    let fake = FakeHypervisor::new("hv1").with_volumes(&pool(), &[COPY]);
    let (outcome, left) = prune_on(&fake, true);
    assert_eq!(outcome, Some(CopyOutcome::Removed));
    assert_eq!(left, [COPY]);
    assert!(
        !fake
            .calls()
            .iter()
            .any(|call| call.starts_with("delete_volume")),
        "{:?}",
        fake.calls()
    );
}

#[test]
fn a_copy_a_root_disk_is_layered_over_is_kept_and_the_disk_named() {
    let fake = FakeHypervisor::new("hv1").with_layered(&pool(), "g-root.qcow2", COPY);
    let (outcome, left) = prune_on(&fake, false);
    assert_eq!(
        outcome,
        Some(CopyOutcome::Kept {
            by: vec!["volume g-root.qcow2".into()]
        })
    );
    assert!(left.contains(&COPY.to_string()));
}

#[test]
fn a_copy_a_domain_boots_from_is_kept_and_the_domain_named() {
    let fake = FakeHypervisor::new("hv1")
        .with_volumes(&pool(), &[COPY])
        .with_domain(
            "g.example.test",
            FakeDomain {
                disks: vec![format!("/var/lib/trog/pool/{COPY}")],
                ..FakeDomain::default()
            },
        );
    let (outcome, left) = prune_on(&fake, false);
    assert_eq!(
        outcome,
        Some(CopyOutcome::Kept {
            by: vec!["domain g.example.test".into()]
        })
    );
    assert_eq!(left, [COPY]);
}

#[test]
fn a_pool_without_the_copy_has_nothing_to_report() {
    let fake = FakeHypervisor::new("hv1").with_volumes(&pool(), &["other.qcow2"]);
    let (outcome, left) = prune_on(&fake, false);
    assert_eq!(outcome, None);
    assert_eq!(left, ["other.qcow2"]);
}

#[test]
fn a_hypervisor_that_cannot_say_what_uses_the_copy_keeps_it_and_says_why() {
    let fake = FakeHypervisor::new("hv1")
        .with_volumes(&pool(), &[COPY])
        .failing(Operation::VolumeUse);
    let (outcome, left) = prune_on(&fake, false);
    assert!(
        matches!(&outcome, Some(CopyOutcome::Unasked { why }) if !why.is_empty()),
        "{outcome:?}"
    );
    assert_eq!(left, [COPY]);
}

#[test]
fn a_failed_delete_is_reported_and_the_image_record_is_kept_for_a_later_prune() {
    let fake = FakeHypervisor::new("hv1")
        .with_volumes(&pool(), &[COPY])
        .failing(Operation::DeleteVolume);
    let (outcome, left) = prune_on(&fake, false);
    assert!(
        matches!(&outcome, Some(CopyOutcome::Unasked { .. })),
        "{outcome:?}"
    );
    assert_eq!(left, [COPY]);
    let image = PrunedImage {
        record: BakedRecord {
            key: "k".into(),
            built_at: 0,
            distro: "debian".into(),
            release: "bookworm".into(),
            mirror: "http://deb.debian.org/debian".into(),
            security_mirror: String::new(),
            packages: vec!["nginx".into()],
            versions: Default::default(),
            builder: "b".into(),
            image_sha256: "5555555555555555".into(),
        },
        copies: vec![PoolCopy {
            hypervisor: "hv1".into(),
            pool: pool(),
            volume: COPY.into(),
            outcome: outcome.unwrap(),
        }],
    };
    assert!(image.record_kept());
}
