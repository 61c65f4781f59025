//! `new_guest`: not yet written.

use crate::cli::GlobalArgs;
use crate::exit_status::ExitStatus;
use crate::report::Failure;

#[derive(Debug, clap::Args)]
pub struct NewGuestArgs {}

pub fn run(_global: &GlobalArgs, _args: NewGuestArgs) -> Result<ExitStatus, Failure> {
    todo!("new_guest")
}
