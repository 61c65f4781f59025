//! Addresses and isolation, on the fleet's guests: the five provisioned at once share one
//! pool, one secret store and one base image's upload (one uploads, the others wait for it and
//! use it); the pool then holds exactly one base image with its boot files, each guest's disks
//! (a data volume for those that ask for one) and no partial upload; `status` says each is
//! converged. Each is given its own address from the installation's range. The guests of tenant
//! `shop` reach each other by ICMP and TCP, the one of `blog` probed reaches neither and is reached
//! by neither (tried from both sides); every guest reaches its gateway; a guest sending from an
//! address that is not its own gets no answer. At the end, a root-disk rebuild keeps the guest's
//! address, and run by a second installation sharing the hypervisor (an ips.db of its own) it
//! keeps the tenants apart; a tenant's filter stays while the tenant has a guest, and destroy
//! removes trog's network filters once no domain uses them, and leaves the pool its base image
//! alone. `own_addresses` checks the rest of what a guest may send as, on the same guests.

use crate::fleet::{Fleet, GATEWAY, UNHELD};
use crate::second_installation::SecondInstallation;
use crate::support::*;
use std::process::Output;
use trog::model::names::DomainName;

/// Probes from the guest, all at once: each argument `ping,TARGET[,SOURCE]` (ICMP echo) or
/// `tcp,TARGET[,SOURCE]` (a connection to port 22), sent from SOURCE if given; prints `yes` or
/// `no` for each, in order, on one line. One Python start and one SSH session for a guest's
/// probes, and the ones that must fail wait out their timeouts together. The test image has
/// python3 (cloud-init's) but no ping. Each probe has about eight seconds: under emulation, with
/// a libguestfs appliance booting beside it, a guest has been seen to take over three seconds to
/// answer a SYN; six echoes a second apart, and the kernel's SYN retransmits at 1, 3 and 7 s.
const PROBE: &str = r#"
import os, socket, struct, sys, threading, time
def checksum(data):
    if len(data) % 2: data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xffff); total += total >> 16
    return ~total & 0xffff
def ping(target, source, ident):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(1)
    if source: s.bind((source, 0))
    for seq in range(6):
        body = b"trog"
        packet = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + body
        packet = struct.pack("!BBHHH", 8, 0, checksum(packet), ident, seq) + body
        s.sendto(packet, (target, 0))
        until = time.time() + 1
        while time.time() < until:
            try: reply, sender = s.recvfrom(2048)
            except socket.timeout: break
            if sender[0] == target and reply[20] == 0 and struct.unpack("!H", reply[24:26])[0] == ident:
                return True
    return False
def tcp(target, source, ident):
    s = socket.socket(); s.settimeout(8)
    if source: s.bind((source, 0))
    try: s.connect((target, 22)); return True
    except OSError: return False
specs = [arg.split(",") for arg in sys.argv[1:]]
answers = [None] * len(specs)
def probe(index):
    kind, target, source = (specs[index] + [None])[:3]
    # Every probe its own echo identifier: each raw socket sees every reply.
    ident = (os.getpid() + index) & 0xffff
    answers[index] = (ping if kind == "ping" else tcp)(target, source, ident)
threads = [threading.Thread(target=probe, args=(index,)) for index in range(len(specs))]
for thread in threads: thread.start()
for thread in threads: thread.join()
print(" ".join("yes" if answer else "no" for answer in answers))
"#;

/// One probe and what it must find: `kind` is `ping` or `tcp`, `source` the address sent from.
struct Probe<'a> {
    kind: &'static str,
    target: &'a str,
    source: Option<&'a str>,
    reaches: bool,
    what: String,
}

fn probe<'a>(kind: &'static str, target: &'a str, reaches: bool, what: &str) -> Probe<'a> {
    Probe {
        kind,
        target,
        source: None,
        reaches,
        what: what.to_string(),
    }
}

/// Runs `probes` from `from` at once and fails, naming each, for every one that found otherwise.
fn expect(fleet: &Fleet, from: &(DomainName, String), probes: &[Probe]) {
    let script = PROBE.replace('\'', "'\\''");
    let specs: Vec<String> = probes
        .iter()
        .map(|probe| match probe.source {
            Some(source) => format!("{},{},{source}", probe.kind, probe.target),
            None => format!("{},{}", probe.kind, probe.target),
        })
        .collect();
    let answer = fleet.must(
        &from.0,
        &from.1,
        &format!("sudo python3 -c '{script}' {}", specs.join(" ")),
    );
    let found: Vec<bool> = answer
        .split_whitespace()
        .map(|word| match word {
            "yes" => true,
            "no" => false,
            other => panic!("the probe on {} answered {other:?}", from.0),
        })
        .collect();
    assert_eq!(found.len(), probes.len(), "{}: {answer:?}", from.0);
    let wrong: Vec<String> = probes
        .iter()
        .zip(&found)
        .filter(|(probe, found)| probe.reaches != **found)
        .map(|(probe, found)| {
            let said = if *found { "reaches" } else { "does not reach" };
            format!(
                "{} {said} ({} {}): {}",
                from.0, probe.kind, probe.target, probe.what
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The address a provision's summary gives `guest` on the hypervisor named `hypervisor`.
fn address_in(stdout: &str, guest: &DomainName, hypervisor: &str) -> String {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{guest} is on {hypervisor} at ")))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no address for {guest} in:\n{stdout}"))
        .to_string()
}

fn network_filters() -> Vec<String> {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    connection
        .list_all_nw_filters(0)
        .unwrap()
        .iter()
        .map(|filter| filter.name().unwrap())
        .collect()
}

/// Whether any domain on this libvirtd (other work's included) references `filter`.
fn filter_in_use(filter: &str) -> bool {
    !domains_using(filter).is_empty()
}

/// The domains on this libvirtd (other work's included) whose definition, running or the one
/// they start from next, references `filter`.
fn domains_using(filter: &str) -> Vec<String> {
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let reference = format!("filter='{filter}'");
    connection
        .list_all_domains(0)
        .unwrap()
        .iter()
        .filter(|domain| {
            [0, virt::sys::VIR_DOMAIN_XML_INACTIVE]
                .into_iter()
                .any(|flags| {
                    domain
                        .xml_desc(flags)
                        .is_ok_and(|xml| xml.contains(&reference))
                })
        })
        .filter_map(|domain| domain.name().ok())
        .collect()
}

fn volumes(pool: &str) -> Vec<String> {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let pool = connection.lookup_storage_pool_by_name(pool).unwrap();
    pool.refresh(0).unwrap();
    let mut names = pool.list_volumes().unwrap();
    names.sort();
    names
}

/// The base image's volume and its boot files: what the pool keeps once every guest is gone.
fn boot_files() -> Vec<String> {
    let digest = sha256_file(&test_image());
    let base = trog::plan::resource_names::base_image_volume(&digest);
    vec![
        base.clone(),
        format!("{base}.cmdline"),
        format!("{base}.initrd"),
        format!("{base}.kernel"),
        format!("{base}.network-stage"),
    ]
}

/// Right after the five provisions (`outputs`, in [`Fleet::five_at_once`]'s order): each
/// succeeded with its own address from the range, having read the base image's kernel whole;
/// one base image and its boot files in the pool, each guest's disks and nothing else (no partial
/// upload); each guest converged.
pub fn five_at_once_share_one_base_image(fleet: &Fleet, outputs: &[Output]) {
    let mut addresses = Vec::new();
    for (guest, output) in fleet.five_at_once().into_iter().zip(outputs) {
        let said = format!("{}\n{}", text(&output.stdout), text(&output.stderr));
        assert!(
            output.status.success(),
            "{guest} was not provisioned:\n{said}"
        );
        assert!(
            said.contains(&format!("{guest} is on local at ")),
            "{guest}:\n{said}"
        );
        // The five read the base image's kernel out of it at once: each got whole files.
        assert!(
            said.contains("the base image's kernel, started directly"),
            "{guest}:\n{said}"
        );
        let address = address_in(&text(&output.stdout), guest, "local");
        assert!(address.starts_with("192.168.122.23"), "{guest}: {address}");
        addresses.push(address);
    }
    let mut distinct = addresses.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), addresses.len(), "{addresses:?}");

    let mut expected = boot_files();
    for guest in fleet.five_at_once() {
        // No seed: each retired its own once its first boot was over.
        expected.push(format!("{guest}-root.qcow2"));
        if fleet.has_data_volume(guest) {
            expected.push(format!("{guest}-data.qcow2"));
        }
    }
    expected.sort();
    assert_eq!(volumes(&fleet.pool), expected);
    for guest in fleet.five_at_once() {
        let status = run_verb("status", fleet.config(), &[guest.as_str()]);
        assert_eq!(
            text(&status.stdout),
            format!("{guest}: on local, converged\n"),
            "{}",
            text(&status.stderr)
        );
    }
}

/// Each probed guest is reached over SSH at its assigned address, which it also carries; trog's
/// filters for both tenants exist.
pub fn each_guest_answers_at_its_address(fleet: &Fleet) {
    for guest in [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a] {
        let (guest, address) = fleet.ready(guest);
        assert!(address.starts_with("192.168.122.23"), "{guest}: {address}");
        assert!(fleet
            .must(&guest, &address, "ip -4 -o addr show")
            .contains(&format!("{address}/24")));
    }
    let filters = network_filters();
    for filter in ["trog-isolated", "trog-tenant-shop", "trog-tenant-blog"] {
        assert!(filters.contains(&filter.to_string()), "{filters:?}");
    }
}

/// Tenants: shop's guests reach each other; blog's reaches neither, nor is reached; all reach
/// the gateway.
pub fn tenants_are_kept_apart(fleet: &Fleet) {
    let [shop_a, shop_b, blog_a] =
        [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a].map(|guest| fleet.ready(guest));
    for (shop, other) in [(&shop_a, &shop_b), (&shop_b, &shop_a)] {
        expect(
            fleet,
            shop,
            &[
                probe("ping", &other.1, true, "the same tenant"),
                probe("tcp", &other.1, true, "the same tenant"),
                probe("ping", &blog_a.1, false, "another tenant"),
                probe("tcp", &blog_a.1, false, "another tenant"),
                probe("ping", GATEWAY, true, "the gateway"),
            ],
        );
    }
    expect(
        fleet,
        &blog_a,
        &[
            probe("ping", &shop_a.1, false, "another tenant"),
            probe("tcp", &shop_a.1, false, "another tenant"),
            probe("ping", &shop_b.1, false, "another tenant"),
            probe("tcp", &shop_b.1, false, "another tenant"),
            probe("ping", GATEWAY, true, "the gateway"),
        ],
    );
}

/// A foreign source address: blog's guest takes an address that is not its own (one no guest
/// holds, then shop-a's) and gets nothing through, not even from its gateway. It gives each
/// address back, and reaches its gateway from its own again.
pub fn a_foreign_source_gets_nothing_through(fleet: &Fleet) {
    let [shop_a, shop_b, blog_a] =
        [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a].map(|guest| fleet.ready(guest));
    let interface = fleet.must(
        &blog_a.0,
        &blog_a.1,
        "ip -o route get 192.168.122.1 | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'",
    );
    let interface = interface.trim();
    for foreign in [UNHELD, shop_a.1.as_str()] {
        fleet.must(
            &blog_a.0,
            &blog_a.1,
            &format!("sudo ip addr add {foreign}/32 dev {interface}"),
        );
        let spoofed = |target, what: &str| Probe {
            source: Some(foreign),
            ..probe("ping", target, false, what)
        };
        expect(
            fleet,
            &blog_a,
            &[
                spoofed(GATEWAY, "the gateway, from an address not its own"),
                spoofed(&shop_b.1, "another guest, from an address not its own"),
            ],
        );
        fleet.must(
            &blog_a.0,
            &blog_a.1,
            &format!("sudo ip addr del {foreign}/32 dev {interface}"),
        );
    }
    expect(
        fleet,
        &blog_a,
        &[probe(
            "ping",
            GATEWAY,
            true,
            "the gateway, from its own address again",
        )],
    );
}

/// A root-disk rebuild (a new disk size, and a shared folder) keeps shop-a's address, and its
/// isolation. It is run by a second installation sharing the hypervisor (reached over SSH, its
/// sudo password handed in and seen in no process listing, `second_installation.rs`),
/// whose ips.db knows shop-a only: its run rewrites
/// both tenants' filters, and the addresses only the fleet's installation knows (shop-b's,
/// blog's, the service guests') must stay in them.
pub fn a_second_installations_rebuild_keeps_tenants_apart(
    fleet: &Fleet,
    second: &SecondInstallation,
) {
    let [shop_a, shop_b, blog_a] =
        [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a].map(|guest| fleet.ready(guest));
    assert_eq!(second.guest, shop_a.0);
    let rebuilt = second.provision_watching_process_listings();
    let said = format!("{}\n{}", text(&rebuilt.stdout), text(&rebuilt.stderr));
    assert!(rebuilt.status.success(), "{said}");
    assert!(
        said.contains("root"),
        "the plan did not rebuild the root disk:\n{said}"
    );
    assert_eq!(
        address_in(
            &text(&rebuilt.stdout),
            &shop_a.0,
            SecondInstallation::HYPERVISOR
        ),
        shop_a.1
    );
    let after = "after another installation's run";
    expect(
        fleet,
        &shop_b,
        &[
            probe("tcp", &shop_a.1, true, after),
            probe("ping", &blog_a.1, false, after),
            probe("tcp", &blog_a.1, false, after),
        ],
    );
    expect(
        fleet,
        &blog_a,
        &[
            probe("ping", &shop_a.1, false, after),
            probe("tcp", &shop_a.1, false, after),
            probe("ping", &shop_b.1, false, after),
            probe("tcp", &shop_b.1, false, after),
        ],
    );
}

/// Destroys `guest` with its volumes: its disks go from the pool. Returns what the destroy
/// printed on standard output (what it removed, kept and left).
fn destroy(fleet: &Fleet, guest: &DomainName) -> String {
    let purge = run_verb(
        "destroy",
        fleet.config(),
        &["--purge", "--yes", guest.as_str()],
    );
    assert!(
        purge.status.success(),
        "{}\n{}",
        text(&purge.stdout),
        text(&purge.stderr)
    );
    let left = volumes(&fleet.pool);
    assert!(
        !left.iter().any(|volume| volume.starts_with(guest.as_str())),
        "{left:?}"
    );
    format!("destroy {guest}:\n{}", text(&purge.stdout))
}

/// The fleet's end. The two guests with data volumes besides the hub (blog-b, the leaf) go
/// first, with their disks, and their tenants' filters stay for the guests left. Then
/// the rest (shop-a is gone already, destroyed by the second installation, unless that check
/// failed): the tenants' filters go with their last guests, and the pool keeps only the shared
/// base image and its boot files.
pub fn filters_go_with_their_tenants_last_guest(fleet: &Fleet) {
    for guest in fleet.all() {
        fleet.ready(guest);
    }
    for guest in [&fleet.blog_b, &fleet.leaf] {
        destroy(fleet, guest);
    }
    let filters = network_filters();
    for filter in ["trog-tenant-shop", "trog-tenant-blog"] {
        assert!(
            filters.contains(&filter.to_string()),
            "{filter} went while its tenant still has a guest: {filters:?}"
        );
    }
    let mut rest = vec![&fleet.hub, &fleet.shop_b, &fleet.blog_a];
    if domain_exists(fleet.shop_a.as_str()) {
        rest.push(&fleet.shop_a);
    }
    let said: Vec<String> = rest
        .into_iter()
        .map(|guest| destroy(fleet, guest))
        .collect();
    assert_eq!(volumes(&fleet.pool), boot_files());
    let filters = network_filters();
    // The fleet's tenants have no guest left here, other work's included.
    for filter in ["trog-tenant-shop", "trog-tenant-blog"] {
        assert!(
            !filters.contains(&filter.to_string()),
            "{filter} outlived its tenant's last guest; the domains using it: {:?}; \
             what the destroys said:\n{}",
            domains_using(filter),
            said.join("\n")
        );
    }
    // Other work's guests reference trog-guest (which builds on trog-isolated and trog-ipv6)
    // or, defined before it existed, trog-isolated itself. Other work defines and destroys its
    // guests meanwhile, and its destroy removes the filters its guest was the last to use a
    // moment after the domain goes: the filters are read between two readings of their users
    // until the users held still and the filters agree with them, for at most a minute.
    let users = || (filter_in_use("trog-isolated"), filter_in_use("trog-guest"));
    let agrees = |filters: &[String], (isolated_used, guest_used): (bool, bool)| {
        let has = |name: &str| filters.iter().any(|filter| filter == name);
        has("trog-isolated") == (isolated_used || guest_used)
            && has("trog-guest") == guest_used
            && has("trog-ipv6") == guest_used
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (filters, used) = loop {
        let before = users();
        let filters = network_filters();
        let after = users();
        if (before == after && agrees(&filters, after)) || std::time::Instant::now() >= deadline {
            break (filters, after);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    let (isolated_used, guest_filter_used) = used;
    assert_eq!(
        filters.contains(&"trog-isolated".to_string()),
        isolated_used || guest_filter_used,
        "trog-isolated stays exactly while another domain uses it: {filters:?}"
    );
    for filter in ["trog-guest", "trog-ipv6"] {
        assert_eq!(
            filters.contains(&filter.to_string()),
            guest_filter_used,
            "{filter} stays exactly while another domain uses trog-guest: {filters:?}"
        );
    }
}
