//! `provision --all`'s arguments the command checks itself (`--parallel` only with `--all`); its
//! summary is `provision::site_summary`.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;

/// `--parallel` given to a `provision` of named guests, which converges them in turn.
#[derive(Debug, thiserror::Error)]
#[error(
    "--parallel bounds how many guests `provision --all` converges at once, and --all is not given"
)]
pub struct ParallelWithoutAll;

impl Diagnose for ParallelWithoutAll {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Usage
    }

    fn hint(&self) -> Option<String> {
        Some("add --all, or leave --parallel out".into())
    }
}
