//! `root-programs sudoers` and `root-programs install-script`: what a site needs to let trog's
//! account do, as root on a hypervisor, exactly the closed list of trog's root programs.

use crate::cli::values;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::machine::hypervisor_ops::root_programs::{install_script, sudoers_lines};
use crate::outln;

#[derive(Debug, clap::Args)]
pub struct RootProgramsArgs {
    #[command(subcommand)]
    pub action: RootProgramsAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum RootProgramsAction {
    /// Print the sudoers lines that let ACCOUNT run each of trog's root programs as root without
    /// a password, and nothing else (one line a program, for /etc/sudoers.d).
    Sudoers {
        /// The account trog runs as (on a remote hypervisor: the login its URI names).
        #[arg(long, value_name = "ACCOUNT", default_value = "trog", value_parser = values::account)]
        user: String,
    },
    /// Print a shell script that, run as root, installs trog's root programs into
    /// /usr/libexec/trog (e.g. `trog root-programs install-script --user admin | ssh admin@hv1 sudo sh`).
    InstallScript {
        /// Also install the sudoers file of this account (checked with `visudo -c` first).
        #[arg(long, value_name = "ACCOUNT", value_parser = values::account)]
        user: Option<String>,
        /// Install under this folder instead of `/` (a package's staging folder).
        #[arg(long, value_name = "DIR")]
        dest_dir: Option<std::path::PathBuf>,
    },
}

pub fn run(args: RootProgramsArgs) -> Result<ExitStatus, Failure> {
    match args.action {
        RootProgramsAction::Sudoers { user } => {
            for line in sudoers_lines(&user) {
                outln!("{line}");
            }
        }
        RootProgramsAction::InstallScript { user, dest_dir } => {
            let dest_dir = dest_dir
                .map(|dir| dir.display().to_string().trim_end_matches('/').to_string())
                .unwrap_or_default();
            crate::output::print::write_stdout_bytes(
                install_script(&dest_dir, user.as_deref()).as_bytes(),
            );
        }
    }
    Ok(ExitStatus::Success)
}
