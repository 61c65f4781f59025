//! Retiring the seed, against a fake guest and a fake hypervisor.

use super::*;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::machine::fake::{Answer, FakeMachine};

const DOMAIN: &str = "fake.example.test";
const POOL: &str = "trog";
const SEED: &str = "fake.example.test-seed.iso";

fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1")
        .with_domain(
            DOMAIN,
            FakeDomain {
                trogs: true,
                running: true,
                seed: Some(SEED.into()),
                ..FakeDomain::default()
            },
        )
        .with_volumes(POOL, &["fake.example.test-root.qcow2", SEED])
}

fn seed() -> SeedOf<'static> {
    SeedOf {
        domain: DOMAIN,
        pool: POOL,
        volume: SEED,
    }
}

#[test]
fn the_seed_goes_after_cloud_init_is_done_and_the_datasource_is_pinned() {
    let guest = FakeMachine::new();
    let hypervisor = hypervisor();
    retire_seed(&guest, &hypervisor, &seed()).unwrap();
    let lines = guest.command_lines();
    let cloud_init = lines.iter().position(|line| line.contains("cloud-init"));
    let pin = lines
        .iter()
        .position(|line| line.contains(DATASOURCE_PIN_PATH));
    assert!(
        matches!((cloud_init, pin), (Some(waited), Some(pinned)) if waited < pinned),
        "{lines:?}"
    );
    assert_eq!(
        hypervisor.calls(),
        [
            format!("detach_seed {DOMAIN} {SEED}"),
            format!("delete_volume {POOL} {SEED}"),
        ]
    );
    assert_eq!(hypervisor.domain(DOMAIN).unwrap().seed, None);
    assert_eq!(hypervisor.volumes(POOL), ["fake.example.test-root.qcow2"]);
}

#[test]
fn a_detach_that_fails_is_named_and_leaves_the_seed_attached_and_in_the_pool() {
    let guest = FakeMachine::new();
    let hypervisor = hypervisor().failing(Operation::DetachSeed);
    let error = retire_seed(&guest, &hypervisor, &seed()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("cannot detach seed {SEED} from {DOMAIN} on hv1")
    );
    let failure = crate::diagnose::Failure::from(error);
    assert_eq!(failure.status, crate::exit_status::ExitStatus::Hypervisor);
    assert!(
        failure
            .hint
            .as_deref()
            .is_some_and(|hint| hint.contains("run provision again")),
        "{:?}",
        failure.hint
    );
    assert_eq!(
        hypervisor.domain(DOMAIN).unwrap().seed.as_deref(),
        Some(SEED)
    );
    assert!(hypervisor.volumes(POOL).contains(&SEED.to_string()));
    assert!(hypervisor
        .calls()
        .iter()
        .all(|call| !call.starts_with("delete_volume")));
}

#[test]
fn a_first_boot_that_failed_keeps_its_seed() {
    let guest =
        FakeMachine::new().answer("cloud-init status", &[Answer::Exit(1, "status: error\n")]);
    let hypervisor = hypervisor();
    let error = retire_seed(&guest, &hypervisor, &seed()).unwrap_err();
    assert!(
        matches!(error, RetireSeedError::FirstBoot { .. }),
        "{error}"
    );
    assert!(hypervisor.calls().is_empty(), "{:?}", hypervisor.calls());
    assert_eq!(guest.count(DATASOURCE_PIN_PATH), 0);
}

#[test]
fn a_retirement_cut_short_is_finished_by_the_next() {
    // Detached by a run that stopped before deleting the volume.
    let hypervisor = hypervisor();
    hypervisor.detach_seed(DOMAIN, SEED).unwrap();
    retire_seed(&FakeMachine::new(), &hypervisor, &seed()).unwrap();
    assert_eq!(hypervisor.volumes(POOL), ["fake.example.test-root.qcow2"]);
}
