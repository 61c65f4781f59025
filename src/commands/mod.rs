//! One file per verb: each takes its parsed arguments and the global options, resolves the
//! settings it needs, does its work through the core and the backends, and prints. `verbs` is
//! the list of verbs clap parses and the dispatch to each.

pub mod addresses;
pub mod assign_ip;
pub mod authorized_key;
pub mod backup;
pub mod debug_boot;
pub mod destroy;
pub mod fleet;
pub mod image;
pub mod inventory;
pub mod new_config;
pub mod new_guest;
pub mod preflight;
pub mod provision;
pub mod provision_all;
pub mod recipes;
pub mod restore;
pub mod root_programs;
pub mod shell_docs;
pub mod snapshot;
pub mod status;
pub mod status_all;
pub mod verbs;

/// What a workflow tells the user while it works (a lock it waits for, a warning about the
/// fleet), printed on stderr as it comes.
pub struct StderrReporter;

impl crate::workflow::reporter::Reporter for StderrReporter {
    fn say(&self, line: &str) {
        crate::errln!("{line}");
    }
}

/// The one line a run as root gets on stderr (the specification: "DO NOT USE ROOT TO RUN THIS!"),
/// wherever it runs: a terminal, cron's mail or the web button's log. Nothing turns it off; the
/// way to silence it is to run trog as its account. (The installer's verbs, which bin/setup runs
/// as root by design, do not warn: `verbs::Command::is_installer_verb`.)
pub const ROOT_WARNING: &str = "warning: trog runs as root here; run it as an account in group libvirt (hint: bin/setup makes one, `trog`: `sudo -u trog trog …`, and `trog root-programs sudoers` prints what it may do as root)";

/// The warning a run gets: [`ROOT_WARNING`] as root, nothing otherwise.
pub fn root_warning(running_as_root: bool) -> Option<&'static str> {
    running_as_root.then_some(ROOT_WARNING)
}

/// Prints [`root_warning`] once, before the verb runs: on stderr always, and with `--json` also
/// as a `message` event, so that a program reading only the events is told as well.
pub fn warn_when_root(json: bool) {
    let root = crate::machine::local::LocalMachine::running_as_root();
    if let Some(warning) = root_warning(root) {
        crate::errln!("{warning}");
        if json {
            crate::output::events::emit(&crate::output::events::Event::Message { text: warning });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::root_warning;

    #[test]
    fn root_is_warned_in_one_line_with_a_hint_and_no_one_else_is() {
        let warning = root_warning(true).unwrap();
        assert!(warning.starts_with("warning: trog runs as root"));
        assert!(warning.contains("hint: bin/setup"));
        assert!(!warning.contains('\n'));
        assert_eq!(root_warning(false), None);
    }
}
