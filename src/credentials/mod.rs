//! Credentials a run needs (`keepass`, `sudo`): read from standard input with `--credentials`,
//! asked for on a terminal, or refused with an error when there is nobody to ask.
//!
//! Architecture Invariant: no value of a credential reaches a message. Values live in [`Secret`],
//! whose Debug and Display print `<redacted>`; errors carry line numbers and names only.

mod confirm;
mod error;
mod handed_in;
mod prompt;
mod secret;
mod source;

pub use confirm::confirmed_by_retyping;
pub use error::CredentialsError;
pub use handed_in::{
    parse_credential_line, parse_handed_in, read_handed_in, CredentialName, HandedInCredentials,
    DEFAULT_HANDED_IN_WAIT, MAX_HANDED_IN_BYTES,
};
pub use prompt::{
    decide_terminal_is_available, terminal_is_available, FakePrompter, PromptError, Prompter,
    TerminalPrompter,
};
pub use secret::Secret;
pub use source::CredentialSource;
