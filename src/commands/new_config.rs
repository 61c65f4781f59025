//! `new_config`: not yet written.

use crate::cli::GlobalArgs;
use crate::exit_status::ExitStatus;
use crate::report::Failure;

#[derive(Debug, clap::Args)]
pub struct NewConfigArgs {}

pub fn run(_global: &GlobalArgs, _args: NewConfigArgs) -> Result<ExitStatus, Failure> {
    todo!("new_config")
}
