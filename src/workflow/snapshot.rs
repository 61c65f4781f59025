//! Snapshots of a guest wherever it is: locate it, open its hypervisor's libvirt, then take,
//! list or delete. Everything goes through libvirt, so a remote hypervisor works the same as this
//! machine and nothing needs sudo there, but for the sizes `--list` shows: libvirt has none per
//! snapshot, so they are read with `qemu-img info` on the hypervisor (as root), and a listing
//! whose sizes cannot be read says why and goes on without them.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::libvirt::snapshot::GuestSnapshots;
use crate::lock::Locks;
use crate::machine::hypervisor_ops::HypervisorOp;
use crate::model::names::DomainName;
use crate::plan::GuestTag;
use crate::provision::desired::desired_guest;
use crate::provision::hypervisor_machine::open_hypervisor_machine;
use crate::provision::inputs::{load_guest_inputs, StoreUse};
use crate::snapshot::{beyond_newest, by_age, name_for_new, Capture, SnapshotRecord};
use crate::snapshot_space::{parse_image_info, snapshot_space, SnapshotSpace};
use crate::workflow::lock::{take_guest_lock, GuestLock};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::{fleet_for_guest, locate_guest, open_hypervisor, OpenedHypervisor};
use std::time::Duration;

/// Which guest, and where to look for it.
pub struct GuestAddress<'a> {
    pub domain: &'a DomainName,
    /// `--hypervisor`: act there instead of asking the fleet.
    pub hypervisor: Option<&'a str>,
    pub answer_timeout: Duration,
}

/// Whether a verb changes the guest (and so holds its lock while it acts) or only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestUse {
    Change,
    Read,
}

/// The hypervisor that holds the guest, opened through libvirt, and for a verb that changes the
/// guest its lock, held until the returned guard is dropped.
pub(crate) fn open_guests_hypervisor(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    guest_use: GuestUse,
) -> Result<(OpenedHypervisor, Option<GuestLock>), Failure> {
    let fleet = fleet_for_guest(paths, guest.domain)?;
    let hypervisor = locate_guest(&fleet, guest.domain, guest.hypervisor, guest.answer_timeout)?;
    if let Some(warning) = &fleet.warning {
        eprintln!("warning: {warning}");
    }
    let held = match guest_use {
        GuestUse::Change => Some(take_guest_lock(
            locks,
            guest.domain,
            hypervisor,
            None,
            &mut |text| eprintln!("{text}"),
        )?),
        GuestUse::Read => None,
    };
    let opened = open_hypervisor(hypervisor, HypervisorAccess::LibvirtOnly, credentials)?;
    Ok((opened, held))
}

/// A snapshot just taken, and the ones `--keep` deleted after it.
#[derive(Debug, serde::Serialize)]
pub struct TakenSnapshot {
    pub guest: String,
    pub hypervisor: String,
    pub name: String,
    pub capture: Capture,
    pub deleted: Vec<String>,
}

/// Takes a snapshot of the guest (named `name`, or by the time now), then with `keep` deletes
/// all but the newest `keep`.
pub fn take_snapshot(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    name: Option<&str>,
    keep: Option<usize>,
    now_unix: i64,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
) -> Result<TakenSnapshot, Failure> {
    let (opened, _guest_lock) =
        open_guests_hypervisor(paths, guest, credentials, locks, GuestUse::Change)?;
    let hypervisor = opened.config.name.to_string();
    let snapshots = GuestSnapshots::open(&opened.connection, &hypervisor, guest.domain.as_str())?;
    let existing = snapshots.list()?;
    let name = name_for_new(guest.domain.as_str(), &existing, name, now_unix)?;
    let capture = snapshots.take(&name)?;
    let mut deleted = Vec::new();
    if let Some(keep) = keep {
        for old in beyond_newest(&snapshots.list()?, keep) {
            snapshots.delete(&old)?;
            deleted.push(old);
        }
    }
    Ok(TakenSnapshot {
        guest: guest.domain.to_string(),
        hypervisor,
        name,
        capture,
        deleted,
    })
}

/// One line of `snapshot --list`.
#[derive(Debug, serde::Serialize)]
pub struct ListedSnapshot {
    #[serde(flatten)]
    pub record: SnapshotRecord,
    /// `Some(true)` when the definition the snapshot holds carries the tag today's declaration
    /// gives (boot inputs, shape and payload alike): restoring it leaves the guest converged.
    /// `None` when today's declaration could not be read.
    pub matches_declaration: Option<bool>,
    /// The memory the snapshot holds on the hypervisor (0 for one taken shut off); `None` when
    /// the sizes could not be read.
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, serde::Serialize)]
pub struct SnapshotListing {
    pub guest: String,
    pub hypervisor: String,
    pub snapshots: Vec<ListedSnapshot>,
    /// Why the snapshots could not be compared with today's declaration, if they could not.
    pub declaration_unread: Option<String>,
    /// The space the guest's disks take on the hypervisor: its current state and every snapshot
    /// together (qcow2 cannot tell one snapshot's share of the disks); `None` when unread.
    pub disk_bytes: Option<u64>,
    /// Why the sizes could not be read, if they could not.
    pub sizes_unread: Option<String>,
}

/// The guest's snapshots, oldest first, each compared with today's declaration.
pub fn list_snapshots(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
) -> Result<SnapshotListing, Failure> {
    let (opened, _) = open_guests_hypervisor(paths, guest, credentials, locks, GuestUse::Read)?;
    let hypervisor = opened.config.name.to_string();
    let snapshots = GuestSnapshots::open(&opened.connection, &hypervisor, guest.domain.as_str())?;
    let records = snapshots.list()?;
    let (declared, declaration_unread) = match load_guest_inputs(
        paths,
        guest.domain,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
    ) {
        Ok(inputs) => {
            let desired = desired_guest(
                guest.domain,
                &inputs.generated,
                &inputs.config.settings,
                &opened.config,
            );
            let tag = GuestTag {
                payload_digest: Some(desired.payload_digest.clone()),
                ..desired.tag_before_finish()
            };
            (Some(tag), None)
        }
        Err(failure) => (None, Some(failure.chain().join(": "))),
    };
    let (space, sizes_unread) = match read_snapshot_space(&opened, &snapshots, credentials) {
        Ok(space) => (Some(space), None),
        Err(why) => (None, Some(why)),
    };
    let listed = by_age(&records)
        .into_iter()
        .map(|record| ListedSnapshot {
            record: record.clone(),
            matches_declaration: declared
                .as_ref()
                .map(|declared| record.tag.as_ref() == Some(declared)),
            memory_bytes: space
                .as_ref()
                .and_then(|space| space.memory_bytes.get(&record.name).copied()),
        })
        .collect();
    Ok(SnapshotListing {
        guest: guest.domain.to_string(),
        hypervisor,
        snapshots: listed,
        declaration_unread,
        disk_bytes: space.map(|space| space.disk_bytes),
        sizes_unread,
    })
}

/// The space of the guest's disks and its snapshots' memory, from `qemu-img info` on each disk on
/// the hypervisor (as root: the pool's files are libvirt's, so sudo is settled first); `Err` says
/// why it could not be read.
fn read_snapshot_space(
    opened: &OpenedHypervisor,
    snapshots: &GuestSnapshots,
    credentials: &mut CredentialSource<TerminalPrompter>,
) -> Result<SnapshotSpace, String> {
    let machine = open_hypervisor_machine(&opened.config.libvirt_uri, credentials)
        .map_err(|failure| failure.chain().join(": "))?
        .ok_or_else(|| "libvirt's test driver has no hypervisor system to ask".to_string())?;
    let paths = snapshots
        .disk_paths(&opened.connection)
        .map_err(|error| error.to_string())?;
    let images = paths
        .into_iter()
        .map(|path| {
            let output = machine
                .run(&HypervisorOp::DiskImageInfo { path: path.clone() })
                .and_then(|output| output.success())
                .map_err(|error| {
                    format!("qemu-img info {path} on {}: {error}", machine.describe())
                })?;
            parse_image_info(&output.stdout_text())
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(snapshot_space(&images))
}

/// Deletes the guest's snapshot `name`; an unknown name lists the ones there are.
pub fn delete_snapshot(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    name: &str,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
) -> Result<String, Failure> {
    let (opened, _guest_lock) =
        open_guests_hypervisor(paths, guest, credentials, locks, GuestUse::Change)?;
    let hypervisor = opened.config.name.to_string();
    let snapshots = GuestSnapshots::open(&opened.connection, &hypervisor, guest.domain.as_str())?;
    let records = snapshots.list()?;
    let chosen = crate::snapshot::choose(
        guest.domain.as_str(),
        &records,
        &crate::snapshot::Which::Named(name.to_string()),
    )?;
    snapshots.delete(&chosen.name)?;
    Ok(hypervisor)
}
