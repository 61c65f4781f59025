//! `assign_ip DOMAIN [--network N]`: gives a guest the lowest free address of its network's
//! range and records it in ips.db (a guest that holds one already keeps it).

use crate::cli::GlobalArgs;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::workflow::addresses::{as_cidr, assign_address};

#[derive(Debug, clap::Args)]
pub struct AssignIpArgs {
    #[command(flatten)]
    pub guest: crate::cli::target::GuestName,
    /// The network (a libvirt network's name, or `bridge:NAME`) whose range to assign from;
    /// unset, the guest's own.
    #[arg(long, value_name = "N", value_parser = crate::cli::values::network)]
    pub network: Option<String>,
}

pub fn run(global: &GlobalArgs, args: AssignIpArgs) -> Result<ExitStatus, Failure> {
    let domain = &args.guest.domain;
    let assigned = assign_address(
        &global.installation_paths(),
        domain,
        args.network.as_deref(),
        &global.locks("assign_ip"),
        &crate::commands::StderrReporter,
    )?;
    if global.json {
        emit(&Event::AddressAssigned(&assigned));
        return Ok(ExitStatus::Success);
    }
    for holding in &assigned.holdings {
        match &assigned.range {
            Some(range) => crate::outln!(
                "{}: {} on {} (gateway {})",
                assigned.guest,
                as_cidr(holding, range),
                holding.network,
                range.gateway
            ),
            None => crate::outln!(
                "{}: {} on {} (written by hand in {}, recorded)",
                assigned.guest,
                holding.address,
                holding.network,
                holding.file
            ),
        }
    }
    Ok(ExitStatus::Success)
}
