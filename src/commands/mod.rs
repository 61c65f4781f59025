//! One file per verb: each takes its parsed arguments and the global options, resolves the
//! settings it needs, does its work through the core and the backends, and prints.

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

/// What a workflow tells the user while it works (a lock it waits for, a warning about the
/// fleet), printed on stderr as it comes.
pub struct StderrReporter;

impl crate::workflow::reporter::Reporter for StderrReporter {
    fn say(&self, line: &str) {
        crate::errln!("{line}");
    }
}

/// The warning a run as root gets (the specification: "DO NOT USE ROOT TO RUN THIS!"), when it
/// gets one: on a terminal only, where a person reads it. A run without one (cron, the web
/// button, a test suite) is told nothing here: the bin/ entry points started as root run trog as
/// its account instead, and `preflight` notes a run as root in every output.
pub fn root_warning(running_as_root: bool, stderr_is_terminal: bool) -> Option<&'static str> {
    (running_as_root && stderr_is_terminal).then_some(
        "warning: trog runs as root here; run it as an account in group libvirt (hint: bin/setup makes one, `trog`: `sudo -u trog trog …`, and `trog root-programs sudoers` prints what it may do as root)",
    )
}

/// Prints [`root_warning`] on stderr, once, before the verb runs.
pub fn warn_when_root() {
    use std::io::IsTerminal;
    let root = crate::machine::local::LocalMachine::running_as_root();
    if let Some(warning) = root_warning(root, std::io::stderr().is_terminal()) {
        crate::errln!("{warning}");
    }
}

#[cfg(test)]
mod tests {
    use super::root_warning;

    #[test]
    fn root_is_warned_on_a_terminal_once_in_one_line_with_a_hint() {
        let warning = root_warning(true, true).unwrap();
        assert!(warning.starts_with("warning: trog runs as root"));
        assert!(warning.contains("hint: bin/setup"));
        assert!(!warning.contains('\n'));
        assert_eq!(root_warning(true, false), None);
        assert_eq!(root_warning(false, true), None);
    }
}
