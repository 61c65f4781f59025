//! Returning a guest to one of its snapshots: locate it, choose the snapshot, revert through
//! libvirt (disks, definition, and memory when the snapshot has it), wait — bounded — until SSH
//! answers when the snapshot was of a running guest, and say what `status` says now.

use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::guest::wait::{wait_for_ssh, BootWait};
use crate::libvirt::guest_state::stopped_state;
use crate::libvirt::snapshot::GuestSnapshots;
use crate::lock::Locks;
use crate::output::progress::Progress;
use crate::provision::inputs::{load_guest_inputs, StoreUse};
use crate::provision::reach::{address_source, SshProbe};
use crate::secrets::PrivateKeyFile;
use crate::snapshot::{choose, Capture, Which};
use crate::workflow::snapshot::{open_guests_hypervisor, GuestAddress, GuestUse};
use crate::workflow::status::{guest_status, GuestStatus};
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
    progress: &Progress,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
) -> Result<RestoreReport, Failure> {
    // The declaration and the guest's key are read before anything changes: a restore that could
    // not wait for the guest afterwards is refused up front.
    let inputs = load_guest_inputs(
        paths,
        guest.domain,
        credentials,
        StoreUse::Write(locks),
        AddressPolicy::ReadOnly,
    )?;
    let (opened, guest_lock) =
        open_guests_hypervisor(paths, guest, credentials, locks, GuestUse::Change)?;
    let hypervisor = opened.config.name.to_string();
    let snapshots = GuestSnapshots::open(&opened.connection, &hypervisor, guest.domain.as_str())?;
    let records = snapshots.list()?;
    let chosen = choose(guest.domain.as_str(), &records, which)?.clone();
    progress.say(&format!(
        "{}: restoring snapshot {} ({}) on {hypervisor}",
        guest.domain, chosen.name, chosen.capture
    ));
    snapshots.revert(&chosen.name)?;
    let running = snapshots.is_running()?;
    let mut address = None;
    if running {
        let key = PrivateKeyFile::write(&inputs.keypair)?;
        let domain = guest.domain.to_string();
        let mut probe = SshProbe {
            source: address_source(&opened.connection, &inputs, &domain),
            admin_user: inputs.config.settings.admin_user.clone(),
            key_file: key.path().to_path_buf(),
            host_keys: key.pinned_host_keys(),
            adoption: None,
            // The hypervisor's shell is not opened for a restore: libvirt says whether the
            // guest stopped, and the console and QEMU log are left to `debug_boot`.
            console: Box::new(|| None),
            stopped: Box::new({
                let connection = &opened.connection;
                let domain = domain.clone();
                move || stopped_state(connection, &domain)
            }),
            hypervisor_log: Box::new(|| None),
            // A restored guest whose emulator crashed would boot from its disk, not resume the
            // snapshot: the restore reports the crash instead.
            start_again: Box::new(|| Err("a restored guest is not started again".into())),
            progress,
            connected: None,
        };
        address = Some(wait_for_ssh(
            &mut probe,
            &domain,
            &inputs.generated.mac_address.to_string(),
            BootWait::fixed(RESTORE_SSH_WAIT),
            &Instant::now,
            &std::thread::sleep,
        )?);
    }
    // The guest is what the snapshot made it; what status says is read without holding it, from
    // the hypervisor it was restored on (a named one keeps the rest of the fleet unasked).
    drop(guest_lock);
    let status = guest_status(
        paths,
        guest.domain,
        guest.hypervisor,
        guest.answer_timeout,
        credentials,
        locks,
    )?;
    Ok(RestoreReport {
        guest: guest.domain.to_string(),
        hypervisor,
        snapshot: chosen.name,
        capture: chosen.capture,
        running,
        address,
        status,
    })
}
