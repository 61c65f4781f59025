//! The `trog` binary: parse the command line, run the verb, report, exit.

use clap::Parser;

fn main() {
    // Output piped into `head` or a closed socket ends the program quietly, as it does for any
    // Unix tool, instead of panicking on a write to a closed pipe.
    // SAFETY: restoring the default disposition of a signal, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match trog::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => trog::report::exit_on_bad_command_line(error),
    };
    let json = cli.global.json;
    let status = match trog::cli::run(cli) {
        Ok(status) => status,
        Err(failure) => {
            trog::report::report_failure(&failure, json);
            failure.status
        }
    };
    std::process::exit(status.code());
}
