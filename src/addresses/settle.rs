//! Which address a guest has, decided before its artifacts are generated: the `ips` written by
//! hand (recorded and checked), the address it already holds, or — when its configuration
//! declares an `address_range` — the lowest free one, recorded. The result is written into the
//! guest's settings as its `ips`, so the generator puts it in the seed exactly as a hand-written
//! address.

use crate::addresses::error::AddressError;
use crate::addresses::store::{AddressBook, Claimant, Holding, RangeRecord};
use crate::config::guest::GuestConfig;
use crate::config::settings::GuestSettings;
use crate::config::values::IpCidr;
use crate::render::network_filter::TenantDirectory;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

/// Whether a run may record in ips.db or only read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// `provision`: record hand-written addresses, hand one out when the guest needs it.
    Record,
    /// `status`, `new_config`, a dry run: use what is recorded; change nothing.
    ReadOnly,
}

/// The name a guest's network has in ips.db: its libvirt network, or `bridge:NAME`.
pub fn network_key(settings: &GuestSettings) -> String {
    match &settings.bridge {
        Some(bridge) => format!("bridge:{bridge}"),
        None => settings.network.clone(),
    }
}

/// Where `config`'s setting `key` was written (`file:line:column`: the guest's file or
/// recipes.yaml), else the guest's file.
fn written_at(config: &GuestConfig, key: &str) -> String {
    config.origins.locate_setting(key).map_or_else(
        || config.domain_file.display().to_string(),
        ToString::to_string,
    )
}

/// The range `config` declares for its network, if it declares one.
pub fn declared_range(config: &GuestConfig) -> Result<Option<RangeRecord>, AddressError> {
    let settings = &config.settings;
    let Some(range) = settings.address_range else {
        return Ok(None);
    };
    let Some(IpAddr::V4(gateway)) = settings.gateway else {
        return Err(AddressError::RangeWithoutGateway {
            guest: config.domain.to_string(),
            file: written_at(config, "address_range"),
        });
    };
    let declared_in = config
        .origins
        .locate_setting("address_range")
        .map(|origin| origin.file.display().to_string())
        .unwrap_or_else(|| config.recipes_yaml.display().to_string());
    Ok(Some(RangeRecord {
        network: network_key(settings),
        range,
        gateway,
        resolvers: settings.resolvers.iter().map(ToString::to_string).collect(),
        declared_by: config.domain.to_string(),
        declared_in,
    }))
}

/// Settles `config`'s address under `policy`, writing an address it holds into its `ips`, and
/// (recording) the guest's tenant. Returns the address the guest was given or holds, when it
/// has one from ips.db.
pub fn settle_addresses(
    ips_db: &Path,
    config: &mut GuestConfig,
    policy: AddressPolicy,
) -> Result<Option<Holding>, AddressError> {
    let held = settle_address(ips_db, config, policy)?;
    let tenant = config
        .settings
        .tenant
        .as_ref()
        .map(|tenant| tenant.as_str());
    // A tenant is kept apart by the addresses of the other tenants' guests, so a guest of one
    // needs an address ips.db knows: one handed out, or written by hand. (A dry run of a new
    // guest with a range has none yet, and will be given one.)
    let will_have_one =
        policy == AddressPolicy::ReadOnly && config.settings.address_range.is_some();
    if tenant.is_some() && config.settings.ips.is_empty() && !will_have_one {
        return Err(AddressError::TenantWithoutAddress {
            guest: config.domain.to_string(),
            file: written_at(config, "tenant"),
        });
    }
    if policy == AddressPolicy::Record {
        let book = match tenant {
            Some(_) => Some(AddressBook::open(ips_db)?),
            None => AddressBook::open_existing(ips_db)?,
        };
        if let Some(mut book) = book {
            book.set_tenant(config.domain.as_str(), tenant)?;
        }
    }
    Ok(held)
}

/// Every tenant with its guests' addresses, as ips.db records them (none without ips.db).
pub fn tenant_directory(ips_db: &Path) -> Result<TenantDirectory, AddressError> {
    match AddressBook::open_existing(ips_db)? {
        Some(book) => book.tenant_directory(),
        None => Ok(TenantDirectory::new()),
    }
}

fn settle_address(
    ips_db: &Path,
    config: &mut GuestConfig,
    policy: AddressPolicy,
) -> Result<Option<Holding>, AddressError> {
    let declared = declared_range(config)?;
    let network = network_key(&config.settings);
    let guest = config.domain.to_string();
    let file = config.domain_file.display().to_string();
    let claimant = Claimant {
        guest: &guest,
        file: &file,
    };
    if !config.settings.ips.is_empty() {
        if policy == AddressPolicy::Record {
            let addresses: Vec<Ipv4Addr> = config
                .settings
                .ips
                .iter()
                .filter_map(|cidr| match cidr.address {
                    IpAddr::V4(address) => Some(address),
                    IpAddr::V6(_) => None,
                })
                .collect();
            AddressBook::open(ips_db)?.record_declared(
                &claimant,
                &network,
                &addresses,
                declared.as_ref(),
            )?;
        }
        return Ok(None);
    }
    let held = match policy {
        AddressPolicy::Record => {
            let book = match (&declared, AddressBook::open_existing(ips_db)?) {
                (_, Some(book)) => Some(book),
                (Some(_), None) => Some(AddressBook::open(ips_db)?),
                (None, None) => None,
            };
            match book {
                Some(mut book) => {
                    let holds = book
                        .held_by(&guest)?
                        .into_iter()
                        .any(|holding| holding.network == network);
                    if declared.is_some() || holds {
                        Some(book.assign(&claimant, &network, declared.as_ref())?)
                    } else {
                        None
                    }
                }
                None => None,
            }
        }
        AddressPolicy::ReadOnly => match AddressBook::open_existing(ips_db)? {
            Some(book) => {
                let holding = book
                    .held_by(&guest)?
                    .into_iter()
                    .find(|holding| holding.network == network);
                let (ranges, _) = book.list()?;
                holding.and_then(|holding| {
                    let range = ranges
                        .into_iter()
                        .find(|range| range.network == holding.network)
                        .or(declared.clone())?;
                    Some((holding, range))
                })
            }
            None => None,
        },
    };
    let Some((holding, range)) = held else {
        return Ok(None);
    };
    apply(&mut config.settings, &holding, &range);
    Ok(Some(holding))
}

/// Writes a held address into the settings as a static address, with its range's gateway and
/// resolvers where the configuration names none.
fn apply(settings: &mut GuestSettings, holding: &Holding, range: &RangeRecord) {
    settings.ips = vec![IpCidr {
        address: IpAddr::V4(holding.address),
        prefix_len: range.range.prefix_len,
    }];
    if settings.gateway.is_none() {
        settings.gateway = Some(IpAddr::V4(range.gateway));
    }
    if settings.resolvers.is_empty() {
        settings.resolvers = range
            .resolvers
            .iter()
            .filter_map(|text| text.parse().ok())
            .collect();
    }
}
