//! A guest's plan from what its hypervisor has of it: what `provision` carries out and `status`
//! shows, made the same way for both.

use crate::backup::archive_dir::GuestBackups;
use crate::backup::backup_dir;
use crate::diagnose::Failure;
use crate::generate::desired;
use crate::machine::hypervisor_ops::{self, HypervisorMachine};
use crate::model::hypervisor::HypervisorConfig;
use crate::plan::{
    check_plan, plan, with_backup_restore, Action, DesiredGuest, ObservedGuest, Plan, Resolution,
};
use crate::render::domain_xml::{render_domain_xml, DomainSpec, DEFAULT_DOMAIN_TEMPLATE};
use crate::workflow::inputs::GuestInputs;
use std::path::{Path, PathBuf};

/// A plan and what executing it needs, all built before anything is changed.
pub struct PreparedGuest {
    pub desired: DesiredGuest,
    pub observed: ObservedGuest,
    pub plan: Plan,
    pub domain_xml: String,
    /// What `domain_xml` was rendered from; the first boot renders it again with the base
    /// image's kernel.
    pub domain_spec: DomainSpec,
    /// The verified base image on this machine, when the plan uploads it.
    pub base_image: Option<PathBuf>,
}

/// Plans the guest from what was observed of it on `hypervisor` (`machine`: its own system, for
/// the TPM check). Changes nothing anywhere; `status` plans this way through its `Hypervisor`.
pub fn plan_observed(
    inputs: &GuestInputs,
    hypervisor: &HypervisorConfig,
    machine: Option<&HypervisorMachine>,
    desired: DesiredGuest,
    observed: ObservedGuest,
    resolution: Resolution,
) -> Result<PreparedGuest, Failure> {
    let settings = &inputs.config.settings;
    let newest_backup = GuestBackups::new(
        &backup_dir(&inputs.paths, settings),
        inputs.config.domain.as_str(),
    )
    .newest()?;
    let backs_up = !crate::backup::backup_paths(&inputs.generated.resolved)?.is_empty();
    let plan = with_backup_restore(
        plan(&desired, &observed, resolution)?,
        &observed,
        newest_backup.as_deref().and_then(Path::to_str),
        backs_up,
    );
    check_plan(&plan, &desired, &observed, resolution)?;
    let tag = plan
        .actions
        .iter()
        .find_map(|action| match action {
            Action::DefineDomain { tag, .. } => Some(tag.clone()),
            _ => None,
        })
        .unwrap_or_else(|| desired.tag_before_finish());
    let tpm = machine.is_some_and(hypervisor_ops::offers_tpm);
    let spec = desired::domain_spec(&desired, &inputs.generated, settings, hypervisor, tpm, tag);
    let domain_xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE)?;
    Ok(PreparedGuest {
        desired,
        observed,
        plan,
        domain_xml,
        domain_spec: spec,
        base_image: None,
    })
}
