//! A static address that libvirt's `default` network has leased to a running domain is not
//! reserved for a guest: a reservation would not take the lease back, and two machines would
//! answer at one address until it ran out. The lease is real: busybox's udhcpc in a network
//! namespace of its own, on the bridge through a veth pair, asks dnsmasq for it, and libvirt
//! reports it. The domain is real too: a diskless one that runs (its firmware finds nothing to
//! boot) with an interface of the same MAC, plugged into no network, as libvirt sees a machine
//! holding a lease. Without it running, the same lease is a stale one, and no obstacle.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use trog::libvirt::network_leases::network_leases;
use trog::libvirt::reservation::{
    address_leased_elsewhere, dhcp_hosts, release_reservation, reserve_address,
};

const URI: &str = "qemu:///system";
/// A DHCP answer on the bridge takes well under a second; emulated guests may keep dnsmasq busy.
const LEASE_TIMEOUT: Duration = Duration::from_secs(60);

/// A machine on the default network's bridge that asked its DHCP for a lease; gone when dropped
/// (its client releases the lease as it ends, then its namespace and link go).
struct LeasingMachine {
    /// Holds the client's script and the address it wrote down.
    scratch: tempfile::TempDir,
    namespace: String,
    link: String,
    client: Child,
    mac: String,
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}");
}

impl LeasingMachine {
    fn start(mac: &str) -> LeasingMachine {
        let id = std::process::id();
        let scratch = tempfile::tempdir().unwrap();
        let namespace = format!("trog-lease-{id}");
        // Interface names are at most 15 characters.
        let link = format!("tl{}", id % 100_000_000);
        let inner = format!("tn{}", id % 100_000_000);
        ip(&["netns", "add", &namespace]);
        ip(&["link", "add", &link, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &namespace]);
        ip(&["link", "set", &link, "master", "virbr0", "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &namespace, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["link", "set", &inner, "address", mac, "up"]);
        // In the foreground, releasing its lease when it ends. Its script puts the leased
        // address on the namespace's link (and touches nothing else, the machine's resolv.conf
        // least of all): the release is sent from that address. It writes the address down
        // once bound.
        let script = scratch.path().join("udhcpc.script");
        let bound = scratch.path().join("bound");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncase \"$1\" in bound|renew)\n  ip addr flush dev \"$interface\"\n  \
                 ip addr add \"$ip/${{mask:-24}}\" dev \"$interface\"\n  \
                 echo \"$ip\" >{}.new && mv {}.new {};;\nesac\n",
                bound.display(),
                bound.display(),
                bound.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let client = Command::new("ip")
            .args(["netns", "exec", &namespace, "busybox", "udhcpc", "-f", "-R"])
            .args(["-t", "20", "-T", "2", "-i", &inner, "-s"])
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        LeasingMachine {
            scratch,
            namespace,
            link,
            client,
            mac: mac.to_string(),
        }
    }

    /// The address the network's DHCP leased it, once it is bound to it and libvirt reports the
    /// lease (a lease an earlier run of this test left is the same MAC's, and is not taken for
    /// this one).
    fn leased_address(&self, connection: &virt::connect::Connect) -> Ipv4Addr {
        let network = connection.lookup_network_by_name("default").unwrap();
        let started = Instant::now();
        let address: Ipv4Addr = loop {
            if let Ok(text) = std::fs::read_to_string(self.scratch.path().join("bound")) {
                break text.trim().parse().unwrap();
            }
            assert!(
                started.elapsed() < LEASE_TIMEOUT,
                "{} had no lease after {LEASE_TIMEOUT:?}",
                self.mac
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        loop {
            let leases = network_leases(&network, URI).unwrap();
            if leases
                .iter()
                .any(|lease| lease.mac.eq_ignore_ascii_case(&self.mac) && lease.address == address)
            {
                return address;
            }
            assert!(
                started.elapsed() < LEASE_TIMEOUT,
                "libvirt does not report {}'s lease of {address} after {LEASE_TIMEOUT:?}: {leases:?}",
                self.mac
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LeasingMachine {
    fn drop(&mut self) {
        // SIGTERM: udhcpc sends its release, then ends.
        let _ = Command::new("kill")
            .args(["-TERM", &self.client.id().to_string()])
            .status();
        let _ = self.client.wait();
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.namespace])
            .status();
    }
}

/// `trog provision --dry-run` of a new guest whose `ips` name `address` on the default network,
/// in an installation of its own on this machine's libvirtd (its pool is never made).
fn dry_run_with_address(address: Ipv4Addr) -> std::process::Output {
    let installation = tempfile::tempdir().unwrap();
    let dir = installation.path();
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(checkout.join("etc/recipes.yaml"), dir.join("recipes.yaml")).unwrap();
    std::fs::create_dir(dir.join("recipes.d")).unwrap();
    let guest = format!("leasecheck-{}.test", std::process::id());
    std::fs::write(
        dir.join(format!("recipes.d/{guest}.yaml")),
        format!(
            "{guest}:\n  _global:\n    ips: [{address}/24]\n    gateway: 192.168.122.1\n    \
             resolvers: [192.168.122.1]\n  nginx: {{}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("hypervisors.conf"),
        format!(
            "[local]\nlibvirt_uri = {URI}\ndomain_type = qemu\npool_name = trog-leasecheck-{}\n\
             pool_path = {}\ncpu_overcommit = 100\n",
            std::process::id(),
            dir.join("pool").display()
        ),
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(["provision", "--dry-run", &guest])
        .env("TROG_PROVISIONER_CONFIG", dir)
        .env("TROG_RECIPES", checkout.join("recipes"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A diskless domain that runs with one interface of a given MAC, plugged into nothing (type
/// `ethernet`): its firmware finds nothing to boot and waits. Transient: gone once destroyed,
/// which dropping it does.
struct RunningHolder(virt::domain::Domain);

impl RunningHolder {
    fn start(connection: &virt::connect::Connect, mac: &str) -> RunningHolder {
        // Named as the tests' guests are, so a stopped run's leftover is recognised.
        let name = format!("trog-leaseholder-{}", std::process::id());
        let xml = format!(
            "<domain type='qemu'><name>{name}</name><memory unit='MiB'>32</memory>\
             <vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices>\
             <interface type='ethernet'><mac address='{mac}'/><model type='e1000'/>\
             <rom enabled='no'/></interface></devices></domain>"
        );
        RunningHolder(connection.create_domain_xml(&xml, 0).unwrap())
    }

    fn name(&self) -> String {
        self.0.name().unwrap()
    }
}

impl Drop for RunningHolder {
    fn drop(&mut self) {
        let _ = self.0.destroy();
    }
}

#[test]
fn an_address_a_running_domain_holds_a_lease_on_is_not_reserved_and_nothing_changes() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some(URI)).unwrap();
    let other = LeasingMachine::start("52:54:00:7e:57:40");
    let address = other.leased_address(&connection);
    let network = connection.lookup_network_by_name("default").unwrap();
    // Other tests change the network's reservations meanwhile: only this address's are looked at.
    let reservations_of_the_address = || {
        dhcp_hosts(&network.xml_desc(0).unwrap())
            .unwrap()
            .into_iter()
            .filter(|host| host.ip.as_deref() == Some(address.to_string().as_str()))
            .collect::<Vec<_>>()
    };
    let before = reservations_of_the_address();
    let guest_mac = "52:54:00:7e:57:41";

    // No running domain has the holder's MAC: the lease is a stale one (a destroyed guest's, as
    // far as libvirt can tell), and the address is the guest's.
    assert!(reserve_address(&connection, URI, "default", guest_mac, address).unwrap());
    assert!(release_reservation(&connection, URI, "default", address).unwrap());
    assert_eq!(reservations_of_the_address(), before);

    // A running domain has it: refused, and the network is left as it was.
    let holder = RunningHolder::start(&connection, &other.mac);
    let refused = reserve_address(&connection, URI, "default", guest_mac, address).unwrap_err();
    let said = refused.chain().join(": ");
    assert!(
        said.contains(&format!(
            "{address} is leased by network default's DHCP to {} ({}), which is running, until ",
            holder.name(),
            other.mac
        )),
        "{said}"
    );
    assert_eq!(refused.status, trog::exit_status::ExitStatus::Conflict);
    assert!(
        refused
            .hint
            .as_deref()
            .is_some_and(|hint| hint.contains(&format!("shut {} off first", holder.name()))),
        "{refused:?}"
    );
    assert_eq!(
        reservations_of_the_address(),
        before,
        "the network was changed"
    );

    // A dry run asks the same, changes nothing, and is refused the same way, after its plan.
    let asked = address_leased_elsewhere(&connection, URI, "default", guest_mac, address)
        .unwrap()
        .expect("the running holder is named");
    assert_eq!(asked.holder_domain, holder.name());
    let dry_run = dry_run_with_address(address);
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&dry_run.stdout),
        String::from_utf8_lossy(&dry_run.stderr)
    );
    assert_eq!(dry_run.status.code(), Some(7), "{said}");
    assert!(said.contains("define the domain"), "{said}");
    assert!(
        said.contains(&format!(
            "{address} is leased by network default's DHCP to {} ({}), which is running",
            holder.name(),
            other.mac
        )),
        "{said}"
    );
    assert_eq!(
        reservations_of_the_address(),
        before,
        "the network was changed"
    );

    // The holder itself may have its address reserved (a guest keeping the address it leased).
    assert!(reserve_address(&connection, URI, "default", &other.mac, address).unwrap());
    assert!(release_reservation(&connection, URI, "default", address).unwrap());
    drop(holder);
    drop(other);
}

/// A network defined but not running: its leases read as none, and a reservation in it is made
/// in its definition alone.
#[test]
fn a_reservation_in_a_network_that_is_not_running_is_made_in_its_definition() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some(URI)).unwrap();
    let id = std::process::id();
    let name = format!("trog-idle-{id}");
    let xml = format!(
        "<network><name>{name}</name><bridge name='tib{}'/>\
         <ip address='10.251.0.1' netmask='255.255.255.0'><dhcp>\
         <range start='10.251.0.2' end='10.251.0.99'/></dhcp></ip></network>",
        id % 100_000_000
    );
    let network = connection.define_network_xml(&xml).unwrap();
    struct Undefine(virt::network::Network);
    impl Drop for Undefine {
        fn drop(&mut self) {
            let _ = self.0.undefine();
        }
    }
    let _undefine = Undefine(network);
    let address: Ipv4Addr = "10.251.0.150".parse().unwrap();
    let made = reserve_address(&connection, URI, &name, "52:54:00:7e:57:42", address);
    assert!(made.as_ref().is_ok_and(|made| *made), "{made:?}");
    let network = connection.lookup_network_by_name(&name).unwrap();
    assert!(!network.is_active().unwrap());
    let hosts = dhcp_hosts(
        &network
            .xml_desc(virt::sys::VIR_NETWORK_XML_INACTIVE)
            .unwrap(),
    )
    .unwrap();
    assert!(
        hosts
            .iter()
            .any(|host| host.ip.as_deref() == Some("10.251.0.150")),
        "{hosts:?}"
    );
}

/// What preflight reads of the networks: each network's DHCP pool as libvirt has it, here the
/// default network's, which tests/services/libvirt.sh narrows to end below the tests' address
/// ranges (.200 and above).
#[test]
fn preflight_reads_each_networks_dhcp_pool() {
    let uri = trog::model::hypervisor::LibvirtUri::parse(URI).unwrap();
    let facts = trog::libvirt::facts::libvirt_facts(&uri, "no-such-pool").unwrap();
    let default: Vec<_> = facts
        .dhcp_pools
        .iter()
        .filter(|pool| pool.network == "default")
        .collect();
    assert_eq!(default.len(), 1, "{:?}", facts.dhcp_pools);
    assert_eq!(default[0].first, Ipv4Addr::new(192, 168, 122, 2));
    assert!(
        default[0].last < Ipv4Addr::new(192, 168, 122, 200),
        "{:?}",
        default[0]
    );
}
