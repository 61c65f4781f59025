//! `tests/services/sweep-leftovers.sh`, which `.ci/run` runs before the tests: what a test run
//! killed before its cleanup left on this machine's libvirtd (a shut-off domain and a pool
//! named with the id of a process that is gone, and the domain's DHCP reservation) is removed;
//! the same things named with a running process's id, and a domain named otherwise, stay.

use std::process::Command;

const URI: &str = "qemu:///system";

/// The id of a process that has ended (reaped: nothing runs under it now).
fn a_dead_process_id() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let id = child.id();
    child.wait().unwrap();
    id
}

fn define_domain(connection: &virt::connect::Connect, name: &str, mac: &str) {
    let xml = format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>\
         <os><type arch='x86_64'>hvm</type></os><devices><interface type='network'>\
         <source network='default'/><mac address='{mac}'/></interface></devices></domain>"
    );
    connection.define_domain_xml(&xml).unwrap();
}

fn define_pool(connection: &virt::connect::Connect, name: &str, path: &std::path::Path) {
    std::fs::create_dir_all(path).unwrap();
    let xml = format!(
        "<pool type='dir'><name>{name}</name><target><path>{}</path></target></pool>",
        path.display()
    );
    let pool = connection.define_storage_pool_xml(&xml, 0).unwrap();
    pool.create(0).unwrap();
    let volume = "<volume><name>left.qcow2</name><capacity unit='M'>1</capacity>\
                  <target><format type='qcow2'/></target></volume>";
    virt::storage_vol::StorageVol::create_xml(&pool, volume, 0).unwrap();
}

fn domain_exists(connection: &virt::connect::Connect, name: &str) -> bool {
    connection.lookup_domain_by_name(name).is_ok()
}

fn pool_exists(connection: &virt::connect::Connect, name: &str) -> bool {
    connection.lookup_storage_pool_by_name(name).is_ok()
}

fn reserved(connection: &virt::connect::Connect, mac: &str) -> bool {
    let network = connection.lookup_network_by_name("default").unwrap();
    network
        .xml_desc(virt::sys::VIR_NETWORK_XML_INACTIVE)
        .unwrap()
        .contains(&format!("mac='{mac}'"))
}

/// Removes what the test made, whatever the sweep did.
struct Made<'a> {
    connection: &'a virt::connect::Connect,
    domains: Vec<String>,
    pools: Vec<String>,
    macs: Vec<String>,
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        for name in &self.domains {
            if let Ok(domain) = self.connection.lookup_domain_by_name(name) {
                let _ = domain.undefine();
            }
        }
        for name in &self.pools {
            if let Ok(pool) = self.connection.lookup_storage_pool_by_name(name) {
                if let Ok(volume) = pool.lookup_storage_vol_by_name("left.qcow2") {
                    let _ = volume.delete(0);
                }
                let _ = pool.destroy();
                let _ = pool.undefine();
            }
        }
        if let Ok(network) = self.connection.lookup_network_by_name("default") {
            for mac in &self.macs {
                let _ = network.update(
                    virt::sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
                    virt::sys::VIR_NETWORK_SECTION_IP_DHCP_HOST,
                    -1,
                    &format!("<host mac='{mac}'/>"),
                    virt::sys::VIR_NETWORK_UPDATE_AFFECT_LIVE
                        | virt::sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG,
                );
            }
        }
    }
}

#[test]
fn a_dead_runs_domain_pool_and_reservation_go_and_a_live_ones_stay() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some(URI)).unwrap();
    let dead = a_dead_process_id();
    let alive = std::process::id();
    let scratch = tempfile::tempdir().unwrap();
    let gone_domain = format!("swept-{dead}.test");
    let kept_domain = format!("swept-{alive}.test");
    // Named in no test's form: not the sweep's to judge.
    let foreign_domain = format!("swept-by-hand-{alive}x.test");
    let gone_pool = format!("trog-swept-{dead}-1");
    let kept_pool = format!("trog-swept-{alive}-1");
    let (gone_mac, kept_mac) = ("52:54:00:7e:58:01", "52:54:00:7e:58:02");
    let made = Made {
        connection: &connection,
        domains: vec![
            gone_domain.clone(),
            kept_domain.clone(),
            foreign_domain.clone(),
        ],
        pools: vec![gone_pool.clone(), kept_pool.clone()],
        macs: vec![gone_mac.to_string(), kept_mac.to_string()],
    };
    define_domain(&connection, &gone_domain, gone_mac);
    define_domain(&connection, &kept_domain, kept_mac);
    define_domain(&connection, &foreign_domain, "52:54:00:7e:58:03");
    for (mac, address) in [(gone_mac, "192.168.122.238"), (kept_mac, "192.168.122.239")] {
        trog::libvirt::reservation::reserve_address(
            &connection,
            URI,
            "default",
            mac,
            address.parse().unwrap(),
        )
        .unwrap();
    }
    define_pool(&connection, &gone_pool, &scratch.path().join("gone"));
    define_pool(&connection, &kept_pool, &scratch.path().join("kept"));

    let sweep = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/services/sweep-leftovers.sh"
    ))
    .output()
    .unwrap();
    let said = String::from_utf8_lossy(&sweep.stdout);
    assert!(
        sweep.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&sweep.stderr)
    );
    assert!(!domain_exists(&connection, &gone_domain), "{said}");
    assert!(!reserved(&connection, gone_mac), "{said}");
    assert!(!pool_exists(&connection, &gone_pool), "{said}");
    assert!(!scratch.path().join("gone").exists(), "{said}");
    assert!(
        said.contains(&format!("removed the domain {gone_domain}")),
        "{said}"
    );
    assert!(
        said.contains(&format!("removed the pool {gone_pool}")),
        "{said}"
    );
    for kept in [&kept_domain, &foreign_domain] {
        assert!(domain_exists(&connection, kept), "{kept}: {said}");
    }
    assert!(reserved(&connection, kept_mac), "{said}");
    assert!(pool_exists(&connection, &kept_pool), "{said}");
    drop(made);
}
