//! Where a guest is, and whether it is the realization of its declaration (converged) or what a
//! `provision` would still do. Asks the guest's hypervisor only (through `Hypervisor`, opened by
//! the fleet as every verb opens it); changes nothing.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::generate::desired::desired_guest;
use crate::images::baked::BakedRecord;
use crate::images::package_versions::PackageVersions;
use crate::model::hypervisor::HypervisorConfig;
use crate::plan::Resolution;
use crate::workflow::baked_images::{bake_choice, makes_root_disk, over_baked_image, unix_now};
use crate::workflow::guest_plan::plan_observed;
use crate::workflow::inputs::{
    generate_guest_inputs, load_guest_configured, GuestConfigured, StoreUse,
};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, InstallationFleet};

/// What `status` found for one guest.
#[derive(Debug, serde::Serialize)]
pub struct GuestStatus {
    pub guest: String,
    pub hypervisor: Option<String>,
    pub converged: bool,
    /// What a `provision` would do, in order.
    pub pending: Vec<String>,
    /// `bake_packages`, when a provision would make a root disk: which image it would be made
    /// over and why, as provision's plan says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    /// Hypervisors that could not be asked, with why.
    pub unreachable: Vec<String>,
}

/// The status of the guest, looked for on every hypervisor of the fleet at once or, when
/// `guest` names one (a block of hypervisors.conf), on that one only: the rest of the fleet is
/// not asked.
pub fn guest_status(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &crate::lock::Locks,
    reporter: &dyn Reporter,
) -> Result<GuestStatus, Failure> {
    // The configuration and the fleet first: what is wrong with them is said before the store is
    // asked for, and a guest on no hypervisor needs no store at all.
    let configured = load_guest_configured(paths, guest.domain, reporter)?;
    if configured.config.settings.runs_on() != crate::config::settings::RunsOn::OwnGuest {
        return crate::workflow::host::host_status(
            paths,
            locks,
            configured,
            credentials,
            guest.answer_timeout,
            reporter,
        );
    }
    let fleet = InstallationFleet { paths, locks };
    let whereabouts = fleet.search(guest)?;
    let Some(holder) = whereabouts.holder else {
        return Ok(GuestStatus {
            guest: guest.domain.to_string(),
            hypervisor: None,
            converged: false,
            pending: vec![match guest.hypervisor {
                Some(name) => format!("provision it: it is not on {name}"),
                None => "provision it: it is on no hypervisor".into(),
            }],
            unreachable: whereabouts.unreachable,
            base_image: None,
        });
    };
    let mut status = status_on(&fleet, paths, configured, &holder, credentials, reporter)?;
    status.unreachable = whereabouts.unreachable;
    Ok(status)
}

/// The status of the guest `configured` declares, on `hypervisor`, which holds it (a verb that
/// just acted on it there, such as `restore`, asks without looking for it again).
pub fn status_on(
    fleet: &dyn Fleet,
    paths: &InstallationPaths,
    configured: GuestConfigured,
    hypervisor: &HypervisorConfig,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<GuestStatus, Failure> {
    let domain = configured.config.domain.clone();
    // A status changes nothing, so it does not create a store: without one, the guest's key pair
    // (and with it the seed the guest was built from) is unknown.
    if !paths.secrets_kdbx.exists() {
        return Ok(GuestStatus {
            guest: domain.to_string(),
            hypervisor: Some(hypervisor.name.to_string()),
            converged: false,
            pending: vec![format!(
                "provision it: there is no secret store {} holding its key pair",
                paths.secrets_kdbx.display()
            )],
            unreachable: Vec::new(),
            base_image: None,
        });
    }
    let inputs = generate_guest_inputs(
        configured,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        reporter,
    )?;
    // Only libvirt is asked: a status needs no shell on the hypervisor.
    let opened = fleet.open(hypervisor, HypervisorAccess::LibvirtOnly, credentials)?;
    let image_cache = &crate::images::image_cache_of_this_account();
    let plan_over = |baked: Option<&BakedRecord>| {
        let mut desired = desired_guest(
            &inputs.config.domain,
            &inputs.generated,
            &inputs.config.settings,
            hypervisor,
            inputs.installation.as_ref(),
        );
        if let Some(record) = baked {
            over_baked_image(&mut desired, record, image_cache);
        }
        opened
            .hypervisor
            .observe_guest(&desired)
            .and_then(|observed| {
                plan_observed(
                    &inputs,
                    hypervisor,
                    None,
                    desired,
                    observed,
                    Resolution::default(),
                )
            })
    };
    let mut prepared = plan_over(None);
    // A new root disk is made over the baked image provision would use, as its plan shows; a
    // status builds none, and a mirror it cannot read leaves the declared image in the steps.
    let mut base_image = None;
    if prepared
        .as_ref()
        .is_ok_and(|prepared| makes_root_disk(&prepared.plan))
    {
        if let Some((choice, _)) = bake_choice(
            &inputs,
            &PackageVersions::default(),
            image_cache,
            unix_now(),
        )? {
            if let Some(record) = choice.fresh() {
                prepared = plan_over(Some(record));
            }
            base_image = Some(choice.to_string());
        }
    }
    let pending: Vec<String> = match prepared {
        Ok(prepared) => prepared
            .plan
            .actions
            .iter()
            .map(ToString::to_string)
            .collect(),
        Err(failure) => vec![format!("resolve first: {}", failure.chain().join(": "))],
    };
    Ok(GuestStatus {
        guest: domain.to_string(),
        hypervisor: Some(hypervisor.name.to_string()),
        converged: pending.is_empty(),
        pending,
        unreachable: Vec::new(),
        base_image,
    })
}
