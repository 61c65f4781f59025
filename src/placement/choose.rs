//! The decision: which hypervisor a guest goes to, and why every other one was not chosen.

use crate::model::names::HypervisorName;
use crate::placement::assess::{assess, score, Resource, ResourceCheck, Score};
use crate::placement::demand::GuestDemand;
use crate::placement::error::{PlacementError, Refusal, RefusedHypervisor, UnknownNameFrom};
use crate::placement::observed::{
    DefinedGuest, FleetObservation, Observation, ObservedHypervisor, PoolState,
};
use serde::Serialize;
use std::cmp::Ordering;

/// Why the chosen hypervisor was chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ChoiceReason {
    /// It already has the guest, which stays where it is.
    AlreadyThere,
    /// The guest's `hypervisor=` setting names it, and it fits.
    Pinned,
    /// `--hypervisor` named it: no search and no capacity check.
    CommandLine,
    /// Its tightest resource has the most room left afterwards.
    Roomiest,
    /// Tied with another on the tightest resource; won on the next rule.
    TieBroken { by: TieBreak },
    /// The only hypervisor that fits.
    OnlyFit,
}

/// The rules that break a tie on the tightest resource, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TieBreak {
    MeanHeadroom,
    FewerGuests,
    Name,
}

/// Why a hypervisor was, or was not, chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Chosen(ChoiceReason),
    /// It fits, but the chosen one has more room (or won a tie).
    LessRoom {
        lost_by: Option<TieBreak>,
    },
    DoesNotFit {
        resources: Vec<Resource>,
    },
    Unreachable {
        reason: String,
    },
    /// Not a candidate: the guest is pinned, named on the command line, or already elsewhere.
    NotConsidered,
}

/// One hypervisor's line of the dry-run table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypervisorRow {
    pub hypervisor: HypervisorName,
    /// Empty when it did not answer.
    pub checks: Vec<ResourceCheck>,
    pub score: Option<Score>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub demand: GuestDemand,
    pub chosen: HypervisorName,
    pub rows: Vec<HypervisorRow>,
}

impl Decision {
    pub fn reason(&self) -> &ChoiceReason {
        self.rows
            .iter()
            .find_map(|row| match &row.verdict {
                Verdict::Chosen(reason) => Some(reason),
                _ => None,
            })
            .expect("a decision has a chosen row")
    }
}

/// Places several guests, one after another: each sees the memory, CPUs, disk and guest slot
/// promised to the ones before it. A refused guest promises nothing.
/// `command_line_hypervisor` is `--hypervisor NAME`, which applies to every guest.
pub fn place_guests(
    demands: &[GuestDemand],
    fleet: &FleetObservation,
    command_line_hypervisor: Option<&HypervisorName>,
) -> Vec<Result<Decision, PlacementError>> {
    let mut promised = fleet.clone();
    let mut outcomes = Vec::with_capacity(demands.len());
    for demand in demands {
        let outcome = place_guest(demand, &promised, command_line_hypervisor);
        if let Ok(decision) = &outcome {
            promise(&mut promised, demand, &decision.chosen);
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// Counts a placed guest against the hypervisor it was given, unless it is already there.
fn promise(fleet: &mut FleetObservation, demand: &GuestDemand, chosen: &HypervisorName) {
    let Some(hypervisor) = fleet
        .hypervisors
        .iter_mut()
        .find(|h| &h.config.name == chosen)
    else {
        return;
    };
    let Observation::Answered(capacity) = &mut hypervisor.observation else {
        return;
    };
    if capacity.holds(demand.domain.as_str()) {
        return;
    }
    capacity.guests.push(DefinedGuest {
        name: demand.domain.to_string(),
        max_memory: demand.memory,
        max_vcpus: demand.vcpus,
        running: false,
    });
    if let PoolState::Active {
        allocation,
        available,
        ..
    } = &mut capacity.pool
    {
        *allocation = *allocation + demand.disk;
        *available = available.saturating_sub(demand.disk);
    }
}

/// Places one guest on the fleet as observed.
pub fn place_guest(
    demand: &GuestDemand,
    fleet: &FleetObservation,
    command_line_hypervisor: Option<&HypervisorName>,
) -> Result<Decision, PlacementError> {
    let known = |name: &HypervisorName, from: UnknownNameFrom| {
        if fleet.hypervisors.iter().any(|h| &h.config.name == name) {
            Ok(())
        } else {
            Err(PlacementError::UnknownHypervisor {
                name: name.clone(),
                from,
                fleet: fleet.source.describe(),
                known: fleet
                    .hypervisors
                    .iter()
                    .map(|h| h.config.name.clone())
                    .collect(),
                written_at: None,
            })
        }
    };
    if let Some(name) = command_line_hypervisor {
        known(name, UnknownNameFrom::CommandLine)?;
        return Ok(decide(
            demand,
            fleet,
            |h| &h.config.name == name,
            ChoiceReason::CommandLine,
        ));
    }
    if let Some(pin) = &demand.pinned_to {
        known(pin, UnknownNameFrom::GuestSetting)?;
    }
    let holders: Vec<&ObservedHypervisor> = fleet
        .hypervisors
        .iter()
        .filter(|h| {
            h.capacity()
                .is_some_and(|c| c.holds(demand.domain.as_str()))
        })
        .collect();
    match (holders.as_slice(), &demand.pinned_to) {
        ([], _) => {}
        ([holder], Some(pin)) if &holder.config.name != pin => {
            return Err(PlacementError::PinnedButElsewhere {
                domain: demand.domain.clone(),
                pinned_to: pin.clone(),
                holder: holder.config.name.clone(),
            })
        }
        ([holder], _) => {
            let name = &holder.config.name;
            return Ok(decide(
                demand,
                fleet,
                |h| &h.config.name == name,
                ChoiceReason::AlreadyThere,
            ));
        }
        (many, _) => {
            return Err(PlacementError::HeldByMany {
                domain: demand.domain.clone(),
                holders: many.iter().map(|h| h.config.name.clone()).collect(),
            })
        }
    }
    let candidate = |h: &ObservedHypervisor| {
        demand
            .pinned_to
            .as_ref()
            .is_none_or(|pin| pin == &h.config.name)
    };
    let mut rows = rows_for(demand, fleet, |_| false);
    let fits: Vec<bool> = (0..rows.len())
        .map(|index| {
            candidate(&fleet.hypervisors[index])
                && rows[index].score.is_some()
                && rows[index].checks.iter().all(|c| c.fits)
        })
        .collect();
    let fitting: Vec<usize> = (0..rows.len()).filter(|&index| fits[index]).collect();
    for (index, row) in rows.iter_mut().enumerate() {
        if row.score.is_none() {
            continue; // unreachable: already said so
        }
        row.verdict = if !candidate(&fleet.hypervisors[index]) {
            Verdict::NotConsidered
        } else if fits[index] {
            Verdict::LessRoom { lost_by: None }
        } else {
            let resources = row
                .checks
                .iter()
                .filter(|c| !c.fits)
                .map(|c| c.resource())
                .collect();
            Verdict::DoesNotFit { resources }
        };
    }
    // The best and the runner-up in one pass each, so a large fleet costs linear time.
    let best =
        |among: &mut dyn Iterator<Item = usize>| among.min_by(|&a, &b| rank(&rows[a], &rows[b]));
    let Some(winner) = best(&mut fitting.iter().copied()) else {
        return Err(PlacementError::Nowhere(refusal(
            demand, fleet, &rows, candidate,
        )));
    };
    let runner_up = best(&mut fitting.iter().copied().filter(|&index| index != winner));
    let reason = match runner_up {
        _ if demand.pinned_to.is_some() => ChoiceReason::Pinned,
        None => ChoiceReason::OnlyFit,
        Some(runner_up) => match tie_break(&rows[winner], &rows[runner_up]) {
            None => ChoiceReason::Roomiest,
            Some(by) => ChoiceReason::TieBroken { by },
        },
    };
    for &loser in fitting.iter().filter(|&&index| index != winner) {
        rows[loser].verdict = Verdict::LessRoom {
            lost_by: tie_break(&rows[winner], &rows[loser]),
        };
    }
    rows[winner].verdict = Verdict::Chosen(reason);
    Ok(Decision {
        demand: demand.clone(),
        chosen: rows[winner].hypervisor.clone(),
        rows,
    })
}

/// A decision made without comparing (already there, or named on the command line): the
/// chosen row is judged with the guest already counted when it is already there.
fn decide(
    demand: &GuestDemand,
    fleet: &FleetObservation,
    is_chosen: impl Fn(&ObservedHypervisor) -> bool,
    reason: ChoiceReason,
) -> Decision {
    let mut rows = rows_for(demand, fleet, &is_chosen);
    let mut chosen = None;
    for (row, hypervisor) in rows.iter_mut().zip(&fleet.hypervisors) {
        if is_chosen(hypervisor) {
            row.verdict = Verdict::Chosen(reason.clone());
            chosen = Some(row.hypervisor.clone());
        } else if row.score.is_some() {
            row.verdict = Verdict::NotConsidered;
        }
    }
    Decision {
        demand: demand.clone(),
        chosen: chosen.expect("the name was checked"),
        rows,
    }
}

fn rows_for(
    demand: &GuestDemand,
    fleet: &FleetObservation,
    already_counted: impl Fn(&ObservedHypervisor) -> bool,
) -> Vec<HypervisorRow> {
    fleet
        .hypervisors
        .iter()
        .map(|hypervisor| match &hypervisor.observation {
            Observation::Answered(capacity) => {
                let holds = already_counted(hypervisor) && capacity.holds(demand.domain.as_str());
                let checks = assess(&hypervisor.config, capacity, demand, holds);
                let score = score(&checks, capacity.guests.len() as u64);
                HypervisorRow {
                    hypervisor: hypervisor.config.name.clone(),
                    checks,
                    score: Some(score),
                    verdict: Verdict::NotConsidered,
                }
            }
            Observation::Unreachable { reason } => HypervisorRow {
                hypervisor: hypervisor.config.name.clone(),
                checks: Vec::new(),
                score: None,
                verdict: Verdict::Unreachable {
                    reason: reason.clone(),
                },
            },
        })
        .collect()
}

/// Best first: the most room on the tightest resource, then the most on average, then the
/// fewest guests, then the name, so the same fleet always gives the same answer.
fn rank(a: &HypervisorRow, b: &HypervisorRow) -> Ordering {
    let (sa, sb) = (
        a.score.expect("ranked rows answered"),
        b.score.expect("ranked rows answered"),
    );
    sb.min_headroom_after
        .total_cmp(&sa.min_headroom_after)
        .then(sb.mean_headroom_after.total_cmp(&sa.mean_headroom_after))
        .then(sa.guest_count.cmp(&sb.guest_count))
        .then(a.hypervisor.cmp(&b.hypervisor))
}

/// Which rule separated `winner` from `other`, when it was not the tightest resource.
fn tie_break(winner: &HypervisorRow, other: &HypervisorRow) -> Option<TieBreak> {
    let (w, o) = (winner.score?, other.score?);
    if w.min_headroom_after != o.min_headroom_after {
        None
    } else if w.mean_headroom_after != o.mean_headroom_after {
        Some(TieBreak::MeanHeadroom)
    } else if w.guest_count != o.guest_count {
        Some(TieBreak::FewerGuests)
    } else {
        Some(TieBreak::Name)
    }
}

fn refusal(
    demand: &GuestDemand,
    fleet: &FleetObservation,
    rows: &[HypervisorRow],
    candidate: impl Fn(&ObservedHypervisor) -> bool,
) -> Refusal {
    let hypervisors = rows
        .iter()
        .zip(&fleet.hypervisors)
        .filter(|(_, hypervisor)| candidate(hypervisor))
        .map(|(row, _)| match &row.verdict {
            Verdict::Unreachable { reason } => RefusedHypervisor::Unreachable {
                hypervisor: row.hypervisor.clone(),
                reason: reason.clone(),
            },
            _ => RefusedHypervisor::TooFull {
                hypervisor: row.hypervisor.clone(),
                shortfalls: row
                    .checks
                    .iter()
                    .filter(|c| !c.fits)
                    .map(|c| c.figures.clone())
                    .collect(),
            },
        })
        .collect();
    Refusal {
        demand: demand.clone(),
        fleet: fleet.source.describe(),
        hypervisors,
    }
}
