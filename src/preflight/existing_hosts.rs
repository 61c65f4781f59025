//! preflight's checks of the existing hosts recipes.d describes (`existing_host`): that trog's
//! key for the domain logs in as its admin with the host key it adopted, and that the admin has
//! passwordless sudo (the domain's Makefile runs as root there). Pure: what was found comes in,
//! the checks go out.

use crate::preflight::Check;

/// What logging into an existing host found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostLoginFact {
    Reached,
    /// The store holds no key for the domain yet.
    NoKey,
    /// The store was not opened (no passphrase handed in), with why.
    StoreNotOpened(String),
    /// The host answered with a key trog has not adopted.
    HostKeyNotAdopted,
    /// The host answered with another key than the one adopted.
    HostKeyRefused,
    /// Nothing answered, or the login was refused: what ssh said.
    Unreachable(String),
}

/// One existing host as preflight found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingHostFacts {
    pub domain: String,
    pub user: String,
    pub address: String,
    pub login: HostLoginFact,
    /// What `sudo -n true` did, once logged in (not asked of root).
    pub sudo: Option<Result<(), String>>,
}

/// The checks of one existing host.
pub fn existing_host_checks(facts: &ExistingHostFacts) -> Vec<Check> {
    let ExistingHostFacts {
        domain,
        user,
        address,
        ..
    } = facts;
    let login = format!("{user}@{address}");
    let authorize = format!(
        "`trog authorized-key {domain}` prints trog's key for it: add that line to ~{user}/.ssh/authorized_keys on the host"
    );
    let mut checks = vec![match &facts.login {
        HostLoginFact::Reached => Check::ok(format!(
            "Existing host {domain}: reached {login} with trog's key, its host key pinned"
        )),
        HostLoginFact::NoKey => Check::failed(
            format!("Existing host {domain}: trog has no key for {login} yet"),
            authorize,
        ),
        HostLoginFact::StoreNotOpened(why) => Check::note(
            format!("Existing host {domain}: not checked, its key is in the secret store ({why})"),
            "hand the store's passphrase in to check it: printf 'keepass: %s\\n\\n' \"$PASSPHRASE\" | trog --credentials preflight",
        ),
        HostLoginFact::HostKeyNotAdopted => Check::failed(
            format!("Existing host {domain}: {address} answers with a host key trog has not adopted"),
            format!("compare `ssh-keyscan -t ed25519 {address} | ssh-keygen -lf -` with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host, then `trog provision --adopt-host-key {domain}` adopts it"),
        ),
        HostLoginFact::HostKeyRefused => Check::failed(
            format!("Existing host {domain}: {address} answers with another host key than the one adopted"),
            format!("whoever answers is not the host adopted for {domain}: find out why before anything is sent there"),
        ),
        HostLoginFact::Unreachable(why) => Check::failed(
            format!("Existing host {domain}: cannot log in as {login}: {why}"),
            authorize,
        ),
    }];
    match &facts.sudo {
        Some(Ok(())) if user == "root" => {
            checks.push(Check::ok(format!("Existing host {domain}: logged in as root, no sudo needed")))
        }
        Some(Ok(())) => checks.push(Check::ok(format!(
            "Existing host {domain}: passwordless sudo for {user}"
        ))),
        Some(Err(why)) => checks.push(Check::failed(
            format!("Existing host {domain}: no passwordless sudo for {user}: {why}"),
            format!("trog runs the domain's Makefile and tests as root there: add `{user} ALL=(ALL) NOPASSWD: ALL` to a file in /etc/sudoers.d on the host"),
        )),
        None => {}
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::Outcome;

    fn facts(login: HostLoginFact, sudo: Option<Result<(), String>>) -> ExistingHostFacts {
        ExistingHostFacts {
            domain: "old.example.test".into(),
            user: "ops".into(),
            address: "192.0.2.7".into(),
            login,
            sudo,
        }
    }

    #[test]
    fn a_host_reached_with_sudo_passes_and_each_failure_says_what_to_do() {
        let good = existing_host_checks(&facts(HostLoginFact::Reached, Some(Ok(()))));
        assert!(
            good.iter().all(|check| check.outcome == Outcome::Ok),
            "{good:?}"
        );
        assert_eq!(good.len(), 2);

        let no_sudo = existing_host_checks(&facts(
            HostLoginFact::Reached,
            Some(Err("a password is required".into())),
        ));
        assert_eq!(no_sudo[1].outcome, Outcome::Failed);
        assert!(no_sudo[1]
            .advice
            .as_deref()
            .unwrap()
            .contains("ops ALL=(ALL) NOPASSWD: ALL"));

        let refused = existing_host_checks(&facts(
            HostLoginFact::Unreachable("Permission denied (publickey)".into()),
            None,
        ));
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].outcome, Outcome::Failed);
        assert!(refused[0]
            .advice
            .as_deref()
            .unwrap()
            .contains("`trog authorized-key old.example.test`"));

        let unadopted = existing_host_checks(&facts(HostLoginFact::HostKeyNotAdopted, None));
        assert!(unadopted[0]
            .advice
            .as_deref()
            .unwrap()
            .contains("trog provision --adopt-host-key old.example.test"));

        let locked = existing_host_checks(&facts(
            HostLoginFact::StoreNotOpened("no passphrase handed in".into()),
            None,
        ));
        assert_eq!(locked[0].outcome, Outcome::Note);
    }
}
