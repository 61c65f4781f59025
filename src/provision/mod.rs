//! Converging one guest on the hypervisor it was placed on: observe what is there, plan, check
//! the plan, then carry it out step by step — libvirt steps through the libvirt backend, the
//! wait and the finish over SSH.
//!
//! Everything that can be built locally (the artifacts, the base image) is built before the
//! first step touches the hypervisor.

pub mod desired;
pub mod execute;
pub mod host;
pub mod hypervisor_machine;
pub mod inputs;
pub mod reach;
pub mod run;
pub mod schedule;
pub mod site;
pub mod store_guard;

pub use execute::execute;

use crate::backup::archive_dir::GuestBackups;
use crate::backup::backup_dir;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::images::ensure_image;
use crate::libvirt::guest_resources::GuestResources;
use crate::lock::Locks;
use crate::machine::hypervisor_ops::{self, HypervisorMachine};
use crate::model::hypervisor::{HypervisorConfig, Transport};
use crate::plan::{
    check_plan, plan, with_backup_restore, Action, DesiredGuest, ObservedGuest, Plan, Resolution,
};
use crate::render::domain_xml::{render_domain_xml, DomainSpec, DEFAULT_DOMAIN_TEMPLATE};
use inputs::GuestInputs;
use std::path::{Path, PathBuf};

/// One guest and the hypervisor it goes to.
pub struct GuestOnHypervisor<'a> {
    pub inputs: &'a GuestInputs,
    pub hypervisor: &'a HypervisorConfig,
    pub connection: &'a virt::connect::Connect,
    /// The hypervisor's own system, for the TPM check and the serial console; `None` for
    /// libvirt's test driver, which has none.
    pub hypervisor_machine: Option<&'a HypervisorMachine>,
    /// The locks between runs: the base image's upload is made under one.
    pub locks: &'a Locks,
    /// `provision --adopt-host-key`: a guest built before trog made host keys that answers with
    /// its own is taken as it is, once, and its key kept.
    pub adopt_host_key: bool,
}

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

/// How a converge ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConvergeReport {
    pub guest: String,
    pub hypervisor: String,
    pub address: Option<String>,
    pub converged_already: bool,
    /// Each step with how long it took, in seconds.
    pub steps: Vec<(String, f64)>,
    pub total_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvergeError {
    #[error("{guest} is placed on {hypervisor}, which is libvirt's test driver: its guests cannot be reached over SSH")]
    TestDriverGuest { guest: String, hypervisor: String },
    #[error("{guest} is to be built on the remote hypervisor {hypervisor}, but has no address: a guest there is reached at its static address (`ips`, or one from `address_range`)")]
    RemoteNeedsAddress { guest: String, hypervisor: String },
    #[error("the plan was to wait for {guest}, but no connection to it was made")]
    NotConnected { guest: String },
}

impl crate::diagnose::Diagnose for ConvergeError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ConvergeError::RemoteNeedsAddress { .. } => ExitStatus::Configuration,
            _ => ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ConvergeError::TestDriverGuest { .. } => Some("use --dry-run with test:/// hypervisors".into()),
            ConvergeError::RemoteNeedsAddress { .. } => Some("declare `address_range` and `gateway` in `_global` so trog hands the guest an address (docs/NETWORK.md), or write its `ips` by hand: the NAT lease of a remote hypervisor is only reachable from it".into()),
            ConvergeError::NotConnected { .. } => None,
        }
    }
}

/// Refuses, before anything is built or changed, a guest that could not be reached afterwards.
pub fn check_reachable(guest: &GuestOnHypervisor) -> Result<(), ConvergeError> {
    if matches!(
        guest.hypervisor.libvirt_uri.transport,
        Transport::Ssh { .. }
    ) && guest.inputs.config.settings.ips.is_empty()
    {
        return Err(ConvergeError::RemoteNeedsAddress {
            guest: guest.inputs.config.domain.to_string(),
            hypervisor: guest.hypervisor.name.to_string(),
        });
    }
    Ok(())
}

/// Observes the guest on its hypervisor and plans. Changes nothing anywhere.
pub fn prepare(
    guest: &GuestOnHypervisor,
    resolution: Resolution,
) -> Result<PreparedGuest, Failure> {
    let inputs = guest.inputs;
    let settings = &inputs.config.settings;
    let desired = desired::desired_guest(
        &inputs.config.domain,
        &inputs.generated,
        settings,
        guest.hypervisor,
    );
    let resources = GuestResources {
        connection: guest.connection,
        hypervisor: guest.hypervisor.name.as_str(),
        desired: &desired,
        machine: guest.hypervisor_machine,
    };
    let observed = resources.observe()?;
    plan_observed(
        inputs,
        guest.hypervisor,
        guest.hypervisor_machine,
        desired,
        observed,
        resolution,
    )
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

/// The last local step before a plan runs (a dry run does none of it): refuses a plan that could
/// not be finished, and fetches and verifies the base image when the plan uploads it.
pub fn ready_to_execute(
    guest: &GuestOnHypervisor,
    prepared: &mut PreparedGuest,
    image_cache: &Path,
) -> Result<(), Failure> {
    let waits = prepared
        .plan
        .actions
        .iter()
        .any(|action| matches!(action, Action::WaitForSsh));
    if guest.hypervisor.libvirt_uri.transport == Transport::Test && waits {
        return Err(ConvergeError::TestDriverGuest {
            guest: prepared.desired.domain.to_string(),
            hypervisor: guest.hypervisor.name.to_string(),
        }
        .into());
    }
    if prepared
        .plan
        .actions
        .iter()
        .any(|action| matches!(action, Action::UploadBaseImage { .. }))
    {
        let generated = &guest.inputs.generated;
        prepared.base_image = Some(ensure_image(
            &generated.image_url,
            &generated.image_digest,
            image_cache,
        )?);
    }
    Ok(())
}
