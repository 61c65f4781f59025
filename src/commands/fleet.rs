//! `fleet`: every hypervisor's capacity, commitments, free space and guests, asked all at once.
//! A hypervisor that cannot be reached is listed with why; the command still succeeds unless
//! none answered.

use crate::cli::target::AnswerTimeout;
use crate::cli::GlobalArgs;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::placement::fleet_table::{render_fleet, SummaryState};
use crate::workflow::fleet::fleet_summary;

#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    #[command(flatten)]
    pub answer: AnswerTimeout,
}

pub fn run(global: &GlobalArgs, args: FleetArgs) -> Result<ExitStatus, Failure> {
    let summary = fleet_summary(&global.installation_paths(), args.answer.timeout.duration())?;
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
