//! What trog prints: tables and text for people on stdout, progress on stderr, and one JSON
//! event per line with `--json`. Every write goes through `print`, which neither panics nor
//! stops the run when a reader goes away.

pub mod events;
pub mod print;
pub mod progress;
