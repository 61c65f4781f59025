//! One file per verb: each takes its parsed arguments and the global options, resolves the
//! settings it needs, does its work through the core and the backends, and prints.

pub mod addresses;
pub mod assign_ip;
pub mod backup;
pub mod debug_boot;
pub mod destroy;
pub mod fleet;
pub mod image;
pub mod inventory;
pub mod new_config;
pub mod new_guest;
pub mod preflight;
pub mod provision;
pub mod provision_all;
pub mod recipes;
pub mod restore;
pub mod shell_docs;
pub mod snapshot;
pub mod status;
pub mod status_all;
