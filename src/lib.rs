//! trog: provision guests onto one or a few libvirt hypervisors from recipes.
//!
//! See ARCHITECTURE.md for the map of this crate and the rules each part keeps.

// The edge: command line, commands, reporting.
pub mod cli;
pub mod commands;
pub mod output;
pub mod report;

// The vocabulary of failure, shared by every layer: exit statuses and what an error says of itself.
pub mod diagnose;
pub mod did_you_mean;
pub mod exit_status;
pub mod untrusted;

// The pure core: data, configuration parsing, recipes, rendering, placement.
pub mod addresses;
pub mod backup;
pub mod config;
pub mod cookbook;
pub mod debug_boot;
pub mod generate;
pub mod inventory;
pub mod model;
pub mod placement;
pub mod plan;
pub mod preflight;
pub mod provision;
pub mod render;
pub mod snapshot;
pub mod snapshot_space;

// What the workflows ask of the hypervisor holding a guest, whichever backend answers.
pub mod hypervisor;

// The workflows of the verbs that act on an existing guest: locate it, open its hypervisor, act.
pub mod workflow;

// The backends: everything that talks to something outside this process.
pub mod credentials;
pub mod guest;
pub mod images;
pub mod libvirt;
pub mod lock;
pub mod machine;
pub mod secrets;

#[cfg(test)]
mod layering_tests;
