//! `ips.db`: the address ranges trog hands out from and who holds each address, in SQLite.
//!
//! Every change is one `BEGIN IMMEDIATE` transaction: two runs at once queue on SQLite's write
//! lock (each waits at most [`BUSY_WAIT`]), so one address is never handed out twice, and a run
//! killed half-way leaves the database as it was. WAL keeps readers (`trog addresses`) out of
//! writers' way. The choice of an address is the pure [`lowest_free`].

use crate::addresses::error::AddressError;
use crate::model::address_range::{lowest_free, AddressRange};
use crate::render::network_filter::TenantDirectory;
use rusqlite::{params, Connection, ErrorCode, TransactionBehavior};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a run waits for another's write to ips.db. Writes last milliseconds; this is long
/// enough for a queue of many runs (20 at once in the tests) and short enough to report a stuck
/// holder while a person still waits.
pub const BUSY_WAIT: Duration = Duration::from_secs(30);

/// The schema, one step per version: `MIGRATIONS[n]` brings version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE ranges (
        network TEXT PRIMARY KEY,
        range TEXT NOT NULL,
        gateway TEXT NOT NULL,
        resolvers TEXT NOT NULL,
        declared_by TEXT NOT NULL,
        declared_in TEXT NOT NULL
    );
    CREATE TABLE holdings (
        address TEXT PRIMARY KEY,
        network TEXT NOT NULL,
        guest TEXT NOT NULL,
        file TEXT NOT NULL,
        origin TEXT NOT NULL CHECK (origin IN ('assigned', 'declared'))
    );
    CREATE INDEX holdings_by_guest ON holdings (guest);
",
    "
    CREATE TABLE tenants (
        guest TEXT PRIMARY KEY,
        tenant TEXT NOT NULL
    );
",
];

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// A network's range as declared in a guest's `_global`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RangeRecord {
    /// A libvirt network's name, or `bridge:NAME`.
    pub network: String,
    pub range: AddressRange,
    pub gateway: Ipv4Addr,
    pub resolvers: Vec<String>,
    /// The guest and file that declared it last.
    pub declared_by: String,
    pub declared_in: String,
}

/// How a guest came to hold an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HoldingOrigin {
    /// Handed out by `assign_ip` (or by `provision` for a guest without `ips`).
    Assigned,
    /// Written by hand in the guest's `ips`.
    Declared,
}

impl HoldingOrigin {
    fn as_str(self) -> &'static str {
        match self {
            HoldingOrigin::Assigned => "assigned",
            HoldingOrigin::Declared => "declared",
        }
    }
}

/// One address and its holder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holding {
    pub address: Ipv4Addr,
    pub network: String,
    pub guest: String,
    /// The guest's file in recipes.d.
    pub file: String,
    pub origin: HoldingOrigin,
}

/// A guest asking for an address: its name and the file that declares it.
#[derive(Debug, Clone)]
pub struct Claimant<'a> {
    pub guest: &'a str,
    pub file: &'a str,
}

/// An open `ips.db`.
pub struct AddressBook {
    connection: Connection,
    path: PathBuf,
}

impl AddressBook {
    /// Opens `path`, creating an empty database when there is none. A file that is not SQLite is
    /// refused and left as it is.
    pub fn open(path: &Path) -> Result<AddressBook, AddressError> {
        AddressBook::open_with(path, MIGRATIONS)
    }

    /// Opens `path` if it exists; `None` when there is no ips.db (nothing was ever recorded).
    pub fn open_existing(path: &Path) -> Result<Option<AddressBook>, AddressError> {
        if path.exists() {
            AddressBook::open(path).map(Some)
        } else {
            Ok(None)
        }
    }

    fn open_with(path: &Path, migrations: &[&str]) -> Result<AddressBook, AddressError> {
        refuse_non_sqlite(path)?;
        let connection = Connection::open(path).map_err(|source| fail(path, "open", source))?;
        connection
            .busy_timeout(BUSY_WAIT)
            .map_err(|source| fail(path, "open", source))?;
        let mut book = AddressBook {
            connection,
            path: path.to_path_buf(),
        };
        book.use_wal()?;
        book.migrate(migrations)?;
        Ok(book)
    }

    /// Switches the file to WAL (once; the mode is kept in the file). The switch needs the
    /// database to itself and SQLite does not wait for that through the busy handler, so runs
    /// opening a new ips.db at once retry it, within the same [`BUSY_WAIT`].
    fn use_wal(&self) -> Result<(), AddressError> {
        let started = std::time::Instant::now();
        loop {
            let mode = self
                .connection
                .query_row("PRAGMA journal_mode = WAL", [], |row| {
                    row.get::<_, String>(0)
                });
            let busy = match &mode {
                Ok(mode) => !mode.eq_ignore_ascii_case("wal"),
                Err(error) => matches!(
                    error.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ),
            };
            match mode {
                Ok(_) if !busy => return Ok(()),
                Err(source) if !busy || started.elapsed() >= BUSY_WAIT => {
                    return Err(self.fail("open", source))
                }
                Ok(_) if started.elapsed() >= BUSY_WAIT => {
                    return Err(AddressError::Busy {
                        path: self.path.clone(),
                        seconds: BUSY_WAIT.as_secs(),
                    })
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Brings the schema up to date, backing the file up first when it already held data.
    fn migrate(&mut self, migrations: &[&str]) -> Result<(), AddressError> {
        let known = migrations.len() as i64;
        let version = self.version()?;
        if version > known {
            return Err(AddressError::NewerSchema {
                path: self.path.clone(),
                found: version,
                known,
            });
        }
        if version == known {
            return Ok(());
        }
        if version > 0 {
            let backup = self.path.with_extension(format!("db.v{version}.bak"));
            self.connection
                .backup(rusqlite::MAIN_DB, &backup, None)
                .map_err(|source| AddressError::Backup {
                    path: self.path.clone(),
                    backup,
                    source,
                })?;
        }
        let path = self.path.clone();
        let transaction = self.write()?;
        // Another run may have migrated while this one backed up.
        let version: i64 = transaction
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|source| fail(&path, "read the schema version of", source))?;
        for step in migrations.iter().skip(version.max(0) as usize) {
            transaction
                .execute_batch(step)
                .map_err(|source| fail(&path, "change the schema of", source))?;
        }
        transaction
            .execute_batch(&format!("PRAGMA user_version = {known}"))
            .map_err(|source| fail(&path, "change the schema of", source))?;
        commit(transaction, &path)
    }

    fn version(&self) -> Result<i64, AddressError> {
        self.connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|source| match source.sqlite_error_code() {
                Some(ErrorCode::NotADatabase) => AddressError::NotADatabase {
                    path: self.path.clone(),
                },
                _ => self.fail("read", source),
            })
    }

    /// Starts a write transaction, waiting for other runs' writes.
    fn write(&mut self) -> Result<rusqlite::Transaction<'_>, AddressError> {
        let path = self.path.clone();
        self.connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| fail(&path, "lock", source))
    }

    fn fail(&self, doing: &'static str, source: rusqlite::Error) -> AddressError {
        fail(&self.path, doing, source)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives `claimant` an address on `network`: the one it holds already, or the lowest free
    /// one of the network's range. `declared` is the range the guest's configuration declares
    /// (recorded, replacing an older one); without it the recorded range is used.
    pub fn assign(
        &mut self,
        claimant: &Claimant,
        network: &str,
        declared: Option<&RangeRecord>,
    ) -> Result<(Holding, RangeRecord), AddressError> {
        let path = self.path.clone();
        let transaction = self.write()?;
        if let Some(record) = declared {
            put_range(&transaction, &path, record)?;
        }
        let range = ranges(&transaction, &path)?
            .into_iter()
            .find(|record| record.network == network)
            .ok_or_else(|| AddressError::NoRange {
                guest: claimant.guest.to_string(),
                network: network.to_string(),
                path: path.clone(),
            })?;
        let held = holdings(&transaction, &path)?;
        if let Some(own) = held
            .iter()
            .find(|holding| holding.guest == claimant.guest && holding.network == network)
        {
            let own = own.clone();
            commit(transaction, &path)?;
            return Ok((own, range));
        }
        let taken: BTreeSet<Ipv4Addr> = held.iter().map(|holding| holding.address).collect();
        let address = lowest_free(&range.range, &taken, Some(range.gateway)).ok_or_else(|| {
            AddressError::RangeFull {
                network: network.to_string(),
                range: range.range.to_string(),
            }
        })?;
        let holding = Holding {
            address,
            network: network.to_string(),
            guest: claimant.guest.to_string(),
            file: claimant.file.to_string(),
            origin: HoldingOrigin::Assigned,
        };
        insert(&transaction, &path, &holding)?;
        commit(transaction, &path)?;
        Ok((holding, range))
    }

    /// Records the addresses `claimant` declares by hand, after checking each: not held by
    /// another guest, not a gateway, inside a recorded range (when any range is recorded). The
    /// guest's holdings become exactly these; on any refusal nothing is changed.
    pub fn record_declared(
        &mut self,
        claimant: &Claimant,
        network: &str,
        addresses: &[Ipv4Addr],
        declared: Option<&RangeRecord>,
    ) -> Result<Vec<Holding>, AddressError> {
        let path = self.path.clone();
        let transaction = self.write()?;
        if let Some(record) = declared {
            put_range(&transaction, &path, record)?;
        }
        let ranges = ranges(&transaction, &path)?;
        let held = holdings(&transaction, &path)?;
        transaction
            .execute(
                "DELETE FROM holdings WHERE guest = ?1",
                params![claimant.guest],
            )
            .map_err(|source| fail(&path, "write", source))?;
        let mut recorded = Vec::new();
        for &address in addresses {
            if let Some(other) = held
                .iter()
                .find(|holding| holding.address == address && holding.guest != claimant.guest)
            {
                return Err(AddressError::HeldByAnother {
                    guest: claimant.guest.to_string(),
                    file: claimant.file.to_string(),
                    address: address.to_string(),
                    holder: other.guest.clone(),
                    holder_file: other.file.clone(),
                });
            }
            if let Some(range) = ranges.iter().find(|range| range.gateway == address) {
                return Err(AddressError::IsAGateway {
                    guest: claimant.guest.to_string(),
                    file: claimant.file.to_string(),
                    address: address.to_string(),
                    network: range.network.clone(),
                    declared_by: format!("{}, {}", range.declared_by, range.declared_in),
                });
            }
            let within = ranges
                .iter()
                .filter(|range| range.range.contains(address))
                .min_by_key(|range| range.network != network);
            let holding_network = match (within, ranges.is_empty()) {
                (Some(range), _) => range.network.clone(),
                // Without any range there is nothing to be outside of: the address is recorded
                // so that no other guest is given it.
                (None, true) => network.to_string(),
                (None, false) => {
                    return Err(AddressError::OutsideRanges {
                        guest: claimant.guest.to_string(),
                        file: claimant.file.to_string(),
                        address: address.to_string(),
                        path: path.clone(),
                    })
                }
            };
            let holding = Holding {
                address,
                network: holding_network,
                guest: claimant.guest.to_string(),
                file: claimant.file.to_string(),
                origin: HoldingOrigin::Declared,
            };
            insert(&transaction, &path, &holding)?;
            recorded.push(holding);
        }
        commit(transaction, &path)?;
        Ok(recorded)
    }

    /// Records which tenant `guest` belongs to (`None`: none), as its configuration says today.
    pub fn set_tenant(&mut self, guest: &str, tenant: Option<&str>) -> Result<(), AddressError> {
        let path = self.path.clone();
        let transaction = self.write()?;
        let changed = match tenant {
            Some(tenant) => transaction.execute(
                "INSERT INTO tenants (guest, tenant) VALUES (?1, ?2)
                 ON CONFLICT (guest) DO UPDATE SET tenant = excluded.tenant",
                params![guest, tenant],
            ),
            None => transaction.execute("DELETE FROM tenants WHERE guest = ?1", params![guest]),
        };
        changed.map_err(|source| fail(&path, "write", source))?;
        commit(transaction, &path)
    }

    /// Every tenant with the addresses its guests hold, lowest first.
    pub fn tenant_directory(&self) -> Result<TenantDirectory, AddressError> {
        let tenants: Vec<(String, String)> = {
            let mut statement = self
                .connection
                .prepare("SELECT guest, tenant FROM tenants")
                .map_err(|source| self.fail("read", source))?;
            let rows = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(|source| self.fail("read", source))?;
            rows.collect::<Result<_, _>>()
                .map_err(|source| self.fail("read", source))?
        };
        let held = holdings(&self.connection, &self.path)?;
        let mut directory = TenantDirectory::new();
        for (guest, tenant) in tenants {
            let addresses = directory.entry(tenant).or_default();
            addresses.extend(
                held.iter()
                    .filter(|holding| holding.guest == guest)
                    .map(|holding| holding.address),
            );
            addresses.sort();
        }
        Ok(directory)
    }

    /// Releases every address `guest` holds (and its tenant), returning what it held.
    pub fn release(&mut self, guest: &str) -> Result<Vec<Holding>, AddressError> {
        let path = self.path.clone();
        let transaction = self.write()?;
        let released: Vec<Holding> = holdings(&transaction, &path)?
            .into_iter()
            .filter(|holding| holding.guest == guest)
            .collect();
        transaction
            .execute("DELETE FROM holdings WHERE guest = ?1", params![guest])
            .map_err(|source| fail(&path, "write", source))?;
        transaction
            .execute("DELETE FROM tenants WHERE guest = ?1", params![guest])
            .map_err(|source| fail(&path, "write", source))?;
        commit(transaction, &path)?;
        Ok(released)
    }

    /// What `guest` holds, lowest address first.
    pub fn held_by(&self, guest: &str) -> Result<Vec<Holding>, AddressError> {
        Ok(holdings(&self.connection, &self.path)?
            .into_iter()
            .filter(|holding| holding.guest == guest)
            .collect())
    }

    /// Every recorded range and every holding, each in order.
    pub fn list(&self) -> Result<(Vec<RangeRecord>, Vec<Holding>), AddressError> {
        Ok((
            ranges(&self.connection, &self.path)?,
            holdings(&self.connection, &self.path)?,
        ))
    }
}

/// Refuses a file that exists and is not SQLite, before SQLite could write to it.
fn refuse_non_sqlite(path: &Path) -> Result<(), AddressError> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut header = Vec::with_capacity(16);
    let read = file.by_ref().take(16).read_to_end(&mut header);
    // An empty file is an empty database to SQLite; anything else must start with its header.
    if read.is_err() || (!header.is_empty() && header.as_slice() != SQLITE_HEADER) {
        return Err(AddressError::NotADatabase {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn fail(path: &Path, doing: &'static str, source: rusqlite::Error) -> AddressError {
    match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => AddressError::Busy {
            path: path.to_path_buf(),
            seconds: BUSY_WAIT.as_secs(),
        },
        Some(ErrorCode::NotADatabase) => AddressError::NotADatabase {
            path: path.to_path_buf(),
        },
        _ => AddressError::Database {
            doing,
            path: path.to_path_buf(),
            source,
        },
    }
}

fn commit(transaction: rusqlite::Transaction, path: &Path) -> Result<(), AddressError> {
    transaction
        .commit()
        .map_err(|source| fail(path, "write", source))
}

fn put_range(
    connection: &Connection,
    path: &Path,
    record: &RangeRecord,
) -> Result<(), AddressError> {
    connection
        .execute(
            "INSERT INTO ranges (network, range, gateway, resolvers, declared_by, declared_in)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (network) DO UPDATE SET range = ?2, gateway = ?3, resolvers = ?4,
                 declared_by = ?5, declared_in = ?6",
            params![
                record.network,
                record.range.to_string(),
                record.gateway.to_string(),
                record.resolvers.join(" "),
                record.declared_by,
                record.declared_in,
            ],
        )
        .map(|_| ())
        .map_err(|source| fail(path, "write", source))
}

fn insert(connection: &Connection, path: &Path, holding: &Holding) -> Result<(), AddressError> {
    connection
        .execute(
            "INSERT INTO holdings (address, network, guest, file, origin)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                holding.address.to_string(),
                holding.network,
                holding.guest,
                holding.file,
                holding.origin.as_str(),
            ],
        )
        .map(|_| ())
        .map_err(|source| fail(path, "write", source))
}

fn ranges(connection: &Connection, path: &Path) -> Result<Vec<RangeRecord>, AddressError> {
    let read = |source| fail(path, "read", source);
    let mut statement = connection
        .prepare(
            "SELECT network, range, gateway, resolvers, declared_by, declared_in
             FROM ranges ORDER BY network",
        )
        .map_err(read)?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
            ))
        })
        .map_err(read)?;
    let mut records = Vec::new();
    for row in rows {
        let (network, range, gateway, resolvers, declared_by, declared_in) = row.map_err(read)?;
        records.push(RangeRecord {
            network,
            range: AddressRange::parse(&range).map_err(|_| damaged(path))?,
            gateway: gateway.parse().map_err(|_| damaged(path))?,
            resolvers: resolvers.split_whitespace().map(String::from).collect(),
            declared_by,
            declared_in,
        });
    }
    Ok(records)
}

fn holdings(connection: &Connection, path: &Path) -> Result<Vec<Holding>, AddressError> {
    let read = |source| fail(path, "read", source);
    let mut statement = connection
        .prepare("SELECT address, network, guest, file, origin FROM holdings")
        .map_err(read)?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
            ))
        })
        .map_err(read)?;
    let mut list = Vec::new();
    for row in rows {
        let (address, network, guest, file, origin) = row.map_err(read)?;
        list.push(Holding {
            address: address.parse().map_err(|_| damaged(path))?,
            network,
            guest,
            file,
            origin: if origin == "declared" {
                HoldingOrigin::Declared
            } else {
                HoldingOrigin::Assigned
            },
        });
    }
    list.sort_by_key(|holding| holding.address);
    Ok(list)
}

/// A value SQLite kept but trog could not have written.
fn damaged(path: &Path) -> AddressError {
    AddressError::NotADatabase {
        path: path.to_path_buf(),
    }
}

/// The range a guest's `holdings` leave free, lowest first, at most `limit` of them.
pub fn free_addresses(range: &RangeRecord, held: &[Holding], limit: usize) -> Vec<Ipv4Addr> {
    let mut taken: BTreeSet<Ipv4Addr> = held.iter().map(|holding| holding.address).collect();
    let mut free = Vec::new();
    while free.len() < limit {
        match lowest_free(&range.range, &taken, Some(range.gateway)) {
            Some(address) => {
                taken.insert(address);
                free.push(address);
            }
            None => break,
        }
    }
    free
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
