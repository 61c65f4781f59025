//! `snapshot DOMAIN`: takes a snapshot of the guest wherever it lives (`--name`, `--keep N`);
//! `--list` shows its snapshots, `--delete NAME` removes one.

use crate::cli::target::GuestTarget;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::commands::StderrReporter;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::model::names::SnapshotName;
use crate::output::events::{emit, Event};
use crate::snapshot::utc_compact;
use crate::snapshot_space::human_bytes;
use crate::workflow::snapshot::{
    delete_snapshot, list_snapshots, take_snapshot, NewSnapshot, SnapshotListing,
};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub target: GuestTarget,
    /// Name the new snapshot (default: the UTC time, so names sort by time): letters, digits,
    /// `.`, `_` and `-`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["list", "delete"],
          value_parser = values::new_snapshot_name)]
    pub name: Option<SnapshotName>,
    /// After taking the snapshot, delete all but the newest N (1 or more).
    #[arg(long, value_name = "N", conflicts_with_all = ["list", "delete"],
          value_parser = values::keep_count)]
    pub keep: Option<usize>,
    /// List the guest's snapshots instead of taking one.
    #[arg(long, conflicts_with = "delete")]
    pub list: bool,
    /// Delete the snapshot NAME instead of taking one.
    #[arg(long, value_name = "NAME", value_parser = values::existing_snapshot_name)]
    pub delete: Option<String>,
}

pub fn run(global: &GlobalArgs, args: SnapshotArgs) -> Result<ExitStatus, Failure> {
    let domain = &args.target.guest.domain;
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let paths = global.installation_paths();
    let locks = global.locks("snapshot");
    let guest = args.target.address();
    if args.list {
        let listing = list_snapshots(&paths, &guest, &mut credentials, &locks, &StderrReporter)?;
        print_listing(&listing, global.json);
        return Ok(ExitStatus::Success);
    }
    if let Some(name) = &args.delete {
        let hypervisor = delete_snapshot(
            &paths,
            &guest,
            name,
            &mut credentials,
            &locks,
            &StderrReporter,
        )?;
        if global.json {
            emit(&Event::SnapshotDeleted {
                guest: domain.as_str(),
                hypervisor: &hypervisor,
                name,
            });
        } else {
            crate::outln!("{domain}: deleted snapshot {name} on {hypervisor}");
        }
        return Ok(ExitStatus::Success);
    }
    let now_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or(0);
    let taken = take_snapshot(
        &paths,
        &guest,
        &NewSnapshot {
            name: args.name.as_ref().map(SnapshotName::as_str),
            keep: args.keep,
            now_unix,
        },
        &mut credentials,
        &locks,
        &StderrReporter,
    )?;
    if global.json {
        emit(&Event::SnapshotTaken(&taken));
    } else {
        crate::outln!(
            "{}: snapshot {} taken on {} ({})",
            taken.guest,
            taken.name,
            taken.hypervisor,
            taken.capture
        );
        for deleted in &taken.deleted {
            crate::outln!("deleted  snapshot {deleted} (--keep)");
        }
    }
    Ok(ExitStatus::Success)
}

fn print_listing(listing: &SnapshotListing, json: bool) {
    if json {
        emit(&Event::Snapshots(listing));
        return;
    }
    if listing.snapshots.is_empty() {
        crate::outln!("{}: no snapshots on {}", listing.guest, listing.hypervisor);
    }
    for listed in &listing.snapshots {
        let record = &listed.record;
        let matches = match listed.matches_declaration {
            Some(true) => "matches today's declaration",
            Some(false) => "differs from today's declaration",
            None => "declaration unread",
        };
        let memory = match listed.memory_bytes {
            Some(0) => "no memory".to_string(),
            Some(bytes) => format!("memory {}", human_bytes(bytes)),
            None => "size unread".to_string(),
        };
        crate::outln!(
            "{:<24} {}  {:<8} {:<12} {memory:<18} {matches}",
            record.name,
            utc_compact(record.created_unix),
            if record.running {
                "running"
            } else {
                "shut off"
            },
            record.capture.to_string(),
        );
    }
    if let Some(bytes) = listing.disk_bytes {
        crate::outln!(
            "{}: its disks take {} on {} (its current state and every snapshot together)",
            listing.guest,
            human_bytes(bytes),
            listing.hypervisor
        );
    }
    if let Some(why) = &listing.declaration_unread {
        crate::errln!("warning: the snapshots were not compared with the declaration: {why}");
    }
    if let Some(why) = &listing.sizes_unread {
        crate::errln!(
            "warning: the sizes on {} were not read: {why}",
            listing.hypervisor
        );
    }
}
