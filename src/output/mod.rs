//! What trog prints: tables and text for people on stdout, progress on stderr, and one JSON
//! event per line with `--json`.

pub mod events;
pub mod progress;
pub mod untrusted;
