//! `preflight [--hypervisor NAME]`: whether a run is worth starting. The questions are asked by
//! `workflow::preflight`; this prints the report (or its event) and exits 0 or 1.

use crate::cli::GlobalArgs;
use crate::credentials::{CredentialName, CredentialSource, Secret};
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::preflight::render::render_report;
use crate::workflow::preflight::preflight_report;

#[derive(Debug, clap::Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    pub one: crate::cli::target::OneHypervisor,
}

pub fn run(global: &GlobalArgs, args: PreflightArgs) -> Result<ExitStatus, Failure> {
    let paths = global.installation_paths();
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    // preflight never prompts: a sudo password counts only when it was handed in.
    let handed_in_sudo: Option<Secret> = if credentials.was_handed_in(CredentialName::Sudo) {
        credentials
            .get(CredentialName::Sudo, "for sudo on the hypervisor")
            .ok()
            .cloned()
    } else {
        None
    };
    // The existing hosts' keys are in the secret store: it is opened only with a passphrase
    // handed in, never asked for.
    let keepass_handed_in = credentials.was_handed_in(CredentialName::Keepass);
    let report = preflight_report(
        &paths,
        args.one.name(),
        handed_in_sudo,
        keepass_handed_in.then_some(&mut credentials),
    )?;
    if global.json {
        emit(&Event::Preflight {
            report: &report,
            worth_starting: report.worth_starting(),
        });
    } else {
        crate::out!("{}", render_report(&report));
    }
    Ok(if report.worth_starting() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
