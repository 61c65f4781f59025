//! A guest is trusted by the host key trog gave it, never by whoever answers at its address:
//! real OpenSSH on both sides (the sshd of tests/services/remote-host.sh, in a network namespace
//! of its own), connected as trog connects to guests.

use crate::remote_host::RemoteHost;
use std::path::Path;
use trog::machine::ssh::{HostKeys, SshMachine, SshTarget};
use trog::machine::{Machine, MachineCommand, MachineError};

const ALIAS: &str = "trog-guest.pinned.example.test";

fn known_hosts(dir: &Path, name: &str, key: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{ALIAS} {key}\n")).unwrap();
    path
}

/// A login name no account has: sshd names it in its log once a client asks to log in as it,
/// which a client does only after it accepted the server's host key. Other tests use the same
/// sshd at the same time: this name is this test's alone.
const UNKNOWN_LOGIN: &str = "trog-pin-check";

fn login(host: &RemoteHost, host_keys: HostKeys) -> SshMachine {
    login_as(host, &host.user_nopasswd, host_keys)
}

fn login_as(host: &RemoteHost, user: &str, host_keys: HostKeys) -> SshMachine {
    SshMachine::new(
        SshTarget {
            user: Some(user.to_string()),
            host: host.address.clone(),
            port: None,
        },
        Some(host.keyfile.clone().into()),
        host_keys,
    )
    .unwrap()
}

/// The sshd's log from `offset` on.
fn log_since(host: &RemoteHost, offset: u64) -> String {
    let log = std::fs::read(format!("{}/sshd.log", host.state)).unwrap_or_default();
    String::from_utf8_lossy(&log[(offset as usize).min(log.len())..]).into_owned()
}

fn log_size(host: &RemoteHost) -> u64 {
    std::fs::metadata(format!("{}/sshd.log", host.state))
        .map(|metadata| metadata.len())
        .unwrap_or(0)
}

#[test]
fn only_the_pinned_key_is_accepted_and_another_gets_no_login_attempt() {
    let host = RemoteHost::set_up();
    let dir = tempfile::tempdir().unwrap();
    let real_key: String = std::fs::read_to_string(format!("{}/host_key.pub", host.state))
        .unwrap()
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let true_command = MachineCommand::new(["true"]);

    let pinned = login(
        &host,
        HostKeys::Pinned {
            known_hosts: known_hosts(dir.path(), "right", &real_key),
            alias: ALIAS.into(),
        },
    );
    let answered = pinned.run(&true_command).unwrap();
    assert_eq!(answered.status, Some(0), "{answered:?}");
    drop(pinned);

    // A key of another machine: what a host answering at the guest's address in its place shows.
    let other = ssh_key::PrivateKey::random(&mut rand::rngs::OsRng, ssh_key::Algorithm::Ed25519)
        .unwrap()
        .public_key()
        .to_openssh()
        .unwrap();
    let wrong_key = known_hosts(dir.path(), "wrong", &other);

    // What the log shows of a client that gets as far as asking to log in.
    let before = log_size(&host);
    let _ = login_as(
        &host,
        UNKNOWN_LOGIN,
        HostKeys::AdoptInto {
            known_hosts: dir.path().join("any"),
            alias: ALIAS.into(),
        },
    )
    .run(&true_command);
    let asked = |said: &str| said.contains(&format!("user {UNKNOWN_LOGIN} "));
    assert!(
        asked(&log_since(&host, before)),
        "the log does not show a login attempt:\n{}",
        log_since(&host, before)
    );

    let before = log_size(&host);
    let refused = login_as(
        &host,
        UNKNOWN_LOGIN,
        HostKeys::Pinned {
            known_hosts: wrong_key,
            alias: ALIAS.into(),
        },
    )
    .run(&true_command)
    .unwrap_err();
    assert!(
        matches!(&refused, MachineError::HostKeyRefused { host: refused_host } if refused_host.ends_with(&host.address)),
        "{refused:?}"
    );
    assert_eq!(
        trog::diagnose::Diagnose::exit_status(&refused),
        trog::exit_status::ExitStatus::UntrustedGuest
    );
    // The client stopped at the key exchange: the server never heard which login it wanted, so
    // neither the login's public key nor anything after it crossed.
    let said = log_since(&host, before);
    assert!(!asked(&said), "the server saw a login attempt:\n{said}");

    // Adoption takes whatever key answers, once, into its own file.
    let taken = dir.path().join("adopted");
    let adopting = login(
        &host,
        HostKeys::AdoptInto {
            known_hosts: taken.clone(),
            alias: ALIAS.into(),
        },
    );
    assert_eq!(adopting.run(&true_command).unwrap().status, Some(0));
    assert_eq!(
        trog::workflow::reach::taken_host_key(&taken, ALIAS).as_deref(),
        Some(real_key.as_str())
    );
}
