//! The arguments several verbs share, declared once: the options every verb takes
//! ([`GlobalArgs`]), the guest a verb acts on (`target`), and every argument's type and check
//! (`values`). The verbs themselves, and the dispatch to them, are `commands/`'s.

pub mod target;
pub mod values;

use crate::config::paths::InstallationPaths;
use crate::lock::{lock_dir_for_store, Locks, DEFAULT_LOCK_WAIT};
use clap::Args;
use std::path::PathBuf;
use values::Seconds;

/// Options every verb takes.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Read the installation's recipes from this file instead of `recipes.yaml` in the
    /// configuration directory.
    #[arg(long, global = true, value_name = "FILE")]
    pub recipes: Option<PathBuf>,
    /// Read the fleet from this file instead of `hypervisors.conf` in the configuration directory.
    #[arg(long, global = true, value_name = "FILE")]
    pub hvconf: Option<PathBuf>,
    /// Read credentials (`keepass: …`, `sudo: …`) from standard input, one per line, until a
    /// blank line. Nothing reads standard input without this flag.
    #[arg(long, global = true)]
    pub credentials: bool,
    /// How long `--credentials` waits for the blank line that ends them (or the end of input).
    #[arg(long, global = true, value_name = "SECONDS",
          default_value_t = Seconds(crate::credentials::DEFAULT_HANDED_IN_WAIT.as_secs()),
          value_parser = values::seconds(1, 3600))]
    pub credentials_wait: Seconds,
    /// Print machine-readable output: JSON on stdout, one event per line for progress.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for another run that holds what this one needs (the guest, the secret
    /// store, the upload of a base image) before giving up with exit status 10.
    #[arg(long, global = true, value_name = "SECONDS",
          default_value_t = Seconds(DEFAULT_LOCK_WAIT.as_secs()),
          value_parser = values::seconds(0, values::LONGEST_SECONDS))]
    pub wait: Seconds,
}

impl GlobalArgs {
    /// How long to wait for credentials on standard input; `None` without `--credentials`, when
    /// standard input is never read.
    pub fn credentials_input(&self) -> Option<std::time::Duration> {
        self.credentials.then(|| self.credentials_wait.duration())
    }

    /// The installation's files for this run: its environment and the files the options replace.
    pub fn installation_paths(&self) -> InstallationPaths {
        InstallationPaths::from_environment(self.recipes.as_deref(), self.hvconf.as_deref())
    }

    /// The locks between runs of the installation, for `verb`, with this run's `--wait`; a wait
    /// is never silent: one the workflow does not tell itself is said on stderr.
    pub fn locks(&self, verb: &str) -> Locks {
        Locks::new(
            lock_dir_for_store(&self.installation_paths().secrets_kdbx),
            self.wait.duration(),
            verb,
        )
        .reporting_waits_to(std::sync::Arc::new(|text: &str| crate::errln!("{text}")))
    }
}
