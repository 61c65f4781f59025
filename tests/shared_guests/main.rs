//! One fleet of real guests on this machine's libvirtd (software emulation), provisioned once by
//! one installation, and the checks that run against it:
//!
//! 1. the fleet's creation: five guests provisioned at once, by five processes, sharing one base
//!    image's upload (`isolation.rs`); then the leaf, whose mirror, cache and log collector is the
//!    hub, once the hub is up (`services.rs`);
//! 2. side by side: the service checks on the hub and the leaf (`services.rs`, `runner.rs`), and
//!    the isolation probes on shop-a, shop-b and blog-a (`isolation.rs`, `own_addresses.rs`), which
//!    start once the leaf is defined (its provision rewrites the tenants' filters while they run
//!    otherwise). A check that changes a guest for a moment (an address added by hand) puts it
//!    back before it ends. Beside them, once the probes that reach every guest are done,
//!    `debug_boot` takes blog-b through every action and puts it back (`debug_boot/`);
//! 3. last, the checks that change or destroy guests, through a hypervisor reached over SSH
//!    (`second_installation.rs`): a snapshot of shop-a with its memory taken, restored and
//!    deleted, a second installation's rebuild of shop-a that gives it a folder of the
//!    hypervisor, and shop-a destroyed through the login that needs no password; then the
//!    filters removed with their tenant's last guest.
//!
//! Each check is named in the log (`[check] NAME: passed after …`, or `FAILED`) and a failed one
//! does not stop the others; the test fails at the end naming every check that failed. A check
//! needing a guest whose provision failed fails at once, naming the guest and why.
//!
//! Software emulation on a small machine: the guests are given little memory and one CPU each.

mod debug_boot;
mod fleet;
mod isolation;
#[path = "../support/local_services.rs"]
mod local_services;
mod own_addresses;
#[path = "../support/remote_host.rs"]
mod remote_host;
mod runner;
mod second_installation;
mod services;
#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

use fleet::Fleet;
use remote_host::RemoteHost;
use second_installation::SecondInstallation;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::*;

/// How long the isolation probes wait for the leaf's domain to be defined (its provision makes
/// its root disk from the base image already uploaded, then defines the filters and the domain):
/// seconds on a quiet machine, a few minutes with the fleet's guests and another test binary's on
/// two cores. Past it the probes run anyway; they only risk meeting a filter being rewritten.
const LEAF_DEFINED_WAIT: Duration = Duration::from_secs(600);

/// The checks run so far that failed, by name.
#[derive(Default)]
struct Checks {
    failed: Mutex<Vec<String>>,
}

impl Checks {
    /// Runs one named check; a panic in it fails that check (its message is printed as it
    /// happens) and the run goes on.
    fn run(&self, name: &str, check: impl FnOnce()) {
        let started = Instant::now();
        eprintln!("[check] {name}: started");
        match catch_unwind(AssertUnwindSafe(check)) {
            Ok(()) => eprintln!("[check] {name}: passed after {:.0?}", started.elapsed()),
            Err(_) => {
                eprintln!("[check] {name}: FAILED after {:.0?}", started.elapsed());
                self.failed.lock().unwrap().push(name.to_string());
            }
        }
    }
}

#[test]
fn one_fleet_of_real_guests() {
    let unique = std::process::id();
    let mirror_root = tempfile::tempdir().unwrap();
    write_empty_archive(mirror_root.path());
    let mirror = MirrorServer::start(mirror_root.path(), 19000 + (unique % 1000) as u16);
    let services = services::Services::start();
    let fleet = Fleet::new(unique, &mirror.url, &services.host_mirror);
    let checks = Checks::default();

    let outputs = fleet::provision_five_at_once(&fleet);
    checks.run("five guests at once share one base image", || {
        isolation::five_at_once_share_one_base_image(&fleet, &outputs)
    });

    // blog-b is probed with every guest first, then restarted again and again by debug_boot.
    let (probes_of_every_guest_done, blog_b_free) = std::sync::mpsc::channel::<()>();
    let (fleet, checks) = (&fleet, &checks);
    std::thread::scope(|side_by_side| {
        side_by_side.spawn(|| {
            checks.run("the hub's recipes pass their tests", || {
                services::the_hubs_recipes_pass_their_tests(fleet)
            });
            checks.run("the leaf is provisioned through the hub", || {
                services::provision_the_leaf(fleet, &services)
            });
            fleet.never_provisioned(
                &fleet.leaf,
                "its provision was not started: the hub it installs through is not ready",
            );
            checks.run(
                "aptmirror: the leaf's packages come through the hub",
                || services::packages_come_through_the_hub(fleet, &services),
            );
            checks.run(
                "fetchcache: the leaf's downloads come through the hub",
                || services::downloads_come_through_the_hubs_cache(fleet, &services),
            );
            checks.run(
                "logshipper and logcollector: the leaf's logs reach the hub",
                || services::the_leafs_logs_reach_the_hub(fleet),
            );
            checks.run(
                "trogrunner: the leaf reaches this machine's libvirtd",
                || services::the_runner_reaches_this_machines_libvirtd(fleet, &services),
            );
        });
        side_by_side.spawn(move || {
            if !fleet.wait_until_defined(&fleet.leaf, LEAF_DEFINED_WAIT) {
                eprintln!(
                    "{} was not defined within {LEAF_DEFINED_WAIT:?}: the isolation probes start anyway",
                    fleet.leaf
                );
            }
            checks.run("each guest answers at its address", || {
                isolation::each_guest_answers_at_its_address(fleet)
            });
            checks.run("filters name each guest's address and learn none", || {
                let guests: Vec<_> = fleet
                    .five_at_once()
                    .into_iter()
                    .map(|guest| fleet.ready(guest))
                    .collect();
                own_addresses::filters_name_each_guests_address(&guests)
            });
            drop(probes_of_every_guest_done);
            checks.run("tenants are kept apart", || {
                isolation::tenants_are_kept_apart(fleet)
            });
            checks.run("a foreign source address gets nothing through", || {
                isolation::a_foreign_source_gets_nothing_through(fleet)
            });
            let probed = || {
                [&fleet.shop_a, &fleet.shop_b, &fleet.blog_a].map(|guest| fleet.ready(guest))
            };
            checks.run("the gateway's address reaches no one", || {
                let [shop_a, shop_b, _] = probed();
                own_addresses::the_gateways_address_reaches_no_one(
                    fleet,
                    &shop_a,
                    &shop_b,
                    fleet::GATEWAY,
                )
            });
            checks.run("a tenant's guests have no IPv6", || {
                let [shop_a, shop_b, _] = probed();
                own_addresses::a_tenants_guests_have_no_ipv6(
                    fleet,
                    &shop_a,
                    &shop_b,
                    fleet::GATEWAY,
                )
            });
            checks.run("displays need a password", || {
                own_addresses::displays_need_a_password(fleet, &fleet.ready(&fleet.shop_b).0)
            });
        });
        side_by_side.spawn(move || {
            // Ends when the probes are done with blog-b, or gave up (the sender is dropped).
            let _ = blog_b_free.recv();
            checks.run("debug_boot reads a real guest and puts it back", || {
                let (blog_b, _) = fleet.ready(&fleet.blog_b);
                debug_boot::reads_a_real_guest_and_puts_it_back(
                    fleet.config(),
                    blog_b.as_str(),
                    unique,
                )
            });
        });
    });

    // Made by the first check that needs it; the next say at once when it could not be.
    let second = std::sync::OnceLock::new();
    checks.run(
        "a snapshot with memory through a remote hypervisor, sudo's password handed in",
        || {
            let host = RemoteHost::set_up();
            let second = second.get_or_init(|| {
                SecondInstallation::new(fleet, &fleet.ready(&fleet.shop_a).0, &host)
            });
            second_installation::a_snapshot_with_memory_through_a_remote_hypervisor(fleet, second)
        },
    );
    let made = || {
        second
            .get()
            .expect("the second installation was not made: see the checks before")
    };
    checks.run(
        "a second installation's rebuild through a remote hypervisor keeps the tenants apart",
        || isolation::a_second_installations_rebuild_keeps_tenants_apart(fleet, made()),
    );
    checks.run(
        "a shared folder through a remote hypervisor, then a destroy through the login that needs no password",
        || second_installation::a_shared_folder_then_a_destroy_without_a_password(fleet, made()),
    );
    checks.run("filters go with their tenant's last guest", || {
        isolation::filters_go_with_their_tenants_last_guest(fleet)
    });

    let failed = checks.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "checks that failed: {failed:?}");
}
