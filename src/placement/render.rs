//! Text for people: the dry-run table of a decision, and the refusal. Pure: values in, text out.

use crate::model::units::{Bytes, MiB};
use crate::placement::assess::{Figures, ResourceCheck, Score};
use crate::placement::choose::{ChoiceReason, Decision, TieBreak, Verdict};
use crate::placement::demand::GuestDemand;
use crate::placement::error::{Refusal, RefusedHypervisor};

const GIB: u64 = 1024 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// Disk space as messages print it: whole GB, rounded down, below a GB in whole MB.
pub fn disk_text(bytes: Bytes) -> String {
    if bytes.0 >= GIB || bytes.0 % GIB == 0 {
        format!("{}GB", bytes.0 / GIB)
    } else {
        format!("{}MB", bytes.0 / MIB)
    }
}

/// A CPU count that may be fractional (overcommit × physical): `32`, `12.5`.
pub fn cpu_text(count: f64) -> String {
    if count.fract() == 0.0 {
        format!("{count:.0}")
    } else {
        format!("{count:.1}")
    }
}

fn cpus_phrase(count: u64) -> String {
    if count == 1 {
        "1 CPU".to_string()
    } else {
        format!("{count} CPUs")
    }
}

/// "65536MB of memory, 16 CPUs and 500GB of disk"
pub fn wants_text(demand: &GuestDemand) -> String {
    format!(
        "{} of memory, {} and {} of disk",
        demand.memory,
        cpus_phrase(u64::from(demand.vcpus)),
        disk_text(demand.disk)
    )
}

/// The refusal, in the manner of the specification's `hungry.test` example, one line for each
/// resource that does not fit on each hypervisor, and one for each that could not be asked.
pub fn render_refusal(refusal: &Refusal) -> String {
    let demand = &refusal.demand;
    let mut text = format!(
        "Nowhere to put {}: it wants {},\n",
        demand.domain,
        wants_text(demand)
    );
    match &demand.pinned_to {
        Some(pin) => text.push_str(&format!(
            "and {pin}, where its hypervisor= setting pins it, cannot spare that.\n"
        )),
        None => text.push_str(&format!(
            "and no hypervisor in {} can spare that.\n",
            refusal.fleet
        )),
    }
    for hypervisor in &refusal.hypervisors {
        match hypervisor {
            RefusedHypervisor::TooFull {
                hypervisor,
                shortfalls,
            } => {
                for figures in shortfalls {
                    text.push_str(&format!("  {hypervisor}: {}\n", shortfall_text(figures)));
                }
            }
            RefusedHypervisor::Unreachable { hypervisor, reason } => {
                text.push_str(&format!("  {hypervisor}: could not be asked: {reason}\n"));
            }
        }
    }
    text
}

/// Why one resource does not fit, with its figures.
pub fn shortfall_text(figures: &Figures) -> String {
    match figures {
        Figures::Memory {
            wanted,
            physical,
            committed,
            reserved,
        } => {
            let free = physical
                .saturating_sub(*committed)
                .saturating_sub(*reserved);
            format!(
                "needs {wanted} of memory, {} free ({physical} physical, {committed} committed, \
                 {reserved} reserved)",
                if free == MiB(0) {
                    "none".to_string()
                } else {
                    free.to_string()
                }
            )
        }
        Figures::Cpus {
            wanted,
            physical,
            overcommit,
            committed,
        } => {
            let limit = overcommit * f64::from(*physical);
            let free = (limit - *committed as f64).max(0.0);
            format!(
                "needs {}, {} free ({physical} physical × {} overcommit, {committed} committed)",
                cpus_phrase(*wanted),
                cpu_text(free),
                cpu_text(*overcommit)
            )
        }
        Figures::Disk {
            wanted,
            pool_available,
            reserved,
            ..
        } => format!(
            "needs {} of disk, {} free in the pool after a {} reserve",
            disk_text(*wanted),
            disk_text(pool_available.saturating_sub(*reserved)),
            disk_text(*reserved)
        ),
        Figures::Guests { count, max, .. } => format!(
            "already has {count} guests, and max_guests is {}",
            max.map_or("not set".to_string(), |max| max.to_string())
        ),
        Figures::DiskUnchecked { .. } => "its pool's free space is unknown".to_string(),
    }
}

fn percent(headroom: Option<f64>) -> String {
    headroom.map_or(String::new(), |share| {
        format!(" ({:.0}%)", (share * 100.0).floor())
    })
}

/// One cell of the dry-run table: free before → after (share left after).
fn check_cell(check: &ResourceCheck) -> String {
    let short = |text: String| format!("short by {text}");
    match &check.figures {
        Figures::Memory {
            wanted,
            physical,
            committed,
            reserved,
        } => {
            let before = physical.0 as i128 - committed.0 as i128 - reserved.0 as i128;
            let after = before - wanted.0 as i128;
            let text = |n: i128| format!("{n}MB");
            let after = if after < 0 {
                short(text(-after))
            } else {
                text(after)
            };
            format!(
                "{} → {after}{}",
                text(before.max(0)),
                percent(check.headroom_after.filter(|_| check.fits))
            )
        }
        Figures::Cpus {
            wanted,
            physical,
            overcommit,
            committed,
        } => {
            let before = overcommit * f64::from(*physical) - *committed as f64;
            let after = before - *wanted as f64;
            let after = if after < 0.0 {
                short(cpu_text(-after))
            } else {
                cpu_text(after)
            };
            format!(
                "{} → {after}{}",
                cpu_text(before.max(0.0)),
                percent(check.headroom_after.filter(|_| check.fits))
            )
        }
        Figures::Disk {
            wanted,
            pool_available,
            reserved,
            ..
        } => {
            let before = pool_available.saturating_sub(*reserved);
            let after = if check.fits {
                disk_text(before.saturating_sub(*wanted))
            } else {
                short(disk_text(wanted.saturating_sub(before)))
            };
            format!(
                "{} → {after}{}",
                disk_text(before),
                percent(check.headroom_after.filter(|_| check.fits))
            )
        }
        Figures::DiskUnchecked {
            pool_name,
            pool_defined: true,
            ..
        } => {
            format!("pool {pool_name} stopped, not checked")
        }
        Figures::DiskUnchecked {
            pool_name,
            pool_defined: false,
            ..
        } => {
            format!("pool {pool_name} not yet created, not checked")
        }
        Figures::Guests {
            wanted,
            count,
            max: Some(max),
        } => format!("{count} → {} of {max}", count + wanted),
        Figures::Guests {
            wanted,
            count,
            max: None,
        } => format!("{count} → {} (no limit)", count + wanted),
    }
}

fn tightest_text(score: &Score) -> String {
    match score.tightest {
        Some(resource) => format!(
            "tightest: {resource}, {:.0}% left",
            (score.min_headroom_after * 100.0).floor()
        ),
        None => "nothing limits it".to_string(),
    }
}

fn tie_text(by: TieBreak) -> &'static str {
    match by {
        TieBreak::MeanHeadroom => "more room on average",
        TieBreak::FewerGuests => "fewer guests",
        TieBreak::Name => "first by name",
    }
}

/// "disk tightest, 44% left afterwards"
fn tightest_phrase(score: Option<Score>) -> String {
    match score {
        Some(Score {
            tightest: Some(resource),
            min_headroom_after,
            ..
        }) => format!(
            "{resource} tightest, {:.0}% left afterwards",
            (min_headroom_after * 100.0).floor()
        ),
        _ => "nothing limits it".to_string(),
    }
}

/// The headline of a decision: where the guest goes and why.
pub fn decision_headline(decision: &Decision) -> String {
    let domain = &decision.demand.domain;
    let chosen = &decision.chosen;
    let score = decision
        .rows
        .iter()
        .find(|row| &row.hypervisor == chosen)
        .and_then(|row| row.score);
    let tightest = tightest_phrase(score);
    match decision.reason() {
        ChoiceReason::AlreadyThere => format!("{domain} stays on {chosen}, which already has it"),
        ChoiceReason::CommandLine => {
            format!("{domain} goes to {chosen}, as --hypervisor says; capacity is not checked")
        }
        ChoiceReason::Pinned => format!(
            "{domain} goes to {chosen}, where its hypervisor= setting pins it, and fits ({tightest})"
        ),
        ChoiceReason::OnlyFit => {
            format!("{domain} goes to {chosen}, the only hypervisor with room ({tightest})")
        }
        ChoiceReason::Roomiest => format!(
            "{domain} goes to {chosen}, which keeps the most room on its tightest resource ({tightest})"
        ),
        ChoiceReason::TieBroken { by } => format!(
            "{domain} goes to {chosen}: tied on its tightest resource ({tightest}), won on {}",
            tie_text(*by)
        ),
    }
}

fn verdict_cell(verdict: &Verdict, score: Option<&Score>) -> String {
    match verdict {
        Verdict::Chosen(_) => "chosen".to_string(),
        Verdict::LessRoom { lost_by: None } => format!(
            "fits, less room ({})",
            score.map_or(String::new(), tightest_text)
        ),
        Verdict::LessRoom { lost_by: Some(by) } => {
            format!("fits, tied; lost on {}", tie_text(*by))
        }
        Verdict::DoesNotFit { resources } => {
            let names: Vec<String> = resources.iter().map(ToString::to_string).collect();
            format!("no room: {}", names.join(", "))
        }
        Verdict::Unreachable { reason } => format!("unreachable: {reason}"),
        Verdict::NotConsidered => "not considered".to_string(),
    }
}

/// The dry-run table: the headline, then every hypervisor with its free memory, CPUs, disk and
/// guest slots before → after placing the guest, and why it was or was not chosen.
pub fn render_decision(decision: &Decision) -> String {
    let mut rows = vec![[
        "HYPERVISOR",
        "MEMORY FREE",
        "CPUS FREE",
        "DISK FREE",
        "GUESTS",
        "VERDICT",
    ]
    .map(String::from)
    .to_vec()];
    for row in &decision.rows {
        let mut cells = vec![row.hypervisor.to_string()];
        if row.checks.is_empty() {
            cells.extend(["-", "-", "-", "-"].map(String::from));
        } else {
            cells.extend(row.checks.iter().map(check_cell));
        }
        cells.push(verdict_cell(&row.verdict, row.score.as_ref()));
        rows.push(cells);
    }
    format!(
        "{}\n\n{}",
        decision_headline(decision),
        align_columns(&rows)
    )
}

/// Several decisions, one after another, separated by a blank line.
pub fn render_decisions(decisions: &[Decision]) -> String {
    decisions
        .iter()
        .map(render_decision)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Pads every column but the last to its widest cell, two spaces apart.
pub fn align_columns(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if column + 1 < row.len() {
                let pad = widths[column] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guests_cell(wanted: u64, max: Option<u32>) -> String {
        check_cell(&ResourceCheck::judged(Figures::Guests {
            wanted,
            count: 2,
            max,
        }))
    }

    #[test]
    fn a_guest_already_counted_adds_nothing_to_the_guest_column() {
        assert_eq!(guests_cell(1, Some(4)), "2 → 3 of 4");
        assert_eq!(guests_cell(0, Some(4)), "2 → 2 of 4");
        assert_eq!(guests_cell(1, None), "2 → 3 (no limit)");
        assert_eq!(guests_cell(0, None), "2 → 2 (no limit)");
    }
}
