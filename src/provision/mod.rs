//! Converging one guest on the hypervisor it was placed on: observe what is there, plan, check
//! the plan, then carry it out step by step — libvirt steps through the libvirt backend, the
//! wait and the finish over SSH.
//!
//! Everything that can be built locally (the artifacts, the base image) is built before the
//! first step touches the hypervisor.

pub mod desired;
pub mod execute;
pub mod hypervisor_machine;
pub mod inputs;
pub mod reach;
pub mod run;
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
use crate::machine::hypervisor_ops::{self, HypervisorMachine, HypervisorOp};
use crate::model::hypervisor::{HypervisorConfig, Transport};
use crate::plan::{
    check_plan, plan, with_backup_restore, Action, DesiredGuest, ObservedGuest, Plan, Resolution,
};
use crate::render::domain_xml::{render_domain_xml, DomainSpec, DEFAULT_DOMAIN_TEMPLATE};
use crate::render::shared_folders::SharedFolder;
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
    #[error(
        "{guest} shares folders from {hypervisor}, which has no virtiofsd to serve them ({why})"
    )]
    NoVirtiofsd {
        guest: String,
        hypervisor: String,
        why: String,
    },
    #[error("{guest}'s shared folder `{name}` is {source_dir} on {hypervisor}, which is not a directory there")]
    SharedFolderSourceMissing {
        guest: String,
        hypervisor: String,
        name: String,
        source_dir: String,
    },
}

impl crate::diagnose::Diagnose for ConvergeError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ConvergeError::RemoteNeedsAddress { .. }
            | ConvergeError::SharedFolderSourceMissing { .. } => ExitStatus::Configuration,
            ConvergeError::NoVirtiofsd { .. } => ExitStatus::Hypervisor,
            _ => ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ConvergeError::TestDriverGuest { .. } => Some("use --dry-run with test:/// hypervisors".into()),
            ConvergeError::RemoteNeedsAddress { .. } => Some("declare `address_range` and `gateway` in `_global` so trog hands the guest an address (docs/NETWORK.md), or write its `ips` by hand: the NAT lease of a remote hypervisor is only reachable from it".into()),
            ConvergeError::NotConnected { .. } => None,
            ConvergeError::NoVirtiofsd { hypervisor, .. } => Some(format!(
                "install virtiofsd on {hypervisor} (Debian from trixie: `apt-get install virtiofsd`; on bookworm, as root: `apt-get install libseccomp-dev libcap-ng-dev && cargo install virtiofsd --root /usr/local`); `trog preflight` says when it is found"
            )),
            ConvergeError::SharedFolderSourceMissing { hypervisor, source_dir, .. } => Some(format!(
                "make the directory on {hypervisor} (`mkdir -p {source_dir}`) or correct `source`: trog shares what is there and makes nothing on the hypervisor"
            )),
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
    let virtiofsd = match machine {
        Some(machine) => shared_folder_server(
            inputs.config.domain.as_str(),
            hypervisor.name.as_str(),
            &inputs.generated.machine_definition.shared_folders,
            machine,
        )?,
        None => None,
    };
    let spec = desired::domain_spec(
        &desired,
        &inputs.generated,
        settings,
        hypervisor,
        desired::HypervisorOffers { tpm, virtiofsd },
        tag,
        attaches_seed(&plan, &observed),
    );
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

/// Whether the definition the plan gives the guest attaches its seed: when the plan uploads one
/// (a first boot is coming), or the domain still attaches its own (it is retired later in the
/// plan, or by a later one); not for a guest whose seed is retired.
fn attaches_seed(plan: &Plan, observed: &ObservedGuest) -> bool {
    plan.actions
        .iter()
        .any(|action| matches!(action, Action::UploadSeed { .. }))
        || observed
            .domain
            .as_ref()
            .is_none_or(|domain| domain.seed_attached)
}

/// For a guest with shared folders, the hypervisor's virtiofsd, once every folder's source is
/// found there; `None` for a guest without (nothing is asked then). Refuses, before anything is
/// made, a hypervisor that could not serve them.
fn shared_folder_server(
    guest: &str,
    hypervisor: &str,
    folders: &[SharedFolder],
    machine: &HypervisorMachine,
) -> Result<Option<String>, ConvergeError> {
    if folders.is_empty() {
        return Ok(None);
    }
    let virtiofsd = match hypervisor_ops::virtiofsd_path(machine) {
        Ok(Some(path)) => Ok(path),
        Ok(None) => Err("none is installed".to_string()),
        Err(why) => Err(format!("it could not be asked: {why}")),
    }
    .map_err(|why| ConvergeError::NoVirtiofsd {
        guest: guest.to_string(),
        hypervisor: hypervisor.to_string(),
        why,
    })?;
    for folder in folders {
        let source = HypervisorOp::DirectoryExists {
            path: folder.source.clone(),
        };
        if !machine.holds(&source) {
            return Err(ConvergeError::SharedFolderSourceMissing {
                guest: guest.to_string(),
                hypervisor: hypervisor.to_string(),
                name: folder.name.clone(),
                source_dir: folder.source.clone(),
            });
        }
    }
    Ok(Some(virtiofsd))
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

#[cfg(test)]
mod shared_folder_tests {
    use super::*;
    use crate::diagnose::Diagnose;
    use crate::machine::fake::{Answer, FakeMachine};

    fn folder(name: &str, source: &str) -> SharedFolder {
        SharedFolder {
            name: name.into(),
            source: source.into(),
            mount: format!("/srv/{name}"),
            readonly: false,
        }
    }

    #[test]
    fn a_guest_without_shared_folders_asks_the_hypervisor_nothing() {
        let fake = FakeMachine::new();
        let machine = HypervisorMachine::fake(fake.clone());
        assert_eq!(
            shared_folder_server("g", "hv", &[], &machine).unwrap(),
            None
        );
        assert!(fake.command_lines().is_empty());
    }

    #[test]
    fn folders_are_served_by_the_virtiofsd_found_once_every_source_is_there() {
        let fake = FakeMachine::new()
            .answer(
                "virtiofsd",
                &[Answer::Exit(0, "/usr/local/bin/virtiofsd\n")],
            )
            .answer("test -d", &[Answer::Exit(0, "")]);
        let machine = HypervisorMachine::fake(fake.clone());
        let folders = [folder("a", "/srv/share/a"), folder("b", "/srv/share/b")];
        assert_eq!(
            shared_folder_server("g", "hv", &folders, &machine).unwrap(),
            Some("/usr/local/bin/virtiofsd".to_string())
        );
        assert_eq!(fake.count("test -d"), 2);
    }

    #[test]
    fn a_hypervisor_without_virtiofsd_is_refused_with_how_to_get_it() {
        let fake = FakeMachine::new().answer("virtiofsd", &[Answer::Exit(1, "")]);
        let machine = HypervisorMachine::fake(fake.clone());
        let error =
            shared_folder_server("g.test", "hv1", &[folder("a", "/srv/a")], &machine).unwrap_err();
        assert_eq!(
            error.to_string(),
            "g.test shares folders from hv1, which has no virtiofsd to serve them (none is installed)"
        );
        assert_eq!(error.exit_status(), ExitStatus::Hypervisor);
        assert!(error.hint().unwrap().contains("cargo install virtiofsd"));
        assert_eq!(fake.count("test -d"), 0, "no source is asked for after");
    }

    #[test]
    fn a_missing_source_is_refused_with_the_directory_to_make() {
        let fake = FakeMachine::new()
            .answer("virtiofsd", &[Answer::Exit(0, "/usr/libexec/virtiofsd\n")])
            .answer("/srv/here", &[Answer::Exit(0, "")])
            .answer("/srv/gone", &[Answer::Exit(1, "")]);
        let machine = HypervisorMachine::fake(fake);
        let folders = [folder("here", "/srv/here"), folder("gone", "/srv/gone")];
        let error = shared_folder_server("g.test", "hv1", &folders, &machine).unwrap_err();
        assert_eq!(
            error.to_string(),
            "g.test's shared folder `gone` is /srv/gone on hv1, which is not a directory there"
        );
        assert_eq!(error.exit_status(), ExitStatus::Configuration);
        assert!(error.hint().unwrap().contains("mkdir -p /srv/gone"));
    }

    #[test]
    fn an_unreachable_hypervisor_says_virtiofsd_could_not_be_asked() {
        let fake = FakeMachine::new().answer("virtiofsd", &[Answer::Unreachable]);
        let machine = HypervisorMachine::fake(fake);
        let error =
            shared_folder_server("g", "hv1", &[folder("a", "/srv/a")], &machine).unwrap_err();
        assert!(
            error.to_string().contains("it could not be asked"),
            "{error}"
        );
    }
}
