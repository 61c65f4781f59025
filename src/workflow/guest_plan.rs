//! A guest's plan from what its hypervisor has of it: what `provision` carries out and `status`
//! shows, made the same way for both.

use crate::backup::archive_dir::GuestBackups;
use crate::backup::backup_dir;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::generate::desired;
use crate::machine::hypervisor_ops::{self, HypervisorMachine, HypervisorOp};
use crate::model::hypervisor::HypervisorConfig;
use crate::plan::{
    check_plan, plan, with_backup_restore, Action, DesiredGuest, ObservedGuest, Plan, Resolution,
};
use crate::render::domain_xml::{render_domain_xml, DomainSpec, DEFAULT_DOMAIN_TEMPLATE};
use crate::render::shared_folders::SharedFolder;
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
    /// The baked image a new root disk is made over (`bake_packages`), when there is one.
    pub baked_image: Option<crate::images::baked::BakedRecord>,
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
        baked_image: None,
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

/// A guest's shared folders that its hypervisor could not serve, found before anything is made.
#[derive(Debug, thiserror::Error)]
pub enum SharedFoldersError {
    #[error(
        "{guest} shares folders from {hypervisor}, which has no virtiofsd to serve them ({why})"
    )]
    NoVirtiofsd {
        guest: String,
        hypervisor: String,
        why: String,
    },
    #[error("{guest}'s shared folder `{name}` is {source_dir} on {hypervisor}, which is not a directory there")]
    SourceMissing {
        guest: String,
        hypervisor: String,
        name: String,
        source_dir: String,
    },
}

impl crate::diagnose::Diagnose for SharedFoldersError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            SharedFoldersError::SourceMissing { .. } => ExitStatus::Configuration,
            SharedFoldersError::NoVirtiofsd { .. } => ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            SharedFoldersError::NoVirtiofsd { hypervisor, .. } => Some(format!(
                "install virtiofsd on {hypervisor} (Debian from trixie: `apt-get install virtiofsd`; on bookworm, as root: `apt-get install libseccomp-dev libcap-ng-dev && cargo install virtiofsd --root /usr/local`); `trog preflight` says when it is found"
            )),
            SharedFoldersError::SourceMissing { hypervisor, source_dir, .. } => Some(format!(
                "make the directory on {hypervisor} (`mkdir -p {source_dir}`) or correct `source`: trog shares what is there and makes nothing on the hypervisor"
            )),
        }
    }
}

/// For a guest with shared folders, the hypervisor's virtiofsd, once every folder's source is
/// found there; `None` for a guest without (nothing is asked then). Refuses, before anything is
/// made, a hypervisor that could not serve them.
fn shared_folder_server(
    guest: &str,
    hypervisor: &str,
    folders: &[SharedFolder],
    machine: &HypervisorMachine,
) -> Result<Option<String>, SharedFoldersError> {
    if folders.is_empty() {
        return Ok(None);
    }
    let virtiofsd = match hypervisor_ops::virtiofsd_path(machine) {
        Ok(Some(path)) => Ok(path),
        Ok(None) => Err("none is installed".to_string()),
        Err(why) => Err(format!("it could not be asked: {why}")),
    }
    .map_err(|why| SharedFoldersError::NoVirtiofsd {
        guest: guest.to_string(),
        hypervisor: hypervisor.to_string(),
        why,
    })?;
    for folder in folders {
        let source = HypervisorOp::DirectoryExists {
            path: folder.source.clone(),
        };
        if !machine.holds(&source) {
            return Err(SharedFoldersError::SourceMissing {
                guest: guest.to_string(),
                hypervisor: hypervisor.to_string(),
                name: folder.name.clone(),
                source_dir: folder.source.clone(),
            });
        }
    }
    Ok(Some(virtiofsd))
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
