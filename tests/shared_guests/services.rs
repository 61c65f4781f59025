//! The fleet's service guests: the hub is built with `aptmirror`, `fetchcache` and
//! `logcollector`; the leaf (provisioned once the hub is up) names the hub in `_global`'s
//! `mirror` and `cache` and runs `logshipper` towards it. They are of one tenant (`shop`): the
//! leaf reaches the hub's mirror, cache and collector.
//!
//! - aptmirror: the hub's apt-cacher-ng fetches through this machine's caching apt proxy
//!   (tests/services/apt-proxy.sh) as its `upstream`; the leaf's first boot and its Makefile
//!   install every package through the hub, `hello` included, which lands in the hub's cache.
//! - fetchcache: the leaf's site Makefile (run by the data recipe under the Makefile's exported
//!   proxy) downloads one file twice from a server on this machine; the server answers once, and
//!   the hub's squid logs the second fetch as a hit.
//! - logcollector and logshipper: a line logged on the leaf arrives in the hub's file for it.
//! - trogrunner: the leaf is also a runner, given a release of trog (downloaded through the hub's
//!   cache), an installation and a key this machine's hypervisor login trusts; `trog preflight`,
//!   run there as the runner's login, reaches this machine's libvirtd over qemu+ssh.
//!
//! Two guests carry the five recipes: a mirror, a cache and a collector serve a fleet, so the
//! proof of each is a second guest using it, and one such guest is enough for all three.

use crate::fleet::{Fixture, Fleet};
use crate::local_services::apt_proxy_url;
use crate::runner;
use crate::support::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use trog::credentials::Secret;
use trog::secrets::{EntryPath, FieldName, Protection, SecretStore};

/// rsyslog sends at once over an open connection; a minute covers a reconnect's back-off.
const LOG_ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);
/// What the leaf's site downloads through the cache, and what the test server answers with.
const DOWNLOAD_PATH: &str = "/release/tool-1.0.tar.gz";
const DOWNLOAD_BODY: &str = "the release archive a recipe downloads\n";
/// Where the trogrunner guest downloads trog's release from.
const RELEASE_PATH: &str = "/trog-release.tar.gz";

/// An HTTP origin on the bridge serving [`DOWNLOAD_PATH`] (counting the requests for it) and
/// the `release` at [`RELEASE_PATH`]; caches may keep its answers for an hour.
fn start_origin(release: Vec<u8>) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((BRIDGE_ADDRESS, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // Headers up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                line.clear();
            }
            let body = match request.split_whitespace().nth(1) {
                Some(DOWNLOAD_PATH) => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Some(DOWNLOAD_BODY.as_bytes())
                }
                Some(RELEASE_PATH) => Some(release.as_slice()),
                _ => None,
            };
            if let Some(body) = body {
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nCache-Control: public, max-age=3600\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\nConnection: close\r\n\r\n",
                    http_date(std::time::SystemTime::now()),
                    body.len()
                );
                let _ = stream.write_all(body);
            } else {
                let _ = write!(
                    stream,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        }
    });
    (port, served)
}

/// `time` as HTTP's date (`Tue, 01 Dec 2026 09:35:14 GMT`). An origin's answer carries one, as
/// every real server's does: without it squid revalidates a cached answer instead of serving it.
fn http_date(time: std::time::SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let seconds = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    // The civil date of a day count since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let of_era = shifted % 146_097;
    let year_of_era = (of_era - of_era / 1460 + of_era / 36_524 - of_era / 146_096) / 365;
    let day_of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

#[test]
fn http_dates_are_what_servers_send() {
    let at = |seconds| std::time::UNIX_EPOCH + Duration::from_secs(seconds);
    assert_eq!(http_date(at(0)), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(http_date(at(951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT");
    assert_eq!(
        http_date(at(1_796_117_714)),
        "Tue, 01 Dec 2026 09:35:14 GMT"
    );
}

/// The leaf's site: a Makefile that downloads the same file twice, as a recipe would on two
/// builds, with nothing but the proxy make exports to it.
fn site_archive(path: &Path, origin: &str) {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        site.path().join("Makefile"),
        format!(
            "all:\n\tcurl -fsS --max-time 60 -o /srv/first.tar.gz {origin}{DOWNLOAD_PATH}\n\tcurl -fsS --max-time 60 -o /srv/second.tar.gz {origin}{DOWNLOAD_PATH}\n"
        ),
    )
    .unwrap();
    let status = Command::new("tar")
        .arg("-czf")
        .arg(path)
        .arg("-C")
        .arg(site.path())
        .arg("Makefile")
        .status()
        .unwrap();
    assert!(status.success());
}

fn assert_recipe_tests_passed(stdout: &str, recipes: &[&str]) {
    for recipe in recipes {
        assert!(
            stdout.contains(&format!("ok   {recipe}: ")),
            "no passing test of {recipe} reported:\n{stdout}"
        );
    }
}

/// What the service guests need from this machine: its caching apt proxy, an origin serving a
/// download and trog's release, and a hypervisor login the runner reaches over SSH.
pub struct Services {
    pub host_mirror: String,
    origin: String,
    origin_served: Arc<AtomicUsize>,
    release_sha256: String,
    hypervisor: runner::Hypervisor,
}

impl Services {
    pub fn start() -> Services {
        let host_mirror = apt_proxy_url();
        let release = runner::release_archive(&checkout(), Path::new(env!("CARGO_BIN_EXE_trog")));
        let release_sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&release));
        let (origin_port, origin_served) = start_origin(release);
        Services {
            host_mirror,
            origin: format!("http://{BRIDGE_ADDRESS}:{origin_port}"),
            origin_served,
            release_sha256,
            hypervisor: runner::Hypervisor::start(&checkout(), BRIDGE_ADDRESS),
        }
    }

    /// The leaf's mirror: the hub's apt-cacher-ng, in front of the archive this machine's proxy
    /// serves.
    fn leaf_mirror(&self, hub_address: &str) -> String {
        let archive = self
            .host_mirror
            .split('/')
            .skip(3)
            .collect::<Vec<_>>()
            .join("/");
        format!("http://{hub_address}:3142/{archive}")
    }
}

/// The hub's `_global` lines and recipes: the fleet's mirror (fetching through this machine's
/// proxy, `host_mirror`, which it also installs from), cache and collector.
pub fn hub_recipes(host_mirror: &str) -> (String, String) {
    let upstream = crate::local_services::apt_proxy_origin(host_mirror);
    (
        format!(
            "    mirror: {host_mirror}\n    security_mirror: {host_mirror}-security\n    data_volume_size: 1G\n"
        ),
        format!(
            "  aptmirror:\n    upstream: {upstream}\n  fetchcache: {{}}\n  logcollector: {{}}\n"
        ),
    )
}

/// The hub's recipes passed their own tests in its provision.
pub fn the_hubs_recipes_pass_their_tests(fleet: &Fleet) {
    assert_recipe_tests_passed(
        &fleet.said(&fleet.hub),
        &["aptmirror", "fetchcache", "logcollector"],
    );
}

/// Puts a password into the fleet's store under its writer lock, as a run of trog would: a
/// provision running meanwhile loses nothing it adds.
pub fn put_secret(fleet: &Fleet, group: &str, entry: &str, value: &str) {
    let mut store = SecretStore::open(
        &fleet.config().join("secrets.kdbx"),
        &Secret::new(PASSPHRASE),
    )
    .unwrap();
    store
        .update(|store| {
            store.put(
                &EntryPath::new([group], entry),
                &FieldName::Password,
                &Secret::new(value),
                Protection::Protected,
            )
        })
        .unwrap();
}

/// The leaf: everything it installs comes through the hub, its downloads through the hub's
/// cache, and its logs go to the hub. It is also a runner of trog, whose hypervisor is this
/// machine (the pool is the one the fleet's guests are in). Provisioned once the hub is up, and
/// recorded as a fixture; its recipes pass their own tests.
pub fn provision_the_leaf(fleet: &Fleet, services: &Services) {
    let (_, hub_address) = fleet.ready(&fleet.hub);
    put_secret(
        fleet,
        "Runner",
        "hypervisor-key",
        &services.hypervisor.private_key,
    );
    let leaf_mirror = services.leaf_mirror(&hub_address);
    let hypervisor = &services.hypervisor;
    let runner_uri = format!(
        "qemu+ssh://{}@{BRIDGE_ADDRESS}:{}/system",
        hypervisor.login, hypervisor.port
    );
    let runner = format!(
        "  trogrunner:\n    release_url: {}{RELEASE_PATH}\n    release_sha256: '{}'\n    ssh_private_key: secret:Runner/hypervisor-key/Password\n    known_hosts: ['[{BRIDGE_ADDRESS}]:{} {}']\n    hypervisors_conf: |\n      [here]\n      libvirt_uri = {runner_uri}\n      domain_type = qemu\n      pool_name = {}\n      pool_path = {}\n      cpu_overcommit = 100\n    recipes_yaml: |\n      _base:\n        _global:\n          admin_user: trogadmin\n          contact_email: ops@example.test\n          distro: debian\n          mirror: {leaf_mirror}\n          cache: http://{hub_address}:3128\n",
        services.origin,
        services.release_sha256,
        hypervisor.port,
        hypervisor.host_key_public,
        fleet.pool,
        fleet.config().join("pool").display(),
    );
    fleet.write_guest(
        &fleet.leaf,
        768,
        "5G",
        &format!(
            "    data_volume_size: 1G\n    mirror: {leaf_mirror}\n    security_mirror: {leaf_mirror}-security\n    cache: http://{hub_address}:3128\n    packages: [hello]\n"
        ),
        &format!("  logshipper:\n    collector: {hub_address}\n  data: {{}}\n{runner}"),
    );
    let leaf_dir = fleet.config().join("recipes.d").join(fleet.leaf.as_str());
    std::fs::create_dir_all(&leaf_dir).unwrap();
    site_archive(&leaf_dir.join("data.tar.gz"), &services.origin);
    let started = Instant::now();
    let output = run_verb("provision", fleet.config(), &[fleet.leaf.as_str()]);
    match fleet.record(&fleet.leaf, &output) {
        Fixture::Ready { address, said } => {
            eprintln!("the leaf is up at {address} after {:?}", started.elapsed());
            assert_recipe_tests_passed(&said, &["logshipper", "data", "trogrunner"]);
        }
        Fixture::Failed(why) => panic!("provision {} failed:\n{why}", fleet.leaf),
    }
}

/// aptmirror: the leaf's apt names the hub, and `hello` came from it into the hub's cache.
pub fn packages_come_through_the_hub(fleet: &Fleet, services: &Services) {
    let (hub, hub_address) = fleet.ready(&fleet.hub);
    let (leaf, leaf_address) = fleet.ready(&fleet.leaf);
    let sources = fleet.must(
        &leaf,
        &leaf_address,
        "cat /etc/apt/sources.list.d/*.sources",
    );
    assert!(
        sources.contains(&services.leaf_mirror(&hub_address)),
        "{sources}"
    );
    fleet.must(&leaf, &leaf_address, "dpkg-query -W hello");
    let cached = fleet.must(
        &hub,
        &hub_address,
        "sudo find /var/cache/apt-cacher-ng -name 'hello_*.deb'",
    );
    assert!(cached.contains("hello_"), "hello is not in the hub's cache");
}

/// fetchcache: two downloads by the site's Makefile, one request to the origin, and the second a
/// hit in squid's log.
pub fn downloads_come_through_the_hubs_cache(fleet: &Fleet, services: &Services) {
    let (hub, hub_address) = fleet.ready(&fleet.hub);
    let (leaf, leaf_address) = fleet.ready(&fleet.leaf);
    let fetched = fleet.must(
        &leaf,
        &leaf_address,
        "cat /srv/first.tar.gz /srv/second.tar.gz",
    );
    assert_eq!(fetched, DOWNLOAD_BODY.repeat(2));
    let access = fleet.must(
        &hub,
        &hub_address,
        &format!("sudo grep -F '{DOWNLOAD_PATH}' /var/log/squid/access.log"),
    );
    assert_eq!(
        services.origin_served.load(Ordering::SeqCst),
        1,
        "the origin was asked more than once: the second download was not served by the cache:\n{access}"
    );
    let outcomes: Vec<&str> = access
        .lines()
        .filter_map(|line| line.split_whitespace().nth(3))
        .collect();
    assert_eq!(outcomes.len(), 2, "{access}");
    assert!(outcomes[0].starts_with("TCP_MISS/200"), "{access}");
    assert!(
        outcomes[1].starts_with("TCP_HIT/200") || outcomes[1].starts_with("TCP_MEM_HIT/200"),
        "the second download was not a cache hit:\n{access}"
    );
}

/// logshipper and logcollector: a line logged on the leaf arrives on the hub, in the leaf's file.
pub fn the_leafs_logs_reach_the_hub(fleet: &Fleet) {
    let (hub, hub_address) = fleet.ready(&fleet.hub);
    let (leaf, leaf_address) = fleet.ready(&fleet.leaf);
    let mark = format!("logged on the leaf {}", fleet.unique);
    fleet.must(
        &leaf,
        &leaf_address,
        &format!("logger -t trog-service-test '{mark}'"),
    );
    let hostname = leaf.as_str().split('.').next().unwrap();
    let deadline = Instant::now() + LOG_ARRIVAL_TIMEOUT;
    loop {
        let found = fleet.on_guest(
            &hub,
            &hub_address,
            &format!("sudo grep -rF '{mark}' /var/log/remote/"),
        );
        match found {
            Ok(lines) => {
                assert!(lines.contains(hostname), "{lines}");
                break;
            }
            Err(said) => assert!(
                Instant::now() < deadline,
                "the line logged on the leaf did not reach the hub's /var/log/remote within {LOG_ARRIVAL_TIMEOUT:?}: {said}"
            ),
        }
        std::thread::sleep(Duration::from_secs(3));
    }
}

/// trogrunner: trog, run on the leaf by its login, reaches this machine's libvirtd over SSH.
pub fn the_runner_reaches_this_machines_libvirtd(fleet: &Fleet, services: &Services) {
    let (leaf, leaf_address) = fleet.ready(&fleet.leaf);
    let hypervisor = &services.hypervisor;
    let runner_uri = format!(
        "qemu+ssh://{}@{BRIDGE_ADDRESS}:{}/system",
        hypervisor.login, hypervisor.port
    );
    let preflight = fleet.must(
        &leaf,
        &leaf_address,
        "cd / && sudo -u trog trog preflight 2>&1; echo \"exit status $?\"",
    );
    for expected in [
        format!("Hypervisor here: {runner_uri}"),
        format!("ok   Reached {BRIDGE_ADDRESS}"),
        format!(" as {}\n", hypervisor.login),
        "ok   libvirt answers".to_string(),
        format!("ok   Passwordless sudo for {}", hypervisor.login),
        format!("ok   Storage pool {} exists", fleet.pool),
    ] {
        assert!(
            preflight.contains(&expected),
            "no `{expected}` in:\n{preflight}"
        );
    }
    // The one check allowed to fail: the runner's libvirt is its distribution's, which need not
    // be the hypervisor's release (this machine's may come from backports).
    let failed: Vec<&str> = preflight
        .lines()
        .filter(|line| line.starts_with("FAILED"))
        .filter(|line| !line.contains("that trog is linked against differs from libvirt"))
        .collect();
    assert!(
        failed.is_empty(),
        "preflight on the runner failed:\n{preflight}"
    );
    eprintln!("trog preflight on the runner:\n{preflight}");
}
