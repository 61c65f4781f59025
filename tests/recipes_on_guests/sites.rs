//! The guest of `main.rs`, once its recipes ran, as the machine of other domains, without
//! another boot:
//! - a second site of the same installation that `depends_on` it: provisioned onto it (the
//!   machine converged first, the site's payload, Makefile and tests in a state directory of its
//!   own there; the machine's converge deletes the firewall rule its file dropped and keeps one
//!   added by hand), its page served beside the first by the same nginx; `provision --all` then
//!   converges nothing, and after the site's page changed exactly that site; with the files set
//!   aside, `status --all` reports the guest as made by trog and declared by no file;
//! - the same guest described as an `existing_host` by a second installation, which did not
//!   build it: its key authorized for a non-root admin with passwordless sudo (through the
//!   first installation's SSH), its host key refused until adopted explicitly, then provisioned
//!   there as that admin; `status` says converged and `destroy` refuses it.

use super::support::*;
use super::{http_get, Installation, PAGE_MARK};
use std::io::Write;
use std::path::Path;
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

/// A site that depends on the first installation's guest, provisioned onto it.
pub fn a_dependent_site_is_served_beside_the_first(installation: &Installation, address: &str) {
    let dir = installation.dir.path();
    let recipes = dir.join("recipes");
    let machine = installation.domain.as_str();
    // The machine converges first: without the fixture whose test fails, it can.
    let own = dir.join(format!("recipes.d/{machine}.yaml"));
    let written = std::fs::read_to_string(&own).unwrap();
    // The machine's package sources become its own file's, and `_base`'s point somewhere no
    // guest reaches: the dependent's Makefile writes its machine's sources, which must stay the
    // machine's (with `_base`'s, its apt would fail and the machine would be re-pointed).
    let recipes_yaml = dir.join("recipes.yaml");
    let base_as_written = std::fs::read_to_string(&recipes_yaml).unwrap();
    let sources: Vec<&str> = base_as_written
        .lines()
        .filter(|line| {
            line.starts_with("    mirror: ") || line.starts_with("    security_mirror: ")
        })
        .collect();
    assert_eq!(sources.len(), 2, "{base_as_written}");
    let machine_sources = format!("{}\n", sources.join("\n"));
    // The machine's firewall drops a rule from its list: the converge deletes it, and keeps a
    // rule added by hand.
    installation.must(address, "sudo ufw allow 8443/tcp", "");
    // The data volume and the mounts recipe's entry move: the converge mounts each at its new
    // path, unmounts the old ones and takes their lines out of fstab. The admin's extra key is
    // dropped: the converge takes it out of the admin's file (and keeps the guest's own key, which
    // every later step logs in with).
    let keys = installation.must(address, "cat ~/.ssh/authorized_keys", "");
    assert!(keys.contains(super::EXTRA_KEY), "{keys}");
    let written = written
        .replace(
            &format!("    authorized_keys: ['{}']\n", super::EXTRA_KEY),
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
            &format!("  _global:\n{machine_sources}    data_mount: /srv/data-moved\n"),
            1,
        );
    assert!(
        written.contains("/srv/moved") && !written.contains(super::EXTRA_KEY),
        "{written}"
    );
    std::fs::write(&own, written).unwrap();
    let unreachable = "http://192.0.2.1/debian";
    let mut base_elsewhere = String::new();
    for line in base_as_written.lines() {
        match line.trim_start().split_once(": ") {
            Some(("mirror", _)) => base_elsewhere.push_str(&format!("    mirror: {unreachable}\n")),
            Some(("security_mirror", _)) => {
                base_elsewhere.push_str(&format!("    security_mirror: {unreachable}-security\n"))
            }
            _ => base_elsewhere.push_str(&format!("{line}\n")),
        }
    }
    std::fs::write(&recipes_yaml, base_elsewhere).unwrap();

    let site = format!("site2-{}.test", std::process::id());
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
    let rules = installation.must(address, "sudo ufw show added", "");
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

    let keys = installation.must(address, "cat ~/.ssh/authorized_keys", "");
    assert!(!keys.contains(super::EXTRA_KEY), "{keys}");
    let fstab = installation.must(address, "grep -v '^#' /etc/fstab", "");
    let mounted = installation.must(
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
    let mirror = sources[0].trim_start().trim_start_matches("mirror: ");
    installation.must(
        address,
        &format!(
            "grep -q 'URIs: {mirror}$' /etc/apt/sources.list.d/trog-debian.sources && ! grep -rq 192.0.2.1 /etc/apt/"
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
    installation.must(
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

    // The whole site in one command: converged, nothing to do; after the site's page changed,
    // exactly that site is finished again.
    let all = trog(dir, &recipes, &["provision", "--all"]);
    assert!(all.status.success(), "{}", said(&all));
    assert!(
        text(&all.stdout).contains("2 guests: 0 changed, 2 converged already, 0 failed"),
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
        summary.contains("2 guests: 1 changed, 1 converged already, 0 failed")
            && summary.contains(&format!("  {:<18} {site}", "changed"))
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
    installation.must(
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
    std::fs::write(&recipes_yaml, base_as_written).unwrap();
}

/// The first installation's guest as an existing host of a second installation.
pub fn a_second_installation_finishes_it_as_an_existing_host(
    installation: &Installation,
    address: &str,
) {
    let second = tempfile::Builder::new()
        .prefix("trog-existing-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = second.path();
    let recipes = checkout().join("recipes");
    let first_recipes_yaml =
        std::fs::read_to_string(installation.dir.path().join("recipes.yaml")).unwrap();
    // The same mirrors; no admin of its own in _base: the host's is named below.
    std::fs::write(
        dir.join("recipes.yaml"),
        first_recipes_yaml.replace("    admin_user: trogadmin\n", ""),
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

    // The key the host's admin authorizes, printed (and made) by the second installation.
    let key = trog(dir, &recipes, &["authorized-key", &host]);
    assert!(key.status.success(), "{}", said(&key));
    let key = text(&key.stdout);
    assert!(key.starts_with("ssh-ed25519 "), "{key}");
    installation.must(
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
    installation.must(address, "sudo test -s /var/lib/trog/converged.digest", "");

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
