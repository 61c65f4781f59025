//! The guest's network: cloud-init's `network-config`, and a systemd-networkd file of trog's own
//! for a guest of static IPv4 addresses or one taking a DHCP lease.
//!
//! Why the second file: with IPv6 router advertisements taken (networkd's default), networkd
//! counts a link configured only once its router solicitations were answered or ran out, three
//! of them four seconds apart. A DHCP lease ends that wait; a static address does not, so on a
//! network without IPv6 routers (libvirt's NAT network, many LANs) every boot of a statically
//! addressed guest stood 12 s in `systemd-networkd-wait-online` before cloud-init's network
//! stage and sshd. `accept-ra: false` in `network-config` would say it, but the cloud-init of
//! Debian bookworm (22.4) writes it into networkd's file only for links that use DHCP. So the
//! seed writes the whole link itself, in a file named to sort before cloud-init's (networkd
//! takes the first file that matches), and runs its files before the network starts (local
//! mode, `super::render_seed`). The link gets no IPv6 link-local address either: an IPv4-only
//! guest has no use for it, and its duplicate address detection held the link's configuration
//! another second or more. A guest taking a lease keeps IPv6 (a LAN's routers may give it an
//! address) without that detection, so that its link is configured as soon as the lease is
//! there. A guest with an IPv6 address keeps both and cloud-init's file alone. On an image
//! without systemd-networkd the file is inert and `network-config` configures the link as
//! before.

use super::SeedInput;
use serde_json::{json, Map, Value};

/// Where the seed writes a static guest's networkd file: `05-` sorts before cloud-init's `10-cloud-init-*`.
pub const NETWORKD_STATIC_FILE_PATH: &str = "/etc/systemd/network/05-trog-static.network";

/// cloud-init's `network-config` (version 2): DHCP, or the static addresses with their route and
/// resolvers, on the interface of the guest's MAC.
pub fn network_config(input: &SeedInput) -> Value {
    let mut ethernet = Map::new();
    ethernet.insert("match".into(), json!({ "macaddress": input.mac_address }));
    if input.addresses.is_empty() {
        ethernet.insert("dhcp4".into(), json!(true));
    } else {
        ethernet.insert("dhcp4".into(), json!(false));
        ethernet.insert("addresses".into(), json!(input.addresses));
        if let Some(gateway) = &input.gateway {
            // The default route as a prefix, not netplan's `default`: the cloud-init of Debian
            // bookworm (22.4) refuses `to: default` and leaves the guest without its network.
            let default_route = if gateway.contains(':') {
                "::/0"
            } else {
                "0.0.0.0/0"
            };
            ethernet.insert(
                "routes".into(),
                json!([{ "to": default_route, "via": gateway }]),
            );
        }
    }
    if !input.resolvers.is_empty() || !input.search_domains.is_empty() {
        let mut nameservers = Map::new();
        if !input.resolvers.is_empty() {
            nameservers.insert("addresses".into(), json!(input.resolvers));
        }
        if !input.search_domains.is_empty() {
            nameservers.insert("search".into(), json!(input.search_domains));
        }
        ethernet.insert("nameservers".into(), Value::Object(nameservers));
    }
    json!({ "version": 2, "ethernets": { "primary": Value::Object(ethernet) } })
}

/// A networkd file of trog's, and where the seed writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkdFile {
    pub path: &'static str,
    pub content: String,
}

/// Where the seed writes the networkd file of a guest taking a DHCP lease (`05-` as well).
pub const NETWORKD_LEASE_FILE_PATH: &str = "/etc/systemd/network/05-trog-lease.network";

/// trog's networkd file: for a guest whose addresses are all static IPv4 ones, the same link
/// as `network-config` describes, taking no router advertisements and without a link-local
/// address; for a guest taking a DHCP lease, the link's lease, with IPv6 (link-local and
/// advertised addresses) kept but not probed for duplicates. `None` for a guest with an IPv6
/// address, whose link is cloud-init's alone.
pub fn networkd_file(input: &SeedInput) -> Option<NetworkdFile> {
    if input.addresses.is_empty() {
        return Some(NetworkdFile {
            path: NETWORKD_LEASE_FILE_PATH,
            content: lease_file(input),
        });
    }
    if input.addresses.iter().any(|a| a.contains(':')) {
        return None;
    }
    let mut file = String::from(
        "# Written by trog's seed: this guest's static IPv4 addresses. Neither IPv6 router\n\
         # advertisements nor a link-local address: the boot waits for neither.\n\
         [Match]\n",
    );
    file.push_str(&format!("MACAddress={}\n\n[Network]\n", input.mac_address));
    for address in &input.addresses {
        file.push_str(&format!("Address={address}\n"));
    }
    if let Some(gateway) = &input.gateway {
        file.push_str(&format!("Gateway={gateway}\n"));
    }
    push_resolvers(&mut file, input);
    file.push_str("IPv6AcceptRA=no\nLinkLocalAddressing=no\n");
    Some(NetworkdFile {
        path: NETWORKD_STATIC_FILE_PATH,
        content: file,
    })
}

/// A DHCP guest's link. Duplicate address detection held the link's configuration a second and
/// more after the lease (networkd counts it configured once its IPv6 link-local address is no
/// longer tentative): the addresses are derived from the guest's MAC, which is unique wherever
/// its IPv4 lease is, so they are used at once.
fn lease_file(input: &SeedInput) -> String {
    let mut file = String::from(
        "# Written by trog's seed: this guest takes a DHCP lease. Its IPv6 addresses (link-local,\n\
         # and any a router advertises) are not probed for duplicates: the boot does not wait.\n\
         [Match]\n",
    );
    file.push_str(&format!(
        "MACAddress={}\n\n[Network]\nDHCP=ipv4\n",
        input.mac_address
    ));
    push_resolvers(&mut file, input);
    file.push_str("IPv6DuplicateAddressDetection=0\n");
    if input.revision.ignores_lease_hostname() {
        // The guest's name is the seed's. networkd would otherwise ask systemd-hostnamed to take
        // the lease's as well: starting it costs 2 s of an emulated processor, in the middle of
        // the first boot, for an answer that changes nothing.
        file.push_str("\n[DHCPv4]\nUseHostname=no\n");
    }
    file
}

fn push_resolvers(file: &mut String, input: &SeedInput) {
    for resolver in &input.resolvers {
        file.push_str(&format!("DNS={resolver}\n"));
    }
    if !input.search_domains.is_empty() {
        file.push_str(&format!("Domains={}\n", input.search_domains.join(" ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(addresses: &[&str]) -> SeedInput {
        SeedInput {
            fqdn: "www.example.test".into(),
            hostname: "www".into(),
            admin_user: "someadmin".into(),
            admin_authorized_keys: vec![],
            extra_users: vec![],
            packages: vec![],
            packages_in_image: false,
            first_boot_commands: vec![],
            revision: crate::render::cloud_init::SeedRevision::CURRENT,
            contact_email: "ops@example.test".into(),
            timezone: "Etc/UTC".into(),
            apt_mirror: None,
            apt_security_mirror: None,
            apt_fallback_mirrors: Vec::new(),
            apt_fallback_security_mirrors: Vec::new(),
            distro: "debian".into(),
            apt_sources: None,
            mac_address: "52:54:00:12:34:56".into(),
            addresses: addresses.iter().map(ToString::to_string).collect(),
            gateway: Some("192.0.2.1".into()),
            resolvers: vec!["192.0.2.1".into(), "192.0.2.2".into()],
            search_domains: vec!["example.test".into(), "example.org".into()],
            host_key: None,
        }
    }

    #[test]
    fn static_ipv4_addresses_get_a_networkd_file_without_router_advertisements() {
        assert_eq!(
            networkd_file(&guest(&["192.0.2.10/24", "192.0.2.11/24"]))
                .unwrap()
                .content,
            "# Written by trog's seed: this guest's static IPv4 addresses. Neither IPv6 router\n\
             # advertisements nor a link-local address: the boot waits for neither.\n\
             [Match]\n\
             MACAddress=52:54:00:12:34:56\n\
             \n\
             [Network]\n\
             Address=192.0.2.10/24\n\
             Address=192.0.2.11/24\n\
             Gateway=192.0.2.1\n\
             DNS=192.0.2.1\n\
             DNS=192.0.2.2\n\
             Domains=example.test example.org\n\
             IPv6AcceptRA=no\n\
             LinkLocalAddressing=no\n"
        );
    }

    #[test]
    fn a_dhcp_guest_gets_a_networkd_file_without_duplicate_address_detection() {
        let mut earlier = guest(&[]);
        earlier.revision = crate::render::cloud_init::SeedRevision::SeparateConfigStage;
        assert_eq!(
            networkd_file(&earlier).unwrap(),
            NetworkdFile {
                path: NETWORKD_LEASE_FILE_PATH,
                content: "# Written by trog's seed: this guest takes a DHCP lease. Its IPv6 addresses (link-local,\n\
                          # and any a router advertises) are not probed for duplicates: the boot does not wait.\n\
                          [Match]\n\
                          MACAddress=52:54:00:12:34:56\n\
                          \n\
                          [Network]\n\
                          DHCP=ipv4\n\
                          DNS=192.0.2.1\n\
                          DNS=192.0.2.2\n\
                          Domains=example.test example.org\n\
                          IPv6DuplicateAddressDetection=0\n"
                    .into(),
            }
        );
        // The lease's host name is not the guest's: networkd is told to leave it alone.
        let current = networkd_file(&guest(&[])).unwrap().content;
        assert_eq!(
            current,
            networkd_file(&earlier).unwrap().content + "\n[DHCPv4]\nUseHostname=no\n"
        );
    }

    #[test]
    fn any_ipv6_address_leaves_the_link_to_cloud_init() {
        assert_eq!(networkd_file(&guest(&["2001:db8::10/64"])), None);
        assert_eq!(
            networkd_file(&guest(&["192.0.2.10/24", "2001:db8::10/64"])),
            None
        );
    }

    #[test]
    fn a_guest_without_gateway_or_resolvers_has_only_its_addresses() {
        let mut input = guest(&["192.0.2.10/24"]);
        input.gateway = None;
        input.resolvers.clear();
        input.search_domains.clear();
        let file = networkd_file(&input).unwrap().content;
        assert!(file.ends_with(
            "[Network]\nAddress=192.0.2.10/24\nIPv6AcceptRA=no\nLinkLocalAddressing=no\n"
        ));
    }
}
