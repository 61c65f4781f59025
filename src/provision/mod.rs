//! Converging one guest on the hypervisor it was placed on: observe what is there, plan, check
//! the plan, then carry it out step by step — the hypervisor's steps through the
//! [`crate::hypervisor::Hypervisor`] trait (`workflow::open` opens it), the wait and the finish
//! over SSH.
//!
//! Everything that can be built locally (the artifacts, the base image) is built before the
//! first step touches the hypervisor.

pub mod execute;
pub mod host;
pub mod run;
pub mod schedule;
pub mod site;
pub mod site_summary;

pub use execute::execute;

use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::generate::desired;
use crate::hypervisor::Hypervisor;
use crate::images::baked::BakedRecord;
use crate::images::ensure_image;
use crate::lock::Locks;
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::{HypervisorConfig, Transport};
use crate::plan::{Action, Resolution};
pub use crate::workflow::baked_images::{makes_root_disk, over_baked_image};
use crate::workflow::guest_plan::plan_observed;
pub use crate::workflow::guest_plan::PreparedGuest;
use crate::workflow::inputs::GuestInputs;
use std::path::Path;

/// One guest and the hypervisor it goes to.
pub struct GuestOnHypervisor<'a> {
    pub inputs: &'a GuestInputs,
    pub hypervisor: &'a HypervisorConfig,
    /// The hypervisor as its backend reaches it: every step of the plan but the wait and the
    /// finish goes through it.
    pub backend: &'a dyn Hypervisor,
    /// The hypervisor's own system, for the TPM check and the serial console; `None` for
    /// libvirt's test driver, which has none.
    pub hypervisor_machine: Option<&'a HypervisorMachine>,
    /// The locks between runs: the base image's upload is made under one.
    pub locks: &'a Locks,
    /// `provision --adopt-host-key`: a guest built before trog made host keys that answers with
    /// its own is taken as it is, once, and its key kept.
    pub adopt_host_key: bool,
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
pub fn check_reachable(
    inputs: &GuestInputs,
    hypervisor: &HypervisorConfig,
) -> Result<(), ConvergeError> {
    if matches!(hypervisor.libvirt_uri.transport, Transport::Ssh { .. })
        && inputs.config.settings.ips.is_empty()
    {
        return Err(ConvergeError::RemoteNeedsAddress {
            guest: inputs.config.domain.to_string(),
            hypervisor: hypervisor.name.to_string(),
        });
    }
    Ok(())
}

/// Observes the guest on its hypervisor and plans. Changes nothing anywhere. `baked`: the baked
/// image (in `image_cache`) a new root disk is made over instead of the declared base image.
pub fn prepare(
    guest: &GuestOnHypervisor,
    resolution: Resolution,
    baked: Option<&BakedRecord>,
    image_cache: &Path,
) -> Result<PreparedGuest, Failure> {
    let inputs = guest.inputs;
    let settings = &inputs.config.settings;
    let mut desired = desired::desired_guest(
        &inputs.config.domain,
        &inputs.generated,
        settings,
        guest.hypervisor,
        inputs.installation.as_ref(),
    );
    if let Some(record) = baked {
        over_baked_image(&mut desired, record, image_cache);
    }
    let observed = guest.backend.observe_guest(&desired)?;
    let mut prepared = plan_observed(
        inputs,
        guest.hypervisor,
        guest.hypervisor_machine,
        desired,
        observed,
        resolution,
    )?;
    prepared.baked_image = baked.cloned();
    Ok(prepared)
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
        prepared.base_image = Some(match &prepared.baked_image {
            // Filed in the cache by its own build, under the digest the upload verifies.
            Some(record) => record.image_path(image_cache),
            None => ensure_image(&generated.image_url, &generated.image_digest, image_cache)?,
        });
    }
    Ok(())
}
