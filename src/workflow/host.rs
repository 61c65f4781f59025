//! `status`, `destroy` and `backup` of a domain without a guest of its own. Its status is read
//! on the machine it runs on (the digest converged in its state directory there, against its
//! payload's); a dependent's destroy removes its state directory on its machine (its payload,
//! which holds its rendered files and their secrets, and its records) and nothing else of the
//! machine; an existing host's destroy is refused: trog did not make it. A backup reads what the
//! domain's recipes list on the machine it runs on, over SSH, into the domain's own backup
//! folder, as a guest's backup does.

use crate::addresses::settle::AddressPolicy;
use crate::backup::Filesystems;
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::lock::{Locks, Subject};
use crate::machine::{Machine, MachineCommand};
use crate::model::names::DomainName;
use crate::secrets::PrivateKeyFile;
use crate::workflow::backup::{back_up_on_machine, TakenBackup};
use crate::workflow::destroy::{DestroyOutcome, DestroyReport, LastBackup};
use crate::workflow::inputs::load_guest_configured;
use crate::workflow::inputs::{generate_guest_inputs, GuestConfigured, StoreUse};
use crate::workflow::machine_login::{
    converged_digest, find_machine_login, log_into_machine, machine_not_reached,
    state_dir_on_machine, steps_on_machine, with_machines_first,
};
use crate::workflow::reporter::{AlreadyTold, Reporter};
use crate::workflow::status::GuestStatus;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum HostVerbError {
    #[error("{domain} describes an existing host ({address}) that trog did not build: destroy removes nothing there")]
    ExistingHost { domain: DomainName, address: String },
    #[error("cannot remove {state_dir} of {domain} on {machine}'s machine")]
    RemoveStateDir {
        domain: DomainName,
        machine: DomainName,
        state_dir: String,
        #[source]
        source: crate::machine::MachineError,
    },
}

impl Diagnose for HostVerbError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            HostVerbError::ExistingHost { .. } => ExitStatus::Conflict,
            HostVerbError::RemoveStateDir { .. } => ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            HostVerbError::ExistingHost { domain, .. } => format!(
                "to stop trog managing it, remove recipes.d/{domain}.yaml; what its Makefile installed on the host stays, and is the host's admin's to remove"
            ),
            HostVerbError::RemoveStateDir { .. } => {
                "the machine's admin needs passwordless sudo; run destroy again once it answers"
                    .into()
            }
        })
    }
}

/// The machine `configured`'s domain runs on.
fn machine_of(paths: &InstallationPaths, domain: &DomainName) -> Result<DomainName, Failure> {
    let (_, graph) = with_machines_first(paths, std::slice::from_ref(domain), &AlreadyTold)?;
    Ok(graph.machine_of(domain).clone())
}

/// The status of a domain without a guest of its own: converged when its machine holds its
/// payload's digest as converged. A machine that cannot be reached is said as what to do.
pub fn host_status(
    paths: &InstallationPaths,
    locks: &Locks,
    configured: GuestConfigured,
    credentials: &mut CredentialSource<TerminalPrompter>,
    answer_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<GuestStatus, Failure> {
    let domain = configured.config.domain.clone();
    let machine = machine_of(paths, &domain)?;
    let on = format!("{machine}'s machine");
    let not_converged = |why: String| GuestStatus {
        guest: domain.to_string(),
        hypervisor: Some(on.clone()),
        converged: false,
        pending: vec![why],
        unreachable: Vec::new(),
        base_image: None,
    };
    if !paths.secrets_kdbx.exists() {
        return Ok(not_converged(format!(
            "provision it: there is no secret store {} holding {machine}'s key",
            paths.secrets_kdbx.display()
        )));
    }
    let inputs = generate_guest_inputs(
        configured,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        reporter,
    )?;
    let reached = find_machine_login(paths, locks, &domain, &machine, credentials, answer_timeout)
        .and_then(|login| {
            let key = PrivateKeyFile::write(&login.keypair)?;
            let ssh = log_into_machine(&login, &key, None, reporter)?;
            let state_dir = state_dir_on_machine(&domain, &machine);
            let digest = converged_digest(&ssh, &domain, &login, &state_dir)?;
            Ok(steps_on_machine(
                digest.as_deref(),
                &inputs.generated.payload.sha256_hex,
                &machine,
                &state_dir,
            ))
        });
    let pending = match reached {
        Ok(steps) => steps,
        Err(failure) => {
            return Ok(not_converged(format!(
                "reach its machine first: {}",
                failure.chain().join(": ")
            )))
        }
    };
    Ok(GuestStatus {
        guest: domain.to_string(),
        hypervisor: Some(on),
        converged: pending.is_empty(),
        pending,
        unreachable: Vec::new(),
        base_image: None,
    })
}

/// Backs up `domain`, which `runs_on` another's machine or an existing host: logged into over
/// SSH as its status and destroy log in, under the machine's lock (one run acts on a machine at
/// a time), the paths its recipes list read there and filed in its own backup folder. On a
/// dependent's machine, a guest trog built, only the root disk is read, as for the machine's own
/// backup (its data volume has its own life); on an existing host every listed path is.
#[allow(clippy::too_many_arguments)]
pub fn back_up_host(
    paths: &InstallationPaths,
    locks: &Locks,
    domain: &DomainName,
    runs_on: &RunsOn,
    now_unix: i64,
    credentials: &mut CredentialSource<TerminalPrompter>,
    answer_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<TakenBackup, Failure> {
    let configured = load_guest_configured(paths, domain, reporter)?;
    let (machine, filesystems, from) = match runs_on {
        RunsOn::ExistingHost(address) => (
            domain.clone(),
            Filesystems::Every,
            format!("the existing host {address}"),
        ),
        _ => {
            let machine = machine_of(paths, domain)?;
            let from = format!("{machine}'s machine");
            (machine, Filesystems::RootDisk, from)
        }
    };
    let inputs = generate_guest_inputs(
        configured,
        credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        reporter,
    )?;
    let not_reached = |failure| machine_not_reached(&inputs, &machine, failure);
    // Found before the lock is taken: a machine that cannot be found leaves nothing behind.
    let login = find_machine_login(paths, locks, domain, &machine, credentials, answer_timeout)
        .map_err(not_reached)?;
    let _machine_lock = locks.acquire(&Subject::Guest(machine.to_string()), &mut |text| {
        reporter.say(text)
    })?;
    let key = PrivateKeyFile::write(&login.keypair)?;
    let ssh = log_into_machine(&login, &key, None, reporter).map_err(not_reached)?;
    back_up_on_machine(&ssh, &inputs, &from, filesystems, now_unix)
}

/// Destroys a domain without a guest of its own: an existing host is refused; a dependent's
/// state directory is removed from its machine, and nothing else of the machine.
pub fn destroy_host(
    paths: &InstallationPaths,
    locks: &Locks,
    configured: &GuestConfigured,
    credentials: &mut CredentialSource<TerminalPrompter>,
    answer_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<DestroyReport, Failure> {
    let domain = &configured.config.domain;
    if let RunsOn::ExistingHost(address) = configured.config.settings.runs_on() {
        return Err(HostVerbError::ExistingHost {
            domain: domain.clone(),
            address,
        }
        .into());
    }
    let machine = machine_of(paths, domain)?;
    let _machine_lock = locks.acquire(&Subject::Guest(machine.to_string()), &mut |_| {})?;
    let login = find_machine_login(paths, locks, domain, &machine, credentials, answer_timeout)?;
    let key = PrivateKeyFile::write(&login.keypair)?;
    let ssh = log_into_machine(&login, &key, None, reporter)?;
    let state_dir = state_dir_on_machine(domain, &machine);
    ssh.run(&MachineCommand::new(["rm", "-rf", "--", state_dir.as_str()]).as_root(true))
        .and_then(|output| output.success())
        .map_err(|source| HostVerbError::RemoveStateDir {
            domain: domain.clone(),
            machine: machine.clone(),
            state_dir: state_dir.clone(),
            source,
        })?;
    Ok(DestroyReport {
        guest: domain.to_string(),
        hypervisor: format!("{machine}'s machine"),
        last_backup: LastBackup::NotTaken {
            why: format!("{domain} has no guest of its own; {machine}'s backups hold its machine"),
        },
        outcome: DestroyOutcome {
            removed: vec![format!("{state_dir} on {machine}'s machine (its payload and records)")],
            kept: vec![format!(
                "{machine}'s machine and everything else on it: what {domain}'s Makefile installed there stays"
            )],
            left_behind: Vec::new(),
        },
    })
}
