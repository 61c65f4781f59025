//! Credentials handed in on standard input with `--credentials`: `name: value` lines, read until a
//! blank line or the end of input.
//!
//! The format, precisely:
//! - one credential per line; the name is the text before the first `:` (surrounding blanks
//!   ignored), and it must be one trog knows ([`CredentialName`]); a misspelt name is an error, never
//!   something to skip, because a skipped `keypass` would quietly mean "ask for it" — and without a
//!   terminal that is a run that fails minutes later;
//! - the value is the rest of the line after the `:` and one space, kept as written (a passphrase may
//!   end in a blank); a line ending of `\n` or `\r\n` is not part of it; an empty value is an error;
//! - each name at most once;
//! - a line that is empty or blank ends the list, and nothing after it is read: the caller may keep
//!   its end of the pipe open, and a read past the blank line would wait for it forever.

use super::error::CredentialsError;
use super::secret::Secret;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, Read};
use std::time::Duration;
use zeroize::Zeroizing;

/// The credentials a run can need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CredentialName {
    /// The passphrase of the secret store, `secrets.kdbx`.
    Keepass,
    /// The sudo password of the login on the hypervisors.
    Sudo,
}

impl CredentialName {
    pub const ALL: [CredentialName; 2] = [CredentialName::Keepass, CredentialName::Sudo];

    pub fn as_str(self) -> &'static str {
        match self {
            CredentialName::Keepass => "keepass",
            CredentialName::Sudo => "sudo",
        }
    }

    /// What the credential is, in words, for prompts.
    pub fn description(self) -> &'static str {
        match self {
            CredentialName::Keepass => "passphrase of the secret store",
            CredentialName::Sudo => "sudo password on the hypervisor",
        }
    }

    pub fn parse(name: &str) -> Option<CredentialName> {
        CredentialName::ALL
            .into_iter()
            .find(|known| known.as_str() == name)
    }

    /// The known name `name` was probably meant to be: same letters in another case, a couple of
    /// typing slips away (`keypass`), or another name of the same thing.
    pub fn suggest(name: &str) -> Option<CredentialName> {
        let lowered = name.to_ascii_lowercase();
        if matches!(
            lowered.as_str(),
            "kdbx" | "keepassxc" | "keepass2" | "passphrase" | "secrets"
        ) {
            return Some(CredentialName::Keepass);
        }
        let known = crate::did_you_mean::nearest(
            &lowered,
            CredentialName::ALL.iter().map(|known| known.as_str()),
            |_| 2,
        )?;
        CredentialName::ALL
            .into_iter()
            .find(|name| name.as_str() == known)
    }

    /// "`keepass` and `sudo`", for messages.
    pub fn listing() -> String {
        let names: Vec<String> = CredentialName::ALL
            .iter()
            .map(|name| format!("`{name}`"))
            .collect();
        names.join(" and ")
    }
}

impl fmt::Display for CredentialName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The credentials a caller handed in, each with the line it came on.
#[derive(Debug, Default)]
pub struct HandedInCredentials {
    values: BTreeMap<CredentialName, (usize, Secret)>,
}

impl HandedInCredentials {
    /// Nothing handed in: every credential is asked for (or refused without a terminal).
    pub fn none() -> HandedInCredentials {
        HandedInCredentials::default()
    }

    pub fn get(&self, name: CredentialName) -> Option<&Secret> {
        self.values.get(&name).map(|(_, secret)| secret)
    }

    pub fn names(&self) -> impl Iterator<Item = CredentialName> + '_ {
        self.values.keys().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub(crate) fn into_values(self) -> impl Iterator<Item = (CredentialName, Secret)> {
        self.values
            .into_iter()
            .map(|(name, (_, secret))| (name, secret))
    }

    /// Adds one line's credential, refusing a name handed in before.
    fn insert(
        &mut self,
        line_number: usize,
        name: CredentialName,
        value: Secret,
    ) -> Result<(), CredentialsError> {
        if let Some((first_line_number, _)) = self.values.get(&name) {
            return Err(CredentialsError::Duplicate {
                line_number,
                first_line_number: *first_line_number,
                name,
            });
        }
        self.values.insert(name, (line_number, value));
        Ok(())
    }
}

/// Parses one line (without its line ending) into a name and a value.
pub fn parse_credential_line(
    line_number: usize,
    line: &str,
) -> Result<(CredentialName, Secret), CredentialsError> {
    let Some((written_name, rest)) = line.split_once(':') else {
        return Err(CredentialsError::NoColon { line_number });
    };
    let written_name = written_name.trim();
    let Some(name) = CredentialName::parse(written_name) else {
        return Err(CredentialsError::UnknownName {
            line_number,
            shown_name: looks_like_a_name(written_name).then(|| written_name.to_string()),
            suggestion: CredentialName::suggest(written_name),
        });
    };
    let value = rest.strip_prefix(' ').unwrap_or(rest);
    if value.is_empty() {
        return Err(CredentialsError::EmptyValue { line_number, name });
    }
    Ok((name, Secret::new(value)))
}

/// Whether text before a `:` may be repeated in an error: a line like `hunter2:x` is more likely a
/// value than a name, and errors never show values.
fn looks_like_a_name(text: &str) -> bool {
    (1..=32).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The most standard input `--credentials` reads: two credentials of any sane length fit many
/// times over, and a caller that pipes a file or an endless stream by mistake is refused instead
/// of read until memory runs out.
pub const MAX_HANDED_IN_BYTES: usize = 64 * 1024;

/// How long `--credentials` waits for the blank line (or the end of input) by default. A program
/// handing credentials in writes them at once; a person typing them has this long.
pub const DEFAULT_HANDED_IN_WAIT: Duration = Duration::from_secs(60);

/// Reads credentials from `reader` up to and including the first blank line, or to the end of input,
/// and reads nothing after it; at most [`MAX_HANDED_IN_BYTES`].
pub fn read_handed_in(reader: &mut impl BufRead) -> Result<HandedInCredentials, CredentialsError> {
    let mut handed_in = HandedInCredentials::none();
    let mut line_number = 0;
    let mut total = 0;
    loop {
        let mut bytes = Zeroizing::new(Vec::new());
        let room = MAX_HANDED_IN_BYTES - total;
        let length = (&mut *reader)
            .take(room as u64 + 1)
            .read_until(b'\n', &mut bytes)
            .map_err(CredentialsError::Read)?;
        if length == 0 {
            return Ok(handed_in);
        }
        if length > room {
            return Err(CredentialsError::TooLong {
                limit: MAX_HANDED_IN_BYTES,
            });
        }
        total += length;
        line_number += 1;
        let line =
            std::str::from_utf8(&bytes).map_err(|_| CredentialsError::NotUtf8 { line_number })?;
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            return Ok(handed_in);
        }
        let (name, value) = parse_credential_line(line_number, line)?;
        handed_in.insert(line_number, name, value)?;
    }
}

/// Parses credentials from text, as [`read_handed_in`] reads them.
/// Reads this process's standard input as [`read_handed_in`] does, giving up after `wait`: a
/// caller that never sends the blank line and never closes its end must not hold the run forever.
/// The reading thread is left blocked when the wait runs out; the run ends with the error.
pub fn read_standard_input_within(wait: Duration) -> Result<HandedInCredentials, CredentialsError> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(read_handed_in(&mut std::io::stdin().lock()));
    });
    match receiver.recv_timeout(wait) {
        Ok(result) => result,
        Err(_) => Err(CredentialsError::NoBlankLine {
            waited_seconds: wait.as_secs(),
        }),
    }
}

pub fn parse_handed_in(text: &str) -> Result<HandedInCredentials, CredentialsError> {
    read_handed_in(&mut text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Read};

    fn parse_error(text: &str) -> CredentialsError {
        parse_handed_in(text).expect_err("the input should be refused")
    }

    #[test]
    fn reads_both_names_until_the_blank_line() {
        let handed_in = parse_handed_in("keepass: correct horse\nsudo: s3cret\n\n").unwrap();
        assert_eq!(
            handed_in.get(CredentialName::Keepass).unwrap().expose(),
            "correct horse"
        );
        assert_eq!(
            handed_in.get(CredentialName::Sudo).unwrap().expose(),
            "s3cret"
        );
    }

    #[test]
    fn end_of_input_ends_the_list_too() {
        let handed_in = parse_handed_in("sudo: s3cret").unwrap();
        assert_eq!(
            handed_in.get(CredentialName::Sudo).unwrap().expose(),
            "s3cret"
        );
        assert!(handed_in.get(CredentialName::Keepass).is_none());
        assert!(parse_handed_in("").unwrap().is_empty());
    }

    #[test]
    fn a_blank_line_of_spaces_or_crlf_ends_the_list() {
        let handed_in = parse_handed_in("keepass: a\r\n  \r\nsudo: never read\n").unwrap();
        assert_eq!(
            handed_in.names().collect::<Vec<_>>(),
            vec![CredentialName::Keepass]
        );
        assert_eq!(
            handed_in.get(CredentialName::Keepass).unwrap().expose(),
            "a"
        );
    }

    #[test]
    fn the_value_is_kept_as_written_after_one_space() {
        let handed_in = parse_handed_in("keepass:  two spaces, a colon: and a tail \n").unwrap();
        assert_eq!(
            handed_in.get(CredentialName::Keepass).unwrap().expose(),
            " two spaces, a colon: and a tail "
        );
        let handed_in = parse_handed_in("  sudo :nospace\n").unwrap();
        assert_eq!(
            handed_in.get(CredentialName::Sudo).unwrap().expose(),
            "nospace"
        );
    }

    #[test]
    fn an_unknown_name_is_an_error_with_a_suggestion() {
        let error = parse_error("sudo: x\nkeypass: hunter2\n\n");
        assert!(matches!(
            error,
            CredentialsError::UnknownName {
                line_number: 2,
                suggestion: Some(CredentialName::Keepass),
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            "credentials line 2 names `keypass`, which is not a credential trog knows"
        );
        assert!(crate::diagnose::Diagnose::hint(&error)
            .unwrap()
            .starts_with("did you mean `keepass`?"));
        assert!(!format!("{error:?}").contains("hunter2"));
    }

    #[test]
    fn names_are_case_sensitive_but_suggested_in_the_right_case() {
        let error = parse_error("SUDO: x\n");
        assert!(matches!(
            error,
            CredentialsError::UnknownName {
                suggestion: Some(CredentialName::Sudo),
                ..
            }
        ));
        let error = parse_error("kdbx: x\n");
        assert!(matches!(
            error,
            CredentialsError::UnknownName {
                suggestion: Some(CredentialName::Keepass),
                ..
            }
        ));
        let error = parse_error("database: x\n");
        assert!(matches!(
            error,
            CredentialsError::UnknownName {
                suggestion: None,
                ..
            }
        ));
    }

    #[test]
    fn text_before_the_colon_that_may_be_a_secret_is_not_shown() {
        let error = parse_error("p@ss w0rd!:rest\n");
        assert!(matches!(
            error,
            CredentialsError::UnknownName {
                shown_name: None,
                ..
            }
        ));
        assert!(!error.to_string().contains("p@ss"));
    }

    #[test]
    fn a_duplicate_name_is_an_error_naming_both_lines() {
        let error = parse_error("keepass: one\nsudo: x\nkeepass: two\n\n");
        assert!(matches!(
            error,
            CredentialsError::Duplicate {
                line_number: 3,
                first_line_number: 1,
                name: CredentialName::Keepass
            }
        ));
        let message = error.to_string();
        assert!(
            !message.contains("one") && !message.contains("two"),
            "{message}"
        );
    }

    #[test]
    fn a_line_without_a_colon_is_an_error_without_the_line() {
        let error = parse_error("keepass: a\nhunter2\n\n");
        assert!(matches!(
            error,
            CredentialsError::NoColon { line_number: 2 }
        ));
        assert!(!error.to_string().contains("hunter2"));
    }

    #[test]
    fn an_empty_value_is_an_error() {
        assert!(matches!(
            parse_error("keepass: \n"),
            CredentialsError::EmptyValue {
                line_number: 1,
                name: CredentialName::Keepass
            }
        ));
        assert!(matches!(
            parse_error("sudo:\n"),
            CredentialsError::EmptyValue {
                line_number: 1,
                name: CredentialName::Sudo
            }
        ));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_an_error() {
        let error = read_handed_in(&mut &b"keepass: \xff\xfe\n\n"[..]).unwrap_err();
        assert!(matches!(
            error,
            CredentialsError::NotUtf8 { line_number: 1 }
        ));
    }

    /// Hands out its bytes a few at a time, then fails the test if anything reads past them:
    /// the stand-in for a caller that never closes its end of the pipe.
    struct ReaderThatMustNotBeReadPast {
        bytes: &'static [u8],
        position: usize,
    }

    impl Read for ReaderThatMustNotBeReadPast {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            assert!(
                self.position < self.bytes.len(),
                "read past the blank line: this would block forever"
            );
            let end = (self.position + 3)
                .min(self.bytes.len())
                .min(self.position + buffer.len());
            let chunk = &self.bytes[self.position..end];
            buffer[..chunk.len()].copy_from_slice(chunk);
            self.position = end;
            Ok(chunk.len())
        }
    }

    #[test]
    fn stops_at_the_blank_line_without_reading_further() {
        let mut reader = io::BufReader::new(ReaderThatMustNotBeReadPast {
            bytes: b"keepass: pass\nsudo: word\n\n",
            position: 0,
        });
        let handed_in = read_handed_in(&mut reader).unwrap();
        assert_eq!(
            handed_in.get(CredentialName::Sudo).unwrap().expose(),
            "word"
        );
    }

    #[test]
    fn endless_input_is_refused_at_the_limit() {
        let mut endless = io::BufReader::new(io::repeat(b'x'));
        let error = read_handed_in(&mut endless).unwrap_err();
        assert!(matches!(error, CredentialsError::TooLong { .. }), "{error}");
        let many_lines = "keepass: x\n".repeat(MAX_HANDED_IN_BYTES);
        assert!(parse_handed_in(&many_lines).is_err());
    }
}
