//! network-config: static addresses when `ips` is set, DHCP otherwise; read back by cloud-init's
//! own converter, which is what turns it into the guest's network configuration.

use crate::harness::{files_below, oracle, read, Installation};
use crate::{installation_with_both_guests, STATIC_GUEST};
use serde_json::{json, Value};
use std::path::Path;

fn parsed(path: &Path) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap()
}

/// What cloud-init 's converter makes of `network_config` for systemd-networkd, as one text.
fn as_networkd(installation: &Installation, network_config: &Path) -> String {
    let directory = installation.out("networkd");
    let _ = std::fs::remove_dir_all(&directory);
    oracle(
        "cloud-init",
        &[
            "devel",
            "net-convert",
            "--network-data",
            network_config.to_str().unwrap(),
            "--kind",
            "yaml",
            "--output-kind",
            "networkd",
            "--distro",
            "debian",
            "--directory",
            directory.to_str().unwrap(),
        ],
    );
    files_below(&directory)
        .into_values()
        .map(|bytes| String::from_utf8(bytes).unwrap())
        .collect()
}

#[test]
fn a_guest_with_ips_gets_its_addresses_gateway_and_resolvers() {
    let installation = installation_with_both_guests();
    let out = installation.out("static");
    installation.new_config(STATIC_GUEST, &out);
    let path = out.join("seed/network-config");
    let config = parsed(&path);
    assert_eq!(config["version"], 2);
    let ethernet = &config["ethernets"]["primary"];
    assert_eq!(ethernet["dhcp4"], false);
    assert_eq!(ethernet["addresses"], json!(["192.0.2.10/24"]));
    assert_eq!(ethernet["routes"][0]["via"], "192.0.2.1");
    assert_eq!(
        ethernet["nameservers"]["addresses"],
        json!(["192.0.2.53", "192.0.2.54"])
    );

    let networkd = as_networkd(&installation, &path);
    for expected in [
        "Address=192.0.2.10/24",
        "Gateway=192.0.2.1",
        "DNS=192.0.2.53 192.0.2.54",
        "DHCP=no",
    ] {
        assert!(networkd.contains(expected), "{expected}:\n{networkd}");
    }
}

#[test]
fn a_guest_without_ips_uses_dhcp() {
    let installation = installation_with_both_guests();
    let out = installation.out("example");
    installation.new_config("example.test", &out);
    let path = out.join("seed/network-config");
    let ethernet = parsed(&path)["ethernets"]["primary"].clone();
    assert_eq!(ethernet["dhcp4"], true);
    for absent in ["addresses", "routes", "nameservers"] {
        assert!(ethernet.get(absent).is_none(), "{absent}: {ethernet}");
    }
    let networkd = as_networkd(&installation, &path);
    assert!(networkd.contains("DHCP=ipv4"), "{networkd}");
    assert!(
        !networkd.lines().any(|line| line.starts_with("Address=")),
        "{networkd}"
    );
}
