//! A freshly built guest: waiting until it can be reached, and finishing it over SSH.

pub mod finish;
pub mod wait;
