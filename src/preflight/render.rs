//! The report as text for a person.

use super::{Check, Outcome, PreflightReport};
use std::fmt::Write;

fn line(out: &mut String, check: &Check) {
    let word = match check.outcome {
        Outcome::Ok => "  ok  ",
        Outcome::Failed => "FAILED",
        Outcome::Note => " note ",
    };
    let _ = writeln!(out, "{word} {}", check.summary);
    if check.outcome != Outcome::Ok {
        if let Some(advice) = &check.advice {
            let _ = writeln!(out, "         {advice}");
        }
    }
}

pub fn render_report(report: &PreflightReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Configuration: {}\n", report.configuration_dir);
    for check in &report.configuration {
        line(&mut out, check);
    }
    for hypervisor in &report.hypervisors {
        let _ = writeln!(
            out,
            "\nHypervisor {}: {}\n",
            hypervisor.name, hypervisor.uri
        );
        for check in &hypervisor.checks {
            line(&mut out, check);
        }
    }
    let failed = report
        .configuration
        .iter()
        .chain(report.hypervisors.iter().flat_map(|h| h.checks.iter()))
        .filter(|check| check.outcome == Outcome::Failed)
        .count();
    if failed == 0 {
        let _ = writeln!(out, "\nA run is worth starting.");
    } else {
        let _ = writeln!(
            out,
            "\nNot worth starting a run: {failed} check{} FAILED.",
            if failed == 1 { "" } else { "s" }
        );
    }
    out
}
