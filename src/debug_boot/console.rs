//! Reading a boot from a serial console capture: cutting the bytes as they come into lines, and
//! telling from a line whether the boot has got somewhere it will stay (a login prompt, a kernel
//! panic, a rescue shell). Silence and the total bound are the caller's clock.

use serde::Serialize;
use std::time::Duration;

/// Why a console capture stopped being read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum ConsoleEnd {
    /// The guest printed a login prompt: it booted.
    LoginPrompt,
    /// The kernel panicked; nothing more comes.
    KernelPanic,
    /// systemd's rescue or emergency shell is asking for the root password (or says it cannot).
    RescueShell,
    /// Nothing new for this long.
    Silence { seconds: u64 },
    /// The whole capture took this long without ending otherwise.
    TotalBound { seconds: u64 },
}

impl ConsoleEnd {
    pub fn silence(bound: Duration) -> ConsoleEnd {
        ConsoleEnd::Silence {
            seconds: bound.as_secs(),
        }
    }

    pub fn total(bound: Duration) -> ConsoleEnd {
        ConsoleEnd::TotalBound {
            seconds: bound.as_secs(),
        }
    }
}

impl std::fmt::Display for ConsoleEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsoleEnd::LoginPrompt => write!(f, "the guest reached a login prompt"),
            ConsoleEnd::KernelPanic => write!(f, "the kernel panicked"),
            ConsoleEnd::RescueShell => write!(f, "the guest is in its rescue shell"),
            ConsoleEnd::Silence { seconds } => write!(
                f,
                "the console was silent for {seconds}s; a hang is the last line before the silence"
            ),
            ConsoleEnd::TotalBound { seconds } => {
                write!(
                    f,
                    "the capture reached its bound of {seconds}s and was stopped"
                )
            }
        }
    }
}

/// Whether `line` (complete, or the unfinished last one, which is how a prompt arrives) shows
/// the boot somewhere it stays.
pub fn end_shown_by(line: &str) -> Option<ConsoleEnd> {
    let line = line.trim_end();
    if line.contains("Kernel panic - not syncing") {
        return Some(ConsoleEnd::KernelPanic);
    }
    if line.contains("Give root password for maintenance")
        || line.contains("Cannot open access to console, the root account is locked")
        || line.contains("Press Enter for maintenance")
    {
        return Some(ConsoleEnd::RescueShell);
    }
    // getty's prompt: `HOSTNAME login:` at the start of a line. getty ends it with no newline,
    // so whatever the guest prints next on the console (cloud-init's last messages, often)
    // continues the same line: the prompt is seen whatever follows it.
    let words: Vec<&str> = line.split_whitespace().collect();
    if let [_host, "login:", ..] = words.as_slice() {
        return Some(ConsoleEnd::LoginPrompt);
    }
    None
}

/// Cuts a byte stream into lines as it arrives. Control sequences (colours, cursor moves of the
/// firmware and systemd) and carriage returns are dropped so that the lines read as text.
#[derive(Debug, Default)]
pub struct LineCutter {
    pending: String,
}

impl LineCutter {
    /// Adds `bytes`, returning the lines they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.push_str(&String::from_utf8_lossy(bytes));
        let mut lines = Vec::new();
        while let Some(at) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=at).collect();
            lines.push(clean(&line[..line.len() - 1]));
        }
        lines
    }

    /// The unfinished last line (a prompt waits there), cleaned.
    pub fn unfinished(&self) -> String {
        clean(&self.pending)
    }

    /// Ends the stream: the unfinished line, if any, as a last line.
    pub fn finish(&mut self) -> Option<String> {
        let rest = clean(&std::mem::take(&mut self.pending));
        (!rest.trim().is_empty()).then_some(rest)
    }
}

/// `text` without terminal control sequences and carriage returns.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ parameters final-byte; other escapes are two characters.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {}
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_of_a_boot_are_recognised() {
        assert_eq!(
            end_shown_by("debian login: "),
            Some(ConsoleEnd::LoginPrompt)
        );
        assert_eq!(
            end_shown_by(
                "[    3.1] Kernel panic - not syncing: Requested init /nope failed (error -2)."
            ),
            Some(ConsoleEnd::KernelPanic)
        );
        assert_eq!(
            end_shown_by("Cannot open access to console, the root account is locked."),
            Some(ConsoleEnd::RescueShell)
        );
        assert_eq!(
            end_shown_by(
                "dbg-1 login: [   44.4] cloud-init[402]: Cloud-init v. 22.4.2 running 'modules:config'"
            ),
            Some(ConsoleEnd::LoginPrompt),
            "the prompt, then the guest's next console output on the same line"
        );
        assert_eq!(end_shown_by("login: "), None);
        assert_eq!(
            end_shown_by("[  OK  ] Started systemd-logind.service - User Login Management."),
            None
        );
        assert_eq!(end_shown_by("[  OK  ] Started getty@tty1.service"), None);
    }

    #[test]
    fn lines_are_cut_as_bytes_arrive_and_control_sequences_dropped() {
        let mut cutter = LineCutter::default();
        assert!(cutter.feed(b"Sea").is_empty());
        assert_eq!(
            cutter.feed(b"BIOS\r\n[\x1b[0;32m  OK  \x1b[0m] Reached"),
            ["SeaBIOS"]
        );
        assert_eq!(
            cutter.feed(b" target\nhost login: "),
            ["[  OK  ] Reached target"]
        );
        assert_eq!(cutter.unfinished(), "host login: ");
        assert_eq!(cutter.finish().as_deref(), Some("host login: "));
        assert_eq!(cutter.finish(), None);
    }
}
