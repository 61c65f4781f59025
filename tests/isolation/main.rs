//! Addresses and isolation on real guests, and five guests provisioned at once: five processes
//! started together on libvirt's NAT network, one pool, one secret store, one base image's
//! upload (one uploads, the others wait for it and use it). All five finish; the pool then holds
//! exactly one base image with its boot files, each guest's disks (a data volume for the two that
//! ask for one) and no partial upload; `status` says each is converged. Each is given its own
//! address from the installation's range (three of tenant `shop`, two of tenant `blog`); the
//! two with data volumes are then destroyed, and their tenants' filters stay for the others.
//! Each of the three left answers SSH at its address; the two of `shop` reach each other by ICMP
//! and TCP, the one of `blog` reaches neither and is reached by neither (tried from both sides);
//! every guest reaches its gateway; a guest sending from an address that is not its own gets no
//! answer; a root-disk rebuild keeps the guest's address, and run by a second installation
//! sharing the hypervisor (an ips.db of its own) it keeps the tenants apart; destroy removes
//! trog's network filters once no domain uses them, and leaves the pool its base image alone.
//! `own_addresses` checks, on the same guests, that each filter names its guest's address and
//! learns none, that a guest sending as the gateway reaches no one, that a tenant's guests have
//! no IPv6, and that every display needs a password.
//!
//! Software emulation on a small machine: the guests are given little memory and one CPU each.

#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

mod own_addresses;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::*;
use trog::model::names::DomainName;

/// The addresses this test hands out: kept apart from the other tests' ranges on the shared
/// default network.
const RANGE: &str = "192.168.122.230-192.168.122.237/24";
/// An address of the range no guest holds: what a guest pretending to be another sends from.
const UNHELD: &str = "192.168.122.237";
const GATEWAY: &str = "192.168.122.1";
/// The guests kept for the isolation checks; the others are destroyed once all five were
/// provisioned at once and checked.
const KEPT_GUESTS: usize = 3;

/// Probes from the guest, all at once: each argument `ping,TARGET[,SOURCE]` (ICMP echo) or
/// `tcp,TARGET[,SOURCE]` (a connection to port 22), sent from SOURCE if given; prints `yes` or
/// `no` for each, in order, on one line. One Python start and one SSH session for a guest's
/// probes, and the ones that must fail wait out their timeouts together. The test image has
/// python3 (cloud-init's) but no ping.
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
    for seq in range(3):
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
    s = socket.socket(); s.settimeout(3)
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

struct Installation {
    dir: tempfile::TempDir,
    pool: String,
    guests: Vec<DomainName>,
}

fn installation(unique: u32) -> Installation {
    let dir = tempfile::Builder::new()
        .prefix("trog-isolation-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let pool = format!("trog-iso-{unique}");
    let pool_path = dir.path().join("pool");
    let image = test_image();
    std::fs::write(
        dir.path().join("hypervisors.conf"),
        format!(
            "[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool}\npool_path = {}\nreserve_memory = 512\nreserve_disk = 1G\ncpu_overcommit = 100\n",
            pool_path.display()
        ),
    )
    .unwrap();
    // The empty archive's URL is filled in by the caller (the mirror server's port). The first
    // three carry the isolation checks; the last two, with data volumes, make it five at once.
    let guests: Vec<DomainName> = ["shop-a", "shop-b", "blog-a", "shop-c", "blog-b"]
        .iter()
        .map(|name| DomainName::parse(&format!("{name}-{unique}.test")).unwrap())
        .collect();
    let recipes_d = dir.path().join("recipes.d");
    std::fs::create_dir_all(&recipes_d).unwrap();
    for (n, guest) in guests.iter().enumerate() {
        let tenant = guest.as_str().split('-').next().unwrap();
        let mut file = guest_file(guest, tenant, "4G", &image);
        if n >= KEPT_GUESTS {
            file = file.replace("    size: 4G\n", "    size: 4G\n    data_volume_size: 1G\n");
        }
        std::fs::write(recipes_d.join(format!("{guest}.yaml")), file).unwrap();
    }
    Installation { dir, pool, guests }
}

/// A second installation on the same hypervisor and pool that knows only `guest` (given a 5G
/// root disk): its own ips.db holds that guest's address and tenant and nothing else; it shares
/// the first one's secret store (the guest's key) and image cache.
fn second_installation(first: &Installation, guest: &DomainName) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("trog-isolation-second-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for file in ["hypervisors.conf", "recipes.yaml", "secrets.kdbx"] {
        std::fs::copy(first.dir.path().join(file), dir.path().join(file)).unwrap();
    }
    // Copied by SQLite itself: the first installation's ips.db is in WAL mode.
    rusqlite::Connection::open(first.dir.path().join("ips.db"))
        .unwrap()
        .execute(
            "VACUUM INTO ?1",
            [dir.path().join("ips.db").to_str().unwrap()],
        )
        .unwrap();
    std::os::unix::fs::symlink(first.dir.path().join("cache"), dir.path().join("cache")).unwrap();
    let recipes_d = dir.path().join("recipes.d");
    std::fs::create_dir_all(&recipes_d).unwrap();
    std::fs::write(
        recipes_d.join(format!("{guest}.yaml")),
        guest_file(guest, "shop", "5G", &test_image()),
    )
    .unwrap();
    let ips_db = rusqlite::Connection::open(dir.path().join("ips.db")).unwrap();
    for table in ["holdings", "tenants"] {
        ips_db
            .execute(
                &format!("DELETE FROM {table} WHERE guest != ?1"),
                [guest.as_str()],
            )
            .unwrap();
    }
    dir
}

fn guest_file(guest: &DomainName, tenant: &str, size: &str, image: &Path) -> String {
    format!(
        "{guest}:\n  _global:\n    tenant: {tenant}\n    memory: 640\n    cpus: 1\n    size: {size}\n    image:\n      url: file://{}\n      sha256: {}\n",
        image.display(),
        sha256_file(image)
    )
}

fn write_recipes_yaml(installation: &Installation, mirror_url: &str) {
    std::fs::write(
        installation.dir.path().join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror_url}\n    upgrade: false\n    network: default\n    address_range: {RANGE}\n    gateway: {GATEWAY}\n    resolvers: [{GATEWAY}]\n"
        ),
    )
    .unwrap();
}

/// Runs `command` on `guest` (at `address`) as its admin, with its key from the secret store.
fn on_guest(
    installation: &Installation,
    guest: &DomainName,
    address: &str,
    command: &str,
) -> String {
    ssh_as_admin(installation.dir.path(), guest, address, command)
        .unwrap_or_else(|stderr| panic!("`{command}` on {guest} ({address}): {stderr}"))
}

/// Runs `probes` from `from` at once and fails, naming each, for every one that found otherwise.
fn expect(installation: &Installation, from: &(DomainName, String), probes: &[Probe]) {
    let script = PROBE.replace('\'', "'\\''");
    let specs: Vec<String> = probes
        .iter()
        .map(|probe| match probe.source {
            Some(source) => format!("{},{},{source}", probe.kind, probe.target),
            None => format!("{},{}", probe.kind, probe.target),
        })
        .collect();
    let answer = on_guest(
        installation,
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

fn address_in(stdout: &str, guest: &DomainName) -> String {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{guest} is on local at ")))
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
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    connection
        .list_all_domains(0)
        .unwrap()
        .iter()
        .any(|domain| {
            domain
                .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)
                .is_ok_and(|xml| xml.contains(&format!("filter='{filter}'")))
        })
}

struct Cleanup<'a> {
    installation: &'a Installation,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for guest in &self.installation.guests {
            let _ = run_verb(
                "destroy",
                self.installation.dir.path(),
                &["--purge", "--yes", guest.as_str()],
            );
        }
        let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
        if let Ok(pool) = connection.lookup_storage_pool_by_name(&self.installation.pool) {
            if let Ok(volumes) = pool.list_all_volumes(0) {
                for volume in volumes {
                    let _ = volume.delete(0);
                }
            }
            let _ = pool.destroy();
            let _ = pool.undefine();
        }
    }
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

/// Right after the five provisions: one base image and its boot files in the pool, each guest's
/// disks and nothing else (no partial upload), each guest converged. Then the guests past
/// `KEPT_GUESTS` are destroyed, and their tenants' filters stay for the guests left. Returns the
/// base image's volumes, what the pool keeps once every guest is gone.
fn five_at_once_share_one_base_image(installation: &Installation) -> Vec<String> {
    let config = installation.dir.path();
    let digest = sha256_file(&test_image());
    let base = trog::plan::resource_names::base_image_volume(&digest);
    let boot_files = vec![
        base.clone(),
        format!("{base}.cmdline"),
        format!("{base}.initrd"),
        format!("{base}.kernel"),
        format!("{base}.network-stage"),
    ];
    let mut expected = boot_files.clone();
    for (n, guest) in installation.guests.iter().enumerate() {
        // No seed: each retired its own once its first boot was over.
        expected.push(format!("{guest}-root.qcow2"));
        if n >= KEPT_GUESTS {
            expected.push(format!("{guest}-data.qcow2"));
        }
    }
    expected.sort();
    assert_eq!(volumes(&installation.pool), expected);
    for guest in &installation.guests {
        let status = run_verb("status", config, &[guest.as_str()]);
        assert_eq!(
            text(&status.stdout),
            format!("{guest}: on local, converged\n"),
            "{}",
            text(&status.stderr)
        );
    }
    for guest in &installation.guests[KEPT_GUESTS..] {
        let purge = run_verb("destroy", config, &["--purge", "--yes", guest.as_str()]);
        assert!(
            purge.status.success(),
            "{}\n{}",
            text(&purge.stdout),
            text(&purge.stderr)
        );
        let left = volumes(&installation.pool);
        assert!(
            !left.iter().any(|volume| volume.starts_with(guest.as_str())),
            "{left:?}"
        );
    }
    let filters = network_filters();
    for filter in ["trog-tenant-shop", "trog-tenant-blog"] {
        assert!(
            filters.contains(&filter.to_string()),
            "{filter} went while its tenant still has a guest: {filters:?}"
        );
    }
    boot_files
}

#[test]
fn tenants_are_kept_apart_on_real_guests() {
    let unique = std::process::id();
    let mirror_root = tempfile::tempdir().unwrap();
    write_empty_archive(mirror_root.path());
    let mirror = MirrorServer::start(mirror_root.path(), 19000 + (unique % 1000) as u16);
    let installation = installation(unique);
    write_recipes_yaml(&installation, &mirror.url);
    let _cleanup = Cleanup {
        installation: &installation,
    };
    let config = installation.dir.path();

    // The five at once, each its own run: the first to get there makes the secret store and
    // uploads the base image while the others wait for it, ips.db hands out five addresses, and
    // each run's filters learn the others'.
    let runs: Vec<_> = installation
        .guests
        .iter()
        .map(|guest| spawn_verb("provision", config, &[guest.as_str()]))
        .collect();
    let mut stdout = String::new();
    for (guest, run) in installation.guests.iter().zip(runs) {
        let output = run.wait_with_output().unwrap();
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
        stdout.push_str(&text(&output.stdout));
    }
    let all: Vec<(DomainName, String)> = installation
        .guests
        .iter()
        .map(|guest| (guest.clone(), address_in(&stdout, guest)))
        .collect();
    let mut addresses: Vec<&String> = all.iter().map(|(_, address)| address).collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), all.len(), "{all:?}");
    for (guest, address) in &all {
        assert!(address.starts_with("192.168.122.23"), "{guest}: {address}");
    }
    let boot_files = five_at_once_share_one_base_image(&installation);
    let guests = all[..KEPT_GUESTS].to_vec();
    let [shop_a, shop_b, blog_a] = [&guests[0], &guests[1], &guests[2]];
    for (guest, address) in &guests {
        assert!(address.starts_with("192.168.122.23"), "{guest}: {address}");
        // Reached over SSH at its assigned address, which it also carries.
        assert!(
            on_guest(&installation, guest, address, "ip -4 -o addr show")
                .contains(&format!("{address}/24"))
        );
    }
    let filters = network_filters();
    for filter in ["trog-isolated", "trog-tenant-shop", "trog-tenant-blog"] {
        assert!(filters.contains(&filter.to_string()), "{filters:?}");
    }

    // Tenants: shop's guests reach each other; blog's reaches neither, nor is reached; all reach
    // the gateway.
    for (shop, other) in [(shop_a, shop_b), (shop_b, shop_a)] {
        expect(
            &installation,
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
        &installation,
        blog_a,
        &[
            probe("ping", &shop_a.1, false, "another tenant"),
            probe("tcp", &shop_a.1, false, "another tenant"),
            probe("ping", &shop_b.1, false, "another tenant"),
            probe("tcp", &shop_b.1, false, "another tenant"),
            probe("ping", GATEWAY, true, "the gateway"),
        ],
    );

    // A foreign source address: blog's guest takes an address that is not its own (one no
    // guest holds, then shop-a's) and gets nothing through, not even from its gateway.
    let interface = on_guest(
        &installation,
        &blog_a.0,
        &blog_a.1,
        "ip -o route get 192.168.122.1 | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'",
    );
    let interface = interface.trim();
    for foreign in [UNHELD, shop_a.1.as_str()] {
        on_guest(
            &installation,
            &blog_a.0,
            &blog_a.1,
            &format!("sudo ip addr add {foreign}/32 dev {interface}"),
        );
        let spoofed = |target, what: &str| Probe {
            source: Some(foreign),
            ..probe("ping", target, false, what)
        };
        expect(
            &installation,
            blog_a,
            &[
                spoofed(GATEWAY, "the gateway, from an address not its own"),
                spoofed(&shop_b.1, "another guest, from an address not its own"),
            ],
        );
        on_guest(
            &installation,
            &blog_a.0,
            &blog_a.1,
            &format!("sudo ip addr del {foreign}/32 dev {interface}"),
        );
    }
    expect(
        &installation,
        blog_a,
        &[probe(
            "ping",
            GATEWAY,
            true,
            "the gateway, from its own address again",
        )],
    );

    // Each filter names its guest's address and learns none; the gateway's address, sent from
    // by hand, reaches no one; IPv6 is not a way round the tenants; displays need a password.
    own_addresses::filters_name_each_guests_address(&guests);
    own_addresses::the_gateways_address_reaches_no_one(&installation, shop_a, shop_b, GATEWAY);
    own_addresses::a_tenants_guests_have_no_ipv6(&installation, shop_a, shop_b, GATEWAY);
    own_addresses::displays_need_a_password(&installation, &shop_b.0);

    // A root-disk rebuild (a new disk size) keeps shop-a's address, and its isolation. It is run
    // by a second installation sharing the hypervisor, whose ips.db knows shop-a only: its run
    // rewrites both tenants' filters, and the addresses only the first installation knows
    // (shop-b's, blog's) must stay in them.
    let second = second_installation(&installation, &shop_a.0);
    let rebuilt = run_verb("provision", second.path(), &[shop_a.0.as_str()]);
    let said = format!("{}\n{}", text(&rebuilt.stdout), text(&rebuilt.stderr));
    assert!(rebuilt.status.success(), "{said}");
    assert!(
        said.contains("root"),
        "the plan did not rebuild the root disk:\n{said}"
    );
    assert_eq!(address_in(&text(&rebuilt.stdout), &shop_a.0), shop_a.1);
    let after = "after another installation's run";
    expect(
        &installation,
        shop_b,
        &[
            probe("tcp", &shop_a.1, true, after),
            probe("ping", &blog_a.1, false, after),
            probe("tcp", &blog_a.1, false, after),
        ],
    );
    expect(
        &installation,
        blog_a,
        &[
            probe("ping", &shop_a.1, false, after),
            probe("tcp", &shop_a.1, false, after),
            probe("ping", &shop_b.1, false, after),
            probe("tcp", &shop_b.1, false, after),
        ],
    );

    // Destroyed: the tenants' filters go with their last guests, and the pool keeps only the
    // shared base image and its boot files.
    for guest in &installation.guests[..KEPT_GUESTS] {
        let destroy = run_verb("destroy", config, &["--purge", "--yes", guest.as_str()]);
        assert!(destroy.status.success(), "{}", text(&destroy.stderr));
    }
    assert_eq!(volumes(&installation.pool), boot_files);
    let filters = network_filters();
    assert!(
        !filters.iter().any(|name| name.starts_with("trog-tenant-")),
        "{filters:?}"
    );
    // Other work's guests reference trog-guest (which builds on trog-isolated and trog-ipv6)
    // or, defined before it existed, trog-isolated itself.
    let guest_filter_used = filter_in_use("trog-guest");
    assert_eq!(
        filters.contains(&"trog-isolated".to_string()),
        filter_in_use("trog-isolated") || guest_filter_used,
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
