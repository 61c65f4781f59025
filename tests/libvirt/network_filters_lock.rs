//! trog's network filters on a hypervisor are shared by every guest there, whichever
//! installation made it: a destroy removes those no domain uses any more, and a provision
//! defines them just before its domain, which references them. The two meet under one lock on
//! the hypervisor (`network-filters.lock`), held by a provision from defining the filters until
//! its domain is defined and by a destroy while it removes them. Without it, a destroy that
//! looked between another run's filters and its domain removed the filters that guest then
//! failed to start without ("referenced filter 'trog-isolated' is missing").
//!
//! Here another machine's run holds the lock (its own process, as trog starts it on a
//! hypervisor): a destroy removes the guest and then waits for the lock, saying for whom, while
//! "that run" defines a guest referencing `trog-isolated`; once let go, the destroy leaves the
//! filter in place. A provision holding nothing waits at the same lock before defining its
//! domain, and `--wait 1` ends it with status 10 and no domain defined.

use super::hypervisor_lock::{held_elsewhere, installation, line_with, lines, trog};
use super::TestGuest;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use trog::libvirt::network_filter::define_filters;
use trog::render::network_filter::{filters_for, TenantDirectory, ISOLATED_FILTER};

const LOCK_DIR: &str = "/run/lock/trog";
const LOCK_FILE: &str = "network-filters.lock";
const HELD_ELSEWHERE: &str = "`trog provision` (process 4242 on ws-b.example.test, since ";

/// The filters' lock, held as another machine's provision would hold it, until dropped.
struct HeldElsewhere(Child);

impl HeldElsewhere {
    fn take() -> HeldElsewhere {
        let mut holder = held_elsewhere(LOCK_FILE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let said = lines(holder.stdout.take().unwrap());
        // Other tests' runs may hold it a moment (they define their guests' domains under it).
        assert!(line_with(&said, "held", Duration::from_secs(120)).is_some());
        HeldElsewhere(holder)
    }
}

impl Drop for HeldElsewhere {
    fn drop(&mut self) {
        // Its input closes: it lets go and ends.
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// `xml` with an interface on libvirt's `default` network that references `trog-isolated`, as
/// every guest of trog's has.
fn with_filtered_interface(xml: &str) -> String {
    xml.replace(
        "</devices>",
        &format!(
            "<interface type='network'><source network='default'/>\
             <filterref filter='{ISOLATED_FILTER}'/></interface></devices>"
        ),
    )
}

#[test]
fn a_destroy_leaves_the_filters_a_guest_defined_meanwhile_uses() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let leaving = TestGuest::new("leaving", false);
    leaving.build_without_starting(&connection);
    let domain = leaving.desired.domain.to_string();
    let first = installation("qemu:///system", &leaving.desired.pool_name);

    let held = HeldElsewhere::take();
    // That run has defined the filters and is about to define its guest.
    define_filters(
        &connection,
        "local",
        &filters_for(&TenantDirectory::new(), &[]),
    )
    .unwrap();

    let mut destroying = trog(&first, &["destroy", &domain, "--wait", "120"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = lines(destroying.stderr.take().unwrap());
    let wait_line = line_with(&said, "waiting up to", Duration::from_secs(60))
        .expect("the destroy says what it waits for");
    assert!(
        wait_line.starts_with(&format!(
            "waiting up to 120s for the set of trog's network filters on local on the hypervisor \
             local (its lock {LOCK_DIR}/{LOCK_FILE} there): {HELD_ELSEWHERE}"
        )),
        "{wait_line}"
    );
    // The guest itself is gone already: only the filters wait.
    assert!(connection.lookup_domain_by_name(&domain).is_err());

    let mut arriving = TestGuest::new("arriving", false);
    arriving.xml = with_filtered_interface(&arriving.xml);
    arriving.build_without_starting(&connection);
    drop(held);
    let status = destroying.wait().unwrap();
    let rest: Vec<String> = said.try_iter().collect();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    let filter = std::ffi::CString::new(ISOLATED_FILTER).unwrap();
    // SAFETY: a valid connection and a NUL-terminated name; the reference returned is freed.
    let found = unsafe {
        let filter = virt::sys::virNWFilterLookupByName(connection.as_ptr(), filter.as_ptr());
        if !filter.is_null() {
            virt::sys::virNWFilterFree(filter);
        }
        !filter.is_null()
    };
    assert!(
        found,
        "{ISOLATED_FILTER} stays while the guest defined meanwhile uses it"
    );

    // The arriving guest's own destroy takes the lock too, and may remove the filter when no
    // other test's guest uses it.
    let second = installation("qemu:///system", &arriving.desired.pool_name);
    let gone = trog(
        &second,
        &["destroy", arriving.desired.domain.as_str(), "--wait", "120"],
    )
    .output()
    .unwrap();
    assert_eq!(
        gone.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
}

/// An installation that provisions `domain` from `image` on this machine's libvirtd, in `pool`.
fn provisioning_installation(dir: &Path, domain: &str, pool: &str, image: &Path) {
    std::fs::write(
        dir.join("hypervisors.conf"),
        format!(
            "[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool}\n\
             pool_path = {}\nreserve_memory = 256\nreserve_disk = 1G\ncpu_overcommit = 100\n",
            dir.join("pool").display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("recipes.yaml"),
        "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    \
         distro: debian\n    release: bookworm\n    upgrade: false\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("recipes.d")).unwrap();
    let digest = super::sha256_of(image.to_str().unwrap());
    std::fs::write(
        dir.join("recipes.d").join(format!("{domain}.yaml")),
        format!(
            "{domain}:\n  _global:\n    memory: 256\n    cpus: 1\n    size: 1G\n    image:\n      \
             url: file://{}\n      sha256: {digest}\n",
            image.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_provision_waits_for_the_filters_before_defining_its_domain() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    // Only for its names, its scratch directory and its base image: nothing is built from it,
    // and it removes whatever the provision left when dropped.
    let guest = TestGuest::new("filterwait", false);
    let domain = guest.desired.domain.to_string();
    let dir = tempfile::tempdir().unwrap();
    provisioning_installation(dir.path(), &domain, &guest.desired.pool_name, &guest.base);

    let _held = HeldElsewhere::take();
    let mut provision = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(["provision", &domain, "--credentials", "--wait", "1"])
        .env("TROG_PROVISIONER_CONFIG", dir.path())
        .env_remove("TROG_RECIPES")
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(provision.stdin.take().unwrap(), "keepass: filters-lock\n").unwrap();
    let output = provision.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(10), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the set of trog's network filters on local is busy on the hypervisor local: \
             {HELD_ELSEWHERE}"
        )),
        "{stderr}"
    );
    assert!(
        connection.lookup_domain_by_name(&domain).is_err(),
        "no domain is defined without the filters: {stderr}"
    );
}
