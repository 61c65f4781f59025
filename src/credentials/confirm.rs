//! Confirming a destructive step by retyping a name, as `--destroy-data` and `--purge` require.

use crate::credentials::terminal_is_available;
use std::io::{BufRead, Write};

/// Whether the user confirmed: on a terminal, by typing `expected` after `warning`; without one,
/// by having said `--yes` on the command line (a script's authorization, since nobody can type).
pub fn confirmed_by_retyping(warning: &str, expected: &str, yes_without_terminal: bool) -> bool {
    if !terminal_is_available() {
        return yes_without_terminal;
    }
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let mut writer = &tty;
    let _ = write!(writer, "{warning} Type {expected} to go on: ");
    let mut answer = String::new();
    std::io::BufReader::new(&tty).read_line(&mut answer).is_ok() && answer.trim() == expected
}
