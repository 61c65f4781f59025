//! `provision --all`'s summary: one line per guest of recipes.d (changed, converged already,
//! failed and why, or skipped because the domain whose machine it runs on did not converge), and
//! the exit status: 0 when every guest converged, else the status of the first guest that
//! failed, in recipes.d's order; and its text as people read it, which the command prints.

use crate::diagnose::ErrorEvent;
use crate::exit_status::ExitStatus;
use crate::model::names::DomainName;
use crate::provision::site::SiteOutcome;
use serde::Serialize;

/// One guest's line of the summary.
#[derive(Debug, Serialize)]
pub struct SummaryLine {
    pub guest: String,
    /// `changed`, `converged_already`, `failed` or `skipped`.
    pub outcome: &'static str,
    /// For `skipped`: the domain whose machine it runs on, which did not converge.
    pub skipped_because: Option<String>,
    /// Why it failed, as an `error` event's fields; `null` otherwise.
    pub failure: Option<ErrorEvent>,
}

/// The summary of a `provision --all` run.
#[derive(Debug, Serialize)]
pub struct SiteSummary {
    pub dry_run: bool,
    pub guests: Vec<SummaryLine>,
}

/// The summary and the run's exit status.
pub fn summarise(
    outcomes: &[(DomainName, SiteOutcome)],
    dry_run: bool,
) -> (SiteSummary, ExitStatus) {
    let status = outcomes
        .iter()
        .find_map(|(_, outcome)| match outcome {
            SiteOutcome::Failed(failure) => Some(failure.status),
            _ => None,
        })
        .unwrap_or(ExitStatus::Success);
    let guests = outcomes
        .iter()
        .map(|(guest, outcome)| SummaryLine {
            guest: guest.to_string(),
            outcome: match outcome {
                SiteOutcome::Changed => "changed",
                SiteOutcome::Already => "converged_already",
                SiteOutcome::Failed(_) => "failed",
                SiteOutcome::Skipped { .. } => "skipped",
            },
            skipped_because: match outcome {
                SiteOutcome::Skipped { because } => Some(because.to_string()),
                _ => None,
            },
            failure: match outcome {
                SiteOutcome::Failed(failure) => Some(ErrorEvent::of(failure)),
                _ => None,
            },
        })
        .collect();
    (SiteSummary { dry_run, guests }, status)
}

/// The summary as people read it.
pub fn render(summary: &SiteSummary) -> String {
    let count = |outcome: &str| {
        summary
            .guests
            .iter()
            .filter(|line| line.outcome == outcome)
            .count()
    };
    let (changed, already, failed, skipped) = (
        count("changed"),
        count("converged_already"),
        count("failed"),
        count("skipped"),
    );
    let skipped = if skipped > 0 {
        format!(", {skipped} skipped")
    } else {
        String::new()
    };
    let mut text = format!(
        "{} guest{}: {changed} {}, {already} converged already, {failed} failed{skipped}\n",
        summary.guests.len(),
        if summary.guests.len() == 1 { "" } else { "s" },
        if summary.dry_run {
            "to change"
        } else {
            "changed"
        },
    );
    for line in &summary.guests {
        let what = match (line.outcome, summary.dry_run) {
            ("changed", true) => "would change",
            ("changed", false) => "changed",
            ("converged_already", _) => "converged already",
            ("skipped", _) => "SKIPPED",
            _ => "FAILED",
        };
        text.push_str(&format!("  {:<18} {}", what, line.guest));
        if let Some(because) = &line.skipped_because {
            text.push_str(&format!(
                ": runs on {because}'s machine, and {because} did not converge in this run"
            ));
        }
        if let Some(failure) = &line.failure {
            // A message of several lines goes on under the guest's name, not at the margin.
            let continued = format!("\n{:21}", "");
            let mut why = failure.message.clone();
            for cause in &failure.causes {
                why.push_str(&format!(": {cause}"));
            }
            text.push_str(&format!(": {}", why.trim_end().replace('\n', &continued)));
            if let Some(hint) = &failure.hint {
                text.push_str(&format!("{continued}hint: {hint}"));
            }
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Failure;

    #[test]
    fn the_summary_counts_each_outcome_and_the_first_failure_sets_the_status() {
        let domain = |name: &str| DomainName::parse(name).unwrap();
        let outcomes = vec![
            (domain("a.site.test"), SiteOutcome::Already),
            (
                domain("b.site.test"),
                SiteOutcome::Failed(Failure::new(
                    "CHANGEME left in server_names",
                    ExitStatus::Configuration,
                    Some("fill it in".into()),
                )),
            ),
            (domain("c.site.test"), SiteOutcome::Changed),
            (
                domain("d.site.test"),
                SiteOutcome::Failed(Failure::new("no room", ExitStatus::NoPlacement, None)),
            ),
        ];
        let (summary, status) = summarise(&outcomes, false);
        assert_eq!(status, ExitStatus::Configuration);
        assert_eq!(
            render(&summary),
            "4 guests: 1 changed, 1 converged already, 2 failed\n\
             \x20 converged already  a.site.test\n\
             \x20 FAILED             b.site.test: CHANGEME left in server_names\n\
             \x20                    hint: fill it in\n\
             \x20 changed            c.site.test\n\
             \x20 FAILED             d.site.test: no room\n"
        );
        let (all_well, status) = summarise(&outcomes[..1], true);
        assert_eq!(status, ExitStatus::Success);
        assert!(render(&all_well).starts_with("1 guest: 0 to change, 1 converged already"));
    }
}
