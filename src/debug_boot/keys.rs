//! Keystrokes for a guest's keyboard: named keys (`esc`, `down`, `f12`…), single characters, and
//! `text:WORDS` typed one character at a time. Each becomes one key event (a key, or a key with
//! shift held), sent in order: libvirt presses every code of one event at once, as a chord.

/// Linux input key codes (`linux/input-event-codes.h`), which libvirt's LINUX code set takes.
const NAMED_KEYS: &[(&str, u32)] = &[
    ("esc", 1),
    ("backspace", 14),
    ("tab", 15),
    ("enter", 28),
    ("space", 57),
    ("f1", 59),
    ("f2", 60),
    ("f3", 61),
    ("f4", 62),
    ("f5", 63),
    ("f6", 64),
    ("f7", 65),
    ("f8", 66),
    ("f9", 67),
    ("f10", 68),
    ("f11", 87),
    ("f12", 88),
    ("home", 102),
    ("up", 103),
    ("pageup", 104),
    ("left", 105),
    ("right", 106),
    ("end", 107),
    ("down", 108),
    ("pagedown", 109),
    ("insert", 110),
    ("delete", 111),
];

const LEFT_SHIFT: u32 = 42;

/// A character's key on a US keyboard, and whether shift is held for it.
fn character_key(c: char) -> Option<(u32, bool)> {
    const ROWS: &[(&str, &str, u32)] = &[
        ("1234567890-=", "!@#$%^&*()_+", 2),
        ("qwertyuiop[]", "QWERTYUIOP{}", 16),
        ("asdfghjkl;'`", "ASDFGHJKL:\"~", 30),
        ("\\zxcvbnm,./", "|ZXCVBNM<>?", 43),
    ];
    if c == ' ' {
        return Some((57, false));
    }
    ROWS.iter().find_map(|(plain, shifted, first)| {
        let position = |row: &str| row.chars().position(|k| k == c);
        position(plain)
            .map(|i| (first + i as u32, false))
            .or_else(|| position(shifted).map(|i| (first + i as u32, true)))
    })
}

/// One key event: the codes pressed together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEvent {
    /// How the user wrote it, for messages.
    pub label: String,
    pub codes: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("unknown key `{}`", crate::untrusted::one_line(.0))]
    Unknown(String),
    #[error(
        "`{}` has a character no key types: `{}`",
        crate::untrusted::one_line(text),
        crate::untrusted::one_line(&character.to_string())
    )]
    Untypable { text: String, character: char },
    #[error("`text:` has no words after it: it types nothing")]
    EmptyText,
    #[error("--keys needs at least one key")]
    Empty,
}

impl crate::diagnose::Diagnose for KeyError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Usage
    }

    fn hint(&self) -> Option<String> {
        Some(valid_keys_hint())
    }
}

/// The names --keys knows, for the hint of an unknown one.
pub fn valid_keys_hint() -> String {
    let names: Vec<&str> = NAMED_KEYS.iter().map(|(name, _)| *name).collect();
    format!(
        "a key is one of: {}; or one character (a, Z, 1, /…); or text:WORDS, typed a character at a time",
        names.join(" ")
    )
}

fn event_for_character(label: String, c: char) -> Option<KeyEvent> {
    character_key(c).map(|(code, shifted)| KeyEvent {
        label,
        codes: if shifted {
            vec![LEFT_SHIFT, code]
        } else {
            vec![code]
        },
    })
}

/// Turns the arguments of `--keys` into key events, in order, or names the first that is not a
/// key (nothing is sent unless every one is).
pub fn parse_keys(arguments: &[String]) -> Result<Vec<KeyEvent>, KeyError> {
    if arguments.is_empty() {
        return Err(KeyError::Empty);
    }
    let mut events = Vec::new();
    for argument in arguments {
        if let Some(text) = argument.strip_prefix("text:") {
            if text.is_empty() {
                return Err(KeyError::EmptyText);
            }
            for c in text.chars() {
                events.push(event_for_character(c.to_string(), c).ok_or_else(|| {
                    KeyError::Untypable {
                        text: text.to_string(),
                        character: c,
                    }
                })?);
            }
            continue;
        }
        let lower = argument.to_ascii_lowercase();
        if let Some((_, code)) = NAMED_KEYS.iter().find(|(name, _)| *name == lower) {
            events.push(KeyEvent {
                label: lower,
                codes: vec![*code],
            });
            continue;
        }
        let mut chars = argument.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => events.push(
                event_for_character(argument.clone(), c)
                    .ok_or_else(|| KeyError::Unknown(argument.clone()))?,
            ),
            _ => return Err(KeyError::Unknown(argument.clone())),
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(words: &[&str]) -> Result<Vec<Vec<u32>>, KeyError> {
        let arguments: Vec<String> = words.iter().map(ToString::to_string).collect();
        parse_keys(&arguments).map(|events| events.into_iter().map(|e| e.codes).collect())
    }

    #[test]
    fn named_keys_and_characters_are_one_event_each_in_order() {
        assert_eq!(
            keys(&["esc", "Down", "2", "enter"]).unwrap(),
            [vec![1], vec![108], vec![3], vec![28]]
        );
    }

    #[test]
    fn text_is_typed_a_character_at_a_time_with_shift_where_needed() {
        assert_eq!(
            keys(&["text:sI 1"]).unwrap(),
            [vec![31], vec![42, 23], vec![57], vec![2]]
        );
    }

    #[test]
    fn an_unknown_key_is_named_and_the_hint_lists_the_valid_ones() {
        let error = keys(&["esc", "escape"]).unwrap_err();
        assert_eq!(error, KeyError::Unknown("escape".into()));
        let hint = crate::diagnose::Diagnose::hint(&error).unwrap();
        assert!(hint.contains("esc ") && hint.contains("pagedown") && hint.contains("text:"));
        assert_eq!(keys(&[]).unwrap_err(), KeyError::Empty);
        assert!(matches!(
            keys(&["text:é"]).unwrap_err(),
            KeyError::Untypable {
                character: 'é', ..
            }
        ));
    }

    #[test]
    fn refusals_show_characters_escaped_and_text_without_words_is_refused() {
        assert_eq!(
            keys(&["text:a\tb"]).unwrap_err().to_string(),
            "`a\\tb` has a character no key types: `\\t`"
        );
        assert_eq!(
            keys(&["a\u{1b}b"]).unwrap_err().to_string(),
            "unknown key `a\\x1bb`"
        );
        assert_eq!(keys(&["esc", "text:"]).unwrap_err(), KeyError::EmptyText);
    }
}
