//! `authorized-key DOMAIN`: the public key trog logs into a domain's machine with, as an
//! `authorized_keys` line, made and kept in the secret store when the domain has none yet. An
//! existing host's admin adds it to `~ADMIN/.ssh/authorized_keys` there before its first
//! provision; for a guest trog builds, the seed installs it already.

use crate::cli::GlobalArgs;
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::settings::RunsOn;
use crate::credentials::CredentialSource;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::hypervisor::fleet::DEFAULT_ANSWER_TIMEOUT;
use crate::model::names::DomainName;
use crate::workflow::inputs::{load_guest_configured, login_keypair, StoreUse};
use crate::workflow::store_guard::{check_store, StoreCheck};

#[derive(Debug, clap::Args)]
pub struct AuthorizedKeyArgs {
    #[command(flatten)]
    pub guest: crate::cli::target::GuestName,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "{domain} runs on {machine}'s machine and logs in with {machine}'s key: it has none of its own"
)]
pub struct DependentHasNoKey {
    domain: DomainName,
    machine: DomainName,
}

impl Diagnose for DependentHasNoKey {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(format!(
            "`trog authorized-key {}` prints the key it logs in with",
            self.machine
        ))
    }
}

pub fn run(global: &GlobalArgs, args: AuthorizedKeyArgs) -> Result<ExitStatus, Failure> {
    let paths = global.installation_paths();
    let domain = &args.guest.domain;
    let configured = load_guest_configured(&paths, domain, &crate::commands::StderrReporter)?;
    if let RunsOn::DependsOn(machine) = configured.config.settings.runs_on() {
        return Err(DependentHasNoKey {
            domain: domain.clone(),
            machine,
        }
        .into());
    }
    let locks = global.locks("authorized-key");
    // A missing store is made only as provision would make it: when no hypervisor holds a
    // guest of trog's whose key it would have held.
    let fleet = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(&paths)?,
        None,
    );
    let store_use = match check_store(&paths, &fleet, false, DEFAULT_ANSWER_TIMEOUT)? {
        StoreCheck::Present => StoreUse::Write(&locks),
        StoreCheck::MayCreate(permit) => StoreUse::WriteOrCreate(&locks, permit),
    };
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let keypair = login_keypair(&paths, &configured.config, &mut credentials, store_use)?;
    crate::outln!("{}", keypair.public_key_openssh().trim());
    Ok(ExitStatus::Success)
}
