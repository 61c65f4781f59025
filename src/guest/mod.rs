//! A freshly built guest: waiting until it can be reached, restoring its newest backup, and finishing it over
//! SSH.

pub mod backup;
pub mod cloud_init;
pub mod finish;
pub mod retire_seed;
pub mod wait;
