//! The recipes' guest (`recipes.rs`), once its recipes ran, as the machine of other domains,
//! without another boot:
//! - a second site of the same installation that `depends_on` it: provisioned onto it (the
//!   machine converged first, the site's payload, Makefile and tests in a state directory of its
//!   own there; the machine's converge deletes the firewall rule its file dropped and keeps one
//!   added by hand), its page served beside the first by the same nginx; once the side-by-side
//!   checks are over, `provision --all` converges nothing across the whole fleet, and after the
//!   site's page changed exactly that site; with the files set aside, `status --all` reports the
//!   guest as made by trog and declared by no file;
//! - the same guest described as an `existing_host` by another installation, which did not
//!   build it: its key authorized for a non-root admin with passwordless sudo (through the
//!   fleet's SSH), its host key refused until adopted explicitly, then provisioned
//!   there as that admin; `status` says converged and `destroy` refuses it.

use crate::fleet::Fleet;
use crate::recipes::{http_get, must, EXTRA_KEY, PAGE_MARK};
use crate::support::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// What the dependent site's page carries.
const SECOND_MARK: &str = "served from the dependent site";
/// The dependent site's page after it changed.
const CHANGED_MARK: &str = "changed and converged by provision --all";
/// What the existing host's site page carries.
const THIRD_MARK: &str = "served to another installation";
/// The admin the other installation finishes the existing host as.
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

/// A site that depends on the recipes' guest, provisioned onto it.
pub fn a_dependent_site_is_served_beside_the_first(fleet: &Fleet) {
    let (machine, address) = fleet.ready(&fleet.recipes);
    let (machine, address) = (machine.as_str(), address.as_str());
    let dir = fleet.config();
    let recipes = fleet.recipes_dir();
    // The machine converges first: without the fixture whose test fails, it can.
    let own = dir.join(format!("recipes.d/{machine}.yaml"));
    let written = std::fs::read_to_string(&own).unwrap();
    // The machine's package sources are its own file's; `_base`'s (the fleet's empty archive)
    // are what the dependent inherits. Its Makefile writes its machine's sources, which must
    // stay the machine's.
    let machine_mirror = source_in(&written, "mirror");
    let base_mirror = source_in(
        &std::fs::read_to_string(dir.join("recipes.yaml")).unwrap(),
        "mirror",
    );
    assert_ne!(machine_mirror, base_mirror);
    // The machine's firewall drops a rule from its list: the converge deletes it, and keeps a
    // rule added by hand.
    must(fleet, address, "sudo ufw allow 8443/tcp", "");
    // The data volume and the mounts recipe's entry move: the converge mounts each at its new
    // path, unmounts the old ones and takes their lines out of fstab. The admin's extra key is
    // dropped: the converge takes it out of the admin's file (and keeps the guest's own key, which
    // every later step logs in with).
    let keys = must(fleet, address, "cat ~/.ssh/authorized_keys", "");
    assert!(keys.contains(EXTRA_KEY), "{keys}");
    let written = written
        .replace(
            &format!("    authorized_keys: ['{EXTRA_KEY}']\n"),
            "    authorized_keys: []\n",
        )
        .replace("    allow: ['from 10.0.0.0/8 to any port 8080']\n", "")
        .replace("  failing: {}\n", "")
        .replace(
            "    entries: ['LABEL=trog-data /srv/mounted']\n",
            "    entries: ['LABEL=trog-data /srv/moved noatime,nofail']\n",
        )
        .replacen(
            "  _global:\n",
            "  _global:\n    data_mount: /srv/data-moved\n",
            1,
        );
    assert!(
        written.contains("/srv/moved") && !written.contains(EXTRA_KEY),
        "{written}"
    );
    std::fs::write(&own, written).unwrap();

    let site = dependent_site();
    std::fs::write(
        dir.join(format!("recipes.d/{site}.yaml")),
        format!(
            "{site}:\n  _global:\n    depends_on: {machine}\n{}",
            site_recipes("/srv/site2")
        ),
    )
    .unwrap();
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
    let rules = must(fleet, address, "sudo ufw show added", "");
    for (rule, kept) in [
        ("22/tcp", true),
        ("80/tcp", true),
        ("8443/tcp", true),
        ("from 10.0.0.0/8 to any port 8080", false),
    ] {
        assert_eq!(
            rules
                .lines()
                .any(|line| line == format!("ufw allow {rule}")),
            kept,
            "{rule} should be {}:\n{rules}",
            if kept { "kept" } else { "deleted" }
        );
    }

    let keys = must(fleet, address, "cat ~/.ssh/authorized_keys", "");
    assert!(!keys.contains(EXTRA_KEY), "{keys}");
    let fstab = must(fleet, address, "grep -v '^#' /etc/fstab", "");
    let mounted = must(
        fleet,
        address,
        "findmnt -n -o TARGET,LABEL,OPTIONS -S LABEL=trog-data",
        "",
    );
    for (path, wanted) in [
        ("/srv/data-moved", true),
        ("/srv/moved", true),
        ("/srv/data", false),
        ("/srv/mounted", false),
    ] {
        assert_eq!(
            fstab
                .lines()
                .any(|line| line.split_whitespace().nth(1) == Some(path)),
            wanted,
            "{path} in fstab:\n{fstab}"
        );
        assert_eq!(
            mounted
                .lines()
                .any(|line| line.split_whitespace().next() == Some(path)),
            wanted,
            "{path} mounted:\n{mounted}"
        );
    }
    assert!(
        mounted
            .lines()
            .any(|line| line.starts_with("/srv/moved ") && line.contains("noatime")),
        "{mounted}"
    );

    // The machine's package sources are its own, not `_base`'s.
    must(
        fleet,
        address,
        &format!(
            "grep -q 'URIs: {machine_mirror}$' /etc/apt/sources.list.d/debian.sources && ! grep -rq '{base_mirror}' /etc/apt/"
        ),
        "",
    );

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

/// The whole fleet in one command, once the dependent site is on the recipes' guest: every
/// guest converged already, nothing done; after the site's page changed, exactly that site is
/// finished again. Then the site's destroy, and `status --all`'s drift.
pub fn the_whole_fleet_in_one_command(fleet: &Fleet) {
    let (machine, address) = fleet.ready(&fleet.recipes);
    let (machine, address) = (machine.as_str(), address.as_str());
    let dir = fleet.config();
    let recipes = fleet.recipes_dir();
    let site = dependent_site();
    let declared = declared_guests(dir);
    let all = trog(dir, &recipes, &["provision", "--all"]);
    assert!(all.status.success(), "{}", said(&all));
    assert!(
        text(&all.stdout).contains(&format!(
            "{declared} guests: 0 changed, {declared} converged already, 0 failed"
        )),
        "{}",
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
            "{declared} guests: 1 changed, {} converged already, 0 failed",
            declared - 1
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
    let own = dir.join(format!("recipes.d/{machine}.yaml"));
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

/// The value of the first `KEY: VALUE` line of a recipes file whose key is `key`.
fn source_in(file: &str, key: &str) -> String {
    file.lines()
        .find_map(|line| line.trim_start().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{file}"))
        .to_string()
}

/// The site that depends on the recipes' guest.
fn dependent_site() -> String {
    format!("site2-{}.test", std::process::id())
}

/// How many guests the fleet's files declare.
fn declared_guests(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("recipes.d"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|ext| ext == "yaml")
        })
        .count()
}

/// The recipes' guest as an existing host of another installation.
pub fn a_second_installation_finishes_it_as_an_existing_host(fleet: &Fleet) {
    let (machine, address) = fleet.ready(&fleet.recipes);
    let address = address.as_str();
    let second = tempfile::Builder::new()
        .prefix("trog-existing-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = second.path();
    let recipes = checkout().join("recipes");
    let machine_file =
        std::fs::read_to_string(fleet.config().join(format!("recipes.d/{machine}.yaml"))).unwrap();
    let mirror = source_in(&machine_file, "mirror");
    // The machine's mirrors; no admin of its own in _base: the host's is named below.
    std::fs::write(
        dir.join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror}\n    security_mirror: {mirror}-security\n    upgrade: false\n"
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
    let host = format!("existing-{}.test", std::process::id());
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

    // The key the host's admin authorizes, printed (and made) by the other installation.
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
