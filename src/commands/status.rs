//! `status DOMAIN…`: where each guest is, and whether it is the realization of its declaration
//! (converged) or what a `provision` would still do. Changes nothing; exits 0 when every guest is
//! converged and 1 otherwise, so scripts can ask. `--all` is `status_all`'s.

use crate::cli::target::FleetSearch;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::model::names::{DomainName, HypervisorName};
use crate::output::events::{emit, Event};
use crate::workflow::session::GuestAddress;
use crate::workflow::status::{guest_status, GuestStatus};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The guests, fully qualified.
    #[arg(required_unless_present = "all", value_name = "DOMAIN", value_parser = values::domain)]
    pub domains: Vec<DomainName>,
    /// Every guest of recipes.d, and what the hypervisors hold that recipes.d does not say:
    /// guests trog made that no file declares, and same-named domains trog did not make.
    #[arg(long, conflicts_with = "domains")]
    pub all: bool,
    #[command(flatten)]
    pub search: FleetSearch,
}

pub fn run(global: &GlobalArgs, args: StatusArgs) -> Result<ExitStatus, Failure> {
    if args.all {
        return crate::commands::status_all::run(global, &args.search);
    }
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let paths = global.installation_paths();
    let mut all_converged = true;
    for domain in &args.domains {
        let status = guest_status(
            &paths,
            &GuestAddress {
                domain,
                hypervisor: args.search.hypervisor_name(),
                answer_timeout: args.search.answer_timeout(),
            },
            &mut credentials,
            &global.locks("status"),
            &crate::commands::StderrReporter,
        )?;
        all_converged &= status.converged;
        if global.json {
            emit(&Event::Status(&status));
            continue;
        }
        print_guest_status(&status, args.search.hypervisor());
    }
    Ok(if all_converged {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// One guest's status as people read it; `named` is `--hypervisor`.
pub fn print_guest_status(status: &GuestStatus, named: Option<&HypervisorName>) {
    match (&status.hypervisor, status.converged) {
        (Some(hypervisor), true) => {
            crate::outln!("{}: on {hypervisor}, converged", status.guest)
        }
        (Some(hypervisor), false) => crate::outln!(
            "{}: on {hypervisor}, not converged; provision would:",
            status.guest
        ),
        (None, _) => match named {
            Some(named) => crate::outln!("{}: not on {named}", status.guest),
            None => crate::outln!("{}: on no hypervisor", status.guest),
        },
    }
    if status.hypervisor.is_some() {
        if let Some(base_image) = &status.base_image {
            crate::outln!("  base image: {base_image}");
        }
        for (index, step) in status.pending.iter().enumerate() {
            crate::outln!("  {:>2}. {step}", index + 1);
        }
    }
    for unreachable in &status.unreachable {
        crate::outln!("  could not ask {unreachable}");
    }
}
