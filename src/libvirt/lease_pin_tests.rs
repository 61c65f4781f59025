use super::*;
use crate::model::address_range::AddressRange;

const NETWORK: &str = "<network><name>default</name><forward mode='nat'/>\
    <ip address='192.168.122.1' netmask='255.255.255.0'><dhcp>\
    <range start='192.168.122.2' end='192.168.122.254'/>\
    <host mac='52:54:00:aa:bb:cc' ip='192.168.122.100'/>\
    </dhcp></ip></network>";

fn ip(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

fn lease(mac: &str, address: &str) -> NetworkLease {
    NetworkLease {
        mac: mac.into(),
        address: ip(address),
        expires_unix: 0,
    }
}

fn chosen(choice: PinChoice) -> Ipv4Addr {
    match choice {
        PinChoice::Pin(address) => address,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_mac_reserved_already_keeps_its_reservation() {
    assert_eq!(
        pin_choice(NETWORK, "52:54:00:AA:BB:CC", &[], &KeptApart::default()),
        PinChoice::Pinned(ip("192.168.122.100"))
    );
}

#[test]
fn one_mac_is_offered_the_same_address_and_macs_spread_over_the_range() {
    let first = chosen(pin_choice(
        NETWORK,
        "52:54:00:01:02:03",
        &[],
        &KeptApart::default(),
    ));
    let again = chosen(pin_choice(
        NETWORK,
        "52:54:00:01:02:03",
        &[],
        &KeptApart::default(),
    ));
    assert_eq!(first, again);
    let addresses: std::collections::BTreeSet<Ipv4Addr> = (0..20)
        .map(|n| {
            let mac = format!("52:54:00:00:00:{n:02x}");
            chosen(pin_choice(NETWORK, &mac, &[], &KeptApart::default()))
        })
        .collect();
    assert!(addresses.len() > 15, "{addresses:?}");
    assert!(addresses
        .iter()
        .all(|address| (ip("192.168.122.2")..=ip("192.168.122.254")).contains(address)));
}

#[test]
fn a_mac_holding_a_lease_is_pinned_to_it() {
    let leases = [
        lease("52:54:00:99:99:99", "192.168.122.50"),
        lease("52:54:00:01:02:03", "192.168.122.77"),
    ];
    assert_eq!(
        pin_choice(NETWORK, "52:54:00:01:02:03", &leases, &KeptApart::default()),
        PinChoice::Pin(ip("192.168.122.77"))
    );
}

#[test]
fn reservations_other_leases_the_network_and_trogs_ranges_are_never_chosen() {
    let small = "<network><ip address='10.0.0.1' netmask='255.255.255.0'><dhcp>\
        <range start='10.0.0.1' end='10.0.0.8'/>\
        <host mac='52:54:00:aa:bb:cc' ip='10.0.0.2'/>\
        </dhcp></ip></network>";
    let leases = [lease("52:54:00:99:99:99", "10.0.0.3")];
    let kept_apart = KeptApart {
        ranges: vec![AddressRange::parse("10.0.0.4-10.0.0.6/24").unwrap()],
        held: vec![ip("10.0.0.7")],
    };
    for n in 0..30 {
        let mac = format!("52:54:00:00:01:{n:02x}");
        assert_eq!(
            pin_choice(small, &mac, &leases, &kept_apart),
            PinChoice::Pin(ip("10.0.0.8")),
            "{mac}"
        );
    }
    let full = KeptApart {
        held: vec![ip("10.0.0.7"), ip("10.0.0.8")],
        ..kept_apart
    };
    assert_eq!(
        pin_choice(small, "52:54:00:00:01:01", &leases, &full),
        PinChoice::NoneFree
    );
}

#[test]
fn a_lease_inside_trogs_ranges_is_not_pinned() {
    let kept_apart = KeptApart {
        ranges: vec![AddressRange::parse("192.168.122.200-192.168.122.249/24").unwrap()],
        held: Vec::new(),
    };
    let leases = [lease("52:54:00:01:02:03", "192.168.122.210")];
    let address = chosen(pin_choice(
        NETWORK,
        "52:54:00:01:02:03",
        &leases,
        &kept_apart,
    ));
    assert!(!kept_apart.ranges[0].contains(address), "{address}");
}

#[test]
fn several_ranges_are_searched_as_one() {
    let two = "<network><ip address='10.0.0.1' netmask='255.255.255.0'><dhcp>\
        <range start='10.0.0.10' end='10.0.0.10'/>\
        <range start='10.0.0.20' end='10.0.0.21'/>\
        </dhcp></ip></network>";
    let addresses: std::collections::BTreeSet<Ipv4Addr> = (0..40)
        .map(|n| {
            let mac = format!("52:54:00:00:02:{n:02x}");
            chosen(pin_choice(two, &mac, &[], &KeptApart::default()))
        })
        .collect();
    assert_eq!(
        addresses.into_iter().collect::<Vec<_>>(),
        [ip("10.0.0.10"), ip("10.0.0.20"), ip("10.0.0.21")]
    );
}

#[test]
fn a_network_without_dhcp_ranges_is_left_alone() {
    for xml in [
        "<network><name>isolated</name><ip address='10.1.0.1' netmask='255.255.255.0'/></network>",
        "<network><ip address='10.1.0.1' netmask='255.255.255.0'><dhcp>\
         <host mac='52:54:00:aa:bb:cc' ip='10.1.0.5'/></dhcp></ip></network>",
        "<network><ip family='ipv6' address='fd00::1' prefix='64'><dhcp>\
         <range start='fd00::10' end='fd00::20'/></dhcp></ip></network>",
    ] {
        assert_eq!(
            pin_choice(xml, "52:54:00:01:02:03", &[], &KeptApart::default()),
            PinChoice::NoDhcp,
            "{xml}"
        );
    }
}

#[test]
fn a_domains_network_interfaces_are_read_from_its_definition() {
    let xml = "<domain><devices>\
        <interface type='network'><mac address='52:54:00:01:02:03'/><source network='default'/></interface>\
        <interface type='bridge'><mac address='52:54:00:01:02:04'/><source bridge='br0'/></interface>\
        </devices></domain>";
    assert_eq!(
        network_interfaces(xml),
        [("default".to_string(), "52:54:00:01:02:03".to_string())]
    );
}
