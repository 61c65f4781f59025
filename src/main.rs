//! The `trog` binary: parse the command line, run the verb, report, exit.

use clap::Parser;

fn main() {
    let cli = trog::cli::Cli::parse();
    let status = match trog::cli::run(cli) {
        Ok(status) => status,
        Err(failure) => {
            trog::report::print_failure(&failure);
            failure.status
        }
    };
    std::process::exit(status.code());
}
