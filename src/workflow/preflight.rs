//! preflight's questions: the configuration's files, and every hypervisor asked in a thread of
//! its own (so a fleet takes as long as its slowest member), every check made even after one
//! fails. Never prompts: a sudo password is only used when it was handed in.

use crate::config::guest::GuestConfig;
use crate::config::hypervisors_conf::{
    fleet_to_build_on, load_installation_fleet, Fleet, HypervisorsConfError,
};
use crate::config::load::{list_domains, load_guest_with_recipe_settings, load_recipes_yaml};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::credentials::Secret;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::{Diagnose, Failure};
use crate::generate::recipe_settings;
use crate::guest::wait::AttemptFailed;
use crate::hypervisor::observer::HypervisorObserver;
use crate::machine::hypervisor_ops::{
    kvm_verdict, virtiofsd_path, HypervisorMachine, HypervisorOp,
};
use crate::machine::ssh::SudoPassword;
use crate::machine::ssh::{SshMachine, SshTarget};
use crate::machine::ssh_masters::SharedMasters;
use crate::machine::MachineError;
use crate::machine::{Machine, MachineCommand};
use crate::model::hypervisor::{HypervisorConfig, Transport};
use crate::preflight::checks::{
    configuration_checks, hypervisor_checks, own_address_checks, parse_findmnt,
};
use crate::preflight::existing_hosts::{existing_host_checks, ExistingHostFacts, HostLoginFact};
use crate::preflight::{
    ConfigurationFacts, FileFact, GuestListingProblem, HypervisorFacts, HypervisorReport,
    OwnAddresses, PreflightReport, SudoFact,
};
use crate::secrets::{stored_keypair, GuestKeypair, PrivateKeyFile, SecretStore};
use crate::untrusted::untrusted_str;
use crate::workflow::hypervisor_machine::{ssh_machine_for, sudo_access, SudoAccess};
use crate::workflow::inputs::{load_guest_configured, store_key_file, GuestConfigured};
use crate::workflow::open::fleet_observer;
use crate::workflow::reach::attempt_login;
use crate::workflow::reporter::AlreadyTold;

/// Asks the installation's configuration and its hypervisors (or the one named) everything
/// preflight checks, and returns the checks. `handed_in_sudo` is the sudo password given with
/// `--credentials`, if any.
pub fn preflight_report(
    paths: &InstallationPaths,
    only_hypervisor: Option<&str>,
    handed_in_sudo: Option<Secret>,
    store_credentials: Option<&mut CredentialSource<TerminalPrompter>>,
) -> Result<PreflightReport, Failure> {
    let fleet_file = load_installation_fleet(paths);
    // A fleet file named on the command line that is not there leaves nothing to check: checking
    // this machine instead would answer a question nobody asked.
    if let Err(HypervisorsConfError::NamedFileMissing { path }) = &fleet_file {
        return Err(HypervisorsConfError::NamedFileMissing { path: path.clone() }.into());
    }
    let configuration = configuration_facts(paths, &fleet_file);
    let fleet = fleet_to_build_on(&paths.hypervisors_conf, fleet_file.ok().flatten(), None);
    let hypervisors: Vec<&HypervisorConfig> = match only_hypervisor {
        Some(name) => vec![fleet.hypervisor_named(name)?],
        None => fleet.fleet.hypervisors.iter().collect(),
    };
    let observer = fleet_observer();
    let linked_version = observer.client_version();
    let facts: Vec<HypervisorFacts> = std::thread::scope(|scope| {
        let asks: Vec<_> = hypervisors
            .iter()
            .map(|hypervisor| {
                let sudo = handed_in_sudo.clone();
                let observer = observer.as_ref();
                scope.spawn(move || hypervisor_facts(observer, hypervisor, sudo, linked_version))
            })
            .collect();
        asks.into_iter()
            .map(|ask| ask.join().expect("a preflight thread does not panic"))
            .collect()
    });
    let own_addresses = configuration.own_addresses.clone();
    let mut configuration = configuration_checks(&configuration);
    configuration.extend(
        existing_host_facts(paths, store_credentials)
            .iter()
            .flat_map(existing_host_checks),
    );
    Ok(PreflightReport {
        configuration_dir: paths.dir.display().to_string(),
        configuration,
        hypervisors: facts
            .iter()
            .map(|facts| {
                let mut checks = hypervisor_checks(facts);
                if let Ok(libvirt) = &facts.libvirt {
                    checks.extend(own_address_checks(&facts.name, libvirt, &own_addresses));
                }
                HypervisorReport {
                    name: facts.name.clone(),
                    uri: facts.uri.clone(),
                    checks,
                }
            })
            .collect(),
    })
}

/// Every existing host of recipes.d, logged into with trog's key for it (when the store could
/// be opened: `credentials` is given only when its passphrase was handed in) and asked for sudo.
fn existing_host_facts(
    paths: &InstallationPaths,
    credentials: Option<&mut CredentialSource<TerminalPrompter>>,
) -> Vec<ExistingHostFacts> {
    let Ok(domains) = list_domains(paths) else {
        return Vec::new();
    };
    let hosts: Vec<(GuestConfigured, String)> = domains
        .iter()
        .filter_map(|domain| load_guest_configured(paths, domain, &AlreadyTold).ok())
        .filter_map(|configured| match configured.config.settings.runs_on() {
            RunsOn::ExistingHost(address) => Some((configured, address)),
            _ => None,
        })
        .collect();
    if hosts.is_empty() {
        return Vec::new();
    }
    let store = match credentials {
        None => Err("no passphrase was handed in".to_string()),
        Some(credentials) => {
            let key_file = store_key_file(paths, &hosts[0].0.config);
            match SecretStore::open_existing(&paths.secrets_kdbx, key_file.as_deref(), credentials)
            {
                Ok(Some(store)) => Ok(store),
                Ok(None) => Err("there is none yet".to_string()),
                Err(error) => Err(error.to_string()),
            }
        }
    };
    hosts
        .into_iter()
        .map(|(configured, address)| {
            let config = &configured.config;
            let user = config.settings.admin_user.clone();
            let (login, sudo) = match &store {
                Err(why) => (HostLoginFact::StoreNotOpened(why.clone()), None),
                Ok(store) => match stored_keypair(store, &config.domain) {
                    Ok(Some(keypair)) => log_in_and_ask_sudo(&keypair, &user, &address),
                    Ok(None) => (HostLoginFact::NoKey, None),
                    Err(error) => (HostLoginFact::StoreNotOpened(error.to_string()), None),
                },
            };
            ExistingHostFacts {
                domain: config.domain.to_string(),
                user,
                address,
                login,
                sudo,
            }
        })
        .collect()
}

/// Logs into an existing host with `keypair` (its adopted host key pinned) and asks sudo.
fn log_in_and_ask_sudo(
    keypair: &GuestKeypair,
    user: &str,
    address: &str,
) -> (HostLoginFact, Option<Result<(), String>>) {
    let key = match PrivateKeyFile::write(keypair) {
        Ok(key) => key,
        Err(error) => return (HostLoginFact::Unreachable(error.to_string()), None),
    };
    let machine = match SshMachine::new(
        SshTarget {
            user: Some(user.to_string()),
            host: address.to_string(),
            port: None,
        },
        Some(key.path().to_path_buf()),
        key.pinned_host_keys(),
    ) {
        Ok(machine) => machine,
        Err(error) => return (HostLoginFact::Unreachable(error.to_string()), None),
    };
    match attempt_login(&machine, &mut || None) {
        Ok(()) => {}
        Err(AttemptFailed::HostKeyRefused) if keypair.adopted_host_key().is_none() => {
            return (HostLoginFact::HostKeyNotAdopted, None)
        }
        Err(AttemptFailed::HostKeyRefused) => return (HostLoginFact::HostKeyRefused, None),
        Err(AttemptFailed::NoAnswer(why) | AttemptFailed::GuestStopped(why)) => {
            return (HostLoginFact::Unreachable(untrusted_str(&why)), None)
        }
    }
    let sudo = machine
        .run(&MachineCommand::new(["true"]).as_root(true))
        .map_err(|error| short_error(&error))
        .and_then(|output| match output.status {
            Some(0) => Ok(()),
            _ => Err(untrusted_str(
                String::from_utf8_lossy(&output.stderr).trim(),
            )),
        });
    (HostLoginFact::Reached, Some(sudo))
}

fn configuration_facts(
    paths: &InstallationPaths,
    fleet_file: &Result<Option<Fleet>, HypervisorsConfError>,
) -> ConfigurationFacts {
    let hypervisors_conf = match fleet_file {
        Ok(None) => FileFact::Missing,
        Ok(Some(fleet)) => FileFact::Loaded(format!(
            "{} hypervisor{}",
            fleet.hypervisors.len(),
            if fleet.hypervisors.len() == 1 {
                ""
            } else {
                "s"
            }
        )),
        Err(error) => FileFact::Invalid(error.to_string()),
    };
    let (recipes_yaml, mirror, cache) = if !paths.recipes_yaml.exists() {
        (FileFact::Missing, None, None)
    } else {
        match load_recipes_yaml(paths) {
            Ok(recipes) => (
                FileFact::Loaded(format!(
                    "{} recipe{} every guest gets",
                    recipes.base.recipes.len(),
                    if recipes.base.recipes.len() == 1 {
                        ""
                    } else {
                        "s"
                    }
                )),
                Some(recipes.base.global.contains_key("mirror")),
                Some(recipes.base.global.contains_key("cache")),
            ),
            Err(error) => (FileFact::Invalid(error.to_string()), None, None),
        }
    };
    let mut own_addresses = Vec::new();
    let guests = list_domains(paths)
        .map_err(|error| GuestListingProblem {
            why: error.to_string(),
            hint: error.hint().unwrap_or_default(),
        })
        .map(|domains| {
            let settings = recipes_dir()
                .and_then(|dir| load_cookbook(&dir))
                .map(|cookbook| recipe_settings(&cookbook))
                .unwrap_or_default();
            domains
                .iter()
                .map(
                    |domain| match load_guest_with_recipe_settings(paths, domain, &settings) {
                        Ok(config) => {
                            own_addresses.extend(own_addresses_of(&config));
                            (domain.to_string(), None)
                        }
                        Err(error) => (domain.to_string(), Some(error.to_string())),
                    },
                )
                .collect()
        });
    ConfigurationFacts {
        dir: paths.dir.display().to_string(),
        dir_exists: paths.dir.is_dir(),
        hypervisors_conf,
        recipes_yaml,
        guests,
        mirror,
        cache,
        own_addresses,
    }
}

/// The addresses trog gives `config`'s guest itself on a libvirt network: none for a guest on a
/// bridge (libvirt has no DHCP there), one that takes a lease, or a domain without a guest.
fn own_addresses_of(config: &GuestConfig) -> Option<OwnAddresses> {
    let settings = &config.settings;
    let ips: Vec<std::net::Ipv4Addr> = settings
        .ips
        .iter()
        .filter_map(|ip| match ip.address {
            std::net::IpAddr::V4(address) => Some(address),
            std::net::IpAddr::V6(_) => None,
        })
        .collect();
    let own_guest = settings.runs_on() == RunsOn::OwnGuest;
    (own_guest
        && settings.bridge.is_none()
        && (settings.address_range.is_some() || !ips.is_empty()))
    .then(|| OwnAddresses {
        guest: config.domain.to_string(),
        hypervisor: settings.hypervisor.as_ref().map(ToString::to_string),
        network: settings.network.clone(),
        address_range: settings.address_range,
        ips,
    })
}

/// Asks one hypervisor everything preflight checks. Every question is asked whatever the
/// previous ones answered.
fn hypervisor_facts(
    observer: &dyn HypervisorObserver,
    hypervisor: &HypervisorConfig,
    handed_in_sudo: Option<Secret>,
    linked_version: u32,
) -> HypervisorFacts {
    let uri = &hypervisor.libvirt_uri;
    let (machine, expected_user, host): (Result<HypervisorMachine, String>, _, _) =
        match &uri.transport {
            Transport::Ssh { user, host, .. } => (
                ssh_machine_for(uri)
                    .map(|machine| machine.expect("an ssh transport").into_dyn())
                    .map_err(|error| error.to_string()),
                user.clone(),
                host.clone(),
            ),
            Transport::Local => (
                Ok(HypervisorMachine::local().into_dyn()),
                None,
                "this machine".to_string(),
            ),
            Transport::Test => (
                Err("libvirt's test driver has no system to check".to_string()),
                None,
                "the test driver".to_string(),
            ),
        };
    let login = machine.as_ref().map_err(Clone::clone).and_then(|machine| {
        machine
            .run(&HypervisorOp::LoginName)
            .and_then(|output| output.success())
            .map(|output| output.stdout_text().trim().to_string())
            .map_err(|error| short_error(&error))
    });
    // A host that could not be reached is not asked again for each question.
    let reached: Result<&HypervisorMachine, String> = match (&machine, &login) {
        (Ok(machine), Ok(_)) => Ok(machine),
        (_, Err(why)) => Err(format!("not reached ({why})")),
        (Err(why), _) => Err(why.clone()),
    };
    let sudo = reached
        .clone()
        .and_then(|machine| sudo_fact(machine, uri, handed_in_sudo));
    let ask = |op: HypervisorOp| -> Result<bool, String> {
        reached.clone().map(|machine| machine.holds(&op))
    };
    let libvirt = observer
        .preflight_facts(hypervisor)
        .map_err(|error| error.to_string());
    let pool_filesystem = libvirt
        .as_ref()
        .ok()
        .and_then(|facts| facts.pool.as_ref())
        .map(|pool| {
            reached.clone().and_then(|machine| {
                machine
                    .run(&HypervisorOp::FilesystemOf {
                        path: pool.path.clone(),
                    })
                    .and_then(|output| output.success())
                    .map_err(|error| short_error(&error))
                    .and_then(|output| {
                        parse_findmnt(&output.stdout_text())
                            .ok_or_else(|| "findmnt's answer was not understood".to_string())
                    })
            })
        });
    HypervisorFacts {
        name: hypervisor.name.to_string(),
        uri: uri.uri.clone(),
        host,
        expected_user,
        login,
        sudo,
        root_programs: reached.clone().and_then(|machine| {
            machine
                .root_programs()
                .map(|found| {
                    found.map(|found| {
                        found
                            .iter()
                            .map(|(program, state)| (program.path(), state.clone()))
                            .collect()
                    })
                })
                .map_err(|error| short_error(&error))
        }),
        libvirt,
        linked_version,
        pool_name: hypervisor.pool_name.clone(),
        pool_filesystem,
        real_tpm: ask(HypervisorOp::RealTpm),
        swtpm: ask(HypervisorOp::Swtpm),
        libguestfs: ask(HypervisorOp::Libguestfs),
        virtiofsd: reached.clone().and_then(virtiofsd_path),
        qemu_img: ask(HypervisorOp::QemuImg),
        domain_type: hypervisor.domain_type,
        kvm: reached.clone().and_then(kvm_verdict),
        connection_kept: matches!(uri.transport, Transport::Ssh { .. }).then(|| {
            SharedMasters::for_this_user()
                .map(|_| ())
                .map_err(|unavailable| unavailable.to_string())
        }),
    }
}

/// Whether sudo works: passwordless, or with the password handed in (tried on a connection of
/// its own, so the machine the other questions use is left as it was).
fn sudo_fact(
    machine: &HypervisorMachine,
    uri: &crate::model::hypervisor::LibvirtUri,
    handed_in: Option<Secret>,
) -> Result<SudoFact, String> {
    match sudo_access(machine).map_err(|error| short_error(&error))? {
        SudoAccess::Passwordless => Ok(SudoFact::Passwordless),
        SudoAccess::Refused { detail } => Ok(SudoFact::Refused(detail)),
        SudoAccess::WantsPassword => {
            let (Some(password), Ok(Some(mut with_password))) = (handed_in, ssh_machine_for(uri))
            else {
                return Ok(SudoFact::WantsPassword);
            };
            with_password.remember_sudo_password(SudoPassword::new(password.expose().as_bytes()));
            match with_password.run(&HypervisorOp::RootAccess) {
                Ok(output) if output.status == Some(0) => Ok(SudoFact::PasswordHandedInWorks),
                Ok(_) | Err(MachineError::SudoPasswordRefused { .. }) => {
                    Ok(SudoFact::PasswordHandedInRefused)
                }
                Err(error) => Err(short_error(&error)),
            }
        }
    }
}

/// An error as one line: its message, without the hint (the check gives its own advice).
fn short_error(error: &MachineError) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}
