//! The `trog` binary: parse the command line, run the verb, report, exit.

use clap::Parser;

fn main() {
    // SIGPIPE stays ignored, as Rust leaves it: a command on the far side of a pipe that stops
    // reading (ssh to a host whose pool is full, a link that drops) is then an error trog
    // reports and cleans up after, not a signal that kills it mid-step. A reader of trog's own
    // output that goes away (`trog recipes | head -1`) is handled where trog prints
    // (`output::print`): the run goes on quietly and ends with its own status.
    let cli = match trog::commands::verbs::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => trog::report::exit_on_bad_command_line(error),
    };
    let json = cli.global.json;
    if !cli.command.is_installer_verb() {
        trog::commands::warn_when_root(json);
    }
    let status = match trog::commands::verbs::run(cli).and_then(|status| {
        trog::output::print::finish_stdout()?;
        Ok(status)
    }) {
        Ok(status) => status,
        Err(failure) => {
            trog::report::report_failure(&failure, json);
            failure.status
        }
    };
    std::process::exit(status.code());
}
