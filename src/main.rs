//! The `trog` binary: parse the command line, run the verb, report, exit.

use clap::Parser;

fn main() {
    // Output piped into `head` or a closed socket ends the program quietly, as it does for any
    // Unix tool, instead of panicking on a write to a closed pipe.
    // SAFETY: restoring the default disposition of a signal, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
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
