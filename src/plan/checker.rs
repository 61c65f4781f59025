//! Invariants every plan must keep, checked before anything runs. The planner is written to
//! keep them; this is the second pair of eyes that turns a planner bug into a refusal instead
//! of a lost disk.

use crate::plan::action::{Action, Plan};
use crate::plan::conflict::Resolution;
use crate::plan::desired::DesiredGuest;
use crate::plan::observed::{ObservedGuest, PoolState};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the plan for {domain} breaks a rule trog keeps ({rule}); nothing was changed")]
pub struct PlanViolation {
    pub domain: String,
    pub rule: &'static str,
}

impl crate::diagnose::Diagnose for PlanViolation {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some("this is a bug in trog's planner: report it with the output of `provision --dry-run --json`".into())
    }
}

/// Refuses `plan` when it breaks an invariant, replaying it over `observed`: what each step
/// needs (a pool, a defined domain, a stopped guest, --force, --destroy-data) must hold when the
/// step comes.
pub fn check_plan(
    plan: &Plan,
    desired: &DesiredGuest,
    observed: &ObservedGuest,
    resolution: Resolution,
) -> Result<(), PlanViolation> {
    let refuse = |rule| {
        Err(PlanViolation {
            domain: plan.domain.clone(),
            rule,
        })
    };
    let data_volume = desired
        .data_volume
        .as_ref()
        .map(|volume| volume.name.as_str());
    let foreign_domain = observed
        .domain
        .as_ref()
        .is_some_and(|domain| domain.tag.is_none());
    let mut pool_active = observed.pool == PoolState::Active;
    let mut pool_defined = observed.pool != PoolState::Absent;
    let mut domain_defined = observed.domain.is_some();
    let mut running = observed
        .domain
        .as_ref()
        .is_some_and(|domain| domain.running);
    let mut root_present = observed.root_volume.is_some();
    let mut seed_present = observed.seed_volume.is_some();
    // A guest past its first boot needs no seed while it keeps its root disk.
    let mut seed_retired = root_present
        && observed
            .domain
            .as_ref()
            .is_some_and(|domain| !domain.seed_attached);
    let mut data_present = observed.data_volume.is_some();
    let is_extra_disk = |volume: &str| desired.extra_disks.iter().any(|disk| disk.volume == volume);
    let mut extra_disks_present: Vec<String> =
        observed.extra_disks.volumes.keys().cloned().collect();
    let mut base_present = observed.base_image_present;
    let mut waited = false;
    let mut finished = false;
    let mut backed_up = false;
    let mut snapshots_present = observed
        .domain
        .as_ref()
        .is_some_and(|domain| !domain.snapshots.is_empty());
    for (index, action) in plan.actions.iter().enumerate() {
        let makes_a_volume = matches!(
            action,
            Action::UploadBaseImage { .. }
                | Action::CreateRootVolume { .. }
                | Action::CreateDataVolume { .. }
                | Action::CreateExtraDisk { .. }
                | Action::UploadSeed { .. }
        );
        if makes_a_volume && !pool_active {
            return refuse("volumes are made only in a pool that is defined and started");
        }
        let touches_the_domain = matches!(
            action,
            Action::DefineDomain { .. }
                | Action::StopDomain
                | Action::PowerOffDomain
                | Action::DeleteSnapshots { .. }
                | Action::SetAutostart
                | Action::StartDomain
                | Action::AttachExtraDisk { .. }
                | Action::DetachExtraDisk { .. }
        );
        if touches_the_domain && foreign_domain && !resolution.force {
            return refuse("a domain trog did not create is touched only with --force");
        }
        match action {
            Action::DefinePool { .. } => pool_defined = true,
            Action::StartPool { .. } => {
                if !pool_defined {
                    return refuse("a pool is started only once it is defined");
                }
                pool_active = true;
            }
            Action::DeleteVolume { volume, .. } => {
                let own = *volume == desired.root_volume.name
                    || *volume == desired.seed_volume
                    || Some(volume.as_str()) == data_volume
                    || is_extra_disk(volume);
                if !own {
                    return refuse(
                        "only the guest's own root disk, seed, data volume and declared disks are deleted",
                    );
                }
                if is_extra_disk(volume) {
                    if !resolution.destroy_data {
                        return refuse("an extra disk is deleted only with --destroy-data");
                    }
                    extra_disks_present.retain(|present| present != volume);
                }
                if running {
                    return refuse("a guest's volume is deleted only once the guest is stopped");
                }
                if Some(volume.as_str()) == data_volume {
                    if !resolution.destroy_data {
                        return refuse("a data volume is deleted only with --destroy-data");
                    }
                    data_present = false;
                }
                if *volume == desired.root_volume.name {
                    if snapshots_present {
                        return refuse(
                            "a root disk with snapshots is deleted only after them, with --force",
                        );
                    }
                    root_present = false;
                    seed_retired = false;
                }
                if *volume == desired.seed_volume {
                    seed_present = false;
                }
            }
            Action::DeleteSnapshots { .. } => {
                if !resolution.force {
                    return refuse("snapshots are deleted only with --force");
                }
                snapshots_present = false;
            }
            Action::DefineDomain {
                redefine,
                until_next_start,
                ..
            } => {
                if *redefine != domain_defined {
                    return refuse("a domain is defined when absent and redefined when present");
                }
                if *until_next_start && !(running && resolution.restart_later) {
                    return refuse(
                        "a definition is left for the next start only of a running guest, with --restart-later",
                    );
                }
                domain_defined = true;
            }
            Action::StopDomain | Action::PowerOffDomain => {
                if !domain_defined {
                    return refuse("only a defined domain is stopped");
                }
                running = false;
            }
            Action::UploadBaseImage { .. } => base_present = true,
            Action::CreateRootVolume { .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                if !base_present {
                    return refuse("a root disk is made over a base image that is present");
                }
                if root_present {
                    return refuse("a root disk is made only where there is none");
                }
                root_present = true;
            }
            Action::CreateDataVolume { .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                if data_present {
                    return refuse("a data volume is never made over one that exists");
                }
                data_present = true;
            }
            Action::CreateExtraDisk { volume, .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                if extra_disks_present.contains(volume) {
                    return refuse("an extra disk is never made over one that exists");
                }
                extra_disks_present.push(volume.clone());
            }
            Action::AttachExtraDisk {
                volume, to_running, ..
            } => {
                if !domain_defined {
                    return refuse("a disk is attached only to a defined domain");
                }
                if !extra_disks_present.contains(volume) {
                    return refuse("a disk is attached only once its volume is made");
                }
                if *to_running && !running {
                    return refuse("a disk is attached to the running guest only while it runs");
                }
            }
            Action::DetachExtraDisk { volume, .. } if is_extra_disk(volume) => {
                return refuse("a declared disk is never detached");
            }
            Action::UploadSeed { .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                seed_present = true;
            }
            Action::SetAutostart if !domain_defined => {
                return refuse("autostart is set only on a defined domain");
            }
            Action::StartDomain => {
                if !domain_defined {
                    return refuse("a guest is started only once its domain is defined");
                }
                if !(root_present && (seed_present || seed_retired)) {
                    return refuse("a guest is started only with its root disk and seed in place");
                }
                if desired.data_volume.is_some() && !data_present {
                    return refuse("a guest is started only with its data volume in place");
                }
                if desired
                    .extra_disks
                    .iter()
                    .any(|disk| !extra_disks_present.contains(&disk.volume))
                {
                    return refuse("a guest is started only with its extra disks in place");
                }
                running = true;
            }
            Action::WaitForSsh => {
                if !running {
                    return refuse("SSH is waited for only on a guest that runs");
                }
                waited = true;
            }
            Action::BackUpBeforeRebuild => {
                if index != 0 || !running {
                    return refuse(
                        "a guest is backed up before a rebuild only first, while it runs",
                    );
                }
                backed_up = true;
            }
            Action::RestoreFreshBackup if !backed_up => {
                return refuse("only a backup this run took is restored as fresh");
            }
            Action::RestoreBackup { .. } | Action::RestoreFreshBackup => {
                if !waited || !running {
                    return refuse("a backup is restored only on a running guest once SSH answers");
                }
                if finished {
                    return refuse("a backup is restored before the guest is finished, never over a finished one");
                }
            }
            Action::RetireSeed { .. } => {
                if !(waited && running) {
                    return refuse("a seed is retired only once the guest it booted answers SSH");
                }
                seed_present = false;
                seed_retired = true;
            }
            Action::Finish { .. } => {
                if !waited {
                    return refuse("a guest is finished only once SSH answers");
                }
                if !running {
                    return refuse("a guest is finished only while it runs");
                }
                finished = true;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
