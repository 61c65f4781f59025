//! What each guest may send as, and who may watch its display, checked on the fleet's guests
//! (no boot of their own):
//! - every interface names its guest's address to its filter and lets libvirt learn none
//!   (`CTRL_IP_LEARNING=none`), so a guest's first packet never decides its address;
//! - a guest sending from the gateway's address (a hand-made IPv4 header) reaches no one, where
//!   the same packets from its own address reach a guest of its tenant;
//! - a tenant's guests have no IPv6, not even between link-local addresses of their own;
//! - a guest's VNC display offers no access without a password, and `debug_boot --vnc` gives one.

use crate::fleet::Fleet;
use crate::support::{run_verb, text};
use std::io::{Read, Write};
use std::time::Duration;
use trog::model::names::DomainName;
use trog::render::domain_xml::MacAddress;
use trog::render::network_filter::link_local_address;

/// Sends ICMP echo requests to argv[1] every half second for 20 s, each pair first from the
/// address argv[2] (`spoofed`) then from argv[3] (`own`), with an IPv4 header of its own
/// making: the kernel puts no address of its own in.
const SEND_AS: &str = r#"
import socket, struct, sys, time
def checksum(data):
    if len(data) % 2: data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xffff); total += total >> 16
    return ~total & 0xffff
target, spoofed, own = sys.argv[1:4]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
def packet(source, marker, seq):
    body = marker.encode()
    icmp = struct.pack("!BBHHH", 8, 0, 0, 0x7472, seq) + body
    icmp = struct.pack("!BBHHH", 8, 0, checksum(icmp), 0x7472, seq) + body
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), seq, 0, 64, 1, 0,
                         socket.inet_aton(source), socket.inet_aton(target))
    return header + icmp
for seq in range(40):
    s.sendto(packet(spoofed, "trog-spoofed", seq), (target, 0))
    s.sendto(packet(own, "trog-own", seq), (target, 0))
    time.sleep(0.5)
"#;

/// Listens for the echo requests of [`SEND_AS`] and prints `SOURCE MARKER` for each kind seen,
/// once; ends 3 s after the first `trog-own` (the sender was heard, and two spoofed ones were
/// sent since), or after 40 s.
const LISTEN: &str = r#"
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(1)
seen, end = set(), time.time() + 40
while time.time() < end:
    try: data, sender = s.recvfrom(2048)
    except socket.timeout: continue
    for marker in ("trog-spoofed", "trog-own"):
        if data[20] == 8 and data.endswith(marker.encode()):
            if marker == "trog-own" and not any(m == marker for _, m in seen):
                end = min(end, time.time() + 3)
            seen.add((sender[0], marker))
for source, marker in sorted(seen): print(source, marker)
"#;

/// Pings argv[1] (an IPv6 link-local address) on interface argv[2] three times, and prints
/// `yes` if it answered.
const PING6: &str = r#"
import socket, struct, sys
target, interface = sys.argv[1:3]
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.settimeout(1)
scope = socket.if_nametoindex(interface)
answered = False
for seq in range(3):
    s.sendto(struct.pack("!BBHHH", 128, 0, 0, 0x7472, seq) + b"trog", (target, 0, 0, scope))
    try:
        while True:
            data, sender = s.recvfrom(2048)
            if data[0] == 129 and sender[0].split("%")[0] == target: answered = True; break
    except socket.timeout: pass
    if answered: break
print("yes" if answered else "no")
"#;

/// A guest's live definition on this machine's libvirtd.
fn live_definition(guest: &DomainName) -> String {
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    connection
        .lookup_domain_by_name(guest.as_str())
        .unwrap()
        .xml_desc(0)
        .unwrap()
}

fn mac_of(definition: &str) -> MacAddress {
    let document = roxmltree::Document::parse(definition).unwrap();
    let text = document
        .descendants()
        .find(|node| node.has_tag_name("mac") && node.parent().unwrap().has_tag_name("interface"))
        .and_then(|node| node.attribute("address"))
        .unwrap();
    let bytes: Vec<u8> = text
        .split(':')
        .map(|byte| u8::from_str_radix(byte, 16).unwrap())
        .collect();
    MacAddress(bytes.try_into().unwrap())
}

/// The `<parameter>`s of the interface's filter reference: name and value.
fn filter_parameters(definition: &str) -> Vec<(String, String)> {
    let document = roxmltree::Document::parse(definition).unwrap();
    document
        .descendants()
        .filter(|node| node.has_tag_name("parameter"))
        .filter(|node| {
            node.parent()
                .is_some_and(|parent| parent.has_tag_name("filterref"))
        })
        .map(|node| {
            (
                node.attribute("name").unwrap().to_string(),
                node.attribute("value").unwrap().to_string(),
            )
        })
        .collect()
}

/// Every guest's filter is given its address, and told to learn none.
pub fn filters_name_each_guests_address(guests: &[(DomainName, String)]) {
    for (guest, address) in guests {
        let parameters = filter_parameters(&live_definition(guest));
        assert!(
            parameters.contains(&("IP".to_string(), address.clone()))
                && parameters.contains(&("CTRL_IP_LEARNING".to_string(), "none".to_string())),
            "{guest}: {parameters:?}"
        );
    }
}

/// `from` sends to `to` (a guest of its tenant) as the gateway and as itself: only what it sent
/// as itself arrives.
pub fn the_gateways_address_reaches_no_one(
    fleet: &Fleet,
    from: &(DomainName, String),
    to: &(DomainName, String),
    gateway: &str,
) {
    let quoted = |script: &str| script.replace('\'', "'\\''");
    let heard = std::thread::scope(|scope| {
        let listener = scope.spawn(|| {
            fleet.must(
                &to.0,
                &to.1,
                &format!("sudo python3 -c '{}'", quoted(LISTEN)),
            )
        });
        fleet.must(
            &from.0,
            &from.1,
            &format!(
                "sudo timeout 30 python3 -c '{}' {} {gateway} {}",
                quoted(SEND_AS),
                to.1,
                from.1
            ),
        );
        listener.join().unwrap()
    });
    assert!(
        heard.contains(&format!("{} trog-own", from.1)),
        "{} never heard {} from its own address, so the check proves nothing: {heard:?}",
        to.0,
        from.0
    );
    assert!(
        !heard.contains("trog-spoofed"),
        "{} heard {} sending as the gateway {gateway}: {heard:?}",
        to.0,
        from.0
    );
}

/// Two guests of one tenant, each given its own link-local address by hand (trog's seed gives a
/// statically addressed guest none): neither reaches the other over IPv6.
pub fn a_tenants_guests_have_no_ipv6(
    fleet: &Fleet,
    one: &(DomainName, String),
    other: &(DomainName, String),
    gateway: &str,
) {
    let link_local = |guest: &DomainName| link_local_address(mac_of(&live_definition(guest)));
    let interface_of = |guest: &(DomainName, String)| {
        fleet
            .must(
                &guest.0,
                &guest.1,
                &format!("ip -o route get {gateway} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'"),
            )
            .trim()
            .to_string()
    };
    let interfaces = [interface_of(one), interface_of(other)];
    for (guest, interface) in [one, other].into_iter().zip(&interfaces) {
        fleet.must(
            &guest.0,
            &guest.1,
            &format!(
                "sudo ip -6 addr add {}/64 dev {interface} nodad",
                link_local(&guest.0)
            ),
        );
    }
    let answer = fleet.must(
        &one.0,
        &one.1,
        &format!(
            "sudo python3 -c '{}' {} {}",
            PING6.replace('\'', "'\\''"),
            link_local(&other.0),
            interfaces[0]
        ),
    );
    for (guest, interface) in [one, other].into_iter().zip(&interfaces) {
        fleet.must(
            &guest.0,
            &guest.1,
            &format!(
                "sudo ip -6 addr del {}/64 dev {interface}",
                link_local(&guest.0)
            ),
        );
    }
    assert_eq!(
        answer.trim(),
        "no",
        "{} reached {} over IPv6: a tenant's guests have none",
        one.0,
        other.0
    );
}

/// The security types a guest's VNC display offers a viewer before any password is given.
fn vnc_security_types(guest: &DomainName) -> Vec<u8> {
    let definition = live_definition(guest);
    let document = roxmltree::Document::parse(&definition).unwrap();
    let port: u16 = document
        .descendants()
        .find(|node| node.has_tag_name("graphics") && node.attribute("type") == Some("vnc"))
        .and_then(|node| node.attribute("port"))
        .unwrap()
        .parse()
        .unwrap();
    let mut display = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    display
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut version = [0u8; 12];
    display.read_exact(&mut version).unwrap();
    assert!(version.starts_with(b"RFB 003."), "{version:?}");
    display.write_all(b"RFB 003.008\n").unwrap();
    let mut count = [0u8; 1];
    display.read_exact(&mut count).unwrap();
    let mut types = vec![0u8; usize::from(count[0])];
    display.read_exact(&mut types).unwrap();
    types
}

/// A guest's display lets no one in without a password (RFB security type 1, none, is not
/// offered; type 2 is VNC's password), before `debug_boot --vnc` and after it, which prints one.
pub fn displays_need_a_password(fleet: &Fleet, guest: &DomainName) {
    assert_eq!(vnc_security_types(guest), [2], "{guest}: no password asked");
    let vnc = run_verb("debug_boot", fleet.config(), &[guest.as_str(), "--vnc"]);
    let stdout = text(&vnc.stdout);
    assert!(vnc.status.success(), "{stdout}{}", text(&vnc.stderr));
    let password = stdout
        .lines()
        .find_map(|line| line.strip_prefix("password: "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("debug_boot --vnc printed no password: {stdout}"));
    assert_eq!(password.len(), 8, "{stdout}");
    assert_eq!(vnc_security_types(guest), [2], "{guest}: no password asked");
}
