//! The site's machines as other tools take them: an OpenSSH `ssh_config` block per machine
//! ([`ssh_config`]), an Ansible dynamic inventory ([`ansible`]), and the known_hosts lines both
//! point at ([`known_hosts`]). Pure: the machines come in as data (`workflow::site` gathers them
//! from recipes.d, ips.db, libvirt and the secret store), text goes out.
//!
//! A machine is trusted by the host key trog pinned for it, as trog itself trusts it: each
//! machine's host key is looked up under its alias ([`crate::secrets::host_key_alias`]) in a
//! known_hosts file of trog's, and no other key is accepted.

pub mod ansible;
pub mod ssh_config;

use serde::Serialize;
use std::net::IpAddr;

/// Where a machine's address comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressOrigin {
    /// The first address of its `ips` in recipes.d.
    Declared,
    /// ips.db's record of what `assign_ip` handed it.
    Recorded,
    /// The DHCP lease of its libvirt network (a guest on this machine).
    Leased,
    /// The `existing_host` of a machine trog did not build.
    ExistingHost,
}

/// One machine of the site, as trog knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteMachine {
    /// Its fully qualified name: the name other tools call it by.
    pub name: String,
    /// An IP address, or an existing host's DNS name.
    pub address: Option<String>,
    pub address_origin: Option<AddressOrigin>,
    /// The login trog finishes it as (`admin_user`; a dependent's machine's).
    pub admin_user: String,
    /// For a domain that runs on another's machine (`depends_on`): that machine's name. Its
    /// address, login and host keys are the machine's.
    pub runs_on: Option<String>,
    /// The hypervisor that holds it, when one said so.
    pub hypervisor: Option<String>,
    pub tenant: Option<String>,
    /// The recipes it runs, in order.
    pub recipes: Vec<String>,
    /// The host keys a connection accepts (`type base64`): trog's own, then an adopted one.
    /// Empty when the secret store holds none for it (it was never built).
    pub host_keys: Vec<String>,
}

/// The address other tools reach a machine at: its first declared address (`ips`), else the one
/// ips.db records for it, else the lease its network gave it, which is reachable from here only
/// when its hypervisor is this machine (`leased_here`).
pub fn choose_address(
    declared: Option<IpAddr>,
    recorded: Option<IpAddr>,
    leased: Option<IpAddr>,
    leased_here: bool,
) -> Option<(IpAddr, AddressOrigin)> {
    declared
        .map(|address| (address, AddressOrigin::Declared))
        .or(recorded.map(|address| (address, AddressOrigin::Recorded)))
        .or(leased
            .filter(|_| leased_here)
            .map(|address| (address, AddressOrigin::Leased)))
}

/// Where the rendered text sends OpenSSH for what is not in it.
#[derive(Debug, Clone, Copy)]
pub struct SshFiles<'a> {
    /// The known_hosts file holding [`known_hosts`]'s lines, as an absolute path.
    pub known_hosts: &'a str,
    /// The one machine whose login key was written, and the file it is in.
    pub identity: Option<(&'a str, &'a str)>,
}

/// The known_hosts lines of every machine's pinned host keys, each under its alias.
pub fn known_hosts(machines: &[SiteMachine]) -> String {
    machines
        .iter()
        .flat_map(|machine| {
            let alias = crate::secrets::host_key_alias(&machine.name);
            machine
                .host_keys
                .iter()
                .map(move |key| format!("{alias} {key}\n"))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub fn machine(name: &str) -> SiteMachine {
        SiteMachine {
            name: name.into(),
            address: Some("192.0.2.10".into()),
            runs_on: None,
            address_origin: Some(AddressOrigin::Declared),
            admin_user: "siteadmin".into(),
            hypervisor: Some("hv1".into()),
            tenant: None,
            recipes: vec!["adminconfig".into(), "nginx".into()],
            host_keys: vec!["ssh-ed25519 AAAAwww".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::machine;
    use super::*;

    #[test]
    fn a_declared_address_comes_first_then_ips_db_then_a_lease_on_this_machine() {
        let (declared, recorded, leased) = (
            Some("192.0.2.10".parse().unwrap()),
            Some("192.0.2.20".parse().unwrap()),
            Some("192.168.122.30".parse().unwrap()),
        );
        assert_eq!(
            choose_address(declared, recorded, leased, true),
            Some((declared.unwrap(), AddressOrigin::Declared))
        );
        assert_eq!(
            choose_address(None, recorded, leased, true),
            Some((recorded.unwrap(), AddressOrigin::Recorded))
        );
        assert_eq!(
            choose_address(None, None, leased, true),
            Some((leased.unwrap(), AddressOrigin::Leased))
        );
        // A lease on another hypervisor's network is not reachable from here.
        assert_eq!(choose_address(None, None, leased, false), None);
    }

    #[test]
    fn every_pinned_key_is_a_line_under_its_machines_alias() {
        let mut www = machine("www.example.test");
        www.host_keys.push("ssh-ed25519 AAAAadopted".into());
        let mut db = machine("db.example.test");
        db.host_keys = vec!["ssh-ed25519 AAAAdb".into()];
        let mut unbuilt = machine("new.example.test");
        unbuilt.host_keys.clear();
        assert_eq!(
            known_hosts(&[www, db, unbuilt]),
            "trog-guest.www.example.test ssh-ed25519 AAAAwww\n\
             trog-guest.www.example.test ssh-ed25519 AAAAadopted\n\
             trog-guest.db.example.test ssh-ed25519 AAAAdb\n"
        );
    }
}
