//! Invariants every plan must keep, checked before anything runs. The planner is written to
//! keep them; this is the second pair of eyes that turns a planner bug into a refusal instead
//! of a lost disk.

use crate::plan::action::{Action, Plan};
use crate::plan::conflict::Resolution;
use crate::plan::desired::DesiredGuest;
use crate::plan::observed::ObservedGuest;

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
    let mut domain_defined = observed.domain.is_some();
    let mut root_present = observed.root_volume.is_some();
    let mut seed_present = observed.seed_volume.is_some();
    let mut base_present = observed.base_image_present;
    let mut waited = false;
    let mut snapshots_present = observed
        .domain
        .as_ref()
        .is_some_and(|domain| !domain.snapshots.is_empty());
    let mut running = observed
        .domain
        .as_ref()
        .is_some_and(|domain| domain.running);
    for action in &plan.actions {
        match action {
            Action::StopDomain => running = false,
            Action::StartDomain if root_present && seed_present => running = true,
            Action::DeleteVolume { volume, .. } => {
                if Some(volume.as_str()) == data_volume && !resolution.destroy_data {
                    return refuse("a data volume is deleted only with --destroy-data");
                }
                if Some(volume.as_str()) == data_volume && running {
                    return refuse("a data volume is deleted only while its guest is stopped");
                }
                if *volume == desired.root_volume.name {
                    if snapshots_present {
                        return refuse(
                            "a root disk with snapshots is deleted only after them, with --force",
                        );
                    }
                    root_present = false;
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
            Action::DefineDomain { .. } => domain_defined = true,
            Action::UploadBaseImage { .. } => base_present = true,
            Action::CreateRootVolume { .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                if !base_present {
                    return refuse("a root disk is made over a base image that is present");
                }
                root_present = true;
            }
            Action::UploadSeed { .. } | Action::CreateDataVolume { .. } => {
                if !domain_defined {
                    return refuse("the domain is defined before any of its volumes is made");
                }
                if matches!(action, Action::UploadSeed { .. }) {
                    seed_present = true;
                }
            }
            Action::StartDomain if !(root_present && seed_present) => {
                return refuse("a guest is started only with its root disk and seed in place");
            }
            Action::WaitForSsh => waited = true,
            Action::Finish { .. } if !waited => {
                return refuse("a guest is finished only once SSH answers");
            }
            _ => {}
        }
    }
    Ok(())
}
