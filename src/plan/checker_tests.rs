//! The checker shown refusing plans built by hand to break each rule, beside a hand-built good
//! plan it accepts: a planner bug must end in a refusal, not in a lost disk.

use super::*;
use crate::model::names::DomainName;
use crate::model::units::Bytes;
use crate::plan::desired::{DesiredVolume, GuestTag};
use crate::plan::observed::{ObservedDomain, ObservedVolume};
use crate::plan::resource_names;

fn desired() -> DesiredGuest {
    let domain = DomainName::parse("www.example.test").unwrap();
    DesiredGuest {
        pool_name: "trog".into(),
        pool_path: "/vms".into(),
        base_image_volume: resource_names::base_image_volume("aaaabbbb"),
        base_image_digest: "aaaabbbb".into(),
        partial_base_image_volume: resource_names::partial_base_image_volume("aaaabbbb", "h"),
        base_image_source: "file:///images/debian.qcow2".into(),
        root_volume: DesiredVolume {
            name: resource_names::root_volume(&domain),
            capacity: Bytes::from_gib(10),
            declared_at: None,
        },
        seed_volume: resource_names::seed_volume(&domain),
        seed_sha256: "5eed".into(),
        equivalent_seed_sha256s: vec!["01d5eed".into()],
        data_volume: Some(DesiredVolume {
            name: resource_names::data_volume(&domain),
            capacity: Bytes::from_gib(20),
            declared_at: None,
        }),
        extra_disks: Vec::new(),
        boot_fingerprint: "b00t".into(),
        shape_fingerprint: "5hape".into(),
        domain_type: crate::model::hypervisor::DomainType::Kvm,
        payload_digest: "pay1oad".into(),
        installation: None,
        domain,
    }
}

fn tag() -> GuestTag {
    desired().tag_before_finish()
}

/// A running guest of trog's, with its three volumes and `snapshots`.
fn running_guest(snapshots: &[&str]) -> ObservedGuest {
    let volume = |gib| ObservedVolume {
        capacity: Bytes::from_gib(gib),
        sha256: None,
    };
    ObservedGuest {
        pool: PoolState::Active,
        base_image_present: true,
        partial_base_image_present: false,
        domain: Some(ObservedDomain {
            tag: Some(tag()),
            running: true,
            autostart: true,
            snapshots: snapshots.iter().map(|name| name.to_string()).collect(),
            seed_attached: true,
            shares_folders: false,
            disk_pools: Vec::new(),
            domain_type: None,
        }),
        root_volume: Some(volume(10)),
        seed_volume: Some(volume(0)),
        data_volume: Some(volume(20)),
        extra_disks: Default::default(),
    }
}

/// The same guest, but a domain trog did not create.
fn foreign_guest() -> ObservedGuest {
    let mut observed = running_guest(&[]);
    observed.domain.as_mut().unwrap().tag = None;
    observed
}

fn root() -> String {
    desired().root_volume.name
}
fn seed() -> String {
    desired().seed_volume
}
fn data() -> String {
    desired().data_volume.unwrap().name
}

fn delete(volume: String) -> Action {
    Action::DeleteVolume {
        volume,
        why: "replaced".into(),
    }
}
fn define() -> Action {
    Action::DefineDomain {
        tag: tag(),
        redefine: false,
        until_next_start: false,
    }
}
fn redefine() -> Action {
    Action::DefineDomain {
        tag: tag(),
        redefine: true,
        until_next_start: false,
    }
}
/// A redefinition a running guest takes at its next start (`--restart-later`).
fn redefine_for_next_start() -> Action {
    Action::DefineDomain {
        tag: tag(),
        redefine: true,
        until_next_start: true,
    }
}
fn create_root() -> Action {
    Action::CreateRootVolume {
        volume: root(),
        backing_volume: desired().base_image_volume,
        capacity: Bytes::from_gib(10),
    }
}
fn create_data() -> Action {
    Action::CreateDataVolume {
        volume: data(),
        capacity: Bytes::from_gib(20),
    }
}
fn upload_seed() -> Action {
    Action::UploadSeed {
        volume: seed(),
        sha256: "5eed".into(),
    }
}
fn finish() -> Action {
    Action::Finish {
        payload_digest: "pay1oad".into(),
    }
}

/// A new guest's whole plan, on a hypervisor with nothing yet.
fn fresh_plan() -> Vec<Action> {
    vec![
        Action::DefinePool {
            name: "trog".into(),
            path: "/vms".into(),
        },
        Action::StartPool {
            name: "trog".into(),
        },
        Action::UploadBaseImage {
            volume: desired().base_image_volume,
            source: "file:///images/debian.qcow2".into(),
            digest: "aaaabbbb".into(),
        },
        define(),
        create_data(),
        create_root(),
        upload_seed(),
        Action::SetAutostart,
        Action::StartDomain,
        Action::WaitForSsh,
        finish(),
    ]
}

/// A new root disk for a running guest: stop, replace root and seed, start, finish.
fn rebuild_plan() -> Vec<Action> {
    vec![
        Action::StopDomain,
        delete(root()),
        delete(seed()),
        redefine(),
        create_root(),
        upload_seed(),
        Action::StartDomain,
        Action::WaitForSsh,
        finish(),
    ]
}

const PLAIN: Resolution = Resolution {
    force: false,
    destroy_data: false,
    restart_later: false,
};
const FORCE: Resolution = Resolution {
    force: true,
    destroy_data: false,
    restart_later: false,
};
const RESTART_LATER: Resolution = Resolution {
    force: false,
    destroy_data: false,
    restart_later: true,
};
const DESTROY_DATA: Resolution = Resolution {
    force: false,
    destroy_data: true,
    restart_later: false,
};

fn check(
    actions: Vec<Action>,
    observed: &ObservedGuest,
    resolution: Resolution,
) -> Result<(), String> {
    let plan = Plan {
        domain: "www.example.test".into(),
        actions,
    };
    check_plan(&plan, &desired(), observed, resolution)
        .map_err(|violation| violation.rule.to_string())
}

/// `actions` with the action at `index` removed.
fn without(mut actions: Vec<Action>, index: usize) -> Vec<Action> {
    actions.remove(index);
    actions
}

/// `actions` with `action` put at `index`.
fn with(mut actions: Vec<Action>, index: usize, action: Action) -> Vec<Action> {
    actions.insert(index, action);
    actions
}

#[test]
fn hand_built_good_plans_are_accepted() {
    assert_eq!(
        check(fresh_plan(), &ObservedGuest::nothing(), PLAIN),
        Ok(())
    );
    assert_eq!(check(rebuild_plan(), &running_guest(&[]), PLAIN), Ok(()));
    let recreate_data = vec![
        Action::StopDomain,
        delete(data()),
        create_data(),
        Action::StartDomain,
        Action::WaitForSsh,
        finish(),
    ];
    assert_eq!(
        check(recreate_data, &running_guest(&[]), DESTROY_DATA),
        Ok(())
    );
    assert_eq!(
        check(
            vec![redefine_for_next_start()],
            &running_guest(&[]),
            RESTART_LATER
        ),
        Ok(())
    );
}

#[test]
fn hand_built_bad_plans_are_refused_for_the_rule_they_break() {
    let nothing = ObservedGuest::nothing();
    let running = running_guest(&[]);
    let with_snapshots = running_guest(&["before-upgrade"]);
    let orphan_volumes = running_guest(&[]).tap_no_domain();
    let foreign = foreign_guest();
    let stopped_data_delete = vec![Action::StopDomain, delete(data()), create_data()];
    let cases: Vec<(&str, Vec<Action>, &ObservedGuest, Resolution, &str)> = vec![
        (
            "a definition for the next start the run did not ask for",
            vec![redefine_for_next_start()],
            &running,
            PLAIN,
            "--restart-later",
        ),
        (
            "a definition for the next start of a stopped guest",
            vec![
                Action::StopDomain,
                redefine_for_next_start(),
                Action::StartDomain,
            ],
            &running,
            RESTART_LATER,
            "--restart-later",
        ),
        (
            "deleting data without --destroy-data",
            stopped_data_delete.clone(),
            &running,
            PLAIN,
            "--destroy-data",
        ),
        (
            "deleting data with only --force",
            stopped_data_delete,
            &running,
            FORCE,
            "--destroy-data",
        ),
        (
            "deleting data of a running guest",
            vec![delete(data()), create_data()],
            &running,
            DESTROY_DATA,
            "stopped",
        ),
        (
            "deleting the root disk of a running guest",
            without(rebuild_plan(), 0),
            &running,
            PLAIN,
            "stopped",
        ),
        (
            "deleting the base image",
            vec![Action::StopDomain, delete(desired().base_image_volume)],
            &running,
            FORCE,
            "own",
        ),
        (
            "deleting another guest's volume",
            vec![
                Action::StopDomain,
                delete("db.example.test-data.qcow2".into()),
            ],
            &running,
            DESTROY_DATA,
            "own",
        ),
        (
            "deleting a root disk with snapshots",
            rebuild_plan(),
            &with_snapshots,
            FORCE,
            "snapshots",
        ),
        (
            "deleting snapshots without --force",
            with(
                rebuild_plan(),
                1,
                Action::DeleteSnapshots {
                    names: vec!["before-upgrade".into()],
                },
            ),
            &with_snapshots,
            PLAIN,
            "--force",
        ),
        (
            "finishing before the guest answers",
            without(fresh_plan(), 9),
            &nothing,
            PLAIN,
            "SSH answers",
        ),
        (
            "finishing a stopped guest",
            vec![Action::StopDomain, Action::WaitForSsh, finish()],
            &running,
            PLAIN,
            "runs",
        ),
        (
            "waiting for SSH on a guest not started",
            without(fresh_plan(), 8),
            &nothing,
            PLAIN,
            "runs",
        ),
        (
            "starting before define",
            with(without(fresh_plan(), 3), 7, define()),
            &nothing,
            PLAIN,
            "defined before",
        ),
        (
            "starting with no domain at all",
            vec![Action::StartDomain],
            &orphan_volumes,
            PLAIN,
            "defined",
        ),
        (
            "starting without a seed",
            without(fresh_plan(), 6),
            &nothing,
            PLAIN,
            "seed",
        ),
        (
            "starting without a root disk",
            without(fresh_plan(), 5),
            &nothing,
            PLAIN,
            "root disk",
        ),
        (
            "starting without the data volume",
            without(fresh_plan(), 4),
            &nothing,
            PLAIN,
            "data volume",
        ),
        (
            "a root disk before its base image",
            with(
                without(fresh_plan(), 2),
                5,
                Action::UploadBaseImage {
                    volume: desired().base_image_volume,
                    source: "x".into(),
                    digest: "aaaabbbb".into(),
                },
            ),
            &nothing,
            PLAIN,
            "base image",
        ),
        (
            "volumes before the pool exists",
            without(without(fresh_plan(), 0), 0),
            &nothing,
            PLAIN,
            "pool",
        ),
        (
            "volumes in a pool never started",
            without(fresh_plan(), 1),
            &nothing,
            PLAIN,
            "pool",
        ),
        (
            "starting a pool never defined",
            without(fresh_plan(), 0),
            &nothing,
            PLAIN,
            "defined",
        ),
        (
            "defining over an existing domain",
            vec![Action::StopDomain, define()],
            &running,
            PLAIN,
            "redefined",
        ),
        (
            "redefining a domain that is not there",
            with(without(fresh_plan(), 3), 3, redefine()),
            &nothing,
            PLAIN,
            "redefined",
        ),
        (
            "a data volume over one that exists",
            vec![Action::StopDomain, create_data()],
            &running,
            DESTROY_DATA,
            "never made over",
        ),
        (
            "a root disk over one that exists",
            vec![Action::StopDomain, create_root()],
            &running,
            PLAIN,
            "only where there is none",
        ),
        (
            "redefining a foreign domain without --force",
            vec![Action::StopDomain, redefine()],
            &foreign,
            PLAIN,
            "did not create",
        ),
        (
            "stopping a foreign domain without --force",
            vec![Action::StopDomain],
            &foreign,
            PLAIN,
            "did not create",
        ),
    ];
    let mut slipped = Vec::new();
    for (name, actions, observed, resolution, rule) in cases {
        match check(actions, observed, resolution) {
            Ok(()) => slipped.push(format!("{name}: accepted")),
            Err(refused) if !refused.contains(rule) => {
                slipped.push(format!("{name}: refused for `{refused}`, not `{rule}`"))
            }
            Err(_) => {}
        }
    }
    assert!(slipped.is_empty(), "{}", slipped.join("\n"));
}

trait NoDomain {
    fn tap_no_domain(self) -> ObservedGuest;
}

impl NoDomain for ObservedGuest {
    /// The observation without its domain: volumes left by an interrupted run.
    fn tap_no_domain(mut self) -> ObservedGuest {
        self.domain = None;
        self
    }
}
