//! The fleet's guest carrying every recipe, once its recipes ran, as the machine of other
//! domains, without another boot:
//! - a second site of the same installation that `depends_on` it: provisioned onto it (the
//!   machine converged first, the site's payload, Makefile and tests in a state directory of its
//!   own there), its page served beside the first by the same nginx;
//! - the same guest described as an `existing_host` by a second installation, which did not
//!   build it: its key authorized for a non-root admin with passwordless sudo (through the
//!   fleet's SSH), its host key refused until adopted explicitly, then provisioned there as that
//!   admin; `status` says converged and `destroy` refuses it;
//! - at the fleet's end, when nothing else runs: `provision --all` over the whole fleet starts
//!   the guests left shut off and changes nothing else, and after the dependent site's page
//!   changed finishes exactly that site; the site destroyed, and with the files set aside,
//!   `status --all` reports the guest as made by trog and declared by no file.

use super::{http_get, must, PAGE_MARK};
use crate::fleet::{write_atomically, Fleet};
use crate::support::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What the dependent site's page carries.
const SECOND_MARK: &str = "served from the dependent site";
/// The dependent site's page after it changed.
const CHANGED_MARK: &str = "changed and converged by provision --all";
/// What the existing host's site page carries.
const THIRD_MARK: &str = "served to the second installation";
/// The admin the second installation finishes the existing host as.
const HOST_ADMIN: &str = "hostadmin";

/// `trog --credentials ARGS…` on installation `dir` with `recipes`, the passphrase handed in.
fn trog(dir: &Path, recipes: &Path, args: &[&str]) -> Output {
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_trog"))
        .arg("--credentials")
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("TROG_RECIPES", recipes)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "keepass: {PASSPHRASE}\n").unwrap();
    let output = child.wait_with_output().unwrap();
    // Where the binary's time goes, in its log (tests/run prints it): one line a verb.
    eprintln!(
        "[verb] {}: exit {:?} after {:.0?}",
        args.join(" "),
        output.status.code(),
        started.elapsed()
    );
    output
}

fn said(output: &Output) -> String {
    format!(
        "status {:?}\n{}\n{}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    )
}

/// A site archive holding one page.
fn page_archive(path: &Path, mark: &str) {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("www")).unwrap();
    std::fs::write(
        site.path().join("www/index.html"),
        format!("<p>{mark}</p>\n"),
    )
    .unwrap();
    let status = Command::new("tar")
        .arg("-czf")
        .arg(path)
        .arg("-C")
        .arg(site.path())
        .arg("www")
        .status()
        .unwrap();
    assert!(status.success());
}

/// A site's recipes: nginx serving `site_dir`/www, restored by the data recipe.
fn site_recipes(site_dir: &str) -> String {
    format!("  nginx:\n    root: {site_dir}/www\n  data:\n    site_dir: {site_dir}\n")
}

/// The recipes every run of the fleet reads (`TROG_RECIPES`, set for the whole test).
fn fleet_recipes() -> PathBuf {
    PathBuf::from(std::env::var_os("TROG_RECIPES").expect("the fleet's recipes are named"))
}

/// A site that depends on the fleet's guest carrying every recipe, provisioned onto it; its
/// packages come through `host_mirror`, as the machine's own do (the fleet's `_base` names an
/// empty archive).
pub fn a_dependent_site_is_served_beside_the_first(fleet: &Fleet, host_mirror: &str) {
    let (machine, address) = fleet.ready(&fleet.every_recipe);
    let (machine, address) = (machine.as_str(), address.as_str());
    let dir = fleet.config();
    let recipes = fleet_recipes();
    // The machine converges first: without the fixture whose test fails, it can.
    let own = dir.join(format!("recipes.d/{machine}.yaml"));
    let written = std::fs::read_to_string(&own).unwrap();
    write_atomically(&own, &written.replace("  failing: {}\n", ""));

    let site = dependent_site(fleet);
    write_atomically(
        &dir.join(format!("recipes.d/{site}.yaml")),
        &format!(
            "{site}:\n  _global:\n    depends_on: {machine}\n    mirror: {host_mirror}\n    security_mirror: {host_mirror}-security\n{}",
            site_recipes("/srv/site2")
        ),
    );
    std::fs::create_dir_all(dir.join(format!("recipes.d/{site}"))).unwrap();
    page_archive(
        &dir.join(format!("recipes.d/{site}/data.tar.gz")),
        SECOND_MARK,
    );

    let run = trog(dir, &recipes, &["provision", &site]);
    assert!(run.status.success(), "{}", said(&run));
    let out = text(&run.stdout);
    assert!(
        out.contains(&format!(
            "{site} on {machine}'s machine (/var/lib/trog/dependents/{site}):"
        )),
        "{}",
        said(&run)
    );
    // The machine was converged first, in the same run (its payload changed).
    let machine_at = out.find(&format!("{machine} is on ")).unwrap_or(usize::MAX);
    let site_at = out.find(&format!("{site} on {machine}'s machine")).unwrap();
    assert!(machine_at < site_at, "{}", said(&run));

    // Both sites, by name, from one nginx.
    let second = http_get(address, &site);
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains(SECOND_MARK), "{second}");
    let first = http_get(address, machine);
    assert!(first.contains(PAGE_MARK), "{first}");
    // Its records are in a directory of its own, the machine's own beside them (each payload
    // removed once its finish was over: it holds rendered secrets).
    must(
        fleet,
        address,
        &format!("sudo test -s /var/lib/trog/dependents/{site}/converged.digest && sudo test -s /var/lib/trog/finish.digest"),
        "",
    );

    let status = trog(dir, &recipes, &["status", &site]);
    assert!(status.status.success(), "{}", said(&status));
    assert!(
        text(&status.stdout).contains(&format!("{site}: on {machine}'s machine, converged")),
        "{}",
        said(&status)
    );
    // Converged: a second run does nothing.
    let again = trog(dir, &recipes, &["provision", "--dry-run", &site]);
    assert!(
        text(&again.stdout).contains("converged, nothing to do"),
        "{}",
        said(&again)
    );
}

/// The dependent site's name.
fn dependent_site(fleet: &Fleet) -> String {
    format!("site2-{}.test", fleet.unique)
}

/// The fleet's guests that are not running (debug_boot leaves the guest it took apart shut off).
fn shut_off(fleet: &Fleet) -> Vec<String> {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    fleet
        .all()
        .iter()
        .filter(|guest| {
            !connection
                .lookup_domain_by_name(guest.as_str())
                .and_then(|domain| domain.is_active())
                .unwrap_or(false)
        })
        .map(|guest| guest.to_string())
        .collect()
}

/// The whole site in one command, at the fleet's end: every guest of the fleet and the dependent
/// site. The guests that are shut off are started and nothing else changes; then, after the
/// site's page changed, exactly that site is finished again. The site is destroyed, and with the
/// files set aside `status --all` reports the machine as drift.
pub fn provision_all_converges_the_whole_site(fleet: &Fleet) {
    let (machine, address) = fleet.ready(&fleet.every_recipe);
    let (machine, address) = (machine.as_str(), address.as_str());
    let dir = fleet.config();
    let recipes = fleet_recipes();
    let own = dir.join(format!("recipes.d/{machine}.yaml"));
    let site = dependent_site(fleet);

    let guests = fleet.all().len() + 1;
    let off = shut_off(fleet);
    let all = trog(dir, &recipes, &["provision", "--all"]);
    assert!(all.status.success(), "{}", said(&all));
    let summary = text(&all.stdout);
    assert!(
        summary.contains(&format!(
            "{guests} guests: {} changed, {} converged already, 0 failed",
            off.len(),
            guests - off.len()
        )) && off
            .iter()
            .all(|guest| summary.contains(&format!("  {:<18} {guest}", "changed"))),
        "the guests shut off were {off:?}:\n{}",
        said(&all)
    );
    page_archive(
        &dir.join(format!("recipes.d/{site}/data.tar.gz")),
        CHANGED_MARK,
    );
    let all = trog(dir, &recipes, &["provision", "--all"]);
    assert!(all.status.success(), "{}", said(&all));
    let summary = text(&all.stdout);
    assert!(
        summary.contains(&format!(
            "{guests} guests: 1 changed, {} converged already, 0 failed",
            guests - 1
        )) && summary.contains(&format!("  {:<18} {site}", "changed"))
            && summary.contains(&format!("  {:<18} {machine}", "converged already")),
        "{}",
        said(&all)
    );
    assert!(http_get(address, &site).contains(CHANGED_MARK));

    // Its destroy removes its directory on the machine and nothing of the machine, and says so.
    let destroyed = trog(dir, &recipes, &["destroy", &site]);
    assert!(destroyed.status.success(), "{}", said(&destroyed));
    let out = text(&destroyed.stdout);
    assert!(
        out.contains(&format!(
            "removed  /var/lib/trog/dependents/{site} on {machine}'s machine"
        )) && out.contains(&format!(
            "kept     {machine}'s machine and everything else on it"
        )),
        "{}",
        said(&destroyed)
    );
    must(
        fleet,
        address,
        &format!(
            "sudo test ! -e /var/lib/trog/dependents/{site} && sudo test -s /var/lib/trog/finish.digest"
        ),
        "",
    );
    assert!(http_get(address, machine).contains(PAGE_MARK));
    let status = trog(dir, &recipes, &["status", machine]);
    assert!(status.status.success(), "{}", said(&status));

    // Drift: with the site's file gone and the machine's set aside, the guest is one this
    // installation made (its tag names the installation) that no file declares; `status --all`
    // names it with the command that removes it, and removes nothing itself.
    std::fs::remove_file(dir.join(format!("recipes.d/{site}.yaml"))).unwrap();
    let aside = dir.join("machine-file-set-aside.yaml");
    std::fs::rename(&own, &aside).unwrap();
    let drift = trog(dir, &recipes, &["status", "--all"]);
    std::fs::rename(&aside, &own).unwrap();
    assert_eq!(drift.status.code(), Some(1), "{}", said(&drift));
    let out = text(&drift.stdout);
    assert!(
        out.contains(
            "made by this installation, declared by no file of recipes.d (left as they are):"
        ) && out.contains(&format!("  {machine} on "))
            && out.contains("remove it with `trog destroy"),
        "{}",
        said(&drift)
    );
    assert!(http_get(address, machine).contains(PAGE_MARK));
}

/// The fleet's guest carrying every recipe as an existing host of a second installation, whose
/// packages come through `host_mirror` as the guest's own do.
pub fn a_second_installation_finishes_it_as_an_existing_host(fleet: &Fleet, host_mirror: &str) {
    let (_, address) = fleet.ready(&fleet.every_recipe);
    let address = address.as_str();
    let second = tempfile::Builder::new()
        .prefix("trog-existing-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = second.path();
    let recipes = checkout().join("recipes");
    // The guest's own mirrors; no admin of its own in _base: the host's is named below.
    std::fs::write(
        dir.join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {host_mirror}\n    security_mirror: {host_mirror}-security\n    upgrade: false\n"
        ),
    )
    .unwrap();
    // Its fleet is libvirt's test driver: nothing of this machine's libvirtd is asked for a
    // machine that is there.
    std::fs::write(
        dir.join("hypervisors.conf"),
        "[none]\nlibvirt_uri = test:///default\n",
    )
    .unwrap();
    let host = format!("existing-{}.test", fleet.unique);
    std::fs::create_dir_all(dir.join(format!("recipes.d/{host}"))).unwrap();
    std::fs::write(
        dir.join(format!("recipes.d/{host}.yaml")),
        format!(
            "{host}:\n  _global:\n    existing_host: {address}\n    admin_user: {HOST_ADMIN}\n{}",
            site_recipes("/srv/site3")
        ),
    )
    .unwrap();
    page_archive(
        &dir.join(format!("recipes.d/{host}/data.tar.gz")),
        THIRD_MARK,
    );

    // The key the host's admin authorizes, printed (and made) by the second installation.
    let key = trog(dir, &recipes, &["authorized-key", &host]);
    assert!(key.status.success(), "{}", said(&key));
    let key = text(&key.stdout);
    assert!(key.starts_with("ssh-ed25519 "), "{key}");
    must(
        fleet,
        address,
        &format!(
            "sudo useradd -m -s /bin/bash {HOST_ADMIN} && \
             echo '{HOST_ADMIN} ALL=(ALL) NOPASSWD: ALL' | sudo tee /etc/sudoers.d/90-{HOST_ADMIN} >/dev/null && \
             sudo install -d -m 700 -o {HOST_ADMIN} -g {HOST_ADMIN} /home/{HOST_ADMIN}/.ssh && \
             sudo tee /home/{HOST_ADMIN}/.ssh/authorized_keys >/dev/null && \
             sudo chown {HOST_ADMIN}: /home/{HOST_ADMIN}/.ssh/authorized_keys"
        ),
        &key,
    );

    // Its host key is not trog's to know: refused until adopted on purpose.
    let refused = trog(dir, &recipes, &["provision", &host]);
    assert_eq!(
        refused.status.code(),
        Some(trog::exit_status::ExitStatus::Conflict.code()),
        "{}",
        said(&refused)
    );
    assert!(
        text(&refused.stderr).contains("--adopt-host-key"),
        "{}",
        said(&refused)
    );

    let preflight = trog(dir, &recipes, &["preflight"]);
    assert!(
        text(&preflight.stdout).contains(&format!(
            "Existing host {host}: {address} answers with a host key trog has not adopted"
        )),
        "{}",
        said(&preflight)
    );

    let adopted = trog(dir, &recipes, &["provision", "--adopt-host-key", &host]);
    assert!(adopted.status.success(), "{}", said(&adopted));
    assert!(
        text(&adopted.stderr).contains("adopted the host key"),
        "{}",
        said(&adopted)
    );
    let page = http_get(address, &host);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains(THIRD_MARK), "{page}");
    // Finished as the non-root admin, through sudo: the record is root's, in the host's own
    // state directory.
    must(
        fleet,
        address,
        "sudo test -s /var/lib/trog/converged.digest",
        "",
    );

    let preflight = trog(dir, &recipes, &["preflight"]);
    let out = text(&preflight.stdout);
    assert!(
        out.contains(&format!(
            "  ok   Existing host {host}: reached {HOST_ADMIN}@{address}"
        )) && out.contains(&format!(
            "  ok   Existing host {host}: passwordless sudo for {HOST_ADMIN}"
        )),
        "{}",
        said(&preflight)
    );

    let status = trog(dir, &recipes, &["status", &host]);
    assert!(status.status.success(), "{}", said(&status));
    assert!(
        text(&status.stdout).contains(&format!("{host}: on {host}'s machine, converged")),
        "{}",
        said(&status)
    );

    let destroy = trog(dir, &recipes, &["destroy", &host]);
    assert_eq!(
        destroy.status.code(),
        Some(trog::exit_status::ExitStatus::Conflict.code()),
        "{}",
        said(&destroy)
    );
    assert!(
        text(&destroy.stderr).contains("trog did not build"),
        "{}",
        said(&destroy)
    );
    // Still served: destroy removed nothing.
    assert!(http_get(address, &host).contains(THIRD_MARK));
}
