//! The planner: declaration and observation in, numbered actions or conflicts out. Pure and
//! deterministic; it never decides anything the executor has to decide again.

use crate::plan::action::{Action, Plan};
use crate::plan::conflict::{Conflict, Conflicts, Resolution};
use crate::plan::desired::{DesiredGuest, GuestTag};
use crate::plan::observed::{ObservedDomain, ObservedGuest, PoolState};

/// Plans the actions that make `observed` the realization of `desired`.
///
/// A plan never destroys data: a data volume is deleted only when the run was given
/// `--destroy-data` for a conflict on it, and root disks and seeds are replaced only when they
/// belong to a domain trog created (or the run said `--destroy-data`).
pub fn plan(
    desired: &DesiredGuest,
    observed: &ObservedGuest,
    resolution: Resolution,
) -> Result<Plan, Conflicts> {
    let conflicts = find_conflicts(desired, observed, resolution);
    if !conflicts.is_empty() {
        return Err(Conflicts {
            domain: desired.domain.to_string(),
            conflicts,
        });
    }
    let mut actions = Vec::new();

    match observed.pool {
        PoolState::Absent => {
            actions.push(Action::DefinePool {
                name: desired.pool_name.clone(),
                path: desired.pool_path.clone(),
            });
            actions.push(Action::StartPool {
                name: desired.pool_name.clone(),
            });
        }
        PoolState::Inactive => actions.push(Action::StartPool {
            name: desired.pool_name.clone(),
        }),
        PoolState::Active => {}
    }

    // The tag the domain carries once the domain steps below have run.
    let mut root_present = observed.root_volume.is_some();
    let mut seed_matches = observed.seed_volume.as_ref().is_some_and(|seed| {
        std::iter::once(&desired.seed_sha256)
            .chain(&desired.equivalent_seed_sha256s)
            .any(|accepted| seed.sha256.as_deref() == Some(accepted.as_str()))
    });
    let mut seed_present = observed.seed_volume.is_some();
    let mut running = observed
        .domain
        .as_ref()
        .is_some_and(|domain| domain.running);
    let mut autostart = observed
        .domain
        .as_ref()
        .is_some_and(|domain| domain.autostart);
    let mut domain_steps = Vec::new();
    let recorded_payload: Option<String>;

    match &observed.domain {
        None => {
            domain_steps.push(Action::DefineDomain {
                tag: desired.tag_before_finish(),
                redefine: false,
                until_next_start: false,
            });
            recorded_payload = None;
            // Volumes under the guest's names with no domain are replaced only with
            // --destroy-data (find_conflicts refused the run otherwise).
            if root_present {
                domain_steps.push(delete(
                    &desired.root_volume.name,
                    "not claimed by any domain; replaced as --destroy-data asked",
                ));
                root_present = false;
            }
            if seed_present {
                domain_steps.push(delete(
                    &desired.seed_volume,
                    "not claimed by any domain; replaced as --destroy-data asked",
                ));
                seed_present = false;
                seed_matches = false;
            }
        }
        Some(domain) => {
            let tag = match &domain.tag {
                Some(tag) => tag.clone(),
                None => {
                    // --force: the domain is taken over and redefined from the declaration, so it
                    // boots from trog's disks (the same-named volumes there are kept); until the
                    // redefinition it carries no tag, so an interrupted run does it again.
                    if running {
                        domain_steps.push(Action::StopDomain);
                        running = false;
                    }
                    let adopted = desired.tag_before_finish();
                    domain_steps.push(Action::DefineDomain {
                        tag: adopted.clone(),
                        redefine: true,
                        until_next_start: false,
                    });
                    adopted
                }
            };
            if tag.boot_fingerprint != desired.boot_fingerprint {
                // --force (find_conflicts refused the run otherwise): the snapshots' states
                // live in the root disk about to be deleted.
                if root_present && !domain.snapshots.is_empty() {
                    domain_steps.push(Action::DeleteSnapshots {
                        names: domain.snapshots.clone(),
                    });
                }
                if running {
                    // Nothing of the guest outlives its root disk and seed but its other disks and
                    // the folders it shares: without them, a clean shutdown writes only what is
                    // deleted next.
                    let keeps_writes = observed.data_volume.is_some()
                        || !observed.extra_disks.defined.is_empty()
                        || !observed.extra_disks.running.is_empty()
                        || domain.shares_folders;
                    domain_steps.push(if root_present && !keeps_writes {
                        Action::PowerOffDomain
                    } else {
                        Action::StopDomain
                    });
                    running = false;
                }
                if root_present {
                    domain_steps.push(delete(&desired.root_volume.name, "the boot inputs changed"));
                    root_present = false;
                }
                if seed_present {
                    domain_steps.push(delete(&desired.seed_volume, "the boot inputs changed"));
                    seed_present = false;
                    seed_matches = false;
                }
                domain_steps.push(Action::DefineDomain {
                    tag: desired.tag_before_finish(),
                    redefine: true,
                    until_next_start: false,
                });
                recorded_payload = None;
            } else if tag.shape_fingerprint != desired.shape_fingerprint
                || (domain.tag.is_some() && attaches_a_new_data_volume(desired, observed))
                || (domain.tag.is_some() && moves_an_extra_disk(desired, observed))
                || (domain.tag.is_some() && changes_domain_type(desired, domain))
            {
                // A new definition (the shape, a data volume to attach, an extra disk's bus, the
                // hypervisor's virtualisation): applied with a restart, or at the guest's next
                // start when the run asked for that. A data volume new to the guest is attached
                // now whatever was asked: the finish below formats and mounts it.
                let until_next_start = running
                    && resolution.restart_later
                    && !attaches_a_new_data_volume(desired, observed);
                if running && !until_next_start {
                    domain_steps.push(Action::StopDomain);
                    running = false;
                }
                let reshaped = GuestTag {
                    shape_fingerprint: desired.shape_fingerprint.clone(),
                    ..tag.clone()
                };
                domain_steps.push(Action::DefineDomain {
                    tag: reshaped,
                    redefine: true,
                    until_next_start,
                });
                recorded_payload = tag.payload_digest.clone();
            } else {
                recorded_payload = tag.payload_digest.clone();
            }
            let redefined = domain_steps
                .iter()
                .any(|action| matches!(action, Action::DefineDomain { .. }));
            if !root_present && !domain.seed_attached && !redefined {
                // Its root disk gone, a guest that retired its seed boots a new one, which needs
                // a seed: the definition attaches one again.
                if running {
                    domain_steps.push(Action::StopDomain);
                    running = false;
                }
                domain_steps.push(Action::DefineDomain {
                    tag: tag.clone(),
                    redefine: true,
                    until_next_start: false,
                });
            }
        }
    }

    if !root_present && !observed.base_image_present {
        if observed.partial_base_image_present {
            actions.push(Action::RemovePartialBaseImage {
                volume: desired.partial_base_image_volume.clone(),
            });
        }
        actions.push(Action::UploadBaseImage {
            volume: desired.base_image_volume.clone(),
            source: desired.base_image_source.clone(),
            digest: desired.base_image_digest.clone(),
        });
    }
    actions.extend(domain_steps);

    if let Some(data) = &desired.data_volume {
        let claimed = observed.domain.is_some();
        match &observed.data_volume {
            None => actions.push(Action::CreateDataVolume {
                volume: data.name.clone(),
                capacity: data.capacity,
            }),
            // Only reachable with --destroy-data: find_conflicts refused the run otherwise.
            Some(volume) if volume.capacity != data.capacity || (!claimed && !resolution.force) => {
                // The guest has the volume attached: it stops before the volume goes.
                if running {
                    actions.push(Action::StopDomain);
                    running = false;
                }
                actions.push(delete(
                    &data.name,
                    "recreated empty as --destroy-data asked",
                ));
                actions.push(Action::CreateDataVolume {
                    volume: data.name.clone(),
                    capacity: data.capacity,
                });
            }
            Some(_) => {}
        }
    }
    for disk in &desired.extra_disks {
        let claimed = observed.domain.is_some();
        match observed.extra_disks.volumes.get(&disk.volume) {
            None => actions.push(create_extra_disk(disk)),
            // Only reachable with --destroy-data: find_conflicts refused the run otherwise.
            Some(_) if !claimed && !resolution.force => {
                actions.push(delete(
                    &disk.volume,
                    "recreated empty as --destroy-data asked",
                ));
                actions.push(create_extra_disk(disk));
            }
            Some(_) => {}
        }
    }
    if !root_present {
        if running {
            actions.push(Action::StopDomain);
            running = false;
        }
        actions.push(Action::CreateRootVolume {
            volume: desired.root_volume.name.clone(),
            backing_volume: desired.base_image_volume.clone(),
            capacity: desired.root_volume.capacity,
        });
    }
    // A guest past its first boot has retired its seed (detached and deleted it): it needs
    // none while its root disk stays. A seed volume still there is what an interrupted
    // retirement left.
    let seed_retired = root_present
        && observed
            .domain
            .as_ref()
            .is_some_and(|domain| !domain.seed_attached);
    if !seed_matches && !seed_retired {
        if seed_present {
            if running {
                actions.push(Action::StopDomain);
                running = false;
            }
            actions.push(delete(
                &desired.seed_volume,
                "its contents differ from the declared seed",
            ));
        }
        actions.push(Action::UploadSeed {
            volume: desired.seed_volume.clone(),
            sha256: desired.seed_sha256.clone(),
        });
    }
    attach_and_detach_extra_disks(desired, observed, running, &mut actions);
    if !autostart {
        actions.push(Action::SetAutostart);
        autostart = true;
    }
    debug_assert!(autostart);
    let restarted = !running;
    if !running {
        actions.push(Action::StartDomain);
    }
    // A new root disk is the base image's, whatever the tag recorded of the one before (a root
    // disk deleted behind trog's back leaves the tag saying finished): it is finished again.
    let needs_finish =
        !root_present || recorded_payload.as_deref() != Some(desired.payload_digest.as_str());
    // The seed is retired once the guest booted from it, but not under snapshots that stay:
    // reverting one puts back a definition that attaches the seed.
    let snapshots_stay = root_present
        && observed
            .domain
            .as_ref()
            .is_some_and(|domain| !domain.snapshots.is_empty());
    let retires_seed = (!seed_retired || seed_present) && !snapshots_stay;
    if needs_finish || restarted || retires_seed {
        actions.push(Action::WaitForSsh);
    }
    if retires_seed {
        actions.push(Action::RetireSeed {
            volume: desired.seed_volume.clone(),
        });
    }
    if needs_finish {
        actions.push(Action::Finish {
            payload_digest: desired.payload_digest.clone(),
        });
    }
    Ok(Plan {
        domain: desired.domain.to_string(),
        actions,
    })
}

/// Whether the declaration has a data volume the guest's domain does not have yet: the volume is
/// created by this plan, and only a new definition attaches it.
fn attaches_a_new_data_volume(desired: &DesiredGuest, observed: &ObservedGuest) -> bool {
    desired.data_volume.is_some() && observed.data_volume.is_none()
}

/// Whether the domain was defined for another virtualisation than its hypervisor's now (KVM
/// made to work, or given up for software emulation): only a new definition and a start move it.
/// A type trog does not write is left alone.
fn changes_domain_type(desired: &DesiredGuest, domain: &ObservedDomain) -> bool {
    domain
        .domain_type
        .is_some_and(|defined| defined != desired.domain_type)
}

/// Whether an extra disk the domain's definition has is declared on another bus: only a new
/// definition (and a restart) moves it.
fn moves_an_extra_disk(desired: &DesiredGuest, observed: &ObservedGuest) -> bool {
    desired.extra_disks.iter().any(|disk| {
        observed
            .extra_disks
            .defined
            .get(&disk.volume)
            .is_some_and(|bus| *bus != disk.bus)
    })
}

fn create_extra_disk(disk: &crate::plan::desired::DesiredDisk) -> Action {
    Action::CreateExtraDisk {
        disk: disk.name.clone(),
        volume: disk.volume.clone(),
        capacity: disk.capacity,
    }
}

/// Attaches every declared extra disk where the guest lacks it (`running`: whether the guest
/// runs once the steps before have run), and takes those no longer declared out of its
/// definition. A plan that defines the domain already gives the definition exactly the declared
/// disks.
fn attach_and_detach_extra_disks(
    desired: &DesiredGuest,
    observed: &ObservedGuest,
    running: bool,
    actions: &mut Vec<Action>,
) {
    let redefined = actions
        .iter()
        .any(|action| matches!(action, Action::DefineDomain { .. }));
    for disk in &desired.extra_disks {
        let to_definition = !redefined && !observed.extra_disks.defined.contains_key(&disk.volume);
        let to_running = running && !observed.extra_disks.running.contains(&disk.volume);
        if to_definition || to_running {
            actions.push(Action::AttachExtraDisk {
                disk: disk.name.clone(),
                volume: disk.volume.clone(),
                to_running,
                to_definition,
            });
        }
    }
    if redefined {
        return;
    }
    for volume in observed.extra_disks.defined.keys() {
        if !desired
            .extra_disks
            .iter()
            .any(|disk| disk.volume == *volume)
        {
            actions.push(Action::DetachExtraDisk {
                volume: volume.clone(),
                pool: desired.pool_name.clone(),
            });
        }
    }
}

fn delete(volume: &str, why: &str) -> Action {
    Action::DeleteVolume {
        volume: volume.to_string(),
        why: why.to_string(),
    }
}

fn find_conflicts(
    desired: &DesiredGuest,
    observed: &ObservedGuest,
    resolution: Resolution,
) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    if let Some(domain) = &observed.domain {
        if domain.tag.is_none() && !resolution.force {
            conflicts.push(Conflict::ForeignDomain {
                domain: desired.domain.to_string(),
            });
        }
        let elsewhere: Vec<String> = domain
            .disk_pools
            .iter()
            .filter(|pool| **pool != desired.pool_name)
            .cloned()
            .collect();
        if domain.tag.is_some() && !elsewhere.is_empty() {
            conflicts.push(Conflict::PoolRenamed {
                defined_in: elsewhere,
                declared: desired.pool_name.clone(),
            });
        }
        let boot_changed = domain
            .tag
            .as_ref()
            .is_some_and(|tag| tag.boot_fingerprint != desired.boot_fingerprint);
        if boot_changed
            && observed.root_volume.is_some()
            && !domain.snapshots.is_empty()
            && !resolution.force
        {
            conflicts.push(Conflict::SnapshotsOfReplacedRoot {
                volume: desired.root_volume.name.clone(),
                snapshots: domain.snapshots.clone(),
            });
        }
    }
    // Volumes belong with the domain of the same guest name: trog defines the domain before it
    // creates any volume, so its domain vouches for them, and a foreign domain's conflict covers
    // its volumes too. Volumes with no domain at all are someone else's (or a leftover of a
    // destroy that failed, which said so when it happened).
    let claimed = observed.domain.is_some();
    if !claimed && !resolution.destroy_data {
        if observed.root_volume.is_some() {
            conflicts.push(Conflict::ForeignVolume {
                volume: desired.root_volume.name.clone(),
            });
        }
        if observed.seed_volume.is_some() {
            conflicts.push(Conflict::ForeignVolume {
                volume: desired.seed_volume.clone(),
            });
        }
    }
    if let (Some(declared), Some(volume)) = (&desired.data_volume, &observed.data_volume) {
        if !claimed && !resolution.force && !resolution.destroy_data {
            conflicts.push(Conflict::ForeignDataVolume {
                volume: declared.name.clone(),
            });
        }
        if volume.capacity < declared.capacity && !resolution.destroy_data {
            conflicts.push(Conflict::DataVolumeTooSmall {
                volume: declared.name.clone(),
                observed_gib: volume.capacity.whole_gib(),
                declared_gib: declared.capacity.whole_gib(),
            });
        }
        // A volume is never shrunk (its filesystem and files fill it): kept without a word, a
        // bigger one would leave the declaration saying what is not there.
        if volume.capacity > declared.capacity && !resolution.destroy_data {
            conflicts.push(Conflict::DataVolumeShrunk {
                volume: declared.name.clone(),
                observed: volume.capacity,
                declared: declared.capacity,
                declared_at: declared.declared_at.clone(),
            });
        }
    }
    for disk in &desired.extra_disks {
        let Some(volume) = observed.extra_disks.volumes.get(&disk.volume) else {
            continue;
        };
        if !claimed && !resolution.force && !resolution.destroy_data {
            conflicts.push(Conflict::ForeignDataVolume {
                volume: disk.volume.clone(),
            });
        }
        let recreated = !claimed && resolution.destroy_data && !resolution.force;
        if volume.capacity != disk.capacity && !recreated {
            conflicts.push(Conflict::ExtraDiskResized {
                disk: disk.name.clone(),
                volume: disk.volume.clone(),
                observed: volume.capacity,
                declared: disk.capacity,
                declared_at: disk.declared_at.clone(),
            });
        }
    }
    conflicts
}
