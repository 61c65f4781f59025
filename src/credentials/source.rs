//! Where a run gets its credentials: what was handed in, else a prompt, remembered for the run so a
//! person is asked once at most.

use super::error::CredentialsError;
use super::handed_in::{read_standard_input_within, CredentialName, HandedInCredentials};
use super::prompt::{PromptError, Prompter, TerminalPrompter};
use super::secret::Secret;
use std::collections::{BTreeMap, BTreeSet};

/// The credentials of one run.
#[derive(Debug)]
pub struct CredentialSource<P: Prompter = TerminalPrompter> {
    remembered: BTreeMap<CredentialName, Secret>,
    handed_in: BTreeSet<CredentialName>,
    prompter: P,
}

impl CredentialSource<TerminalPrompter> {
    /// The source for a run of trog: with `--credentials`, standard input is read up to its blank
    /// line first; without it, standard input is never touched (a caller that hands nothing over
    /// and never closes its end would block the run). Missing credentials are asked for on the
    /// terminal, if there is one.
    ///
    /// `read_standard_input` is how long to wait for the blank line, `None` not to read at all.
    pub fn for_run(
        read_standard_input: Option<std::time::Duration>,
    ) -> Result<CredentialSource<TerminalPrompter>, CredentialsError> {
        let handed_in = match read_standard_input {
            Some(wait) => read_standard_input_within(wait)?,
            None => HandedInCredentials::none(),
        };
        Ok(CredentialSource::new(handed_in, TerminalPrompter))
    }
}

impl<P: Prompter> CredentialSource<P> {
    pub fn new(handed_in: HandedInCredentials, prompter: P) -> CredentialSource<P> {
        let mut remembered = BTreeMap::new();
        let mut handed_in_names = BTreeSet::new();
        for (name, value) in handed_in.into_values() {
            handed_in_names.insert(name);
            remembered.insert(name, value);
        }
        CredentialSource {
            remembered,
            handed_in: handed_in_names,
            prompter,
        }
    }

    /// The credential `name`: handed in, asked before in this run, or asked now. `purpose` says
    /// what it is for, to complete "needed …" (e.g. "to unlock /etc/trog/secrets.kdbx"); it
    /// appears in the prompt and in the error when nobody can be asked.
    pub fn get(
        &mut self,
        name: CredentialName,
        purpose: &str,
    ) -> Result<&Secret, CredentialsError> {
        if !self.remembered.contains_key(&name) {
            let prompt = format!("{} ({purpose}): ", capitalised(name.description()));
            let answer = self.prompter.ask(&prompt).map_err(|error| match error {
                PromptError::NoTerminal => CredentialsError::NoTerminal {
                    name,
                    purpose: purpose.to_string(),
                },
                PromptError::Io(source) => CredentialsError::Prompt { name, source },
            })?;
            if answer.is_empty() {
                return Err(CredentialsError::EmptyAnswer { name });
            }
            self.remembered.insert(name, answer);
        }
        Ok(&self.remembered[&name])
    }

    /// Asks for `name` a second time when it was typed rather than handed in, and refuses a
    /// mismatch: for a value that is being set (a new store's passphrase), where a slip of the
    /// finger would lock the store for good. A handed-in value is taken as it is.
    pub fn confirm(&mut self, name: CredentialName, purpose: &str) -> Result<(), CredentialsError> {
        if self.was_handed_in(name) {
            return Ok(());
        }
        let first = self.get(name, purpose)?.clone();
        let prompt = format!("Repeat the {} ({purpose}): ", name.description());
        let again = self.prompter.ask(&prompt).map_err(|error| match error {
            PromptError::NoTerminal => CredentialsError::NoTerminal {
                name,
                purpose: purpose.to_string(),
            },
            PromptError::Io(source) => CredentialsError::Prompt { name, source },
        })?;
        if again != first {
            self.forget(name);
            return Err(CredentialsError::Mismatch { name });
        }
        Ok(())
    }

    /// Forgets `name`, after whatever it was for refused it (a wrong passphrase): the next
    /// [`get`](Self::get) asks again instead of handing back the same refused value.
    pub fn forget(&mut self, name: CredentialName) {
        self.remembered.remove(&name);
        self.handed_in.remove(&name);
    }

    /// Whether `name` came on standard input (a refused value then cannot be typed again).
    pub fn was_handed_in(&self, name: CredentialName) -> bool {
        self.handed_in.contains(&name)
    }

    pub fn prompter(&self) -> &P {
        &self.prompter
    }
}

fn capitalised(text: &str) -> String {
    let mut characters = text.chars();
    match characters.next() {
        Some(first) => first.to_uppercase().chain(characters).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::handed_in::parse_handed_in;
    use crate::credentials::prompt::FakePrompter;
    use crate::diagnose::{Diagnose, Failure};
    use crate::exit_status::ExitStatus;

    const PURPOSE: &str = "to unlock /etc/trog/secrets.kdbx";

    #[test]
    fn a_handed_in_credential_is_used_without_asking() {
        let handed_in = parse_handed_in("keepass: given\n\n").unwrap();
        let mut source = CredentialSource::new(handed_in, FakePrompter::without_terminal());
        assert_eq!(
            source
                .get(CredentialName::Keepass, PURPOSE)
                .unwrap()
                .expose(),
            "given"
        );
        assert!(source.was_handed_in(CredentialName::Keepass));
    }

    #[test]
    fn a_missing_credential_is_asked_once_and_remembered() {
        let mut source = CredentialSource::new(
            HandedInCredentials::none(),
            FakePrompter::answering(["typed"]),
        );
        assert_eq!(
            source
                .get(CredentialName::Sudo, "for sudo as admin on hv1")
                .unwrap()
                .expose(),
            "typed"
        );
        assert_eq!(
            source
                .get(CredentialName::Sudo, "for sudo as admin on hv2")
                .unwrap()
                .expose(),
            "typed"
        );
        assert_eq!(
            source.prompter().prompts_shown,
            vec!["Sudo password on the hypervisor (for sudo as admin on hv1): "]
        );
    }

    #[test]
    fn a_handed_in_sudo_and_a_typed_passphrase_work_together() {
        let handed_in = parse_handed_in("sudo: given\n\n").unwrap();
        let mut source = CredentialSource::new(handed_in, FakePrompter::answering(["typed"]));
        assert_eq!(
            source.get(CredentialName::Sudo, "x").unwrap().expose(),
            "given"
        );
        assert_eq!(
            source
                .get(CredentialName::Keepass, PURPOSE)
                .unwrap()
                .expose(),
            "typed"
        );
        assert_eq!(source.prompter().prompts_shown.len(), 1);
    }

    #[test]
    fn without_a_terminal_a_missing_credential_is_an_error_saying_how_to_hand_it_in() {
        let mut source = CredentialSource::new(
            HandedInCredentials::none(),
            FakePrompter::without_terminal(),
        );
        let error = source.get(CredentialName::Keepass, PURPOSE).unwrap_err();
        assert_eq!(error.exit_status(), ExitStatus::Credentials);
        let failure = Failure::from(error);
        assert_eq!(
            failure.render(),
            "error: the credential `keepass` is needed to unlock /etc/trog/secrets.kdbx; it was not handed in and there is no terminal to ask on\n\
             hint: hand it in on standard input: printf 'keepass: %s\\n\\n' \"$VALUE\" | trog … --credentials\n"
        );
    }

    #[test]
    fn without_a_terminal_a_missing_sudo_password_also_suggests_nopasswd() {
        let mut source = CredentialSource::new(
            HandedInCredentials::none(),
            FakePrompter::without_terminal(),
        );
        let hint = source
            .get(CredentialName::Sudo, "for sudo as admin on hv1")
            .unwrap_err()
            .hint()
            .unwrap();
        assert!(hint.contains("printf 'sudo: %s\\n\\n'"), "{hint}");
        assert!(hint.contains("trog root-programs sudoers"), "{hint}");
    }

    #[test]
    fn a_forgotten_credential_is_asked_again() {
        let handed_in = parse_handed_in("keepass: wrong\n\n").unwrap();
        let mut source = CredentialSource::new(handed_in, FakePrompter::answering(["right"]));
        source.forget(CredentialName::Keepass);
        assert!(!source.was_handed_in(CredentialName::Keepass));
        assert_eq!(
            source
                .get(CredentialName::Keepass, PURPOSE)
                .unwrap()
                .expose(),
            "right"
        );
    }

    #[test]
    fn a_typed_value_being_set_is_asked_twice_and_must_match() {
        let mut source = CredentialSource::new(
            HandedInCredentials::none(),
            FakePrompter::answering(["new", "new"]),
        );
        source.confirm(CredentialName::Keepass, PURPOSE).unwrap();
        assert_eq!(
            source
                .get(CredentialName::Keepass, PURPOSE)
                .unwrap()
                .expose(),
            "new"
        );
        assert_eq!(source.prompter().prompts_shown.len(), 2);

        let mut source = CredentialSource::new(
            HandedInCredentials::none(),
            FakePrompter::answering(["new", "typo"]),
        );
        let error = source
            .confirm(CredentialName::Keepass, PURPOSE)
            .unwrap_err();
        assert!(matches!(
            error,
            CredentialsError::Mismatch {
                name: CredentialName::Keepass
            }
        ));
        assert!(matches!(
            source.get(CredentialName::Keepass, PURPOSE),
            Err(CredentialsError::Prompt { .. })
        ));
    }

    #[test]
    fn a_handed_in_value_being_set_is_not_confirmed() {
        let handed_in = parse_handed_in("keepass: new\n\n").unwrap();
        let mut source = CredentialSource::new(handed_in, FakePrompter::without_terminal());
        source.confirm(CredentialName::Keepass, PURPOSE).unwrap();
    }

    #[test]
    fn an_empty_answer_or_a_failed_prompt_is_an_error() {
        let mut source =
            CredentialSource::new(HandedInCredentials::none(), FakePrompter::answering([""]));
        assert!(matches!(
            source.get(CredentialName::Keepass, PURPOSE),
            Err(CredentialsError::EmptyAnswer { .. })
        ));
        assert!(matches!(
            source.get(CredentialName::Keepass, PURPOSE),
            Err(CredentialsError::Prompt { .. })
        ));
    }
}
