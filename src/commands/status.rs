//! `status DOMAIN…`: where each guest is, and whether it is the realization of its declaration
//! (converged) or what a `provision` would still do. Changes nothing; exits 0 when every guest is
//! converged and 1 otherwise, so scripts can ask.

use crate::cli::GlobalArgs;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_fleet};
use crate::config::paths::InstallationPaths;
use crate::credentials::CredentialSource;
use crate::exit_status::ExitStatus;
use crate::libvirt::{connect, find_guest, LibvirtObserver, DEFAULT_ANSWER_TIMEOUT};
use crate::plan::Resolution;
use crate::provision::inputs::{domain_argument, load_guest_inputs};
use crate::provision::{prepare, GuestOnHypervisor};
use crate::report::Failure;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The guests, fully qualified.
    #[arg(required = true, value_name = "DOMAIN")]
    pub domains: Vec<String>,
    /// Seconds each hypervisor has to answer when the guests are looked for.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub timeout: u64,
}

/// What `status` found for one guest.
#[derive(Debug, serde::Serialize)]
struct GuestStatus {
    guest: String,
    hypervisor: Option<String>,
    converged: bool,
    /// What a `provision` would do, in order.
    pending: Vec<String>,
    /// Hypervisors that could not be asked, with why.
    unreachable: Vec<String>,
}

pub fn run(global: &GlobalArgs, args: StatusArgs) -> Result<ExitStatus, Failure> {
    let domains = args
        .domains
        .iter()
        .map(|text| domain_argument(text))
        .collect::<Result<Vec<_>, _>>()?;
    let mut credentials = CredentialSource::for_run(global.credentials)?;
    let paths = InstallationPaths::from_environment(global);
    let mut all_converged = true;
    for domain in &domains {
        let inputs = load_guest_inputs(global, domain, &mut credentials)?;
        let fleet = fleet_to_build_on(
            &paths.hypervisors_conf,
            load_fleet(&paths.hypervisors_conf)?,
            inputs.config.settings.libvirt_uri.as_ref(),
        );
        let found = find_guest(
            &fleet,
            domain,
            Arc::new(LibvirtObserver),
            Duration::from_secs(args.timeout),
        );
        let unreachable: Vec<String> = found
            .unreachable
            .iter()
            .map(|(name, why)| format!("{name}: {why}"))
            .collect();
        let status = match found.holders.first() {
            None => GuestStatus {
                guest: domain.to_string(),
                hypervisor: None,
                converged: false,
                pending: vec!["provision it: it is on no hypervisor".into()],
                unreachable,
            },
            Some(holder) => {
                let hypervisor = fleet
                    .fleet
                    .hypervisors
                    .iter()
                    .find(|h| &h.name == holder)
                    .expect("a holder is in the fleet");
                let connection = connect(&hypervisor.libvirt_uri)?;
                // Only libvirt is asked: a status needs no shell on the hypervisor.
                let on_hypervisor = GuestOnHypervisor {
                    inputs: &inputs,
                    hypervisor,
                    connection: &connection,
                    hypervisor_machine: None,
                };
                let pending = match prepare(&on_hypervisor, Resolution::default()) {
                    Ok(prepared) => prepared
                        .plan
                        .actions
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                    Err(failure) => vec![format!("resolve first: {}", failure.chain().join(": "))],
                };
                GuestStatus {
                    guest: domain.to_string(),
                    hypervisor: Some(holder.to_string()),
                    converged: pending.is_empty(),
                    pending,
                    unreachable,
                }
            }
        };
        all_converged &= status.converged;
        if global.json {
            println!(
                "{}",
                serde_json::to_string(&status).expect("a status serialises")
            );
            continue;
        }
        match (&status.hypervisor, status.converged) {
            (Some(hypervisor), true) => println!("{}: on {hypervisor}, converged", status.guest),
            (Some(hypervisor), false) => println!(
                "{}: on {hypervisor}, not converged; provision would:",
                status.guest
            ),
            (None, _) => println!("{}: on no hypervisor", status.guest),
        }
        if status.hypervisor.is_some() {
            for (index, step) in status.pending.iter().enumerate() {
                println!("  {:>2}. {step}", index + 1);
            }
        }
        for unreachable in &status.unreachable {
            println!("  could not ask {unreachable}");
        }
    }
    Ok(if all_converged {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
