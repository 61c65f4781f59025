//! `assign_ip` and `addresses`: giving a guest an address from its network's range, and listing
//! what ips.db holds. Both work on the configuration and ips.db alone; no hypervisor is asked.

use crate::addresses::settle::{declared_range, network_key};
use crate::addresses::store::free_addresses;
use crate::addresses::{AddressBook, AddressError, Claimant, Holding, RangeRecord};
use crate::config::guest::load_guest_with_recipe_settings;
use crate::config::paths::InstallationPaths;
use crate::config::values::IpCidr;
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::diagnose::Failure;
use crate::generate::recipe_settings;
use crate::lock::Locks;
use crate::model::names::DomainName;
use crate::workflow::lock::take_local_guest_lock;
use crate::workflow::reporter::Reporter;
use std::net::{IpAddr, Ipv4Addr};

/// What a guest holds after `assign_ip`.
#[derive(Debug, serde::Serialize)]
pub struct AssignedAddresses {
    pub guest: String,
    pub holdings: Vec<Holding>,
    /// The range the assignment came from; `None` for addresses written by hand.
    pub range: Option<RangeRecord>,
}

/// Gives `domain` the lowest free address of `network`'s range (its own network unless named),
/// or records and checks the addresses its `ips` declare by hand.
pub fn assign_address(
    paths: &InstallationPaths,
    domain: &DomainName,
    network: Option<&str>,
    locks: &Locks,
    reporter: &dyn Reporter,
) -> Result<AssignedAddresses, Failure> {
    let cookbook = load_cookbook(&recipes_dir()?)?;
    let config = load_guest_with_recipe_settings(paths, domain, &recipe_settings(&cookbook))?;
    let guest = domain.to_string();
    let file = config.domain_file.display().to_string();
    let claimant = Claimant {
        guest: &guest,
        file: &file,
    };
    let own_network = network_key(&config.settings);
    let network = network.map_or(own_network.clone(), str::to_string);
    let declared = declared_range(&config)?.filter(|range| range.network == network);
    // A range comes from the guest's files or from ips.db: with neither, the refusal leaves
    // nothing behind (no ips.db made, no lock taken).
    if config.settings.ips.is_empty() && declared.is_none() && !paths.ips_db.exists() {
        return Err(AddressError::NoRange {
            guest,
            network,
            path: paths.ips_db.clone(),
        }
        .into());
    }
    // ips.db's own transactions keep concurrent assignments apart; the guest's lock keeps this
    // one from racing a run of this installation that is changing the guest. Only this
    // installation's records change, so the hypervisor's lock is not taken.
    let _guest_lock = take_local_guest_lock(locks, domain, &mut |text| reporter.say(text))?;
    let mut book = AddressBook::open(&paths.ips_db)?;
    if !config.settings.ips.is_empty() {
        let addresses: Vec<Ipv4Addr> = config
            .settings
            .ips
            .iter()
            .filter_map(|cidr| match cidr.address {
                IpAddr::V4(address) => Some(address),
                IpAddr::V6(_) => None,
            })
            .collect();
        let holdings =
            book.record_declared(&claimant, &own_network, &addresses, declared.as_ref())?;
        return Ok(AssignedAddresses {
            guest,
            holdings,
            range: None,
        });
    }
    let (holding, range) = book.assign(&claimant, &network, declared.as_ref())?;
    Ok(AssignedAddresses {
        guest,
        holdings: vec![holding],
        range: Some(range),
    })
}

/// One range as `addresses` shows it.
#[derive(Debug, serde::Serialize)]
pub struct RangeListing {
    #[serde(flatten)]
    pub range: RangeRecord,
    pub held: usize,
    pub free: u64,
    /// The next addresses `assign_ip` would hand out, lowest first.
    pub next_free: Vec<Ipv4Addr>,
}

/// Everything ips.db holds.
#[derive(Debug, serde::Serialize)]
pub struct AddressListing {
    pub database: String,
    pub ranges: Vec<RangeListing>,
    pub holdings: Vec<Holding>,
}

/// How many free addresses of each range the listing names.
const NEXT_FREE_SHOWN: usize = 3;

/// Reads ips.db (an absent one lists nothing and is not created).
pub fn list_addresses(paths: &InstallationPaths) -> Result<AddressListing, Failure> {
    let database = paths.ips_db.display().to_string();
    let Some(book) = AddressBook::open_existing(&paths.ips_db)? else {
        return Ok(AddressListing {
            database,
            ranges: Vec::new(),
            holdings: Vec::new(),
        });
    };
    let (ranges, holdings) = book.list()?;
    let ranges = ranges
        .into_iter()
        .map(|range| {
            let held: Vec<Holding> = holdings
                .iter()
                .filter(|holding| holding.network == range.network)
                .filter(|holding| range.range.contains(holding.address))
                .cloned()
                .collect();
            let gateway_inside = u64::from(range.range.contains(range.gateway));
            RangeListing {
                held: held.len(),
                free: range.range.size() - held.len() as u64 - gateway_inside,
                next_free: free_addresses(&range, &held, NEXT_FREE_SHOWN),
                range,
            }
        })
        .collect();
    Ok(AddressListing {
        database,
        ranges,
        holdings,
    })
}

/// A holding as a static address is written (`192.0.2.10/24`), when its range is known.
pub fn as_cidr(holding: &Holding, range: &RangeRecord) -> IpCidr {
    IpCidr {
        address: IpAddr::V4(holding.address),
        prefix_len: range.range.prefix_len,
    }
}
