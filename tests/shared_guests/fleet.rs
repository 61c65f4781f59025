//! The fleet: one installation (one pool, one secret store, one ips.db) and its guests, each
//! provisioned once. Five are provisioned at once, by five processes started together; the leaf,
//! whose mirror and cache are the hub, once the hub is up. What each provision ended in is kept
//! (its address and what it printed, or why it failed), so that a check needing a guest that
//! failed fails at once, naming it, instead of waiting out a timeout against a guest that is not
//! there.

use crate::local_services::local_hypervisors_conf;
use crate::support::*;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use trog::model::names::DomainName;

/// The addresses the fleet hands out: kept apart from the other tests' ranges on the shared
/// default network. Six guests take the first six; [`UNHELD`] stays free.
pub const RANGE: &str = "192.168.122.230-192.168.122.237/24";
/// An address of the range no guest holds: what a guest pretending to be another sends from.
pub const UNHELD: &str = "192.168.122.237";
pub const GATEWAY: &str = "192.168.122.1";

/// How a guest's provision ended.
#[derive(Clone)]
pub enum Fixture {
    /// Its address, and everything its provision printed (the recipes' test report among it).
    Ready { address: String, said: String },
    /// Why it is not there: what its provision printed, and the guest's own logs when it was
    /// reachable.
    Failed(String),
}

pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub pool: String,
    pub unique: u32,
    /// Tenant `shop`: the service guests, and two plain guests for the isolation probes.
    pub hub: DomainName,
    pub leaf: DomainName,
    pub shop_a: DomainName,
    pub shop_b: DomainName,
    /// Tenant `blog`: blog-b asks for a data volume, and is the tenant's first to be destroyed.
    pub blog_a: DomainName,
    pub blog_b: DomainName,
    fixtures: Mutex<HashMap<DomainName, Fixture>>,
}

impl Fleet {
    /// The installation's files: `mirror` (an empty archive) serves the guests that install
    /// nothing; the hub's file names `host_mirror` (this machine's caching apt proxy), which its
    /// aptmirror fetches through. The leaf's file is written once the hub has an address.
    pub fn new(unique: u32, mirror: &str, host_mirror: &str) -> Fleet {
        let dir = tempfile::Builder::new()
            .prefix("trog-shared-")
            .tempdir_in("/var/tmp")
            .unwrap();
        // qemu runs as its own user and must reach the pool's directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let pool = format!("trog-shared-{unique}");
        std::fs::write(
            dir.path().join("hypervisors.conf"),
            local_hypervisors_conf(&pool, &dir.path().join("pool")),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("recipes.yaml"),
            format!(
                "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror}\n    upgrade: false\n    network: default\n    address_range: {RANGE}\n    gateway: {GATEWAY}\n    resolvers: [{GATEWAY}]\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("recipes.d")).unwrap();
        let name = |role: &str| DomainName::parse(&format!("{role}-{unique}.test")).unwrap();
        let fleet = Fleet {
            dir,
            pool,
            unique,
            hub: name("shop-hub"),
            leaf: name("shop-leaf"),
            shop_a: name("shop-a"),
            shop_b: name("shop-b"),
            blog_a: name("blog-a"),
            blog_b: name("blog-b"),
            fixtures: Mutex::new(HashMap::new()),
        };
        for guest in [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a] {
            fleet.write_guest(guest, 640, "4G", "", "");
        }
        fleet.write_guest(&fleet.blog_b, 640, "4G", "    data_volume_size: 1G\n", "");
        let (global, recipes) = crate::services::hub_recipes(host_mirror);
        fleet.write_guest(&fleet.hub, 1024, "5G", &global, &recipes);
        fleet
    }

    pub fn config(&self) -> &Path {
        self.dir.path()
    }

    /// The five provisioned at once, in the order their processes start.
    pub fn five_at_once(&self) -> [&DomainName; 5] {
        [
            &self.hub,
            &self.shop_a,
            &self.shop_b,
            &self.blog_a,
            &self.blog_b,
        ]
    }

    /// Every guest of the fleet.
    pub fn all(&self) -> [&DomainName; 6] {
        let [hub, shop_a, shop_b, blog_a, blog_b] = self.five_at_once();
        [hub, shop_a, shop_b, blog_a, blog_b, &self.leaf]
    }

    /// The guests that ask for a data volume.
    pub fn has_data_volume(&self, guest: &DomainName) -> bool {
        [&self.hub, &self.leaf, &self.blog_b].contains(&guest)
    }

    /// Writes a guest's file; its tenant is its name's first word. `global` and `recipes` are
    /// YAML lines, indented under the guest.
    pub fn write_guest(
        &self,
        guest: &DomainName,
        memory: u32,
        size: &str,
        global: &str,
        recipes: &str,
    ) {
        let image = test_image();
        let tenant = guest.as_str().split('-').next().unwrap();
        std::fs::write(
            self.config().join(format!("recipes.d/{guest}.yaml")),
            format!(
                "{guest}:\n  _global:\n    tenant: {tenant}\n    memory: {memory}\n    cpus: 1\n    size: {size}\n    image:\n      url: file://{}\n      sha256: {}\n{global}{recipes}",
                image.display(),
                sha256_file(&image)
            ),
        )
        .unwrap();
    }

    /// Records how `guest`'s provision ended, from what it printed.
    pub fn record(&self, guest: &DomainName, output: &Output) -> Fixture {
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        let said = format!("{stdout}\n{stderr}");
        let address = stdout
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{guest} is on local at ")))
            .and_then(|rest| rest.split(',').next());
        let fixture = match address {
            Some(address) if output.status.success() => Fixture::Ready {
                address: address.to_string(),
                said,
            },
            _ => Fixture::Failed(format!(
                "{said}\nthe guest's logs:\n{}",
                self.logs_of_failed(guest, &stderr)
            )),
        };
        self.fixtures
            .lock()
            .unwrap()
            .insert(guest.clone(), fixture.clone());
        fixture
    }

    /// Records that `guest` will not be provisioned, and why, unless its provision has ended:
    /// what waits for it stops waiting.
    pub fn never_provisioned(&self, guest: &DomainName, why: &str) {
        self.fixtures
            .lock()
            .unwrap()
            .entry(guest.clone())
            .or_insert_with(|| Fixture::Failed(why.to_string()));
    }

    /// The logs of a guest whose provision failed, when it named an address to reach it at.
    fn logs_of_failed(&self, guest: &DomainName, stderr: &str) -> String {
        let Some(address) = stderr
            .split("trogadmin@")
            .nth(1)
            .and_then(|rest| rest.split([':', ' ']).next())
        else {
            return "(the provision named no address to read them at)".to_string();
        };
        ssh_as_admin(
            self.config(),
            guest,
            address,
            "sudo tail -n 40 /var/log/cloud-init-output.log; sudo tail -n 20 /var/lib/trog/finish.log; sudo tail -n 20 /var/log/apt-cacher-ng/apt-cacher.err /var/log/apt-cacher-ng/apt-cacher.log /etc/apt-cacher-ng/backends_debian /etc/apt-cacher-ng/zz-trog.conf; sudo journalctl -u apt-cacher-ng --no-pager -n 20",
        )
        .unwrap_or_else(|error| error)
    }

    /// How `guest`'s provision ended; `None` while it has not.
    pub fn fixture(&self, guest: &DomainName) -> Option<Fixture> {
        self.fixtures.lock().unwrap().get(guest).cloned()
    }

    /// `guest` and its address. A check calls this for each guest it needs before it starts: a
    /// guest whose provision failed fails the check at once, naming the guest and why.
    pub fn ready(&self, guest: &DomainName) -> (DomainName, String) {
        match self.fixture(guest) {
            Some(Fixture::Ready { address, .. }) => (guest.clone(), address),
            Some(Fixture::Failed(why)) => {
                panic!("this check needs {guest}, whose provision failed:\n{why}")
            }
            None => panic!("this check needs {guest}, which was never provisioned"),
        }
    }

    /// What `guest`'s provision printed; it must have succeeded.
    pub fn said(&self, guest: &DomainName) -> String {
        self.ready(guest);
        match self.fixture(guest) {
            Some(Fixture::Ready { said, .. }) => said,
            _ => unreachable!(),
        }
    }

    /// Waits until `guest`'s domain is defined on this machine's libvirtd, or its provision has
    /// ended, for at most `bound`; says whether either happened.
    pub fn wait_until_defined(&self, guest: &DomainName, bound: std::time::Duration) -> bool {
        virt::error::clear_error_callback();
        let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
        let deadline = std::time::Instant::now() + bound;
        loop {
            if self.fixture(guest).is_some()
                || connection.lookup_domain_by_name(guest.as_str()).is_ok()
            {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }

    /// Runs `command` on `guest` (at `address`) as its admin; it must succeed.
    pub fn must(&self, guest: &DomainName, address: &str, command: &str) -> String {
        ssh_as_admin(self.config(), guest, address, command)
            .unwrap_or_else(|stderr| panic!("`{command}` on {guest} ({address}): {stderr}"))
    }

    /// Runs `command` on `guest` as its admin; `Err` carries what ssh said on stderr.
    pub fn on_guest(
        &self,
        guest: &DomainName,
        address: &str,
        command: &str,
    ) -> Result<String, String> {
        ssh_as_admin(self.config(), guest, address, command)
    }
}

/// Starts the provisions of the five together, each its own `provision` process: the first to
/// get there makes the secret store and uploads the base image while the others wait for it,
/// ips.db hands out five addresses, and each run's filters learn the others'. Records each
/// guest's fixture; returns what each printed, in [`Fleet::five_at_once`]'s order.
pub fn provision_five_at_once(fleet: &Fleet) -> Vec<Output> {
    let runs: Vec<_> = fleet
        .five_at_once()
        .iter()
        .map(|guest| spawn_verb("provision", fleet.config(), &[guest.as_str()]))
        .collect();
    fleet
        .five_at_once()
        .iter()
        .zip(runs)
        .map(|(guest, run)| {
            let started = std::time::Instant::now();
            let output = root_warning::output_without_root_warning(run.wait_with_output().unwrap());
            eprintln!(
                "[verb] provision {guest} (one of five at once): exit {:?}, waited {:.0?} more",
                output.status.code(),
                started.elapsed()
            );
            record_printed(
                &format!("stdout of provision {guest}"),
                &text(&output.stdout),
            );
            record_printed(
                &format!("stderr of provision {guest}"),
                &text(&output.stderr),
            );
            fleet.record(guest, &output);
            output
        })
        .collect()
}

/// Removes the fleet, whatever state a run stopped in: `trog destroy --purge` for each guest
/// (which removes trog's filters once unused), then whatever that left in libvirt, the pool last.
impl Drop for Fleet {
    fn drop(&mut self) {
        for guest in self.all() {
            let _ = run_verb(
                "destroy",
                self.config(),
                &["--purge", "--yes", guest.as_str()],
            );
        }
        // Every domain before the pool: only the last names it.
        let guests = self.all();
        for (n, guest) in guests.iter().enumerate() {
            let pool = if n + 1 == guests.len() {
                self.pool.clone()
            } else {
                format!("{}-none", self.pool)
            };
            drop(LibvirtLeftovers {
                domain: guest.to_string(),
                pool,
            });
        }
    }
}
