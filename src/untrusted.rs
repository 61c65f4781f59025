//! Text a guest, QEMU or a remote command wrote, made safe to print and to put in JSON.
//!
//! A console tail or a make log can hold escape sequences (a clear screen, a window title, a
//! cursor moved up over trog's own lines), a carriage return that hides what came before it, or
//! bytes that are not UTF-8. What a terminal would act on is shown as a visible escape instead,
//! so the reader sees what the guest wrote and the terminal stays trog's.

use std::fmt::Write as _;

/// `bytes` as text with every control character but newline and tab shown as an escape: C0
/// controls and DEL as `\x1b`, C1 controls and the bidirectional overrides (which reorder what
/// follows on screen) as `\u{9b}`, a byte that is not UTF-8 as `\xff`. A carriage return right
/// before a newline is dropped: a serial console ends its lines so, and nothing is hidden by it.
pub fn untrusted_text(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        let mut chars = chunk.valid().chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' | '\t' => text.push(c),
                '\r' if chars.peek() == Some(&'\n') => {}
                '\u{0}'..='\u{1f}' | '\u{7f}' => {
                    let _ = write!(text, "\\x{:02x}", u32::from(c));
                }
                '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                    let _ = write!(text, "\\u{{{:x}}}", u32::from(c));
                }
                _ => text.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(text, "\\x{byte:02x}");
        }
    }
    text
}

/// [`untrusted_text`] for text already decoded (a lossy decoding keeps its U+FFFD marks).
pub fn untrusted_str(text: &str) -> String {
    untrusted_text(text.as_bytes())
}

/// `text` for quoting on one line of a message: [`untrusted_str`], with a tab and a newline shown
/// as `\t` and `\n` too.
pub fn one_line(text: &str) -> String {
    untrusted_str(text)
        .replace('\t', "\\t")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_shows_tabs_newlines_and_controls() {
        assert_eq!(one_line("a\tb\nc\u{1b}[2J é"), r"a\tb\nc\x1b[2J é");
        assert_eq!(one_line("\"quoted\" 'x'"), "\"quoted\" 'x'");
    }

    #[test]
    fn a_clear_screen_and_a_window_title_are_shown_not_done() {
        assert_eq!(
            untrusted_text(b"boot\x1b[2J\x1b]0;pwned\x07 done"),
            r"boot\x1b[2J\x1b]0;pwned\x07 done"
        );
        let shown = untrusted_text(b"\x1b]2;title\x1b\\");
        assert!(!shown.contains('\u{1b}'), "{shown}");
    }

    #[test]
    fn a_carriage_return_that_would_hide_text_is_shown() {
        assert_eq!(untrusted_text(b"real\rfake\n"), "real\\x0dfake\n");
        assert_eq!(
            untrusted_text(b"line one\r\nline two\r\n"),
            "line one\nline two\n"
        );
    }

    #[test]
    fn newlines_tabs_and_unicode_stay() {
        assert_eq!(untrusted_text("a\tb\nné ✓".as_bytes()), "a\tb\nné ✓");
    }

    #[test]
    fn c1_controls_and_direction_overrides_are_shown() {
        assert_eq!(untrusted_str("a\u{9b}2Jb"), r"a\u{9b}2Jb");
        assert_eq!(untrusted_str("x\u{202e}cod.exe"), r"x\u{202e}cod.exe");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_bytes() {
        assert_eq!(untrusted_text(b"ok\xff\xfe end\xc3"), r"ok\xff\xfe end\xc3");
        assert_eq!(untrusted_text(b"\xc3\xa9"), "é");
    }
}
