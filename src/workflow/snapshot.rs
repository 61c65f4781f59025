//! Snapshots of a guest wherever it is: locate it, take its lock (but to list), open its
//! hypervisor (`workflow::session`), then take, list or delete. Everything goes through libvirt, so a remote hypervisor works the same as this
//! machine and nothing needs sudo there, but for the sizes `--list` shows: libvirt has none per
//! snapshot, so they are read with `qemu-img info` on the hypervisor (as root), and a listing
//! whose sizes cannot be read says why and goes on without them.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::generate::desired::desired_guest;
use crate::lock::Locks;
use crate::machine::hypervisor_ops::HypervisorOp;
use crate::plan::GuestTag;
use crate::snapshot::{beyond_newest, by_age, name_for_new, Capture, SnapshotRecord};
use crate::snapshot_space::{parse_image_info, snapshot_space, SnapshotSpace};
use crate::workflow::hypervisor_machine::open_hypervisor_machine;
use crate::workflow::inputs::{load_guest_inputs, StoreUse};
use crate::workflow::locate::{refuse_without_own_guest, GuestVerb};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestSession, GuestUse, InstallationFleet};

pub use crate::workflow::session::GuestAddress;

/// Opens the guest's session for a snapshot verb: a domain without a guest of its own refused
/// first, then located, locked when `guest_use` changes it, its hypervisor reached through
/// libvirt alone.
fn open_session(
    fleet: &dyn Fleet,
    guest: &GuestAddress,
    guest_use: GuestUse,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<GuestSession, Failure> {
    refuse_without_own_guest(
        GuestVerb::Snapshot,
        guest.domain,
        fleet.runs_on(guest.domain),
    )?;
    GuestSession::open(
        fleet,
        guest,
        guest_use,
        HypervisorAccess::LibvirtOnly,
        credentials,
        reporter,
    )
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

/// Takes a snapshot of the guest (named, or by the time now), then with `keep` deletes all but
/// the newest `keep`.
pub fn take_snapshot(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    request: &NewSnapshot,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    reporter: &dyn Reporter,
) -> Result<TakenSnapshot, Failure> {
    let fleet = InstallationFleet { paths, locks };
    take_snapshot_in(&fleet, guest, request, credentials, reporter)
}

/// What `snapshot` takes: its name (or one by the time now), and how many to keep.
pub struct NewSnapshot<'a> {
    pub name: Option<&'a str>,
    /// `--keep N`: all but the newest N are deleted after the new one is taken.
    pub keep: Option<usize>,
    pub now_unix: i64,
}

/// Takes a snapshot of the guest on `fleet`.
pub(crate) fn take_snapshot_in(
    fleet: &dyn Fleet,
    guest: &GuestAddress,
    request: &NewSnapshot,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<TakenSnapshot, Failure> {
    let session = open_session(fleet, guest, GuestUse::Change, credentials, reporter)?;
    let hypervisor = session.hypervisor.as_ref();
    let domain = guest.domain.as_str();
    let existing = hypervisor.snapshots(domain)?;
    let name = name_for_new(domain, &existing, request.name, request.now_unix)?;
    let capture = hypervisor.take_snapshot(domain, &name)?;
    let mut deleted = Vec::new();
    if let Some(keep) = request.keep {
        for old in beyond_newest(&hypervisor.snapshots(domain)?, keep) {
            hypervisor.delete_snapshot(domain, &old)?;
            deleted.push(old);
        }
    }
    let hypervisor = session.hypervisor_name();
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
    reporter: &dyn Reporter,
) -> Result<SnapshotListing, Failure> {
    let fleet = InstallationFleet { paths, locks };
    list_snapshots_in(&fleet, paths, guest, credentials, reporter)
}

/// Lists the snapshots of the guest on `fleet`.
pub(crate) fn list_snapshots_in(
    fleet: &dyn Fleet,
    paths: &InstallationPaths,
    guest: &GuestAddress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<SnapshotListing, Failure> {
    let session = open_session(fleet, guest, GuestUse::Read, credentials, reporter)?;
    let hypervisor = session.hypervisor_name();
    let records = session.hypervisor.snapshots(guest.domain.as_str())?;
    let (declared, declaration_unread) = match load_guest_inputs(
        paths,
        guest.domain,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        reporter,
    ) {
        Ok(inputs) => {
            let desired = desired_guest(
                guest.domain,
                &inputs.generated,
                &inputs.config.settings,
                &session.config,
                inputs.installation.as_ref(),
            );
            let tag = GuestTag {
                payload_digest: Some(desired.payload_digest.clone()),
                ..desired.tag_before_finish()
            };
            (Some(tag), None)
        }
        Err(failure) => (None, Some(failure.chain().join(": "))),
    };
    let (space, sizes_unread) = match read_snapshot_space(&session, credentials) {
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
    session: &GuestSession,
    credentials: &mut CredentialSource<TerminalPrompter>,
) -> Result<SnapshotSpace, String> {
    let machine = open_hypervisor_machine(&session.config.libvirt_uri, credentials)
        .map_err(|failure| failure.chain().join(": "))?
        .ok_or_else(|| "libvirt's test driver has no hypervisor system to ask".to_string())?;
    let paths = session
        .hypervisor
        .disk_paths(session.domain.as_str())
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
    reporter: &dyn Reporter,
) -> Result<String, Failure> {
    let fleet = InstallationFleet { paths, locks };
    delete_snapshot_in(&fleet, guest, name, credentials, reporter)
}

/// Deletes snapshot `name` of the guest on `fleet`, returning the hypervisor's name.
pub(crate) fn delete_snapshot_in(
    fleet: &dyn Fleet,
    guest: &GuestAddress,
    name: &str,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<String, Failure> {
    let session = open_session(fleet, guest, GuestUse::Change, credentials, reporter)?;
    let domain = guest.domain.as_str();
    let records = session.hypervisor.snapshots(domain)?;
    let chosen = crate::snapshot::choose(
        domain,
        &records,
        &crate::snapshot::Which::Named(name.to_string()),
    )?;
    session.hypervisor.delete_snapshot(domain, &chosen.name)?;
    Ok(session.hypervisor_name())
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
