//! `fleet`'s question: every hypervisor of the installation asked at once, through libvirt, each
//! within its own time limit; one that does not answer in time is reported with why.

use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::paths::InstallationPaths;
use crate::diagnose::Failure;
use crate::hypervisor::fleet::observe_fleet;
use crate::placement::fleet_table::{summarise_fleet, FleetSummary};
use crate::workflow::open::fleet_observer;
use std::time::Duration;

/// The installation's fleet as it answers now, each hypervisor given `answer_within`.
pub fn fleet_summary(
    paths: &InstallationPaths,
    answer_within: Duration,
) -> Result<FleetSummary, Failure> {
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        None,
    );
    let observation = observe_fleet(&fleet, fleet_observer(), answer_within);
    Ok(summarise_fleet(&observation))
}
