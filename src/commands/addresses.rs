//! `addresses`: the ranges in ips.db, who holds which address, and what is free.

use crate::cli::GlobalArgs;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::workflow::addresses::list_addresses;

#[derive(Debug, clap::Args)]
pub struct AddressesArgs {}

pub fn run(global: &GlobalArgs, _args: AddressesArgs) -> Result<ExitStatus, Failure> {
    let listing = list_addresses(&global.installation_paths())?;
    if global.json {
        emit(&Event::Addresses(&listing));
        return Ok(ExitStatus::Success);
    }
    if listing.ranges.is_empty() && listing.holdings.is_empty() {
        crate::outln!("{}: no ranges and no addresses recorded", listing.database);
        return Ok(ExitStatus::Success);
    }
    crate::outln!("ranges ({}):", listing.database);
    for range in &listing.ranges {
        let next: Vec<String> = range.next_free.iter().map(ToString::to_string).collect();
        crate::outln!(
            "  {:<16} {}  gateway {}  held {}  free {}{}",
            range.range.network,
            range.range.range,
            range.range.gateway,
            range.held,
            range.free,
            if next.is_empty() {
                String::new()
            } else {
                format!(" (next: {})", next.join(", "))
            }
        );
        crate::outln!(
            "  {:<16} declared by {} in {}",
            "",
            range.range.declared_by,
            range.range.declared_in
        );
    }
    crate::outln!("holders:");
    for holding in &listing.holdings {
        crate::outln!(
            "  {:<16} {:<16} {:<9} {} ({})",
            holding.address,
            holding.network,
            match holding.origin {
                crate::addresses::HoldingOrigin::Assigned => "assigned",
                crate::addresses::HoldingOrigin::Declared => "declared",
            },
            holding.guest,
            holding.file
        );
    }
    Ok(ExitStatus::Success)
}
