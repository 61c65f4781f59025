//! What can go wrong with addresses and `ips.db`.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("{path} is not an SQLite database (ips.db holds trog's address assignments)")]
    NotADatabase { path: PathBuf },
    #[error(
        "{path} was written by a newer trog (schema version {found}; this one knows up to {known})"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("could not copy {path} to {backup} before changing its schema")]
    Backup {
        path: PathBuf,
        backup: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("another run held {path} for longer than {seconds} seconds")]
    Busy { path: PathBuf, seconds: u64 },
    #[error("could not {doing} {path}")]
    Database {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{guest} has no address range on {network}: `address_range` is set neither for it nor by any guest recorded in {path}")]
    NoRange {
        guest: String,
        network: String,
        path: PathBuf,
    },
    #[error("the range {range} of {network} is full: every address is held")]
    RangeFull { network: String, range: String },
    #[error("{guest} ({file}) declares {address}, which {holder} ({holder_file}) already holds")]
    HeldByAnother {
        guest: String,
        file: String,
        address: String,
        holder: String,
        holder_file: String,
    },
    #[error(
        "{guest} ({file}) declares {address}, the gateway of {network} (declared by {declared_by})"
    )]
    IsAGateway {
        guest: String,
        file: String,
        address: String,
        network: String,
        /// The guest and file that declared the range: `base.test, recipes.yaml`.
        declared_by: String,
    },
    #[error("{guest} ({file}) declares {address}, which is outside every address range in {path}")]
    OutsideRanges {
        guest: String,
        file: String,
        address: String,
        path: PathBuf,
    },
    #[error("{guest} ({file}) declares `address_range` without `gateway`: a static address needs its default route")]
    RangeWithoutGateway {
        guest: String,
        /// Where `address_range` was written (`file:line:column`).
        file: String,
    },
    #[error("{guest} ({file}) sets `tenant` but has no static address: guests of other tenants are kept from it by its address")]
    TenantWithoutAddress {
        guest: String,
        /// Where `tenant` was written (`file:line:column`).
        file: String,
    },
}

impl Diagnose for AddressError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            AddressError::NotADatabase { .. } | AddressError::NewerSchema { .. } => {
                ExitStatus::DamagedStore
            }
            AddressError::Busy { .. } => ExitStatus::Busy,
            AddressError::Backup { .. } | AddressError::Database { .. } => ExitStatus::Failure,
            _ => ExitStatus::Configuration,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            AddressError::NotADatabase { .. } => "move the file aside (trog never overwrites it); a missing ips.db is created anew, empty".into(),
            AddressError::NewerSchema { .. } => "run the trog that wrote it".into(),
            AddressError::Busy { .. } => "try again when the other run has finished".into(),
            AddressError::NoRange { .. } => "set `address_range` (with `gateway`) in `_global`; docs/NETWORK.md shows how".into(),
            AddressError::RangeFull { .. } => "widen `address_range`, or free an address with `trog destroy --purge`".into(),
            AddressError::HeldByAnother { .. } | AddressError::IsAGateway { .. } => "remove `ips` to be given a free address, or pick one that `trog addresses` lists as free".into(),
            AddressError::OutsideRanges { .. } => "declare an `address_range` that holds it, or pick an address `trog addresses` lists".into(),
            AddressError::RangeWithoutGateway { .. } => "set `gateway` beside `address_range`".into(),
            AddressError::TenantWithoutAddress { .. } => "declare `address_range` and `gateway` in `_global` so trog hands it an address, or write its `ips` (docs/NETWORK.md)".into(),
            AddressError::Backup { .. } | AddressError::Database { .. } => return None,
        })
    }
}
