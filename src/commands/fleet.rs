//! `fleet`: every hypervisor's capacity, commitments, free space and guests, asked all at once.
//! A hypervisor that cannot be reached is listed with why; the command still succeeds unless
//! none answered.

use crate::cli::GlobalArgs;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::libvirt::DEFAULT_ANSWER_TIMEOUT;
use crate::output::events::{emit, Event};
use crate::placement::fleet_table::{render_fleet, SummaryState};
use crate::workflow::fleet::fleet_summary;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// Seconds each hypervisor has to answer before it is reported as unreachable.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_ANSWER_TIMEOUT.as_secs())]
    pub timeout: u64,
}

pub fn run(global: &GlobalArgs, args: FleetArgs) -> Result<ExitStatus, Failure> {
    let summary = fleet_summary(
        &global.installation_paths(),
        Duration::from_secs(args.timeout),
    )?;
    if global.json {
        emit(&Event::Fleet(&summary));
    } else {
        crate::out!("{}", render_fleet(&summary));
    }
    let any_answered = summary
        .hypervisors
        .iter()
        .any(|hypervisor| matches!(hypervisor.state, SummaryState::Answered { .. }));
    Ok(if any_answered {
        ExitStatus::Success
    } else {
        ExitStatus::Hypervisor
    })
}
