//! Addresses: the ranges trog hands out from, per libvirt network or bridge, and who holds each
//! address, kept in `ips.db` beside the configuration.
//!
//! `range` is the pure part (parsing a range, choosing the lowest free address); `store` is the
//! SQLite file; `settle` decides, for one guest's configuration, which address it has.

pub mod error;

pub mod settle;
pub mod store;

pub use crate::model::address_range::AddressRange;
pub use error::AddressError;
pub use store::{AddressBook, Claimant, Holding, HoldingOrigin, RangeRecord};
