//! Backing a guest up off its hypervisor: locate it, take its lock (`workflow::session`), reach it over SSH with its
//! key from the store, read what its recipes list under `backup:` (and the data recipe's site
//! directory) with `tar` on the guest, and file the archive on this machine. A domain without a
//! guest of its own is backed up the same way on the machine it runs on, over SSH, without
//! asking any hypervisor (`workflow::host::back_up_host`): a dependent's paths on its machine, an
//! existing host's on the host. And the sweep, which deletes the backups past their retention.

use crate::addresses::settle::AddressPolicy;
use crate::backup::archive_dir::{guest_folders, GuestBackups, SweepOutcome, WrittenArchive};
use crate::backup::{
    archive_stem, backup_dir, backup_paths, guest_tar_script, recipes_file, skipped_paths,
    BackupPath, Filesystems,
};
use crate::config::global_schema::declaration;
use crate::config::guest::{list_domains, load_recipes_yaml};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::config::values::{check_value, TypedValue};
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::hypervisor::{Hypervisor, Presence};
use crate::lock::Locks;
use crate::machine::ssh::{SshMachine, SshTarget};
use crate::machine::{Machine, MachineCommand, MachineError};
use crate::model::hypervisor::Transport;
use crate::secrets::{KeypairOrigin, PrivateKeyFile};
use crate::workflow::inputs::{load_guest_inputs, GuestInputs, StoreUse};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, GuestSession, GuestUse, InstallationFleet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one SSH attempt at a running guest may take: it answers at once when it is up.
const SSH_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long reading the backed-up paths may take: a site's uploads and dumps of a few GiB over
/// a slow link take minutes; one still going after half an hour has stalled.
const TAR_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{guest} is not running ({state}): a backup is read from the running guest")]
    NotRunning { guest: String, state: String },
    #[error("{guest} has no domain that trog made (none, or one without trog's tag)")]
    NotTrogs { guest: String },
    #[error("{guest} is on libvirt's test driver, whose guests cannot be reached over SSH")]
    TestDriver { guest: String },
    #[error("the secret store holds no SSH key for {guest}, so it cannot be logged in to")]
    NoKey { guest: String },
    #[error("{guest} has no address to reach it at (no declared address, no DHCP lease)")]
    NoAddress { guest: String },
    #[error("{guest} did not answer SSH at {}: {why}", addresses.join(", "))]
    Unreachable {
        guest: String,
        addresses: Vec<String>,
        why: String,
    },
    #[error("cannot read the backed-up paths on {guest}")]
    Read {
        guest: String,
        #[source]
        source: MachineError,
    },
    #[error("tar failed on {guest} with status {status}: {stderr}")]
    Tar {
        guest: String,
        status: String,
        stderr: String,
    },
    #[error("cannot read {setting} in {}", file.display())]
    Setting {
        setting: &'static str,
        file: PathBuf,
        why: String,
    },
}

impl Diagnose for BackupError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            BackupError::Setting { .. } => ExitStatus::Configuration,
            _ => ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            BackupError::NotRunning { .. } => "start it (`virsh start`, or `trog provision` for its domain), then run `trog backup` again".into(),
            BackupError::NotTrogs { .. } => "`trog fleet` lists the guests trog made on each hypervisor".into(),
            BackupError::TestDriver { .. } => "backups need a real guest on a real hypervisor".into(),
            BackupError::NoKey { .. } => "a guest trog built has its key in secrets.kdbx; check that this is the installation that built it (TROG_PROVISIONER_CONFIG)".into(),
            BackupError::NoAddress { .. } | BackupError::Unreachable { .. } => "`trog status` says whether the guest runs; `trog debug_boot --console` shows why it does not answer".into(),
            BackupError::Read { .. } | BackupError::Tar { .. } => "check the guest's free space and its backup: paths (`backup:` in each of its recipes' recipe.yaml)".into(),
            BackupError::Setting { why, .. } => why.clone(),
        })
    }
}

/// A backup just taken.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TakenBackup {
    pub guest: String,
    pub hypervisor: String,
    pub archive: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// What it holds, each path with the recipe that listed it.
    pub paths: Vec<BackupPath>,
    /// Listed paths left out because they are on another filesystem than the root disk's (the
    /// data volume keeps its own data).
    pub skipped: Vec<String>,
}

/// Backs up the guest `guest` names: located, locked, reached over SSH; a domain without a
/// guest of its own on the machine it runs on.
pub fn back_up(
    paths: &InstallationPaths,
    guest: &GuestAddress,
    now_unix: i64,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    reporter: &dyn Reporter,
) -> Result<TakenBackup, Failure> {
    let fleet = InstallationFleet { paths, locks };
    back_up_in(
        &fleet,
        paths,
        guest,
        now_unix,
        credentials,
        reporter,
        &mut |runs_on, credentials| {
            crate::workflow::host::back_up_host(
                paths,
                locks,
                guest.domain,
                &runs_on,
                now_unix,
                credentials,
                guest.answer_timeout,
                reporter,
            )
        },
    )
}

/// How a domain without a guest of its own is backed up, on the machine it runs on.
pub type BackUpOnMachine<'a> =
    dyn FnMut(RunsOn, &mut CredentialSource<TerminalPrompter>) -> Result<TakenBackup, Failure> + 'a;

/// Backs up the guest on `fleet`; a domain that, as the fleet says, has no guest of its own is
/// backed up by `on_machine`, and no hypervisor is asked anything.
pub(crate) fn back_up_in(
    fleet: &dyn Fleet,
    paths: &InstallationPaths,
    guest: &GuestAddress,
    now_unix: i64,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
    on_machine: &mut BackUpOnMachine<'_>,
) -> Result<TakenBackup, Failure> {
    match fleet.runs_on(guest.domain) {
        RunsOn::OwnGuest => {}
        elsewhere => return on_machine(elsewhere, credentials),
    }
    let session = GuestSession::open(
        fleet,
        guest,
        GuestUse::Change,
        HypervisorAccess::LibvirtOnly,
        credentials,
        reporter,
    )?;
    back_up_located(paths, &session, now_unix, credentials, reporter)
}

/// Backs up the guest of `session` (which holds its lock).
pub fn back_up_located(
    paths: &InstallationPaths,
    session: &GuestSession,
    now_unix: i64,
    credentials: &mut CredentialSource<TerminalPrompter>,
    reporter: &dyn Reporter,
) -> Result<TakenBackup, Failure> {
    let domain = &session.domain;
    let guest = domain.to_string();
    if session.config.libvirt_uri.transport == Transport::Test {
        return Err(BackupError::TestDriver { guest }.into());
    }
    let is_trogs = matches!(
        session.hypervisor.presence(domain.as_str()),
        Ok(Presence::Trogs)
    );
    if !is_trogs {
        return Err(BackupError::NotTrogs { guest }.into());
    }
    if let Some(state) = session.hypervisor.stopped_state(domain.as_str()) {
        return Err(BackupError::NotRunning { guest, state }.into());
    }
    let inputs = load_guest_inputs(
        paths,
        domain,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        reporter,
    )?;
    back_up_reached(session.hypervisor.as_ref(), &inputs, now_unix)
}

/// Reads the guest's backed-up paths over SSH (its pinned host key checked) into a new archive
/// of its backup folder. The caller holds the guest's lock: `backup`, or `provision` before it
/// replaces the root disk of a running guest.
pub fn back_up_reached(
    hypervisor: &dyn Hypervisor,
    inputs: &GuestInputs,
    now_unix: i64,
) -> Result<TakenBackup, Failure> {
    let (machine, _key) = reach_guest(hypervisor, inputs)?;
    back_up_on_machine(
        &machine,
        inputs,
        hypervisor.name(),
        Filesystems::RootDisk,
        now_unix,
    )
}

/// Reads the paths `inputs`' recipes list on `machine`, logged into already (the guest, or the
/// machine a domain without a guest of its own runs on: `from` names it in the report), into a
/// new archive of the domain's own backup folder.
pub fn back_up_on_machine(
    machine: &dyn Machine,
    inputs: &GuestInputs,
    from: &str,
    filesystems: Filesystems,
    now_unix: i64,
) -> Result<TakenBackup, Failure> {
    let domain = &inputs.config.domain;
    let guest = domain.to_string();
    let listed = backup_paths(&inputs.generated.resolved)?;
    let folder = GuestBackups::new(
        &backup_dir(&inputs.paths, &inputs.config.settings),
        domain.as_str(),
    );
    let archived = archive_guest_paths(
        machine,
        &guest,
        &listed,
        filesystems,
        &folder,
        &archive_stem(now_unix),
    )?;
    Ok(TakenBackup {
        guest,
        hypervisor: from.to_string(),
        archive: archived.written.archive,
        sha256: archived.written.sha256,
        bytes: archived.written.bytes,
        paths: archived.kept,
        skipped: archived.skipped,
    })
}

/// A guest's paths, filed in its folder.
struct Archived {
    written: WrittenArchive,
    kept: Vec<BackupPath>,
    skipped: Vec<String>,
}

/// Reads `listed` on `machine` (the guest, named `guest`) with tar and files the archive named
/// `stem` in `folder`, streamed from the guest's output to the file as it comes: a site's
/// gigabytes are never held in memory. A failed tar leaves no archive.
fn archive_guest_paths(
    machine: &dyn Machine,
    guest: &str,
    listed: &[BackupPath],
    filesystems: Filesystems,
    folder: &GuestBackups,
    stem: &str,
) -> Result<Archived, Failure> {
    let tar = MachineCommand::shell(&guest_tar_script(listed, filesystems))
        .as_root(true)
        .timeout(TAR_TIMEOUT);
    let mut pending = folder.begin(stem)?;
    let output = machine
        .run_streamed(&tar, &mut pending)
        .map_err(|source| BackupError::Read {
            guest: guest.to_string(),
            source,
        })?;
    // tar's 1 is "some file changed while it was read": the archive is whole, that file as tar
    // found it. Anything else is a failure.
    if !matches!(output.status, Some(0 | 1)) {
        return Err(BackupError::Tar {
            guest: guest.to_string(),
            status: output
                .status
                .map_or("unknown".to_string(), |code| code.to_string()),
            stderr: output.stderr.trim().to_string(),
        }
        .into());
    }
    let skipped = skipped_paths(&output.stderr);
    let kept: Vec<BackupPath> = listed
        .iter()
        .filter(|path| !skipped.contains(&path.path))
        .cloned()
        .collect();
    let written = pending.finish(&recipes_file(&kept))?;
    Ok(Archived {
        written,
        kept,
        skipped,
    })
}

/// The guest over SSH, as its admin with its key from the store, at its declared address or its
/// DHCP lease.
/// The key file comes with it: it lives (and is deleted) with the connection.
fn reach_guest(
    hypervisor: &dyn Hypervisor,
    inputs: &GuestInputs,
) -> Result<(SshMachine, PrivateKeyFile), Failure> {
    let guest = inputs.config.domain.to_string();
    if inputs.keypair.origin() != KeypairOrigin::Stored {
        return Err(BackupError::NoKey { guest }.into());
    }
    let addresses = match inputs.config.settings.ips.first() {
        Some(ip) => vec![ip.address.to_string()],
        None => hypervisor.leased_addresses(&guest, &inputs.generated.mac_address.to_string()),
    };
    if addresses.is_empty() {
        return Err(BackupError::NoAddress { guest }.into());
    }
    let key = PrivateKeyFile::write(&inputs.keypair)?;
    let mut why = String::new();
    for address in &addresses {
        let machine = SshMachine::new(
            SshTarget {
                user: Some(inputs.config.settings.admin_user.clone()),
                host: address.clone(),
                port: None,
            },
            Some(key.path().to_path_buf()),
            key.pinned_host_keys(),
        )?;
        let probe = MachineCommand::new(["true"]).timeout(SSH_ATTEMPT_TIMEOUT);
        match machine.run(&probe) {
            Ok(output) if output.status == Some(0) => return Ok((machine, key)),
            Ok(output) => why = String::from_utf8_lossy(&output.stderr).trim().to_string(),
            // Not another address to try: what answered is not the guest, and gets nothing.
            Err(refused @ crate::machine::MachineError::HostKeyRefused { .. }) => {
                return Err(refused.into())
            }
            Err(error) => why = error.to_string(),
        }
    }
    Err(BackupError::Unreachable {
        guest,
        addresses,
        why,
    }
    .into())
}

/// The backup directory and retention `_base` gives (recipes.yaml): where the sweep looks for
/// the folders of guests that have no configuration any more.
fn installation_backup_settings(paths: &InstallationPaths) -> Result<(PathBuf, u32), Failure> {
    let recipes_yaml = load_recipes_yaml(paths)?;
    let mut dir = crate::backup::DEFAULT_BACKUP_DIR.to_string();
    let mut days = crate::backup::DEFAULT_RETENTION_DAYS;
    for key in ["backup_dir", "backup_retention_days"] {
        let Some(entry) = recipes_yaml.base.global.get(key) else {
            continue;
        };
        let declared = declaration(key).expect("a declared setting");
        let checked = check_value(declared.setting_type, &entry.value).map_err(|problem| {
            BackupError::Setting {
                setting: declared.key,
                file: recipes_yaml.file.clone(),
                why: format!("{}: {}", problem.origin, problem.why),
            }
        })?;
        match checked {
            TypedValue::Text(text) => dir = text,
            TypedValue::Count(count) => days = count,
            _ => {}
        }
    }
    Ok((paths.dir.join(dir), days))
}

/// What a sweep did, folder by folder.
#[derive(Debug, Default, serde::Serialize)]
pub struct SweepReport {
    pub deleted: Vec<PathBuf>,
    pub left: Vec<(PathBuf, String)>,
}

/// Deletes every backup past its retention at `now_unix`: a configured guest's by its own
/// settings, the folder of a guest no longer configured by `_base`'s.
pub fn sweep(paths: &InstallationPaths, now_unix: i64) -> Result<SweepReport, Failure> {
    let (base_dir, base_days) = installation_backup_settings(paths)?;
    let mut folders: Vec<(PathBuf, u32)> = Vec::new();
    let mut configured: Vec<PathBuf> = Vec::new();
    for domain in list_domains(paths)? {
        // A guest whose file does not load now is swept by `_base`'s settings below.
        if let Ok(config) = crate::config::guest::load_guest(paths, &domain) {
            let folder = backup_dir(paths, &config.settings).join(domain.as_str());
            configured.push(base_dir.join(domain.as_str()));
            folders.push((folder, config.settings.backup_retention_days));
        }
    }
    for name in guest_folders(&base_dir)? {
        let folder = base_dir.join(&name);
        if !configured.contains(&folder) {
            folders.push((folder, base_days));
        }
    }
    let mut report = SweepReport::default();
    for (folder, days) in folders {
        let SweepOutcome { deleted, left } = sweep_folder(&folder, now_unix, days)?;
        report.deleted.extend(deleted);
        report.left.extend(left);
    }
    Ok(report)
}

fn sweep_folder(folder: &Path, now_unix: i64, days: u32) -> Result<SweepOutcome, Failure> {
    let backups = GuestBackups {
        folder: folder.to_path_buf(),
    };
    Ok(backups.sweep(now_unix, days)?)
}

#[cfg(test)]
#[path = "backup_tests.rs"]
mod tests;
