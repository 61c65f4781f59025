//! Scenario snapshots of plans, and properties every plan keeps over random observations.

use super::*;
use crate::model::hypervisor::DomainType;
use crate::model::names::DomainName;
use crate::model::units::Bytes;
use proptest::prelude::*;

fn desired() -> DesiredGuest {
    let domain = DomainName::parse("www.example.test").unwrap();
    DesiredGuest {
        pool_name: "trog".into(),
        pool_path: "/vms".into(),
        base_image_volume: resource_names::base_image_volume("aaaabbbbccccddddeeee"),
        base_image_digest: "aaaabbbbccccddddeeee".into(),
        partial_base_image_volume: resource_names::partial_base_image_volume(
            "aaaabbbbccccddddeeee",
            "trog-host",
        ),
        base_image_source: "file:///images/debian.qcow2".into(),
        root_volume: DesiredVolume {
            name: resource_names::root_volume(&domain),
            capacity: Bytes::from_gib(10),
            declared_at: None,
        },
        seed_volume: resource_names::seed_volume(&domain),
        seed_sha256: "5eed5eed5eed5eed".into(),
        equivalent_seed_sha256s: vec!["01d5eed01d5eed".into()],
        data_volume: Some(DesiredVolume {
            name: resource_names::data_volume(&domain),
            capacity: Bytes::from_gib(20),
            declared_at: None,
        }),
        extra_disks: Vec::new(),
        boot_fingerprint: "b00tb00tb00tb00t".into(),
        shape_fingerprint: "5hape5hape5hape5".into(),
        domain_type: crate::model::hypervisor::DomainType::Kvm,
        payload_digest: "pay1oadpay1oad00".into(),
        installation: None,
        domain,
    }
}

fn converged_observation(desired: &DesiredGuest) -> ObservedGuest {
    ObservedGuest {
        pool: PoolState::Active,
        base_image_present: true,
        partial_base_image_present: false,
        domain: Some(ObservedDomain {
            tag: Some(GuestTag {
                boot_fingerprint: desired.boot_fingerprint.clone(),
                shape_fingerprint: desired.shape_fingerprint.clone(),
                payload_digest: Some(desired.payload_digest.clone()),
            }),
            running: true,
            autostart: true,
            snapshots: Vec::new(),
            // Past its first boot: the seed is retired.
            seed_attached: false,
            shares_folders: false,
            disk_pools: Vec::new(),
            domain_type: Some(desired.domain_type),
        }),
        root_volume: Some(ObservedVolume {
            capacity: Bytes::from_gib(10),
            sha256: None,
        }),
        seed_volume: None,
        data_volume: Some(ObservedVolume {
            capacity: Bytes::from_gib(20),
            sha256: None,
        }),
        extra_disks: ObservedExtraDisks::default(),
    }
}

/// [`desired`] with an extra disk `db` of 2 GiB on virtio.
fn desired_with_a_disk() -> DesiredGuest {
    let mut desired = desired();
    desired.extra_disks.push(DesiredDisk {
        name: "db".into(),
        volume: DB_DISK.into(),
        capacity: Bytes::from_gib(2),
        bus: "virtio".into(),
        declared_at: Some("www.example.test.yaml:4:5".into()),
    });
    desired
}

const DB_DISK: &str = "www.example.test-disk-db.qcow2";
/// A disk the guest had and no longer declares.
const OLD_DISK: &str = "www.example.test-disk-old.qcow2";

fn planned(desired: &DesiredGuest, observed: &ObservedGuest, resolution: Resolution) -> String {
    match plan(desired, observed, resolution) {
        Ok(plan) => {
            check_plan(&plan, desired, observed, resolution).expect("plan keeps every invariant");
            plan.to_string()
        }
        Err(conflicts) => format!("refused: {conflicts}\n"),
    }
}

fn tag_mut(observed: &mut ObservedGuest) -> &mut GuestTag {
    observed.domain.as_mut().unwrap().tag.as_mut().unwrap()
}

#[test]
fn scenarios() {
    let desired = desired();
    let converged = converged_observation(&desired);
    let mut text = String::new();
    let mut scenario = |name: &str, observed: &ObservedGuest, resolution: Resolution| {
        text.push_str(&format!(
            "## {name}\n{}\n",
            planned(&desired, observed, resolution)
        ));
    };
    let none = Resolution::default();
    let force = Resolution {
        force: true,
        ..Resolution::default()
    };
    let destroy = Resolution {
        destroy_data: true,
        ..Resolution::default()
    };

    scenario("nothing there yet", &ObservedGuest::nothing(), none);
    scenario("converged", &converged, none);

    let mut boot = converged.clone();
    tag_mut(&mut boot).boot_fingerprint = "0ldb00t".into();
    scenario(
        "boot inputs changed: root disk replaced, data kept",
        &boot,
        none,
    );

    let mut boot_alone = boot.clone();
    boot_alone.data_volume = None;
    scenario(
        "boot inputs changed, data volume not made yet: powered off, root disk replaced",
        &boot_alone,
        none,
    );
    let mut boot_sharing = boot_alone.clone();
    boot_sharing.domain.as_mut().unwrap().shares_folders = true;
    scenario(
        "boot inputs changed, a folder shared: shut down cleanly, root disk replaced",
        &boot_sharing,
        none,
    );
    let mut boot_with_a_disk = boot_alone.clone();
    boot_with_a_disk
        .extra_disks
        .defined
        .insert(OLD_DISK.into(), "virtio".into());
    scenario(
        "boot inputs changed, an extra disk attached: shut down cleanly, root disk replaced",
        &boot_with_a_disk,
        none,
    );

    let mut snapshotted = boot.clone();
    snapshotted.domain.as_mut().unwrap().snapshots =
        vec!["20261130T212233Z".into(), "before-upgrade".into()];
    scenario(
        "boot inputs changed over snapshots: refused, they go with the root disk",
        &snapshotted,
        none,
    );
    scenario(
        "boot inputs changed over snapshots, --force: deleted first",
        &snapshotted,
        force,
    );

    let mut shape = converged.clone();
    tag_mut(&mut shape).shape_fingerprint = "0ld5hape".into();
    scenario("shape changed: redefined and restarted", &shape, none);
    let later = Resolution {
        restart_later: true,
        ..Resolution::default()
    };
    scenario(
        "shape changed, --restart-later: redefined, applied at the next start",
        &shape,
        later,
    );
    let mut shape_stopped = shape.clone();
    shape_stopped.domain.as_mut().unwrap().running = false;
    scenario(
        "shape changed on a stopped guest, --restart-later: redefined and started",
        &shape_stopped,
        later,
    );

    let mut emulated = converged.clone();
    emulated.domain.as_mut().unwrap().domain_type = Some(DomainType::Qemu);
    scenario(
        "defined for software emulation, the hypervisor now runs KVM: redefined and restarted",
        &emulated,
        none,
    );
    let mut other_kind = converged.clone();
    other_kind.domain.as_mut().unwrap().domain_type = None;
    scenario(
        "defined for a virtualisation trog does not write: left as it is",
        &other_kind,
        none,
    );

    let mut without_data = converged.clone();
    without_data.data_volume = None;
    scenario(
        "data volume declared on a built guest: made, attached by a redefinition, restarted",
        &without_data,
        none,
    );
    scenario(
        "data volume declared on a built guest, --restart-later: restarted all the same",
        &without_data,
        later,
    );

    let mut payload = converged.clone();
    tag_mut(&mut payload).payload_digest = Some("0ldpay1oad".into());
    scenario("payload changed: finished again", &payload, none);

    let mut stopped = converged.clone();
    stopped.domain.as_mut().unwrap().running = false;
    scenario("stopped by hand: started again", &stopped, none);

    let mut interrupted = converged.clone();
    tag_mut(&mut interrupted).payload_digest = None;
    interrupted.domain.as_mut().unwrap().running = false;
    interrupted.domain.as_mut().unwrap().autostart = false;
    interrupted.root_volume = None;
    interrupted.domain.as_mut().unwrap().seed_attached = true;
    interrupted.seed_volume = Some(ObservedVolume {
        capacity: Bytes(100),
        sha256: Some("ha1f".into()),
    });
    interrupted.base_image_present = false;
    interrupted.partial_base_image_present = true;
    scenario("interrupted during the seed upload", &interrupted, none);

    let mut foreign = converged.clone();
    foreign.domain.as_mut().unwrap().tag = None;
    scenario("foreign domain", &foreign, none);
    scenario("foreign domain, --force", &foreign, force);

    let mut leftovers = ObservedGuest::nothing();
    leftovers.root_volume = Some(ObservedVolume {
        capacity: Bytes::from_gib(10),
        sha256: None,
    });
    leftovers.data_volume = Some(ObservedVolume {
        capacity: Bytes::from_gib(20),
        sha256: None,
    });
    scenario("volumes without a domain", &leftovers, none);
    scenario("volumes without a domain, --force", &leftovers, force);
    scenario(
        "volumes without a domain, --destroy-data",
        &leftovers,
        destroy,
    );

    let mut small = converged.clone();
    small.data_volume = Some(ObservedVolume {
        capacity: Bytes::from_gib(5),
        sha256: None,
    });
    scenario("data volume too small", &small, none);
    scenario("data volume too small, --destroy-data", &small, destroy);

    let mut big = converged.clone();
    big.data_volume = Some(ObservedVolume {
        capacity: Bytes::from_gib(40),
        sha256: None,
    });
    scenario("data volume bigger than declared", &big, none);
    scenario("data volume bigger than declared, --force", &big, force);
    scenario(
        "data volume bigger than declared, --destroy-data",
        &big,
        destroy,
    );

    insta::assert_snapshot!(text);
}

/// A data volume bigger than declared (the declaration made smaller) is never shrunk: a plain or
/// `--force` run is refused naming both sizes, where the size is written and the line to write
/// back; `--destroy-data` recreates it empty at the declared size. A bigger declaration stays
/// refused as before.
#[test]
fn a_data_volume_declared_smaller_than_it_is_is_refused() {
    let mut desired = desired();
    let data = desired.data_volume.as_mut().unwrap();
    data.capacity = Bytes(3584 * 1024 * 1024);
    data.declared_at = Some("www.example.test.yaml:4:5".into());
    let mut observed = converged_observation(&desired);
    observed.data_volume = Some(ObservedVolume {
        capacity: Bytes::from_gib(4),
        sha256: None,
    });
    for resolution in [
        Resolution::default(),
        Resolution {
            force: true,
            restart_later: true,
            ..Resolution::default()
        },
    ] {
        let conflicts = plan(&desired, &observed, resolution).unwrap_err();
        assert_eq!(
            conflicts.conflicts,
            [Conflict::DataVolumeShrunk {
                volume: "www.example.test-data.qcow2".into(),
                observed: Bytes::from_gib(4),
                declared: Bytes(3584 * 1024 * 1024),
                declared_at: Some("www.example.test.yaml:4:5".into()),
            }]
        );
        assert_eq!(
            conflicts.conflicts[0].to_string(),
            "data volume www.example.test-data.qcow2 holds 4GB but 3584MB is declared at \
             www.example.test.yaml:4:5; a data volume is never shrunk (its filesystem and files \
             fill it): declare `data_volume_size: 4G` again, or back up what it holds (`trog \
             backup`) and --destroy-data recreates it empty at 3584MB"
        );
        assert_eq!(conflicts.conflicts[0].resolving_flag(), "--destroy-data");
        assert_eq!(
            crate::diagnose::Diagnose::exit_status(&conflicts),
            crate::exit_status::ExitStatus::Conflict
        );
    }
    let destroy = Resolution {
        destroy_data: true,
        ..Resolution::default()
    };
    let recreated = plan(&desired, &observed, destroy).unwrap();
    assert!(check_plan(&recreated, &desired, &observed, destroy).is_ok());
    assert!(recreated.actions.iter().any(|action| matches!(
        action,
        Action::CreateDataVolume { capacity, .. } if *capacity == Bytes(3584 * 1024 * 1024)
    )));
    let after = simulate(&desired, observed.clone(), &recreated);
    assert!(plan(&desired, &after, Resolution::default())
        .unwrap()
        .is_converged());
    // An odd size a volume made elsewhere may have is named, though it cannot be written back.
    observed.data_volume.as_mut().unwrap().capacity = Bytes(4 * 1024 * 1024 * 1024 + 512);
    let odd = plan(&desired, &observed, Resolution::default()).unwrap_err();
    assert!(
        odd.conflicts[0]
            .to_string()
            .contains("declare 4294967808B again"),
        "{odd}"
    );
}

/// A guest as it was before seeds were retired: built, finished, its seed (of `sha256`) attached
/// and in the pool.
/// A guest whose disks are in another pool than `pool_name` names now is refused whatever the
/// flags, naming both pools: its volumes would be made anew in the new pool, its data volume
/// empty. Disks in the named pool, or a definition without pool disks, plan as before.
#[test]
fn a_guest_whose_disks_are_in_another_pool_is_refused() {
    let desired = desired();
    let mut observed = converged_observation(&desired);
    observed.root_volume = None;
    observed.data_volume = None;
    observed.domain.as_mut().unwrap().disk_pools = vec!["old-pool".into(), "trog".into()];
    for resolution in [
        Resolution::default(),
        Resolution {
            force: true,
            destroy_data: true,
            restart_later: false,
        },
    ] {
        let said = planned(&desired, &observed, resolution);
        assert!(
            said.starts_with("refused: ")
                && said.contains("the guest's disks are in pool old-pool, but hypervisors.conf's pool_name now says trog")
                && said.contains("set pool_name back to old-pool"),
            "{said}"
        );
    }
    // Where the guest's disks are is not a stranger's domain's business.
    observed.domain.as_mut().unwrap().tag = None;
    let said = planned(
        &desired,
        &observed,
        Resolution {
            force: true,
            ..Resolution::default()
        },
    );
    assert!(!said.contains("pool_name now says"), "{said}");

    let converged = converged_observation(&desired);
    let mut in_the_pool = converged.clone();
    in_the_pool.domain.as_mut().unwrap().disk_pools = vec!["trog".into()];
    assert_eq!(
        planned(&desired, &in_the_pool, Resolution::default()),
        planned(&desired, &converged, Resolution::default())
    );
}

fn with_seed_attached(desired: &DesiredGuest, sha256: &str) -> ObservedGuest {
    let mut observed = converged_observation(desired);
    observed.domain.as_mut().unwrap().seed_attached = true;
    observed.seed_volume = Some(ObservedVolume {
        capacity: Bytes(4096),
        sha256: Some(sha256.to_string()),
    });
    observed
}

#[test]
fn a_guest_built_before_host_keys_keeps_its_seed_and_a_changed_seed_is_replaced() {
    let desired = desired();
    let earlier = with_seed_attached(&desired, &desired.equivalent_seed_sha256s[0]);
    let kept = plan(&desired, &earlier, Resolution::default()).unwrap();
    // Not replaced (no restart for nothing): retired.
    assert_eq!(
        kept.actions,
        [
            Action::WaitForSsh,
            Action::RetireSeed {
                volume: desired.seed_volume.clone()
            }
        ],
        "{kept}"
    );

    let other = with_seed_attached(&desired, "07her");
    let replaced = plan(&desired, &other, Resolution::default()).unwrap();
    assert!(
        replaced
            .actions
            .iter()
            .any(|action| matches!(action, Action::UploadSeed { .. })),
        "{replaced}"
    );
}

/// What the hypervisor looks like after `plan` ran to the end.
fn simulate(desired: &DesiredGuest, mut observed: ObservedGuest, plan: &Plan) -> ObservedGuest {
    for action in &plan.actions {
        match action {
            Action::DefinePool { .. } => observed.pool = PoolState::Inactive,
            Action::StartPool { .. } => observed.pool = PoolState::Active,
            Action::RemovePartialBaseImage { .. } => observed.partial_base_image_present = false,
            Action::UploadBaseImage { .. } => observed.base_image_present = true,
            Action::DefineDomain { tag, .. } => {
                let (running, autostart, snapshots, seed_attached, shares_folders) = observed
                    .domain
                    .as_ref()
                    .map_or((false, false, Vec::new(), true, false), |d| {
                        (
                            d.running,
                            d.autostart,
                            d.snapshots.clone(),
                            d.seed_attached,
                            d.shares_folders,
                        )
                    });
                // The definition attaches exactly the declared disks.
                observed.extra_disks.defined = desired
                    .extra_disks
                    .iter()
                    .map(|disk| (disk.volume.clone(), disk.bus.clone()))
                    .collect();
                // A redefinition keeps the domain's snapshots, as libvirt does; it attaches the
                // seed when the plan uploads one (provision renders the definition so).
                let uploads_seed = plan
                    .actions
                    .iter()
                    .any(|action| matches!(action, Action::UploadSeed { .. }));
                observed.domain = Some(ObservedDomain {
                    tag: Some(tag.clone()),
                    running,
                    autostart,
                    snapshots,
                    seed_attached: seed_attached || uploads_seed,
                    shares_folders,
                    disk_pools: Vec::new(),
                    // Rendered with the hypervisor's virtualisation.
                    domain_type: Some(desired.domain_type),
                });
            }
            Action::RetireSeed { .. } => {
                observed.seed_volume = None;
                observed.domain.as_mut().unwrap().seed_attached = false;
            }
            Action::StopDomain | Action::PowerOffDomain => {
                observed.domain.as_mut().unwrap().running = false;
                observed.extra_disks.running.clear();
            }
            Action::DeleteSnapshots { .. } => observed.domain.as_mut().unwrap().snapshots.clear(),
            Action::DeleteVolume { volume, .. } if volume.contains("-disk-") => {
                observed.extra_disks.volumes.remove(volume);
            }
            Action::CreateExtraDisk {
                volume, capacity, ..
            } => {
                observed.extra_disks.volumes.insert(
                    volume.clone(),
                    ObservedVolume {
                        capacity: *capacity,
                        sha256: None,
                    },
                );
            }
            Action::AttachExtraDisk {
                volume,
                to_running,
                to_definition,
                ..
            } => {
                let bus = desired
                    .extra_disks
                    .iter()
                    .find(|disk| disk.volume == *volume)
                    .unwrap()
                    .bus
                    .clone();
                if *to_definition {
                    observed.extra_disks.defined.insert(volume.clone(), bus);
                }
                if *to_running {
                    observed.extra_disks.running.push(volume.clone());
                }
            }
            Action::DetachExtraDisk { volume, .. } => {
                observed.extra_disks.defined.remove(volume);
            }
            Action::DeleteVolume { volume, .. } => {
                if *volume == desired.root_volume.name {
                    observed.root_volume = None;
                } else if *volume == desired.seed_volume {
                    observed.seed_volume = None;
                } else {
                    observed.data_volume = None;
                }
            }
            Action::CreateDataVolume { capacity, .. } => {
                observed.data_volume = Some(ObservedVolume {
                    capacity: *capacity,
                    sha256: None,
                })
            }
            Action::CreateRootVolume { capacity, .. } => {
                observed.root_volume = Some(ObservedVolume {
                    capacity: *capacity,
                    sha256: None,
                })
            }
            Action::UploadSeed { sha256, .. } => {
                observed.seed_volume = Some(ObservedVolume {
                    capacity: Bytes(1),
                    sha256: Some(sha256.clone()),
                })
            }
            Action::SetAutostart => observed.domain.as_mut().unwrap().autostart = true,
            Action::StartDomain => {
                observed.domain.as_mut().unwrap().running = true;
                observed.extra_disks.running =
                    observed.extra_disks.defined.keys().cloned().collect();
            }
            Action::WaitForSsh
            | Action::BackUpBeforeRebuild
            | Action::RestoreBackup { .. }
            | Action::RestoreFreshBackup => {}
            Action::Finish { payload_digest } => {
                tag_mut(&mut observed).payload_digest = Some(payload_digest.clone())
            }
        }
    }
    observed
}

fn any_observation() -> impl Strategy<Value = ObservedGuest> {
    let digest = prop_oneof![
        Just("b00tb00tb00tb00t".to_string()),
        Just("other".to_string())
    ];
    let shape = prop_oneof![
        Just("5hape5hape5hape5".to_string()),
        Just("other".to_string())
    ];
    let payload = prop_oneof![
        Just(None),
        Just(Some("pay1oadpay1oad00".to_string())),
        Just(Some("old".to_string()))
    ];
    let tag = proptest::option::of((digest, shape, payload).prop_map(
        |(boot_fingerprint, shape_fingerprint, payload_digest)| GuestTag {
            boot_fingerprint,
            shape_fingerprint,
            payload_digest,
        },
    ));
    let domain = proptest::option::of(
        (
            tag,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop_oneof![
                Just(None),
                Just(Some(DomainType::Kvm)),
                Just(Some(DomainType::Qemu))
            ],
        )
            .prop_map(
                |(
                    tag,
                    running,
                    autostart,
                    has_snapshots,
                    seed_attached,
                    shares_folders,
                    domain_type,
                )| {
                    ObservedDomain {
                        tag,
                        running,
                        autostart,
                        snapshots: if has_snapshots {
                            vec!["20261130T212233Z".into()]
                        } else {
                            Vec::new()
                        },
                        seed_attached,
                        shares_folders,
                        disk_pools: Vec::new(),
                        domain_type,
                    }
                },
            ),
    );
    let volume = |gib: u64| {
        proptest::option::of(
            prop_oneof![Just(gib), Just(gib / 2)].prop_map(|gib| ObservedVolume {
                capacity: Bytes::from_gib(gib),
                sha256: None,
            }),
        )
    };
    // The data volume as declared (20 GiB), smaller, or bigger.
    let data_volume =
        proptest::option::of(prop_oneof![Just(20), Just(10), Just(40)].prop_map(|gib| {
            ObservedVolume {
                capacity: Bytes::from_gib(gib),
                sha256: None,
            }
        }));
    let seed = proptest::option::of(
        prop_oneof![
            Just("5eed5eed5eed5eed".to_string()),
            Just("stale".to_string())
        ]
        .prop_map(|sha| ObservedVolume {
            capacity: Bytes(1),
            sha256: Some(sha),
        }),
    );
    let pool = prop_oneof![
        Just(PoolState::Absent),
        Just(PoolState::Inactive),
        Just(PoolState::Active)
    ];
    (
        pool,
        any::<bool>(),
        any::<bool>(),
        domain,
        volume(10),
        seed,
        data_volume,
        any_extra_disks(),
    )
        .prop_map(
            |(
                pool,
                base_image_present,
                partial_base_image_present,
                domain,
                root_volume,
                seed_volume,
                data_volume,
                mut extra_disks,
            )| {
                // Only a pool that runs shows volumes, only a domain attaches disks, and only a
                // running one has them running.
                if pool != PoolState::Active {
                    extra_disks.volumes.clear();
                }
                match &domain {
                    None => {
                        extra_disks.defined.clear();
                        extra_disks.running.clear();
                    }
                    Some(domain) if !domain.running => extra_disks.running.clear(),
                    Some(_) => {}
                }
                ObservedGuest {
                    pool,
                    base_image_present,
                    partial_base_image_present,
                    domain,
                    root_volume,
                    seed_volume,
                    data_volume,
                    extra_disks,
                }
            },
        )
}

/// The disk `db` made or not (at its size or another), attached to the definition (on its bus
/// or another) and the running guest or not; a disk no longer declared attached or not.
fn any_extra_disks() -> impl Strategy<Value = ObservedExtraDisks> {
    let db_volume = proptest::option::of(prop_oneof![Just(2u64), Just(1u64)]);
    let db_defined = proptest::option::of(prop_oneof![Just("virtio"), Just("scsi")]);
    (db_volume, db_defined, any::<bool>(), any::<bool>()).prop_map(
        |(db_volume, db_defined, db_running, old_defined)| {
            let mut disks = ObservedExtraDisks::default();
            if let Some(gib) = db_volume {
                disks.volumes.insert(
                    DB_DISK.to_string(),
                    ObservedVolume {
                        capacity: Bytes::from_gib(gib),
                        sha256: None,
                    },
                );
                if let Some(bus) = db_defined {
                    disks.defined.insert(DB_DISK.to_string(), bus.to_string());
                }
                if db_running {
                    disks.running.push(DB_DISK.to_string());
                }
            }
            if old_defined {
                disks
                    .defined
                    .insert(OLD_DISK.to_string(), "virtio".to_string());
            }
            disks
        },
    )
}

fn any_resolution() -> impl Strategy<Value = Resolution> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(force, destroy_data, restart_later)| Resolution {
            force,
            destroy_data,
            restart_later,
        },
    )
}

proptest! {
    /// Whatever is there, a plan keeps the invariants, and once it has run the next plan is
    /// empty: one run converges.
    #[test]
    fn one_run_converges(observed in any_observation(), resolution in any_resolution()) {
        let desired = desired();
        if let Ok(plan) = plan(&desired, &observed, resolution) {
            prop_assert!(check_plan(&plan, &desired, &observed, resolution).is_ok(), "{plan}");
            let after = simulate(&desired, observed.clone(), &plan);
            let again = super::plan(&desired, &after, Resolution::default()).expect("no conflict after a run");
            prop_assert!(again.is_converged(), "after\n{plan}\nstill\n{again}");
        }
    }

    /// With an extra disk declared too, whatever is there, a plan keeps the invariants, one run
    /// converges, the disk is never deleted without --destroy-data, and a disk of another size
    /// is always refused.
    #[test]
    fn one_run_converges_with_an_extra_disk(observed in any_observation(), resolution in any_resolution()) {
        let desired = desired_with_a_disk();
        let resized = observed.extra_disks.volumes.get(DB_DISK).is_some_and(|volume| volume.capacity != Bytes::from_gib(2));
        match plan(&desired, &observed, resolution) {
            Ok(plan) => {
                prop_assert!(check_plan(&plan, &desired, &observed, resolution).is_ok(), "{plan}");
                let deletes_disk = plan.actions.iter().any(|action| matches!(action, Action::DeleteVolume { volume, .. } if volume == DB_DISK));
                prop_assert!(!deletes_disk || resolution.destroy_data, "{plan}");
                let after = simulate(&desired, observed.clone(), &plan);
                let again = super::plan(&desired, &after, Resolution::default()).expect("no conflict after a run");
                prop_assert!(again.is_converged(), "after\n{plan}\nstill\n{again}");
            }
            Err(conflicts) => {
                let says_resized = conflicts.conflicts.iter().any(|conflict| matches!(conflict, Conflict::ExtraDiskResized { .. }));
                prop_assert!(says_resized || !resized || (observed.domain.is_none() && resolution.destroy_data && !resolution.force), "{conflicts}");
            }
        }
        if resized && !(observed.domain.is_none() && resolution.destroy_data && !resolution.force) {
            prop_assert!(plan(&desired, &observed, resolution).is_err());
        }
    }

    /// Without --destroy-data, no plan deletes the data volume.
    #[test]
    fn data_survives_without_destroy_data(observed in any_observation(), force in any::<bool>()) {
        let desired = desired();
        let resolution = Resolution { force, ..Resolution::default() };
        if let Ok(plan) = plan(&desired, &observed, resolution) {
            let data = desired.data_volume.as_ref().unwrap().name.clone();
            let deletes_data = plan.actions.iter().any(|action| matches!(action, Action::DeleteVolume { volume, .. } if *volume == data));
            prop_assert!(!deletes_data, "{}", plan);
        }
    }

    /// A plain run refuses exactly when something foreign, or a data volume of another size than
    /// declared, is there.
    #[test]
    fn plain_runs_refuse_foreign_resources(observed in any_observation()) {
        let desired = desired();
        let foreign_domain = observed.domain.as_ref().is_some_and(|domain| domain.tag.is_none());
        let unclaimed_volumes = observed.domain.is_none() && (observed.root_volume.is_some() || observed.seed_volume.is_some() || observed.data_volume.is_some());
        let data_resized = observed.data_volume.as_ref().is_some_and(|volume| volume.capacity != Bytes::from_gib(20));
        let snapshots_over_replaced_root = observed.root_volume.is_some() && observed.domain.as_ref().is_some_and(|domain| {
            !domain.snapshots.is_empty() && domain.tag.as_ref().is_some_and(|tag| tag.boot_fingerprint != desired.boot_fingerprint)
        });
        let refused = plan(&desired, &observed, Resolution::default()).is_err();
        prop_assert_eq!(refused, foreign_domain || unclaimed_volumes || data_resized || snapshots_over_replaced_root);
    }
}

#[test]
fn a_definition_for_the_next_start_says_so_in_json_and_others_keep_their_fields() {
    let define = |until_next_start| Action::DefineDomain {
        tag: desired().tag_before_finish(),
        redefine: true,
        until_next_start,
    };
    let later = serde_json::to_value(define(true)).unwrap();
    assert_eq!(later["until_next_start"], true);
    let now = serde_json::to_value(define(false)).unwrap();
    assert!(now.get("until_next_start").is_none(), "{now}");
}

#[test]
fn an_adopted_domain_without_its_data_volume_is_defined_once() {
    let desired = desired();
    let mut foreign = converged_observation(&desired);
    foreign.domain.as_mut().unwrap().tag = None;
    foreign.data_volume = None;
    let force = Resolution {
        force: true,
        ..Resolution::default()
    };
    let steps = plan(&desired, &foreign, force).unwrap();
    let definitions = steps
        .actions
        .iter()
        .filter(|action| matches!(action, Action::DefineDomain { .. }))
        .count();
    assert_eq!(definitions, 1, "{steps}");
    assert!(steps
        .actions
        .iter()
        .any(|action| matches!(action, Action::CreateDataVolume { .. })));
}

#[test]
fn a_first_build_retires_its_seed_once_ssh_answers_and_before_the_finish() {
    let desired = desired();
    let built = plan(&desired, &ObservedGuest::nothing(), Resolution::default()).unwrap();
    let at = |wanted: fn(&Action) -> bool| built.actions.iter().position(wanted).unwrap();
    let waited = at(|action| matches!(action, Action::WaitForSsh));
    let retired = at(|action| matches!(action, Action::RetireSeed { .. }));
    let finished = at(|action| matches!(action, Action::Finish { .. }));
    assert!(waited < retired && retired < finished, "{built}");
    check_plan(
        &built,
        &desired,
        &ObservedGuest::nothing(),
        Resolution::default(),
    )
    .unwrap();
}

#[test]
fn a_guest_whose_seed_is_retired_is_converged_and_a_changed_seed_rebuilds_with_a_new_one() {
    let desired = desired();
    let retired = converged_observation(&desired);
    assert!(retired.seed_volume.is_none());
    let converged = plan(&desired, &retired, Resolution::default()).unwrap();
    assert!(converged.actions.is_empty(), "{converged}");

    // A changed seed input changes the boot fingerprint: a new root disk, a new seed, retired
    // again once the new disk's first boot is over.
    let mut changed = desired.clone();
    changed.boot_fingerprint = "n3wb00t".into();
    changed.seed_sha256 = "n3w5eed".into();
    let rebuilt = plan(&changed, &retired, Resolution::default()).unwrap();
    let position = |wanted: fn(&Action) -> bool| rebuilt.actions.iter().position(wanted);
    let uploaded = position(|action| matches!(action, Action::UploadSeed { .. }));
    let started = position(|action| matches!(action, Action::StartDomain));
    let retired_again = position(|action| matches!(action, Action::RetireSeed { .. }));
    assert!(
        matches!((uploaded, started, retired_again), (Some(u), Some(s), Some(r)) if u < s && s < r),
        "{rebuilt}"
    );
    assert!(rebuilt
        .actions
        .iter()
        .any(|action| matches!(action, Action::CreateRootVolume { .. })));
    check_plan(&rebuilt, &changed, &retired, Resolution::default()).unwrap();
}

#[test]
fn a_retirement_cut_short_is_finished_and_snapshots_keep_the_seed() {
    let desired = desired();
    // Detached, its volume not yet deleted.
    let mut detached = converged_observation(&desired);
    detached.seed_volume = Some(ObservedVolume {
        capacity: Bytes(4096),
        sha256: Some(desired.seed_sha256.clone()),
    });
    let finished = plan(&desired, &detached, Resolution::default()).unwrap();
    assert_eq!(
        finished.actions,
        [
            Action::WaitForSsh,
            Action::RetireSeed {
                volume: desired.seed_volume.clone()
            }
        ]
    );

    // Reverting a snapshot puts back a definition that attaches the seed: it stays.
    let mut snapshotted = with_seed_attached(&desired, &desired.seed_sha256);
    snapshotted.domain.as_mut().unwrap().snapshots = vec!["20261130T212233Z".into()];
    let kept = plan(&desired, &snapshotted, Resolution::default()).unwrap();
    assert!(kept.actions.is_empty(), "{kept}");
}

#[test]
fn a_retired_guest_whose_root_disk_is_gone_is_redefined_with_its_seed() {
    let desired = desired();
    let mut lost = converged_observation(&desired);
    lost.root_volume = None;
    let rebuilt = plan(&desired, &lost, Resolution::default()).unwrap();
    let define = rebuilt
        .actions
        .iter()
        .position(|action| matches!(action, Action::DefineDomain { redefine: true, .. }));
    let upload = rebuilt
        .actions
        .iter()
        .position(|action| matches!(action, Action::UploadSeed { .. }));
    assert!(
        matches!((define, upload), (Some(d), Some(u)) if d < u),
        "{rebuilt}"
    );
    // The tag still says the old root disk was finished; the new one is the base image's.
    assert!(
        matches!(rebuilt.actions.last(), Some(Action::Finish { .. })),
        "{rebuilt}"
    );
    check_plan(&rebuilt, &desired, &lost, Resolution::default()).unwrap();
}
