//! The whole site as trog knows it: every domain of recipes.d with its configuration, and what
//! every hypervisor holds (asked at once, each within its time). `inventory` turns it into the
//! machines other tools take; nothing here changes anything.

use crate::addresses::{AddressBook, Holding};
use crate::config::guest::{list_domains, load_guest_with_recipe_settings, GuestConfig};
use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet};
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::credentials::{CredentialSource, Secret, TerminalPrompter};
use crate::diagnose::Failure;
use crate::generate::recipe_settings;
use crate::hypervisor::fleet::ask_fleet;
use crate::hypervisor::observer::HeldDomain;
use crate::inventory::{choose_address, AddressOrigin, SiteMachine};
use crate::model::hypervisor::Transport;
use crate::model::names::DomainName;
use crate::secrets::{stored_keypair, SecretStore};
use crate::workflow::open::fleet_observer;
use serde::Serialize;
use std::net::IpAddr;
use std::time::Duration;

/// What one hypervisor of the fleet answered.
#[derive(Debug, Clone)]
pub struct HypervisorHoldings {
    pub name: String,
    /// Whether it is this machine: only then is a leased address reachable from here.
    pub local: bool,
    /// Its domains, or why it could not say.
    pub answer: Result<Vec<HeldDomain>, String>,
}

/// Every domain recipes.d declares, with its configuration, and what each hypervisor holds.
pub struct Site {
    pub guests: Vec<GuestConfig>,
    pub hypervisors: Vec<HypervisorHoldings>,
    /// Said before anything else (the fleet file's warning).
    pub warning: Option<String>,
}

/// Reads recipes.d (every guest's configuration, checked) and asks every hypervisor of the fleet
/// at once what it holds, each within `answer_timeout`.
pub fn read_site(paths: &InstallationPaths, answer_timeout: Duration) -> Result<Site, Failure> {
    let domains = list_domains(paths)?;
    let settings = recipe_settings(&load_cookbook(&recipes_dir()?)?);
    let guests = domains
        .iter()
        .map(|domain| load_guest_with_recipe_settings(paths, domain, &settings))
        .collect::<Result<Vec<_>, _>>()?;
    let (hypervisors, warning) = ask_holdings(paths, None, answer_timeout)?;
    Ok(Site {
        guests,
        hypervisors,
        warning,
    })
}

/// What every hypervisor of the fleet holds (or only the one `named`, a block of
/// hypervisors.conf), asked at once, each within `answer_timeout`; with the fleet file's warning.
pub fn ask_holdings(
    paths: &InstallationPaths,
    named: Option<&str>,
    answer_timeout: Duration,
) -> Result<(Vec<HypervisorHoldings>, Option<String>), Failure> {
    let whole = fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        None,
    );
    let fleet = match named {
        Some(name) => whole.narrowed_to(whole.hypervisor_named(name)?),
        None => whole,
    };
    let hypervisors = &fleet.fleet.hypervisors;
    let observer = fleet_observer();
    let answers = ask_fleet(hypervisors, answer_timeout, move |hypervisor| {
        observer.held_domains(hypervisor)
    });
    let holdings = hypervisors
        .iter()
        .zip(answers)
        .map(|(hypervisor, answer)| HypervisorHoldings {
            name: hypervisor.name.to_string(),
            local: hypervisor.libvirt_uri.transport == Transport::Local,
            answer,
        })
        .collect();
    Ok((holdings, fleet.warning))
}

/// The site's machines, and what could not be asked.
#[derive(Debug, Serialize)]
pub struct SiteInventory {
    pub machines: Vec<SiteMachine>,
    /// Hypervisors that could not be asked, each with why: a machine on one of them has no
    /// hypervisor, and no lease, in the inventory.
    pub unreachable: Vec<String>,
    /// The secret store that was read, or `None` when there is none (no machine has a pinned
    /// host key then).
    pub secret_store: Option<String>,
}

/// What [`site_inventory`] gathered.
pub struct GatheredInventory {
    pub inventory: SiteInventory,
    /// The login key of the machine asked for, when the store holds one.
    pub login_key: Option<Secret>,
    /// The fleet file's warning, said before anything else.
    pub warning: Option<String>,
}

/// The site's machines: each guest's address (its `ips`, else ips.db's record, else its lease on
/// this machine), admin user, hypervisor, tenant, recipes and pinned host keys (from the secret
/// store, opened read-only, never created).
pub fn site_inventory(
    paths: &InstallationPaths,
    answer_timeout: Duration,
    credentials: &mut CredentialSource<TerminalPrompter>,
    login_key_of: Option<&DomainName>,
) -> Result<GatheredInventory, Failure> {
    let site = read_site(paths, answer_timeout)?;
    let holdings: Vec<Holding> = match AddressBook::open_existing(&paths.ips_db)? {
        Some(book) => book.list()?.1,
        None => Vec::new(),
    };
    // The key file is an installation setting: every guest's configuration carries the same.
    let key_file = site
        .guests
        .first()
        .and_then(|guest| guest.settings.keepass_key_file.as_deref())
        .map(|written| paths.dir.join(written));
    let store = if site.guests.is_empty() {
        None
    } else {
        SecretStore::open_existing(&paths.secrets_kdbx, key_file.as_deref(), credentials)?
    };
    let mut machines = Vec::with_capacity(site.guests.len());
    let mut login_key = None;
    for guest in &site.guests {
        // A dependent is reached as its machine is: the end of its `depends_on` chain.
        let machine_config = machine_config_of(guest, &site.guests);
        let pair = match &store {
            Some(store) => stored_keypair(store, &machine_config.domain)?
                .filter(|pair| pair.origin() == crate::secrets::KeypairOrigin::Stored),
            None => None,
        };
        if login_key_of == Some(&guest.domain) && machine_config.domain == guest.domain {
            login_key = pair.as_ref().map(|pair| pair.private_key_openssh().clone());
        }
        let host_keys = pair
            .map(|pair| {
                pair.accepted_host_keys()
                    .into_iter()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut entry = machine(machine_config, &site.hypervisors, &holdings, host_keys);
        if machine_config.domain != guest.domain {
            entry.runs_on = Some(entry.name.clone());
            entry.name = guest.domain.to_string();
            entry.tenant = None;
            entry.recipes = guest
                .recipes
                .keys()
                .map(|recipe| recipe.to_string())
                .collect();
        }
        machines.push(entry);
    }
    let unreachable = site
        .hypervisors
        .iter()
        .filter_map(|hypervisor| {
            hypervisor
                .answer
                .as_ref()
                .err()
                .map(|why| format!("{}: {why}", hypervisor.name))
        })
        .collect();
    Ok(GatheredInventory {
        inventory: SiteInventory {
            machines,
            unreachable,
            secret_store: store.map(|store| store.path().display().to_string()),
        },
        login_key,
        warning: site.warning,
    })
}

/// The configuration of the machine `guest` runs on: its own, or the end of its `depends_on`
/// chain among `guests` (a chain that leaves them, or turns in a ring, ends where it does).
fn machine_config_of<'a>(guest: &'a GuestConfig, guests: &'a [GuestConfig]) -> &'a GuestConfig {
    let mut current = guest;
    for _ in 0..guests.len() {
        let Some(next) = current
            .settings
            .depends_on
            .as_ref()
            .and_then(|wanted| guests.iter().find(|other| &other.domain == wanted))
        else {
            break;
        };
        current = next;
    }
    current
}

/// One guest as a machine of the inventory (everything asked is passed in).
fn machine(
    guest: &GuestConfig,
    hypervisors: &[HypervisorHoldings],
    holdings: &[Holding],
    host_keys: Vec<String>,
) -> SiteMachine {
    let name = guest.domain.as_str();
    // Only a domain trog made is this guest; a same-named one without the tag is someone else's.
    let holder = hypervisors.iter().find_map(|hypervisor| {
        let held = hypervisor.answer.as_ref().ok()?;
        let domain = held
            .iter()
            .find(|domain| domain.maker.is_trogs() && domain.name == name)?;
        Some((hypervisor, domain))
    });
    let declared = guest.settings.ips.first().map(|ip| ip.address);
    let recorded = holdings
        .iter()
        .find(|holding| holding.guest == name)
        .map(|holding| IpAddr::V4(holding.address));
    let leased = holder
        .and_then(|(_, domain)| domain.leased.first())
        .and_then(|address| address.parse::<IpAddr>().ok());
    let leased_here = holder.is_some_and(|(hypervisor, _)| hypervisor.local);
    let chosen = choose_address(declared, recorded, leased, leased_here)
        .map(|(address, origin)| (address.to_string(), origin));
    let chosen = match &guest.settings.existing_host {
        Some(address) => Some((address.clone(), AddressOrigin::ExistingHost)),
        None => chosen,
    };
    SiteMachine {
        name: name.to_string(),
        address: chosen.as_ref().map(|(address, _)| address.clone()),
        address_origin: chosen.map(|(_, origin)| origin),
        runs_on: None,
        admin_user: guest.settings.admin_user.clone(),
        hypervisor: holder.map(|(hypervisor, _)| hypervisor.name.clone()),
        tenant: guest
            .settings
            .tenant
            .as_ref()
            .map(|tenant| tenant.as_str().to_string()),
        recipes: guest
            .recipes
            .keys()
            .map(|recipe| recipe.to_string())
            .collect(),
        host_keys,
    }
}
