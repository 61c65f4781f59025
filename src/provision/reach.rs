//! Reaching a guest: which addresses to try (its DHCP lease on this machine's NAT network, or
//! its first declared address), and SSH to its admin login with its own key.

use crate::guest::wait::GuestProbe;
use crate::libvirt::guest_address::leased_addresses;
use crate::machine::ssh::{HostKeys, SshMachine, SshTarget};
use crate::machine::{Machine, MachineCommand};
use crate::output::progress::Progress;
use std::path::PathBuf;
use std::time::Duration;

/// How long one SSH attempt may take while a guest boots. An attempt that is stopped throws
/// away its handshake, and the next starts from nothing: on a loaded host, emulated guests booting
/// side by side have needed more than 20 s for one login (the key exchange, then a session from a
/// logind that is still starting), so every attempt was stopped short of the answer. A minute
/// lets such a login finish; the whole wait stays bounded by its own limit.
const SSH_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a guest's address comes from.
pub enum AddressSource<'a> {
    /// The libvirt network's DHCP lease for the guest's MAC: only reachable from the
    /// hypervisor, so only for guests on this machine.
    Lease {
        connection: &'a virt::connect::Connect,
        domain: String,
        mac: String,
    },
    /// The guest's first declared address (`ips`).
    Declared(String),
}

/// Tries the guest's addresses until SSH answers, keeping the connection that did.
pub struct SshProbe<'a> {
    pub source: AddressSource<'a>,
    pub admin_user: String,
    pub key_file: PathBuf,
    pub known_hosts: PathBuf,
    /// Reads the guest's serial console on its hypervisor, for the timeout message.
    pub console: Box<dyn FnMut() -> Option<String> + 'a>,
    /// Asks libvirt whether the guest's domain stopped, and why.
    pub stopped: Box<dyn FnMut() -> Option<String> + 'a>,
    /// Reads the end of the hypervisor's QEMU log of the guest.
    pub hypervisor_log: Box<dyn FnMut() -> Option<String> + 'a>,
    pub progress: &'a Progress,
    pub connected: Option<SshMachine>,
}

impl GuestProbe for SshProbe<'_> {
    fn candidate_addresses(&mut self) -> Vec<String> {
        match &self.source {
            AddressSource::Lease {
                connection,
                domain,
                mac,
            } => leased_addresses(connection, domain, mac),
            AddressSource::Declared(address) => vec![address.clone()],
        }
    }

    fn try_ssh(&mut self, address: &str) -> Result<(), String> {
        let target = SshTarget {
            user: Some(self.admin_user.clone()),
            host: address.to_string(),
            port: None,
        };
        let machine = SshMachine::new(
            target,
            Some(self.key_file.clone()),
            HostKeys::AcceptNewInto(self.known_hosts.clone()),
        )
        .map_err(|error| error.to_string())?;
        let probe = MachineCommand::new(["true"]).timeout(SSH_ATTEMPT_TIMEOUT);
        match machine.run(&probe) {
            Ok(output) if output.status == Some(0) => {
                self.connected = Some(machine);
                Ok(())
            }
            Ok(output) => Err(String::from_utf8_lossy(&output.stderr).trim().to_string()),
            Err(error) => Err(error.to_string()),
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
}

/// Where a guest's address comes from: its static address (`ips`, written by hand or handed out
/// from ips.db), or its lease on this machine's NAT network.
pub fn address_source<'a>(
    connection: &'a virt::connect::Connect,
    inputs: &crate::provision::inputs::GuestInputs,
    domain: &str,
) -> AddressSource<'a> {
    // A guest with a static address (written by hand or handed out from ips.db) is reached at
    // it; only a guest that takes a lease is looked for among the leases.
    match inputs.config.settings.ips.first() {
        Some(ip) => AddressSource::Declared(ip.address.to_string()),
        None => AddressSource::Lease {
            connection,
            domain: domain.to_string(),
            mac: inputs.generated.mac_address.to_string(),
        },
    }
}
