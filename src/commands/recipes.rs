//! `recipes`: not yet written.

use crate::cli::GlobalArgs;
use crate::exit_status::ExitStatus;
use crate::report::Failure;

#[derive(Debug, clap::Args)]
pub struct RecipesArgs {}

pub fn run(_global: &GlobalArgs, _args: RecipesArgs) -> Result<ExitStatus, Failure> {
    todo!("recipes")
}
