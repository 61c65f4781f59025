//! Returning a guest to one of its snapshots: locate it, take its lock, open its hypervisor
//! (`workflow::session`), choose the snapshot, revert (disks, definition, and memory when the
//! snapshot has it), wait — bounded — until SSH answers when the snapshot was of a running
//! guest, and say what `status` says now.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::guest::wait::{wait_for_ssh, BootWait};
use crate::hypervisor::SnapshotError;
use crate::lock::Locks;
use crate::secrets::PrivateKeyFile;
use crate::snapshot::{choose, Capture, SnapshotRecord, Which};
use crate::workflow::inputs::{load_guest_configured, load_guest_inputs, GuestInputs, StoreUse};
use crate::workflow::locate::{refuse_without_own_guest, GuestVerb};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::progress::Progress;
use crate::workflow::reach::{AddressSource, SshProbe};
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, GuestSession, GuestUse, InstallationFleet};
use crate::workflow::status::{status_on, GuestStatus};
use std::time::{Duration, Instant};

/// How long a restored guest gets to answer SSH. A snapshot with memory resumes a guest that had
/// booted, so SSH answers within seconds; two minutes covers a slow software-emulated hypervisor
/// catching up on the clock jump, and is short enough that a guest that will not answer is
/// reported while someone is still watching.
pub const RESTORE_SSH_WAIT: Duration = Duration::from_secs(120);

/// A finished restore.
#[derive(Debug, serde::Serialize)]
pub struct RestoreReport {
    pub guest: String,
    pub hypervisor: String,
    pub snapshot: String,
    pub capture: Capture,
    /// Whether the guest runs now (it does when the snapshot was of a running guest).
    pub running: bool,
    /// Where SSH answered, when the guest runs.
    pub address: Option<String>,
    /// What `status` says after the restore.
    pub status: GuestStatus,
}

pub fn restore(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    which: &Which,
    progress: &dyn Progress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    reporter: &dyn Reporter,
) -> Result<RestoreReport, Failure> {
    let fleet = InstallationFleet { paths, locks };
    // A domain without a guest of its own has nothing to restore: said before its inputs (an
    // existing host's key, say) are read.
    refuse_without_own_guest(
        GuestVerb::Restore,
        guest.domain,
        fleet.runs_on(guest.domain),
    )?;
    // The declaration and the guest's key are read before anything changes: a restore that could
    // not wait for the guest afterwards is refused up front.
    let inputs = load_guest_inputs(
        paths,
        guest.domain,
        credentials,
        StoreUse::Write(locks),
        AddressPolicy::ReadOnly,
        reporter,
    )?;
    let reverted = restore_in(
        &fleet,
        guest,
        which,
        progress,
        credentials,
        reporter,
        &mut |session| wait_for_restored(session, &inputs, progress),
    )?;
    // The guest is what the snapshot made it; what status says is read without holding it, from
    // the hypervisor it was restored on (the rest of the fleet is not asked again).
    let status = status_on(
        &fleet,
        paths,
        load_guest_configured(paths, guest.domain, reporter)?,
        &reverted.session.config,
        credentials,
        reporter,
    )?;
    Ok(RestoreReport {
        guest: guest.domain.to_string(),
        hypervisor: reverted.session.hypervisor_name(),
        snapshot: reverted.snapshot.name,
        capture: reverted.snapshot.capture,
        running: reverted.running,
        address: reverted.address,
        status,
    })
}

/// A guest returned to a snapshot, its lock let go.
pub(crate) struct Reverted {
    pub session: GuestSession,
    pub snapshot: SnapshotRecord,
    pub running: bool,
    /// Where SSH answered, when the guest runs.
    pub address: Option<String>,
}

/// Returns the guest on `fleet` to the snapshot `which` means; when the snapshot was of a
/// running guest, `wait_for_ssh` waits until the guest answers and says where.
pub(crate) fn restore_in(
    fleet: &dyn Fleet,
    guest: &GuestAddress,
    which: &Which,
    progress: &dyn Progress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
    wait_for_ssh: &mut dyn FnMut(&GuestSession) -> Result<String, Failure>,
) -> Result<Reverted, Failure> {
    refuse_without_own_guest(
        GuestVerb::Restore,
        guest.domain,
        fleet.runs_on(guest.domain),
    )?;
    let session = GuestSession::open(
        fleet,
        guest,
        GuestUse::Change,
        HypervisorAccess::LibvirtOnly,
        credentials,
        reporter,
    )?;
    let hypervisor = session.hypervisor.as_ref();
    let domain = guest.domain.as_str();
    let records = hypervisor.snapshots(domain)?;
    let chosen = choose(domain, &records, which)?.clone();
    progress.say(&format!(
        "{}: restoring snapshot {} ({}) on {}",
        guest.domain,
        chosen.name,
        chosen.capture,
        hypervisor.name()
    ));
    hypervisor.revert_snapshot(domain, &chosen.name)?;
    let running = hypervisor
        .is_running(domain)
        .map_err(|source| SnapshotError::Backend {
            backend: hypervisor.backend(),
            hypervisor: hypervisor.name().to_string(),
            domain: domain.to_string(),
            operation: "ask whether the domain runs".into(),
            source,
        })?;
    let address = match running {
        true => Some(wait_for_ssh(&session)?),
        false => None,
    };
    session.release_lock();
    Ok(Reverted {
        session,
        snapshot: chosen,
        running,
        address,
    })
}

/// Waits, bounded, until the restored guest of `session` answers SSH with its pinned host key,
/// and returns where it answered.
fn wait_for_restored(
    session: &GuestSession,
    inputs: &GuestInputs,
    progress: &dyn Progress,
) -> Result<String, Failure> {
    let key = PrivateKeyFile::write(&inputs.keypair)?;
    let domain = session.domain.to_string();
    let hypervisor = session.hypervisor.as_ref();
    let mac = inputs.generated.mac_address.to_string();
    let source = match inputs.config.settings.ips.first() {
        Some(ip) => AddressSource::Declared(ip.address.to_string()),
        None => AddressSource::Leases(Box::new({
            let domain = domain.clone();
            let mac = mac.clone();
            move || hypervisor.leased_addresses(&domain, &mac)
        })),
    };
    let mut probe = SshProbe {
        source,
        admin_user: inputs.config.settings.admin_user.clone(),
        key_file: key.path().to_path_buf(),
        host_keys: key.pinned_host_keys(),
        adoption: None,
        // The hypervisor's shell is not opened for a restore: its hypervisor says whether the
        // guest stopped, and the console and QEMU log are left to `debug_boot`.
        console: Box::new(|| None),
        stopped: Box::new({
            let domain = domain.clone();
            move || hypervisor.stopped_state(&domain)
        }),
        hypervisor_log: Box::new(|| None),
        // A restored guest whose emulator crashed would boot from its disk, not resume the
        // snapshot: the restore reports the crash instead.
        start_again: Box::new(|| Err("a restored guest is not started again".into())),
        progress,
        connected: None,
    };
    Ok(wait_for_ssh(
        &mut probe,
        &domain,
        &mac,
        BootWait::fixed(RESTORE_SSH_WAIT),
        &Instant::now,
        &std::thread::sleep,
    )?)
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
