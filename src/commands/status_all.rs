//! `status --all`: every guest of recipes.d as `status DOMAIN` says it, then the drift: what the
//! hypervisors hold that recipes.d does not declare (this installation's orphans, with the
//! command that removes each; another installation's guests, listed only; guests tagged before
//! tags named their installation, said so) and same-named domains trog did not make. Removes
//! nothing. Exits 0 when every guest is converged and nothing drifted that may be this
//! installation's, 1 otherwise.

use crate::cli::target::FleetSearch;
use crate::cli::GlobalArgs;
use crate::commands::status::print_guest_status;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::workflow::site_status::site_status;

pub fn run(global: &GlobalArgs, search: &FleetSearch) -> Result<ExitStatus, Failure> {
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let site = site_status(
        &global.installation_paths(),
        search.hypervisor_name(),
        search.answer_timeout(),
        &mut credentials,
        &global.locks("status"),
        &crate::commands::StderrReporter,
    )?;
    if let Some(warning) = &site.warning {
        crate::errln!("warning: {warning}");
    }
    let all_converged = site.guests.iter().all(|status| status.converged);
    let status = if all_converged && site.drift.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    };
    if global.json {
        for guest in &site.guests {
            emit(&Event::Status(guest));
        }
        emit(&Event::Drift(&site.drift));
        return Ok(status);
    }
    for guest in &site.guests {
        print_guest_status(guest, search.hypervisor());
        // A guest on no hypervisor whose status could not be had says why.
        if guest.hypervisor.is_none() {
            for why in guest.pending.iter().filter(|p| p.starts_with("resolve")) {
                crate::outln!("  {why}");
            }
        }
    }
    let drift = &site.drift;
    if drift.is_empty() {
        crate::outln!("no drift: every guest this installation made is declared in recipes.d");
    }
    if !drift.orphans.is_empty() {
        crate::outln!(
            "made by this installation, declared by no file of recipes.d (left as they are):"
        );
        for orphan in &drift.orphans {
            crate::outln!(
                "  {} on {}: remove it with `{}`",
                orphan.guest,
                orphan.hypervisor,
                orphan.remove_with
            );
        }
    }
    if !drift.unknown_installation.is_empty() {
        crate::outln!(
            "made by trog before its tags named their installation, declared by no file of \
             recipes.d: this installation's or another's, trog cannot tell (left as they are):"
        );
        for unknown in &drift.unknown_installation {
            crate::outln!(
                "  {} on {}: only if it is this installation's, `{}` removes it",
                unknown.guest,
                unknown.hypervisor,
                unknown.remove_with
            );
        }
    }
    if !drift.other_installations.is_empty() {
        crate::outln!(
            "made by another installation of trog sharing the hypervisor (theirs, left to them):"
        );
        for theirs in &drift.other_installations {
            crate::outln!(
                "  {} on {}: installation {}",
                theirs.guest,
                theirs.hypervisor,
                theirs.installation
            );
        }
    }
    if !drift.foreign.is_empty() {
        crate::outln!("named as a guest of recipes.d, but not made by trog:");
        for foreign in &drift.foreign {
            crate::outln!(
                "  {} on {}: provision refuses it (--force adopts it)",
                foreign.guest,
                foreign.hypervisor
            );
        }
    }
    for unreachable in &drift.unreachable {
        crate::outln!("could not ask {unreachable}: what it holds is not known");
    }
    Ok(status)
}
