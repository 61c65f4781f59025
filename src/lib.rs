//! trog: provision guests onto one or a few libvirt hypervisors from recipes.
//!
//! See ARCHITECTURE.md for the map of this crate and the rules each part keeps.

// The edge: command line, commands, reporting.
pub mod cli;
pub mod commands;
pub mod exit_status;
pub mod output;
pub mod report;

// The pure core: data, configuration parsing, recipes, rendering, placement.
pub mod config;
pub mod cookbook;
pub mod generate;
pub mod model;
pub mod placement;
pub mod plan;
pub mod preflight;
pub mod provision;
pub mod render;

// The backends: everything that talks to something outside this process.
pub mod credentials;
pub mod guest;
pub mod images;
pub mod libvirt;
pub mod machine;
pub mod secrets;
