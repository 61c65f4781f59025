//! What the verbs ask of a guest's hypervisor, as one trait: [`Hypervisor`] (`provision`
//! building the guest, and the verbs acting on an existing one), and of the whole fleet before
//! one is opened: [`observer::HypervisorObserver`], asked of every hypervisor at once by
//! [`fleet`]. `libvirt::LibvirtHypervisor` and `libvirt::LibvirtObserver` are the real ones,
//! made only by `workflow::open`; `fake::FakeHypervisor` (unit tests only) keeps domains,
//! volumes, snapshots, pools, networks and filters in memory, fails the operation it is told
//! to, and records every call in order.
//!
//! The trait speaks of guests by name, of volumes by pool and name, of networks by name and of
//! snapshots as [`SnapshotRecord`]s: nothing of a backend's own types crosses it, so a second
//! backend (an Incus cluster, OpenStack) implements the same methods with its own API (see
//! ARCHITECTURE.md). What a verb does with the answers (the order of a destroy's steps, what is
//! left behind, which snapshot is meant) is the verb's, in `provision/` and `workflow/`, and is
//! tested against the fake.

#[cfg(test)]
pub mod fake;
pub mod fleet;
pub mod observer;
pub mod provisioning;

use crate::debug_boot::domain_edit::{DebugChange, EditError};
use crate::debug_boot::guest_disk::DiskFile;
use crate::diagnose::Failure;
use crate::machine::hypervisor_ops::boot_files::BootFiles;
use crate::plan::{Action, DesiredGuest, GuestTag, ObservedGuest};
use crate::render::network_filter::{NetworkFilter, TenantDirectory};
use crate::snapshot::{Capture, SnapshotRecord};
use provisioning::{BuiltArtifacts, GuestResourceError, KeptApart, PinnedLease};
use std::net::Ipv4Addr;

/// What a volume in a pool is to the guests of its hypervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeUse {
    /// The pool has no such volume (or there is no such pool).
    Absent,
    /// Nothing is layered over it and no domain uses it.
    Unused,
    /// What uses it: `volume NAME` for each volume backed by it, `domain NAME` for each domain
    /// whose disk it is.
    Used { by: Vec<String> },
}

/// A backend's own failure of one operation, as it worded it (libvirt's message and code, say).
/// Its text is the backend's alone: the verb's error around it says what was being done.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct HypervisorFault(Box<dyn std::error::Error + Send + Sync>);

impl HypervisorFault {
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> HypervisorFault {
        HypervisorFault(error.into())
    }
}

/// Whether a hypervisor holds a domain of a guest's name, and whether it is trog's (it carries
/// trog's tag: a same-named domain without it is someone else's, which trog leaves alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Absent,
    Foreign,
    Trogs,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{backend} on {hypervisor} could not {operation} of {domain}")]
    Backend {
        /// Which kind of hypervisor said no (`libvirt`).
        backend: &'static str,
        hypervisor: String,
        domain: String,
        operation: String,
        #[source]
        source: HypervisorFault,
    },
    #[error(
        "{backend} on {hypervisor} described snapshot {name} of {domain} in a form trog cannot read"
    )]
    Unreadable {
        backend: &'static str,
        hypervisor: String,
        domain: String,
        name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "domain {domain} on {hypervisor} was not created by trog; trog leaves its snapshots alone"
    )]
    Foreign { hypervisor: String, domain: String },
    #[error("{domain} on {hypervisor} runs with shared folders (virtiofs), whose state cannot be saved with the guest's memory")]
    SharedFoldersRunning { hypervisor: String, domain: String },
}

impl SnapshotError {
    /// The backend's own words for what failed, without the verb's context: how a destroy names
    /// a snapshot it left behind.
    pub fn backend_text(&self) -> String {
        match self {
            SnapshotError::Backend { source, .. } => source.to_string(),
            other => other.to_string(),
        }
    }
}

impl crate::diagnose::Diagnose for SnapshotError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            SnapshotError::Foreign { .. } | SnapshotError::SharedFoldersRunning { .. } => {
                crate::exit_status::ExitStatus::Conflict
            }
            _ => crate::exit_status::ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            SnapshotError::Foreign { .. } => "use the tools that made it (virsh snapshot-*)".into(),
            SnapshotError::SharedFoldersRunning { domain, .. } => format!(
                "shut the guest down (`virsh shutdown {domain}`), then snapshot it shut off; what it keeps in its shared folders is on the hypervisor, outside any snapshot"
            ),
            _ => "check libvirtd's log on that hypervisor; `trog snapshot --list DOMAIN` shows \
                  what the guest has now"
                .into(),
        })
    }
}

/// A change `debug_boot` makes to a guest's definition, and `--restore` takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugEdit<'a> {
    /// The serial console written to `capture` (emptied at each start) from the firmware's first
    /// line on, instead of to `provisioned_log`.
    ConsoleCapture {
        provisioned_log: &'a str,
        capture: &'a str,
    },
    /// The firmware's boot menu on, waiting for a key.
    BootMenu,
}

/// A running guest's remote display, open to `password` until `valid_until` (UTC,
/// `YYYY-MM-DDTHH:MM:SS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VncDisplay {
    /// Where it listens, on the hypervisor.
    pub listen: String,
    pub port: u16,
    pub password: String,
    pub valid_until: String,
}

/// One hypervisor of the fleet, opened, as the verbs use it: `provision` building a guest, and
/// the verbs that act on an existing one.
/// Every method names the guest by its domain name; none waits longer than one request to the
/// hypervisor takes (a verb's waits, such as a destroy's grace for a clean shutdown, are its
/// own).
pub trait Hypervisor {
    /// The hypervisor's name in the fleet, for messages.
    fn name(&self) -> &str;
    /// Which kind of hypervisor it is (`libvirt`), for messages that quote its failures.
    fn backend(&self) -> &'static str;

    // Guests.

    /// Whether a domain named `domain` is defined there, and whether it is trog's.
    fn presence(&self, domain: &str) -> Result<Presence, HypervisorFault>;
    /// Whether the guest runs now.
    fn is_running(&self, domain: &str) -> Result<bool, HypervisorFault>;
    /// `None` while the guest runs (or cannot be asked); otherwise its state and the
    /// hypervisor's reason, e.g. `shut off (crashed)`, or that it is no longer defined.
    fn stopped_state(&self, domain: &str) -> Option<String>;
    /// Asks the guest to shut down (ACPI) and returns at once.
    fn shut_down(&self, domain: &str) -> Result<(), HypervisorFault>;
    /// Turns the guest off at once; one already off is not an error.
    fn force_off(&self, domain: &str) -> Result<(), HypervisorFault>;
    /// Removes the guest's definition with its firmware and TPM state, its managed save and the
    /// metadata of its snapshots; its volumes stay.
    fn undefine(&self, domain: &str) -> Result<(), HypervisorFault>;
    /// The (network, MAC) of each of the guest's interfaces on a hypervisor network; none when
    /// it cannot be read.
    fn network_interfaces(&self, domain: &str) -> Vec<(String, String)>;
    /// Every IPv4 address the hypervisor's DHCP leased to `mac` of the guest, newest first.
    fn leased_addresses(&self, domain: &str, mac: &str) -> Vec<String>;
    /// What the hypervisor has of the guest `desired` describes (its domain, volumes, pool, base
    /// image), for the planner.
    fn observe_guest(&self, desired: &DesiredGuest) -> Result<ObservedGuest, Failure>;

    // Snapshots.

    /// The names of the guest's snapshots, without reading what they hold (a destroy deletes
    /// even one it could not read).
    fn snapshot_names(&self, domain: &str) -> Result<Vec<String>, SnapshotError>;
    /// Every snapshot of the guest, read.
    fn snapshots(&self, domain: &str) -> Result<Vec<SnapshotRecord>, SnapshotError>;
    /// Takes snapshot `name`, with memory when the guest runs; atomic, and a running guest the
    /// attempt left paused is resumed.
    fn take_snapshot(&self, domain: &str, name: &str) -> Result<Capture, SnapshotError>;
    fn delete_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError>;
    /// Returns the guest to snapshot `name`: disks, definition, and memory when it has one.
    fn revert_snapshot(&self, domain: &str, name: &str) -> Result<(), SnapshotError>;
    /// The files of the guest's writable disks on the hypervisor (root and data, not the seed).
    fn disk_paths(&self, domain: &str) -> Result<Vec<String>, SnapshotError>;

    // Storage.

    /// Refreshes `pool` (files written beside the hypervisor count); `false` when there is no
    /// such pool.
    fn refresh_pool(&self, pool: &str) -> Result<bool, HypervisorFault>;
    fn volume_exists(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault>;
    /// Deletes the volume; `false` when there was none.
    fn delete_volume(&self, pool: &str, volume: &str) -> Result<bool, HypervisorFault>;
    /// Whether `volume` is in `pool` and what uses it: the volumes layered over it, the domains
    /// whose disk (or a disk's backing chain) it is. A base image is removed only when unused.
    fn volume_use(&self, pool: &str, volume: &str) -> Result<VolumeUse, HypervisorFault>;
    /// Detaches the guest's seed, the volume `volume`, from its definition and from the running
    /// guest; `false` when it was attached to neither.
    fn detach_seed(&self, domain: &str, volume: &str) -> Result<bool, HypervisorFault>;

    /// The names of every volume in `pool` (a guest's extra disks are found among them, the
    /// declared and those no longer declared alike).
    fn volume_names(&self, pool: &str) -> Result<Vec<String>, HypervisorFault>;

    // Networks.

    /// Removes trog's network filters no guest uses any more, returning their names. The
    /// caller holds the filters' lock.
    fn remove_unused_filters(&self) -> Result<Vec<String>, HypervisorFault>;
    /// Releases the DHCP reservations pinning `mac`'s leases in `network`, but those of
    /// `keep` (a guest's static addresses), returning the addresses released.
    fn release_pins(
        &self,
        network: &str,
        mac: &str,
        keep: &[Ipv4Addr],
    ) -> Result<Vec<Ipv4Addr>, HypervisorFault>;
    /// Removes `network`'s DHCP reservation of `address`; `false` when it had none.
    fn release_reservation(
        &self,
        network: &str,
        address: Ipv4Addr,
    ) -> Result<bool, HypervisorFault>;

    // Building a guest (`provision`): a plan's steps, each safe to repeat (a rerun re-observes,
    // re-plans and finds what an interrupted run left), and the networks' side of a guest.

    /// Carries out one of the plan's steps that are the hypervisor's: the pool, the base image
    /// (uploaded from `artifacts.base_image_file`, whole under its final name or not at all),
    /// the guest's volumes and seed, its definition (`artifacts.domain_xml`, tagged with the
    /// step's tag), autostart, a start or a stop, its snapshots' deletion, its extra disks. The
    /// wait for SSH, backups, the seed's retirement and the finish are not the hypervisor's.
    fn carry_out(
        &self,
        desired: &DesiredGuest,
        action: &Action,
        artifacts: &BuiltArtifacts,
    ) -> Result<(), GuestResourceError>;
    /// Records `tag` on the guest's definition (and on the running guest).
    fn record_tag(&self, desired: &DesiredGuest, tag: &GuestTag) -> Result<(), GuestResourceError>;
    /// Removes every partial copy of the guest's base image in its pool, whichever machine's.
    /// Only under the hypervisor's lock of that upload: then each one there is a dead run's.
    fn remove_partial_base_images(&self, desired: &DesiredGuest) -> Result<(), GuestResourceError>;
    /// The base image's kernel, initramfs and command line, for a first boot that starts the
    /// kernel directly; `None` when the backend cannot start one so.
    fn boot_files(&self, desired: &DesiredGuest) -> Result<Option<BootFiles>, GuestResourceError>;
    /// Starts the guest, which is off, once as `first_definition` defines it, then defines it as
    /// `lasting_definition` again (also when the start failed); a guest that runs is left alone.
    /// Both are trog's rendered definitions.
    fn start_once_as(
        &self,
        desired: &DesiredGuest,
        first_definition: &str,
        lasting_definition: &str,
    ) -> Result<(), GuestResourceError>;
    /// The tenants whose network filters trog has defined there.
    fn tenants_with_filters(&self) -> Result<Vec<String>, Failure>;
    /// Every tenant's addresses as the guests' definitions there carry them: what every
    /// installation sharing the hypervisor sees, where each ips.db knows only its own guests.
    fn tenant_addresses(&self) -> Result<TenantDirectory, Failure>;
    /// Defines `filters` in order (each after those it references), or redefines those that are
    /// trog's already; refuses, before changing anything, one of those names that is not trog's.
    /// The caller holds the filters' lock.
    fn define_filters(&self, filters: &[NetworkFilter]) -> Result<(), Failure>;
    /// Reserves `address` for `mac` in `network`'s DHCP, replacing any other reservation of that
    /// MAC or address; whether anything changed. Refuses, changing nothing, an address a running
    /// domain holds a lease of under another MAC ([`Hypervisor::address_leased_elsewhere`]).
    fn reserve_address(&self, network: &str, mac: &str, address: Ipv4Addr)
        -> Result<bool, Failure>;
    /// What [`Hypervisor::reserve_address`] would refuse, asked without changing anything (a
    /// dry run): the lease of `address` a running domain holds under another MAC than `mac`,
    /// when `address` is not reserved for `mac` already.
    fn address_leased_elsewhere(
        &self,
        network: &str,
        mac: &str,
        address: Ipv4Addr,
    ) -> Result<Option<provisioning::AddressLeased>, Failure>;
    /// Pins the lease `mac` is to be given in `network` (docs/NETWORK.md, "Pinned leases"),
    /// away from what `kept_apart` holds; `None` when the network leases nothing from a range or
    /// has no address free.
    fn pin_lease(
        &self,
        network: &str,
        mac: &str,
        kept_apart: &KeptApart,
    ) -> Result<Option<PinnedLease>, Failure>;

    // Debugging a boot (`debug_boot`). A guest's definition is the backend's own text (libvirt:
    // the domain's XML), which the verb reads, hands back to `redefine`, and changes only through
    // `debug_edit` and `as_provisioned`: each backend edits its own form, and takes its edits
    // back exactly.

    /// The guest's definition as the backend keeps it for its next start, whole (a display's
    /// password included: a definition defined again without it would open the display to all).
    fn definition(&self, domain: &str) -> Result<String, HypervisorFault>;
    /// Replaces the guest's definition with `definition` (the same guest: name and identity kept).
    fn redefine(&self, domain: &str, definition: &str) -> Result<(), HypervisorFault>;
    /// `definition` with `edit` made; making it twice changes nothing more.
    fn debug_edit(&self, definition: &str, edit: DebugEdit) -> Result<String, EditError>;
    /// `definition` with every debug edit taken back, and which ones it carried.
    fn as_provisioned(
        &self,
        definition: &str,
        provisioned_log: &str,
        capture: &str,
    ) -> (String, Vec<DebugChange>);
    /// Starts the guest, which is off, from its definition (`debug_boot`'s restart, and the wait
    /// of a provision starting again a guest whose emulator crashed while it booted).
    fn start(&self, domain: &str) -> Result<(), HypervisorFault>;
    /// The guest's screen as it is now, as the backend hands it over (a PPM or a PNG).
    fn screenshot(&self, domain: &str) -> Result<Vec<u8>, HypervisorFault>;
    /// Presses `codes` (Linux input key codes) together, briefly, on the guest's keyboard.
    fn press_keys(&self, domain: &str, codes: &[u32]) -> Result<(), HypervisorFault>;
    /// Opens the running guest's display to a new password for a while (from `now_unix`);
    /// `None` when it has no display.
    fn open_vnc_display(
        &self,
        domain: &str,
        now_unix: u64,
    ) -> Result<Option<VncDisplay>, HypervisorFault>;
    /// The files of the guest's disks on the hypervisor (its disks of a storage pool, not its
    /// CD-ROMs) with the format each is read in, for libguestfs; none when it has none.
    fn disk_files(&self, domain: &str) -> Result<Vec<DiskFile>, HypervisorFault>;
}
