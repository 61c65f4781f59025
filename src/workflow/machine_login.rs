//! Reaching the machine of a domain that has no guest of its own: one that runs on another domain's machine
//! (`depends_on`), or one that describes a machine trog did not build (`existing_host`). Nothing
//! of libvirt is asked or changed: the machine is reached over SSH (its admin, its key from the
//! secret store, its pinned host key), the domain's converged digest is read from its state
//! directory there, and when it differs the payload is finished in that directory
//! ([`finish_at`]) and the digest recorded once its Makefile and tests passed.
//!
//! How the machine is found (its configuration, its key, its address: an existing host's, a
//! static one, or the lease its hypervisor holds) is [`find_machine_login`]; what it changes
//! is `provision::host::converge_on_machine`; the order of a site's domains, each after the one
//! whose machine it runs on, is [`with_machines_first`].

use crate::addresses::settle::{settle_addresses, AddressPolicy};
use crate::config::guest::list_domains;
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::config::site_graph::{site_graph, DomainNode, SiteGraph};
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::guest::finish::{converged_digest_script, dependent_state_dir, GUEST_STATE_DIR};
use crate::guest::wait::AttemptFailed;
use crate::lock::Locks;
use crate::machine::ssh::{HostKeys, SshMachine, SshTarget};
use crate::machine::{Machine, MachineCommand};
use crate::model::names::DomainName;
use crate::render::domain_xml::mac_address_for;
use crate::secrets::{stored_keypair, GuestKeypair, PrivateKeyFile, SecretStore};
use crate::workflow::inputs::{
    load_guest_configured, store_key_file, GuestConfigured, GuestInputs,
};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reach::{attempt_login, taken_host_key};
use crate::workflow::reporter::{AlreadyTold, Reporter};
use crate::workflow::session::{Fleet, GuestAddress, InstallationFleet};
use std::time::Duration;

/// How a machine that a domain without a guest of its own runs on is logged into.
pub struct MachineLogin {
    /// The domain whose machine it is: a guest trog builds, or an existing host.
    pub machine: DomainName,
    /// Whether the machine is an existing host (its host key is adopted, never made by trog).
    pub existing_host: bool,
    pub admin_user: String,
    pub keypair: GuestKeypair,
    /// The addresses to try, in order.
    pub addresses: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{domain} runs on {machine}'s machine, which has no key in the secret store: {machine} was never provisioned")]
    MachineHasNoKey {
        domain: DomainName,
        machine: DomainName,
    },
    #[error("{domain} runs on {machine}'s machine, which is on no hypervisor of the fleet{}", unreachable_list(.unreachable))]
    MachineNotBuilt {
        domain: DomainName,
        machine: DomainName,
        unreachable: Vec<String>,
    },
    #[error("{machine}'s machine has no address to reach it at: it takes a lease, and its hypervisor holds none for it")]
    NoAddress { machine: DomainName },
    #[error("cannot reach {machine}'s machine as {user} at {}: {}", .addresses.join(", "), crate::untrusted::untrusted_str(.why))]
    Unreachable {
        machine: DomainName,
        user: String,
        addresses: Vec<String>,
        why: String,
    },
    #[error(
        "{machine} (an existing host at {address}) answered with a host key trog has not adopted"
    )]
    HostKeyNotAdopted {
        machine: DomainName,
        address: String,
    },
    #[error("{machine}'s machine at {address} answered with a host key that is not the one pinned for it")]
    HostKeyRefused {
        machine: DomainName,
        address: String,
        /// The machine is an existing host (its key was adopted, not made by trog).
        existing_host: bool,
    },
    #[error("cannot read what is converged of {domain} in {state_dir} on {machine}'s machine")]
    Observe {
        domain: DomainName,
        machine: DomainName,
        state_dir: String,
        #[source]
        source: crate::machine::MachineError,
    },
    #[error("cannot record on {machine}'s machine that {domain} is converged")]
    Record {
        domain: DomainName,
        machine: DomainName,
        #[source]
        source: crate::machine::MachineError,
    },
    #[error("cannot keep the host key {machine} answered with: {why}")]
    KeepHostKey { machine: DomainName, why: String },
}

fn unreachable_list(unreachable: &[String]) -> String {
    if unreachable.is_empty() {
        String::new()
    } else {
        format!(" (these could not be asked: {})", unreachable.join("; "))
    }
}

impl Diagnose for HostError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            HostError::MachineHasNoKey { .. } | HostError::MachineNotBuilt { .. } => {
                ExitStatus::Configuration
            }
            HostError::HostKeyNotAdopted { .. } => ExitStatus::Conflict,
            HostError::HostKeyRefused { .. } => ExitStatus::UntrustedGuest,
            _ => ExitStatus::Guest,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            HostError::MachineHasNoKey { machine, .. } | HostError::MachineNotBuilt { machine, .. } => {
                format!("provision {machine} first: `trog provision {machine}` (a provision of a domain that depends on it converges it first)")
            }
            HostError::NoAddress { machine } => format!(
                "`trog status {machine}` says whether it runs; a guest that takes a lease is found by it while it runs"
            ),
            HostError::Unreachable { machine, user, .. } => format!(
                "the machine must answer SSH as {user} with trog's key for {machine} (`trog authorized-key {machine}` prints it, for an existing host's ~{user}/.ssh/authorized_keys), and {user} needs passwordless sudo there; `trog preflight` checks both for an existing host"
            ),
            HostError::HostKeyNotAdopted { machine, address } => format!(
                "trog did not build {machine}, so it cannot know its host key: compare `ssh-keyscan -t ed25519 {address} | ssh-keygen -lf -` with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host itself, then `trog provision --adopt-host-key {machine}` takes it, once, and pins it"
            ),
            HostError::HostKeyRefused {
                machine,
                existing_host: false,
                ..
            } => format!(
                "whoever answers there is not {machine}'s guest, and got nothing: another machine may be answering at its address, or its host key was replaced; find out which before anything else"
            ),
            HostError::HostKeyRefused { machine, .. } => format!(
                "whoever answers there is not the machine {machine}'s key was pinned for, and got nothing; if the host was rebuilt, remove the AdoptedHostKey field of the entry trog/guests/{machine} in secrets.kdbx (with KeePassXC), then adopt its new key with `trog provision --adopt-host-key {machine}`"
            ),
            HostError::Observe { .. } | HostError::Record { .. } => {
                "the admin needs passwordless sudo on the machine; run provision again once it answers".into()
            }
            HostError::KeepHostKey { .. } => {
                "the secret store could not be written; run provision again".into()
            }
        })
    }
}

/// A domain's machine could not be found or logged into: named at the line that says where the
/// domain runs.
#[derive(Debug, thiserror::Error)]
#[error("{}`{setting}` of {domain} ({machine}'s machine)", .written_at.as_ref().map(|at| format!("{at}: ")).unwrap_or_default())]
pub struct MachineNotReached {
    pub written_at: Option<String>,
    pub domain: DomainName,
    pub machine: DomainName,
    pub setting: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// `failure` to find or log into `machine`, for `inputs`' domain: pointed at its `depends_on`
/// (or `existing_host`) line, with the failure's status and hint.
pub fn machine_not_reached(
    inputs: &GuestInputs,
    machine: &DomainName,
    failure: Failure,
) -> Failure {
    let setting = if &inputs.config.domain == machine {
        "existing_host"
    } else {
        "depends_on"
    };
    let status = failure.status;
    let hint = failure.hint;
    Failure::new(
        MachineNotReached {
            written_at: inputs
                .config
                .origins
                .locate_setting(setting)
                .map(ToString::to_string),
            domain: inputs.config.domain.clone(),
            machine: machine.clone(),
            setting,
            source: failure.error,
        },
        status,
        hint,
    )
}

/// Where on its machine `domain`'s payload and records are: the machine's own directory for an
/// existing host, one of its own under it for a dependent.
pub fn state_dir_on_machine(domain: &DomainName, machine: &DomainName) -> String {
    if domain == machine {
        GUEST_STATE_DIR.to_string()
    } else {
        dependent_state_dir(domain)
    }
}

/// How to log into `machine`: its configuration's admin, its key from the store, and its
/// address (an existing host's, a static one, or the lease its hypervisor holds for it).
/// `domain` is the one that runs there, for the errors.
pub fn find_machine_login(
    paths: &InstallationPaths,
    locks: &Locks,
    domain: &DomainName,
    machine: &DomainName,
    credentials: &mut CredentialSource<TerminalPrompter>,
    answer_timeout: Duration,
) -> Result<MachineLogin, Failure> {
    let configured = load_guest_configured(paths, machine, &AlreadyTold)?;
    let mut config = configured.config;
    let runs_on = config.settings.runs_on();
    let no_key = || HostError::MachineHasNoKey {
        domain: domain.clone(),
        machine: machine.clone(),
    };
    let key_file = store_key_file(paths, &config);
    let store = SecretStore::open_existing(&paths.secrets_kdbx, key_file.as_deref(), credentials)?
        .ok_or_else(no_key)?;
    let keypair = stored_keypair(&store, machine)?.ok_or_else(no_key)?;
    let addresses = match &runs_on {
        RunsOn::ExistingHost(address) => vec![address.clone()],
        _ => {
            settle_addresses(&paths.ips_db, &mut config, AddressPolicy::ReadOnly)?;
            match config.settings.ips.first() {
                Some(ip) => vec![ip.address.to_string()],
                None => {
                    leased_addresses(paths, locks, domain, machine, credentials, answer_timeout)?
                }
            }
        }
    };
    Ok(MachineLogin {
        machine: machine.clone(),
        existing_host: matches!(runs_on, RunsOn::ExistingHost(_)),
        admin_user: config.settings.admin_user.clone(),
        keypair,
        addresses,
    })
}

/// The addresses the hypervisor holding `machine` has leased it.
fn leased_addresses(
    paths: &InstallationPaths,
    locks: &Locks,
    domain: &DomainName,
    machine: &DomainName,
    credentials: &mut CredentialSource<TerminalPrompter>,
    answer_timeout: Duration,
) -> Result<Vec<String>, Failure> {
    let fleet = InstallationFleet { paths, locks };
    let whereabouts = fleet.search(&GuestAddress {
        domain: machine,
        hypervisor: None,
        answer_timeout,
    })?;
    let Some(holder) = whereabouts.holder else {
        return Err(HostError::MachineNotBuilt {
            domain: domain.clone(),
            machine: machine.clone(),
            unreachable: whereabouts.unreachable,
        }
        .into());
    };
    let opened = fleet.open(&holder, HypervisorAccess::LibvirtOnly, credentials)?;
    let mac = mac_address_for(machine, 0).to_string();
    let addresses = opened.hypervisor.leased_addresses(machine.as_str(), &mac);
    if addresses.is_empty() {
        return Err(HostError::NoAddress {
            machine: machine.clone(),
        }
        .into());
    }
    Ok(addresses)
}

/// What keeps a host key adopted for an existing host: the store of the run (written under its
/// writer lock).
pub type KeepAdopted<'a> = dyn FnMut(&str) -> Result<(), String> + 'a;

/// Logs into the machine, trying its addresses in turn; an existing host that answers with a
/// key trog has not adopted is adopted when `adopt` is given (`--adopt-host-key`), and refused
/// otherwise. `reporter` is told of an adoption.
pub fn log_into_machine(
    login: &MachineLogin,
    key: &PrivateKeyFile,
    mut adopt: Option<&mut KeepAdopted<'_>>,
    reporter: &dyn Reporter,
) -> Result<SshMachine, Failure> {
    let mut why = String::new();
    for address in &login.addresses {
        let target = SshTarget {
            user: Some(login.admin_user.clone()),
            host: address.clone(),
            port: None,
        };
        let machine = SshMachine::new(
            target.clone(),
            Some(key.path().to_path_buf()),
            key.pinned_host_keys(),
        )?;
        match attempt_login(&machine, &mut || None) {
            Ok(()) => return Ok(machine),
            Err(AttemptFailed::HostKeyRefused) => {
                let never_adopted =
                    login.existing_host && login.keypair.adopted_host_key().is_none();
                let keep = match (never_adopted, adopt.as_mut()) {
                    (true, Some(keep)) => keep,
                    (true, None) => {
                        return Err(HostError::HostKeyNotAdopted {
                            machine: login.machine.clone(),
                            address: address.clone(),
                        }
                        .into())
                    }
                    (false, _) => {
                        return Err(HostError::HostKeyRefused {
                            machine: login.machine.clone(),
                            address: address.clone(),
                            existing_host: login.existing_host,
                        }
                        .into())
                    }
                };
                let known_hosts = key.directory().join("adopted_known_hosts");
                let alias = key.host_key_alias().to_string();
                let adopting = SshMachine::new(
                    target,
                    Some(key.path().to_path_buf()),
                    HostKeys::AdoptInto {
                        known_hosts: known_hosts.clone(),
                        alias: alias.clone(),
                    },
                )?;
                if let Err(failed) = attempt_login(&adopting, &mut || None) {
                    why = attempt_said(failed);
                    continue;
                }
                let taken =
                    taken_host_key(&known_hosts, &alias).ok_or_else(|| HostError::KeepHostKey {
                        machine: login.machine.clone(),
                        why: "ssh took no host key".into(),
                    })?;
                keep(&taken).map_err(|why| HostError::KeepHostKey {
                    machine: login.machine.clone(),
                    why,
                })?;
                reporter.say(&format!(
                    "adopted the host key {address} answered with for {}, as --adopt-host-key asked: it is pinned from now on",
                    login.machine
                ));
                return Ok(adopting);
            }
            Err(failed) => why = attempt_said(failed),
        }
    }
    Err(HostError::Unreachable {
        machine: login.machine.clone(),
        user: login.admin_user.clone(),
        addresses: login.addresses.clone(),
        why,
    }
    .into())
}

/// What a failed login said.
fn attempt_said(failed: AttemptFailed) -> String {
    match failed {
        AttemptFailed::NoAnswer(said) | AttemptFailed::GuestStopped(said) => said,
        AttemptFailed::HostKeyRefused => "it answered with another host key".into(),
    }
}

/// The digest of the payload converged in `state_dir` on `machine`, if any.
pub fn converged_digest(
    machine: &dyn Machine,
    domain: &DomainName,
    login: &MachineLogin,
    state_dir: &str,
) -> Result<Option<String>, Failure> {
    let read = MachineCommand::shell(&converged_digest_script(state_dir)).as_root(true);
    let output = machine
        .run(&read)
        .and_then(|output| output.success())
        .map_err(|source| {
            Failure::from(HostError::Observe {
                domain: domain.clone(),
                machine: login.machine.clone(),
                state_dir: state_dir.to_string(),
                source,
            })
        })?;
    let digest = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok((!digest.is_empty()).then_some(digest))
}

/// What a provision does for a domain on its machine, given what is converged there: nothing
/// when it is the payload's digest.
pub fn steps_on_machine(
    converged: Option<&str>,
    payload_digest: &str,
    machine: &DomainName,
    state_dir: &str,
) -> Vec<String> {
    if converged == Some(payload_digest) {
        return Vec::new();
    }
    vec![format!(
        "finish on {machine}'s machine in {state_dir}: send the payload {}, run its Makefile and tests",
        &payload_digest[..payload_digest.len().min(12)]
    )]
}

/// The domains asked for, each after the domains whose machine it runs on (which are brought
/// in), read and checked; and their graph. A `depends_on` that names no file, or a cycle, is
/// refused here, before anything is asked of any machine.
pub fn with_machines_first(
    paths: &InstallationPaths,
    requested: &[DomainName],
    reporter: &dyn Reporter,
) -> Result<(Vec<GuestConfigured>, SiteGraph), Failure> {
    let mut loaded: Vec<GuestConfigured> = Vec::new();
    let mut queue: Vec<DomainName> = requested.to_vec();
    let mut known: Option<Vec<DomainName>> = None;
    while let Some(domain) = queue.first().cloned() {
        queue.remove(0);
        if loaded.iter().any(|guest| guest.config.domain == domain) {
            continue;
        }
        let guest = load_guest_configured(paths, &domain, reporter)?;
        if let Some(wanted) = &guest.config.settings.depends_on {
            let known = match &known {
                Some(known) => known,
                None => known.insert(list_domains(paths)?),
            };
            if known.contains(wanted) {
                queue.push(wanted.clone());
            }
        }
        loaded.push(guest);
    }
    let nodes: Vec<DomainNode> = loaded.iter().map(domain_node).collect();
    let known = match known {
        Some(known) => known,
        None => loaded
            .iter()
            .map(|guest| guest.config.domain.clone())
            .collect(),
    };
    let graph = site_graph(&nodes, &known)?;
    let mut ordered = Vec::new();
    for domain in &graph.order {
        let index = loaded
            .iter()
            .position(|guest| &guest.config.domain == domain)
            .expect("the graph orders the domains it was given");
        ordered.push(loaded.remove(index));
    }
    Ok((ordered, graph))
}

/// What the graph needs of a domain's configuration.
pub fn domain_node(guest: &GuestConfigured) -> DomainNode {
    DomainNode {
        domain: guest.config.domain.clone(),
        depends_on: guest.config.settings.depends_on.clone().map(|wanted| {
            (
                wanted,
                guest.config.origins.locate_setting("depends_on").cloned(),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> DomainName {
        DomainName::parse(text).unwrap()
    }

    #[test]
    fn a_dependent_has_a_state_directory_of_its_own_and_an_existing_host_the_machines() {
        let web = name("web.example.test");
        let blog = name("blog.example.test");
        assert_eq!(state_dir_on_machine(&web, &web), "/var/lib/trog");
        assert_eq!(
            state_dir_on_machine(&blog, &web),
            "/var/lib/trog/dependents/blog.example.test"
        );
    }

    #[test]
    fn a_domain_is_finished_again_only_when_its_converged_digest_differs() {
        let web = name("web.example.test");
        let dir = "/var/lib/trog/dependents/blog.example.test";
        assert!(
            steps_on_machine(Some("abcdef0123456789"), "abcdef0123456789", &web, dir).is_empty()
        );
        assert_eq!(
            steps_on_machine(None, "abcdef0123456789", &web, dir),
            ["finish on web.example.test's machine in /var/lib/trog/dependents/blog.example.test: send the payload abcdef012345, run its Makefile and tests"]
        );
        assert_eq!(
            steps_on_machine(Some("0000"), "abcdef0123456789", &web, dir).len(),
            1
        );
    }

    #[test]
    fn an_unadopted_host_key_names_how_to_check_it_and_the_flag_that_adopts_it() {
        let error = HostError::HostKeyNotAdopted {
            machine: name("old.example.test"),
            address: "192.0.2.7".into(),
        };
        assert_eq!(error.exit_status(), ExitStatus::Conflict);
        let hint = error.hint().unwrap();
        assert!(hint.contains("ssh-keyscan -t ed25519 192.0.2.7"), "{hint}");
        assert!(
            hint.contains("`trog provision --adopt-host-key old.example.test`"),
            "{hint}"
        );
    }
}
