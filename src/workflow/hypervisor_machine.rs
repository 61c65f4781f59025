//! The hypervisor's own system as a [`Machine`], with sudo settled before anything is done there:
//! passwordless, or with a password asked once on a terminal or handed in with `--credentials`,
//! or a refusal at once naming the user, the host and the `NOPASSWD` line, never a hang.

use crate::credentials::{CredentialName, CredentialSource, CredentialsError, Prompter};
use crate::diagnose::Failure;
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp};
use crate::machine::local::LocalMachine;
use crate::machine::ssh::{HostKeys, SshMachine, SshTarget, SudoPassword};
use crate::machine::ssh_masters::SharedMasters;
use crate::machine::{Machine, MachineError};
use crate::model::hypervisor::{LibvirtUri, Transport};
use std::path::PathBuf;

/// What `sudo -n true` says about a login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SudoAccess {
    Passwordless,
    /// sudo would work, given the login's password.
    WantsPassword,
    /// sudo is missing or refuses the login outright; `detail` is what it said.
    Refused {
        detail: String,
    },
}

/// Reads the answer of [`HypervisorOp::PasswordlessSudo`].
pub fn classify_sudo(status: Option<i32>, stderr: &str) -> SudoAccess {
    if status == Some(0) {
        SudoAccess::Passwordless
    } else if stderr.contains("a password is required") {
        SudoAccess::WantsPassword
    } else {
        SudoAccess::Refused {
            detail: stderr.trim().to_string(),
        }
    }
}

/// Asks `machine` whether its login has passwordless sudo.
pub fn sudo_access<M: Machine + ?Sized>(
    machine: &HypervisorMachine<M>,
) -> Result<SudoAccess, MachineError> {
    let output = machine.run(&HypervisorOp::PasswordlessSudo)?;
    Ok(classify_sudo(
        output.status,
        &String::from_utf8_lossy(&output.stderr),
    ))
}

/// The SSH login a libvirt URI names, with the key its `keyfile` parameter gives, trusting the
/// host keys the user's (and the system's) known-hosts files hold, through the ssh its `command`
/// parameter names if any. Its commands ride the login's shared master, as libvirt's transport
/// does, where this user has a private place for it.
pub fn ssh_machine_for(
    uri: &LibvirtUri,
) -> Result<Option<HypervisorMachine<SshMachine>>, MachineError> {
    let Transport::Ssh { user, host, port } = &uri.transport else {
        return Ok(None);
    };
    let target = SshTarget {
        user: user.clone(),
        host: host.clone(),
        port: *port,
    };
    let keyfile = uri.query_param("keyfile").map(PathBuf::from);
    let mut machine = match SharedMasters::for_this_user() {
        Ok(masters) => {
            SshMachine::sharing_master(target, keyfile, HostKeys::UserKnownHosts, masters)
        }
        // Nowhere private to keep it: the run opens a master of its own, closed at its end.
        Err(_) => SshMachine::new(target, keyfile, HostKeys::UserKnownHosts)?,
    };
    // The ssh the URI names for libvirt is the user's way to this host: trog's commands take it too.
    if let Some(command) = uri.query_param("command") {
        machine = machine.through(command);
    }
    Ok(Some(HypervisorMachine::ssh(machine)))
}

/// The user and host sudo messages name.
fn login_parts(machine: &HypervisorMachine<SshMachine>) -> (String, String) {
    let target = machine.target();
    (
        target.user.clone().unwrap_or_else(|| "the login".into()),
        target.host.clone(),
    )
}

/// Makes sudo usable on `machine` for the rest of the run. When the login wants a password, it
/// comes from `credentials` (handed in, or asked once on a terminal); with neither, the error
/// names the user, the host and the `NOPASSWD` line. A password sudo refuses is an error too.
pub fn settle_sudo<P: Prompter>(
    machine: &mut HypervisorMachine<SshMachine>,
    credentials: &mut CredentialSource<P>,
) -> Result<(), Failure> {
    match sudo_access(machine)? {
        SudoAccess::Passwordless => Ok(()),
        SudoAccess::Refused { detail } => {
            let (user, host) = login_parts(machine);
            Err(MachineError::SudoRefused { host, user, detail }.into())
        }
        SudoAccess::WantsPassword => {
            let (user, host) = login_parts(machine);
            let purpose = format!("for sudo as {user} on {host}");
            let password = match credentials.get(CredentialName::Sudo, &purpose) {
                Ok(secret) => SudoPassword::new(secret.expose().as_bytes()),
                Err(CredentialsError::NoTerminal { .. }) => {
                    return Err(MachineError::SudoNeedsPassword { host, user }.into())
                }
                Err(other) => return Err(other.into()),
            };
            machine.remember_sudo_password(password);
            machine.run(&HypervisorOp::RootAccess)?.success()?;
            Ok(())
        }
    }
}

/// The hypervisor's own system for a run: this machine, or an SSH login to it with sudo settled;
/// `None` for libvirt's test driver, which has none.
pub fn open_hypervisor_machine<P: Prompter>(
    uri: &LibvirtUri,
    credentials: &mut CredentialSource<P>,
) -> Result<Option<HypervisorMachine>, Failure> {
    match &uri.transport {
        Transport::Local => {
            let machine = HypervisorMachine::local();
            if !LocalMachine::running_as_root() {
                let user = || std::env::var("USER").unwrap_or_else(|_| "this login".into());
                match sudo_access(&machine)? {
                    SudoAccess::Passwordless => {}
                    SudoAccess::WantsPassword => {
                        return Err(MachineError::SudoNeedsPassword {
                            host: machine.describe(),
                            user: user(),
                        }
                        .into())
                    }
                    SudoAccess::Refused { detail } => {
                        return Err(MachineError::SudoRefused {
                            host: machine.describe(),
                            user: user(),
                            detail,
                        }
                        .into())
                    }
                }
            }
            Ok(Some(machine.into_dyn()))
        }
        Transport::Ssh { .. } => {
            let mut machine = ssh_machine_for(uri)?.expect("an ssh transport");
            settle_sudo(&mut machine, credentials)?;
            Ok(Some(machine.into_dyn()))
        }
        Transport::Test => Ok(None),
    }
}

/// The hypervisor's own system for holding a lock there: this machine, or an SSH login to it,
/// without sudo (a lock needs none); `None` for libvirt's test driver, which has none.
pub fn lock_machine_for(uri: &LibvirtUri) -> Result<Option<HypervisorMachine>, MachineError> {
    match &uri.transport {
        Transport::Local => Ok(Some(HypervisorMachine::local().into_dyn())),
        Transport::Ssh { .. } => Ok(ssh_machine_for(uri)?.map(HypervisorMachine::into_dyn)),
        Transport::Test => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_answers_are_told_apart() {
        assert_eq!(classify_sudo(Some(0), ""), SudoAccess::Passwordless);
        assert_eq!(
            classify_sudo(Some(1), "sudo: a password is required\n"),
            SudoAccess::WantsPassword
        );
        assert_eq!(
            classify_sudo(Some(127), "sh: 1: sudo: not found\n"),
            SudoAccess::Refused {
                detail: "sh: 1: sudo: not found".into()
            }
        );
    }

    #[test]
    fn the_key_of_an_ssh_uri_is_used_for_the_shell_too() {
        let uri = LibvirtUri::parse("qemu+ssh://admin@hv1.example.test:2222/system?keyfile=/k/id")
            .unwrap();
        let machine = ssh_machine_for(&uri).unwrap().unwrap();
        assert_eq!(machine.describe(), "admin@hv1.example.test");
        assert_eq!(machine.target().port, Some(2222));
        assert!(
            ssh_machine_for(&LibvirtUri::parse("qemu:///system").unwrap())
                .unwrap()
                .is_none()
        );
    }
}
