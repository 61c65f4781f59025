//! Reaching a guest: which addresses to try (its DHCP lease on this machine's NAT network, or
//! its first declared address), and SSH to its admin login with its own key.

use crate::guest::wait::{AttemptFailed, GuestProbe};
use crate::hypervisor::Hypervisor;
use crate::machine::ssh::{HostKeys, SshMachine, SshTarget};
use crate::machine::{Machine, MachineCommand};
use crate::workflow::progress::Progress;
use std::path::PathBuf;
use std::time::Duration;

/// How long one SSH attempt may take while a guest boots. An attempt that is stopped throws
/// away its handshake, and the next starts from nothing: on a loaded host, emulated guests booting
/// side by side have needed more than 20 s for one login (the key exchange, then a session from a
/// logind that is still starting), so every attempt was stopped short of the answer. A minute
/// lets such a login finish; the whole wait stays bounded by its own limit, and an attempt at a
/// guest whose domain stopped is given up at once ([`attempt_login`]).
pub const SSH_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a guest's address comes from.
pub enum AddressSource<'a> {
    /// The guest's first declared address (`ips`).
    Declared(String),
    /// The leases of the guest's MAC, as the caller asks its hypervisor for them (a network's
    /// DHCP lease is only reachable from the hypervisor, so only for guests on this machine).
    Leases(Box<dyn Fn() -> Vec<String> + 'a>),
}

/// Taking the host key of a guest built before trog made host keys, once and on purpose
/// (`provision --adopt-host-key`).
pub struct HostKeyAdoption<'a> {
    /// A file of the run's private directory that the key is taken into.
    pub known_hosts: PathBuf,
    /// The name the key is looked up by there ([`crate::secrets::host_key_alias`]).
    pub alias: String,
    /// Keeps the key taken (`type base64`) where later runs find it: the secret store.
    pub keep: KeepHostKey<'a>,
}

/// What keeps an adopted host key (`type base64`), or says why it could not.
pub type KeepHostKey<'a> = Box<dyn FnMut(&str) -> Result<(), String> + 'a>;

/// Tries the guest's addresses until SSH answers with the guest's own host key, keeping the
/// connection that did.
pub struct SshProbe<'a> {
    pub source: AddressSource<'a>,
    pub admin_user: String,
    pub key_file: PathBuf,
    /// The host keys the guest may answer with ([`HostKeys::Pinned`]).
    pub host_keys: HostKeys,
    /// Set only with `provision --adopt-host-key`.
    pub adoption: Option<HostKeyAdoption<'a>>,
    /// Reads the guest's serial console on its hypervisor, for the timeout message.
    pub console: Box<dyn FnMut() -> Option<String> + 'a>,
    /// Asks libvirt whether the guest's domain stopped, and why.
    pub stopped: Box<dyn FnMut() -> Option<String> + 'a>,
    /// Reads the end of the hypervisor's QEMU log of the guest.
    pub hypervisor_log: Box<dyn FnMut() -> Option<String> + 'a>,
    /// Starts the guest's domain again (after its emulator crashed).
    pub start_again: Box<dyn FnMut() -> Result<(), String> + 'a>,
    pub progress: &'a dyn Progress,
    pub connected: Option<SshMachine>,
}

impl GuestProbe for SshProbe<'_> {
    fn candidate_addresses(&mut self) -> Vec<String> {
        match &self.source {
            AddressSource::Declared(address) => vec![address.clone()],
            AddressSource::Leases(leases) => leases(),
        }
    }

    fn try_ssh(&mut self, address: &str) -> Result<(), AttemptFailed> {
        let target = SshTarget {
            user: Some(self.admin_user.clone()),
            host: address.to_string(),
            port: None,
        };
        let connect = |host_keys: HostKeys| {
            SshMachine::new(target.clone(), Some(self.key_file.clone()), host_keys)
                .map_err(|error| AttemptFailed::NoAnswer(error.to_string()))
        };
        let machine = connect(self.host_keys.clone())?;
        match attempt_login(&machine, &mut *self.stopped) {
            Ok(()) => {
                self.connected = Some(machine);
                Ok(())
            }
            Err(AttemptFailed::HostKeyRefused) if self.adoption.is_some() => {
                let adoption = self.adoption.as_mut().expect("checked above");
                let adopting = connect(HostKeys::AdoptInto {
                    known_hosts: adoption.known_hosts.clone(),
                    alias: adoption.alias.clone(),
                })?;
                attempt_login(&adopting, &mut *self.stopped)?;
                let key = taken_host_key(&adoption.known_hosts, &adoption.alias)
                    .ok_or_else(|| AttemptFailed::NoAnswer("ssh took no host key".into()))?;
                (adoption.keep)(&key).map_err(AttemptFailed::NoAnswer)?;
                self.progress.say(&format!(
                    "adopted the host key {address} answered with ({}), as --adopt-host-key asked: it is accepted from now on, beside the one trog made, until the guest's next root disk",
                    key_fingerprint(&key)
                ));
                // Taken once: a second refusal within this run is a refusal.
                self.adoption = None;
                self.connected = Some(adopting);
                Ok(())
            }
            Err(other) => Err(other),
        }
    }

    fn console(&mut self) -> Option<String> {
        (self.console)()
    }

    fn stopped(&mut self) -> Option<String> {
        (self.stopped)()
    }

    fn hypervisor_log(&mut self) -> Option<String> {
        (self.hypervisor_log)()
    }

    fn waiting(&mut self, what: &str, elapsed: Duration) {
        self.progress.waiting(what, elapsed);
    }

    fn start_again(&mut self, note: &str) -> Result<(), String> {
        (self.start_again)()?;
        self.progress.say(note);
        Ok(())
    }
}

/// One login at a booting guest (`true` over SSH), given up as soon as `stopped` says its domain
/// no longer runs: a login may take up to [`SSH_ATTEMPT_TIMEOUT`], and a guest that crashed
/// meanwhile must not be waited for that long.
pub fn attempt_login(
    guest: &dyn Machine,
    stopped: &mut dyn FnMut() -> Option<String>,
) -> Result<(), AttemptFailed> {
    let login = MachineCommand::new(["true"]).timeout(SSH_ATTEMPT_TIMEOUT);
    let mut stopped_state = None;
    let outcome = guest.run_watched(&login, &mut || {
        stopped_state = stopped();
        stopped_state.clone()
    });
    if let Some(state) = stopped_state {
        return Err(AttemptFailed::GuestStopped(state));
    }
    match outcome {
        Ok(output) if output.status == Some(0) => Ok(()),
        Ok(output) => Err(AttemptFailed::NoAnswer(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        )),
        Err(crate::machine::MachineError::HostKeyRefused { .. }) => {
            Err(AttemptFailed::HostKeyRefused)
        }
        Err(error) => Err(AttemptFailed::NoAnswer(error.to_string())),
    }
}

/// The key (`type base64`) ssh wrote into `known_hosts` under `alias`.
pub fn taken_host_key(known_hosts: &std::path::Path, alias: &str) -> Option<String> {
    let text = std::fs::read_to_string(known_hosts).ok()?;
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next()? == alias).then(|| {
            let kind = words.next()?;
            let key = words.next()?;
            Some(format!("{kind} {key}"))
        })?
    })
}

/// A key's SHA256 fingerprint as OpenSSH prints it, or the key itself when it cannot be read.
fn key_fingerprint(key: &str) -> String {
    ssh_key::PublicKey::from_openssh(key)
        .map(|key| key.fingerprint(ssh_key::HashAlg::Sha256).to_string())
        .unwrap_or_else(|_| key.to_string())
}

/// Where a guest's address comes from: its static address (`ips`, written by hand or handed out
/// from ips.db), or its lease on this machine's NAT network.
pub fn address_source<'a>(
    hypervisor: &'a dyn Hypervisor,
    inputs: &crate::workflow::inputs::GuestInputs,
    domain: &str,
) -> AddressSource<'a> {
    // A guest with a static address (written by hand or handed out from ips.db) is reached at
    // it; only a guest that takes a lease is looked for among the leases.
    match inputs.config.settings.ips.first() {
        Some(ip) => AddressSource::Declared(ip.address.to_string()),
        None => AddressSource::Leases(Box::new({
            let domain = domain.to_string();
            let mac = inputs.generated.mac_address.to_string();
            move || hypervisor.leased_addresses(&domain, &mac)
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fake::{Answer, FakeClock, FakeMachine};

    #[test]
    fn a_login_at_a_guest_whose_domain_dies_meanwhile_is_given_up_within_half_a_second() {
        let clock = FakeClock::default();
        let guest = FakeMachine::new()
            .with_clock(&clock)
            .answer("true", &[Answer::Hangs]);
        // The domain dies 3.2 s into an attempt that would otherwise take its whole minute.
        let mut stopped =
            || (clock.passed() >= Duration::from_millis(3200)).then(|| "shut off (crashed)".into());
        assert_eq!(
            attempt_login(&guest, &mut stopped),
            Err(AttemptFailed::GuestStopped("shut off (crashed)".into()))
        );
        assert_eq!(clock.passed(), Duration::from_millis(3500));
    }

    #[test]
    fn the_key_ssh_took_is_read_back_by_its_alias() {
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("known_hosts");
        std::fs::write(
            &file,
            "other ssh-ed25519 AAAAother\ntrog-guest.www.example.test ssh-ed25519 AAAAC3Nza taken\n",
        )
        .unwrap();
        assert_eq!(
            taken_host_key(&file, "trog-guest.www.example.test").as_deref(),
            Some("ssh-ed25519 AAAAC3Nza")
        );
        assert_eq!(taken_host_key(&file, "trog-guest.db.example.test"), None);
    }

    #[test]
    fn a_login_that_never_answers_ends_at_its_bound_while_the_domain_runs() {
        let clock = FakeClock::default();
        let guest = FakeMachine::new()
            .with_clock(&clock)
            .answer("true", &[Answer::Hangs]);
        let outcome = attempt_login(&guest, &mut || None);
        assert!(
            matches!(&outcome, Err(AttemptFailed::NoAnswer(said)) if said.contains("did not finish within 60s")),
            "{outcome:?}"
        );
        assert_eq!(clock.passed(), SSH_ATTEMPT_TIMEOUT);
    }
}
