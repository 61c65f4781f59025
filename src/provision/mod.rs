//! Converging one guest on the hypervisor it was placed on: observe what is there, plan, check
//! the plan, then carry it out step by step — libvirt steps through the libvirt backend, the
//! wait and the finish over SSH.
//!
//! Everything that can be built locally (the artifacts, the base image) is built before the
//! first step touches the hypervisor.

pub mod desired;
pub mod hypervisor_machine;
pub mod inputs;
pub mod reach;
pub mod run;

use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::guest::finish::{finish, DEFAULT_FINISH_TIMEOUT};
use crate::guest::wait::{wait_for_ssh, DEFAULT_SSH_WAIT};
use crate::images::ensure_image;
use crate::libvirt::guest_resources::{BuiltArtifacts, GuestResources};
use crate::libvirt::guest_state::stopped_state;
use crate::libvirt::reservation::reserve_address;
use crate::lock::{Locks, Subject};
use crate::machine::hypervisor_ops::{self, HypervisorMachine};
use crate::model::hypervisor::{HypervisorConfig, Transport};
use crate::output::progress::Progress;
use crate::plan::{
    check_plan, plan, Action, DesiredGuest, GuestTag, ObservedGuest, Plan, Resolution,
};
use crate::render::domain_xml::{render_domain_xml, DEFAULT_DOMAIN_TEMPLATE};
use crate::secrets::PrivateKeyFile;
use inputs::GuestInputs;
use reach::SshProbe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
}

/// A plan and what executing it needs, all built before anything is changed.
pub struct PreparedGuest {
    pub desired: DesiredGuest,
    pub observed: ObservedGuest,
    pub plan: Plan,
    pub domain_xml: String,
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
    };
    let observed = resources.observe()?;
    let plan = plan(&desired, &observed, resolution)?;
    check_plan(&plan, &desired, &observed, resolution)?;
    let tag = plan
        .actions
        .iter()
        .find_map(|action| match action {
            Action::DefineDomain { tag, .. } => Some(tag.clone()),
            _ => None,
        })
        .unwrap_or_else(|| desired.tag_before_finish());
    let tpm = guest
        .hypervisor_machine
        .is_some_and(hypervisor_ops::offers_tpm);
    let spec = desired::domain_spec(
        &desired,
        &inputs.generated,
        settings,
        guest.hypervisor,
        tpm,
        tag,
    );
    let domain_xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE)?;
    Ok(PreparedGuest {
        desired,
        observed,
        plan,
        domain_xml,
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

/// Carries out a prepared plan.
pub fn execute(
    guest: &GuestOnHypervisor,
    prepared: &PreparedGuest,
    progress: &mut Progress,
) -> Result<ConvergeReport, Failure> {
    let started = Instant::now();
    let inputs = guest.inputs;
    let domain = prepared.desired.domain.to_string();
    let resources = GuestResources {
        connection: guest.connection,
        hypervisor: guest.hypervisor.name.as_str(),
        desired: &prepared.desired,
    };
    let no_file = PathBuf::new();
    let artifacts = BuiltArtifacts {
        domain_xml: &prepared.domain_xml,
        seed_iso: &inputs.generated.seed_iso.bytes,
        base_image_file: prepared.base_image.as_deref().unwrap_or(&no_file),
    };
    let mut report = ConvergeReport {
        guest: domain.clone(),
        hypervisor: guest.hypervisor.name.to_string(),
        address: None,
        converged_already: prepared.plan.is_converged(),
        steps: Vec::new(),
        total_seconds: 0.0,
    };
    // The key and the known-hosts file live only for this run, in private temporary places.
    let mut key_file: Option<PrivateKeyFile> = None;
    let mut connected = None;
    // Before the guest boots, so that dnsmasq never leases its address to another MAC.
    let reserving = Instant::now();
    if let Some(reserved) = reserve_static_address(guest)? {
        report.steps.push((reserved, seconds(reserving.elapsed())));
    }
    let total = prepared.plan.actions.len();
    for (index, action) in prepared.plan.actions.iter().enumerate() {
        progress.start(&domain, index + 1, total, &action.to_string());
        let outcome: Result<(), Failure> = match action {
            Action::WaitForSsh => {
                let key = match &key_file {
                    Some(key) => key,
                    None => key_file.insert(PrivateKeyFile::write(&inputs.keypair)?),
                };
                let known_hosts = key.directory().join("known_hosts");
                let source = reach::address_source(guest.connection, inputs, &domain);
                let console_path = desired::serial_log_path(&prepared.desired.domain);
                let hypervisor_machine = guest.hypervisor_machine;
                let mut probe = SshProbe {
                    source,
                    admin_user: inputs.config.settings.admin_user.clone(),
                    key_file: key.path().to_path_buf(),
                    known_hosts,
                    console: Box::new(move || {
                        hypervisor_machine
                            .and_then(|machine| hypervisor_ops::serial_log(machine, &console_path))
                    }),
                    stopped: Box::new({
                        let connection = guest.connection;
                        let domain = domain.clone();
                        move || stopped_state(connection, &domain)
                    }),
                    hypervisor_log: Box::new({
                        let domain = prepared.desired.domain.clone();
                        move || {
                            hypervisor_machine
                                .and_then(|machine| hypervisor_ops::qemu_log(machine, &domain))
                        }
                    }),
                    progress,
                    connected: None,
                };
                let result = wait_for_ssh(
                    &mut probe,
                    &domain,
                    &inputs.generated.mac_address.to_string(),
                    DEFAULT_SSH_WAIT,
                    &Instant::now,
                    &std::thread::sleep,
                );
                connected = probe.connected.take();
                result
                    .map(|address| report.address = Some(address))
                    .map_err(Failure::from)
            }
            Action::Finish { payload_digest } => match &connected {
                None => Err(ConvergeError::NotConnected {
                    guest: domain.clone(),
                }
                .into()),
                Some(machine) => {
                    let mut on_log = |text: &str| progress.guest_output(text);
                    finish(
                        machine,
                        &inputs.generated.payload.bytes,
                        payload_digest,
                        DEFAULT_FINISH_TIMEOUT,
                        &mut on_log,
                        &std::thread::sleep,
                    )
                    .map_err(Failure::from)
                    .and_then(|_| {
                        let tag = GuestTag {
                            payload_digest: Some(payload_digest.clone()),
                            ..current_tag(prepared)
                        };
                        resources.record_tag(&tag).map_err(Failure::from)
                    })
                }
            },
            Action::UploadBaseImage { .. } | Action::RemovePartialBaseImage { .. } => {
                // One upload of an image to a pool at a time from this machine: the others
                // wait, then find it there (or find a dead run's partial upload to replace).
                let subject = Subject::BaseImageUpload {
                    hypervisor: guest.hypervisor.name.to_string(),
                    pool: prepared.desired.pool_name.clone(),
                    volume: prepared.desired.base_image_volume.clone(),
                };
                guest
                    .locks
                    .acquire(&subject, &mut |text| progress.say(text))
                    .map_err(Failure::from)
                    .and_then(|_held| resources.execute(action, &artifacts).map_err(Failure::from))
            }
            _ => resources.execute(action, &artifacts).map_err(Failure::from),
        };
        let elapsed = progress.finish(outcome.is_ok());
        report.steps.push((action.to_string(), seconds(elapsed)));
        outcome?;
    }
    report.total_seconds = seconds(started.elapsed());
    Ok(report)
}

/// Reserves a guest's static address for its MAC in the libvirt network it joins, when that
/// network hands out leases (a bridge has no DHCP of trog's to tell). Returns the step's label
/// when something changed.
fn reserve_static_address(guest: &GuestOnHypervisor) -> Result<Option<String>, Failure> {
    let settings = &guest.inputs.config.settings;
    let address = settings.ips.iter().find_map(|cidr| match cidr.address {
        std::net::IpAddr::V4(address) => Some(address),
        std::net::IpAddr::V6(_) => None,
    });
    let (None, Some(address)) = (&settings.bridge, address) else {
        return Ok(None);
    };
    let mac = guest.inputs.generated.mac_address.to_string();
    let changed = reserve_address(
        guest.connection,
        &guest.hypervisor.libvirt_uri.uri,
        &settings.network,
        &mac,
        address,
    )?;
    Ok(changed.then(|| {
        format!(
            "reserve {address} for {mac} in network {}",
            settings.network
        )
    }))
}

/// The tag the domain carries once the plan's domain steps have run.
fn current_tag(prepared: &PreparedGuest) -> GuestTag {
    prepared
        .plan
        .actions
        .iter()
        .rev()
        .find_map(|action| match action {
            Action::DefineDomain { tag, .. } => Some(tag.clone()),
            _ => None,
        })
        .or_else(|| {
            prepared
                .observed
                .domain
                .as_ref()
                .and_then(|domain| domain.tag.clone())
        })
        .unwrap_or_else(|| prepared.desired.tag_before_finish())
}

fn seconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10.0).round() / 10.0
}
