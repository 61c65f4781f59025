//! What can go wrong getting a credential. No message here ever holds a credential's value: the
//! variants carry line numbers and names, never the text after a `:`.

use super::handed_in::CredentialName;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::io;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read credentials from standard input")]
    Read(#[source] io::Error),

    #[error("no blank line ended the credentials on standard input within {waited_seconds}s, and the input was not closed")]
    NoBlankLine { waited_seconds: u64 },

    #[error("the credentials on standard input are longer than {limit} bytes")]
    TooLong { limit: usize },

    #[error("credentials line {line_number} is not valid UTF-8")]
    NotUtf8 { line_number: usize },

    #[error("credentials line {line_number} has no `:` between a name and a value")]
    NoColon { line_number: usize },

    #[error("credentials line {line_number} {}", describe_unknown(.shown_name.as_deref()))]
    UnknownName {
        line_number: usize,
        /// The name as written, when it looks like a name; `None` when it might be a value
        /// written without its name (so it is not repeated).
        shown_name: Option<String>,
        suggestion: Option<CredentialName>,
    },

    #[error("credentials line {line_number} hands in `{name}` again (first on line {first_line_number})")]
    Duplicate {
        line_number: usize,
        first_line_number: usize,
        name: CredentialName,
    },

    #[error("credentials line {line_number} hands in `{name}` with an empty value")]
    EmptyValue {
        line_number: usize,
        name: CredentialName,
    },

    #[error("the credential `{name}` is needed {purpose}; it was not handed in and there is no terminal to ask on")]
    NoTerminal {
        name: CredentialName,
        purpose: String,
    },

    #[error("cannot ask for the credential `{name}` on the terminal")]
    Prompt {
        name: CredentialName,
        #[source]
        source: io::Error,
    },

    #[error("the credential `{name}` typed on the terminal is empty")]
    EmptyAnswer { name: CredentialName },

    #[error("the two entries of the credential `{name}` differ")]
    Mismatch { name: CredentialName },
}

fn describe_unknown(shown_name: Option<&str>) -> String {
    match shown_name {
        Some(name) => format!("names `{name}`, which is not a credential trog knows"),
        None => "does not start with the name of a credential trog knows (the text before `:` is not shown: it may be a secret)".to_string(),
    }
}

/// The line a caller writes to hand `name` in on standard input.
fn hand_in_example(name: CredentialName) -> String {
    format!("printf '{name}: %s\\n\\n' \"$VALUE\" | trog … --credentials")
}

const FORMAT_HINT: &str = "hand credentials in as `name: value` lines ending with a blank line, \
     e.g. printf 'keepass: %s\\nsudo: %s\\n\\n' \"$PASSPHRASE\" \"$SUDO\" | trog … --credentials";

impl Diagnose for CredentialsError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Credentials
    }

    fn hint(&self) -> Option<String> {
        match self {
            CredentialsError::Read(_) => Some(
                "pipe the credentials into trog's standard input, or leave out --credentials to be asked on a terminal"
                    .to_string(),
            ),
            CredentialsError::NotUtf8 { .. }
            | CredentialsError::NoColon { .. }
            | CredentialsError::NoBlankLine { .. }
            | CredentialsError::TooLong { .. } => Some(FORMAT_HINT.to_string()),
            CredentialsError::UnknownName { suggestion: Some(known), .. } => Some(format!(
                "did you mean `{known}`? The names trog knows are {}",
                CredentialName::listing()
            )),
            CredentialsError::UnknownName { suggestion: None, .. } => {
                Some(format!("the names trog knows are {}", CredentialName::listing()))
            }
            CredentialsError::Duplicate { .. } => Some("hand each credential in once".to_string()),
            CredentialsError::EmptyValue { name, .. } => Some(format!(
                "leave `{name}` out to be asked for it on a terminal; an empty value is never meant"
            )),
            CredentialsError::NoTerminal { name: name @ CredentialName::Keepass, .. } => Some(format!(
                "hand it in on standard input: {}",
                hand_in_example(*name)
            )),
            CredentialsError::NoTerminal { name: name @ CredentialName::Sudo, .. } => Some(format!(
                "hand it in on standard input: {}\nor let the login run trog's root programs on the hypervisor without a password \
                 (the sudoers lines `trog root-programs sudoers --user USER` prints)",
                hand_in_example(*name)
            )),
            CredentialsError::Prompt { name, .. } => Some(format!(
                "run trog from a terminal, or hand `{name}` in: {}",
                hand_in_example(*name)
            )),
            CredentialsError::EmptyAnswer { .. } => Some("type the value, then Enter".to_string()),
            CredentialsError::Mismatch { .. } => Some("run again and type the same value twice".to_string()),
        }
    }
}
