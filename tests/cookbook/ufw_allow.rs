//! The `ufw` recipe's rule script (`/usr/local/lib/trog/ufw-allow`, from allow.sh.j2), rendered
//! and run against a stand-in `ufw` that keeps its rules in a file: which rules it adds, which it
//! takes back, which it leaves, and how many times it starts ufw (each a Python start on a guest).
//! The real ufw runs it on a real guest in `tests/recipes_on_guests`.

use super::{facts, guest, shipped, template_environment};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use trog::cookbook::resolve::resolve_recipes;
use trog::model::names::RecipeName;
use trog::render::files::render_files;

/// A `ufw` that records each call in `calls`, lists `rules` as `ufw show added` does, adds and
/// deletes lines there (and a tuple line in `user.rules`, which the script reads), and fails an
/// `allow` of `FAIL_RULE`.
const FAKE_UFW: &str = r####"#!/bin/sh
set -eu
here=$(dirname "$0")/..
echo "$*" >>"$here/calls"
case "$1" in
  show) echo "Added user rules (see 'ufw status' for running firewall):"; sed 's/^/ufw allow /' "$here/rules" ;;
  allow) shift
    [ "$*" != "${FAIL_RULE:-}" ] || { echo "ERROR: Bad port" >&2; exit 1; }
    echo "$*" >>"$here/rules"; echo "### tuple ### allow $*" >>"$here/user.rules" ;;
  --force) shift 3
    grep -vxF "$*" "$here/rules" >"$here/rules.new" || true; mv "$here/rules.new" "$here/rules" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"####;

struct Guest {
    dir: tempfile::TempDir,
}

impl Guest {
    fn new() -> Guest {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let ufw = dir.path().join("bin/ufw");
        std::fs::write(&ufw, FAKE_UFW).unwrap();
        make_executable(&ufw);
        for file in ["rules", "user.rules", "calls"] {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        Guest { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A rule added by hand, as `ufw allow RULE` on the guest adds it.
    fn add_by_hand(&self, rule: &str) {
        std::fs::write(
            self.path("rules"),
            std::fs::read_to_string(self.path("rules")).unwrap() + rule + "\n",
        )
        .unwrap();
        std::fs::write(
            self.path("user.rules"),
            std::fs::read_to_string(self.path("user.rules")).unwrap()
                + &format!("### tuple ### allow {rule}\n"),
        )
        .unwrap();
    }

    fn delete_by_hand(&self, rule: &str) {
        let kept: String = std::fs::read_to_string(self.path("rules"))
            .unwrap()
            .lines()
            .filter(|line| *line != rule)
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(self.path("rules"), kept).unwrap();
    }

    fn rules(&self) -> Vec<String> {
        lines(&self.path("rules"))
    }

    /// Runs the script rendered for `ssh` and `allow`, its paths moved into this directory;
    /// returns whether it succeeded and the `ufw` calls it made.
    fn run(&self, ssh: bool, allow: &[&str], fail_rule: &str) -> (bool, Vec<String>) {
        let script = rendered_script(ssh, allow)
            .replace(
                "/etc/ufw/user.rules",
                &self.path("user.rules").display().to_string(),
            )
            .replace(
                "/var/lib/trog/ufw/allowed",
                &self.path("state/allowed").display().to_string(),
            );
        let at = self.path("ufw-allow");
        std::fs::write(&at, script).unwrap();
        std::fs::write(self.path("calls"), "").unwrap();
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap()
        );
        // Run by sh rather than executed: a file just written can be "busy" for exec while a
        // process another test forks at that moment still holds it open.
        let status = Command::new("sh")
            .arg(&at)
            .env("PATH", path)
            .env("FAIL_RULE", fail_rule)
            .status()
            .unwrap();
        (status.success(), lines(&self.path("calls")))
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn rendered_script(ssh: bool, allow: &[&str]) -> String {
    let mut wanted = guest(&["ufw"], "debian");
    wanted.recipes.insert(
        RecipeName::parse("ufw").unwrap(),
        json!({"ssh": ssh, "allow": allow}),
    );
    let resolved = resolve_recipes(&shipped(), &wanted).unwrap();
    let files = render_files(&template_environment(), &facts(), &resolved).unwrap();
    let script = files
        .iter()
        .find(|file| file.guest_path == "/usr/local/lib/trog/ufw-allow")
        .expect("the ufw recipe installs its rule script");
    String::from_utf8(script.contents.clone()).unwrap()
}

#[test]
fn the_ufw_rule_script_adds_what_ufw_lacks_and_takes_back_only_its_own() {
    let guest = Guest::new();
    let rules = |list: &[&str]| list.iter().map(|rule| rule.to_string()).collect::<Vec<_>>();

    // A new guest: ufw holds no rule, so its list is not read; every rule is added.
    let (ok, calls) = guest.run(true, &["8080/tcp"], "");
    assert!(ok);
    assert_eq!(calls, rules(&["allow 22/tcp", "allow 8080/tcp"]));

    // Finished again, nothing changed: one start of ufw, to read its list.
    let (ok, calls) = guest.run(true, &["8080/tcp"], "");
    assert!(ok);
    assert_eq!(calls, rules(&["show added"]));

    // A rule added by hand stays; one dropped from the list is deleted; a new one, of several
    // words, reaches ufw as its words.
    guest.add_by_hand("8443/tcp");
    let wide = "from 10.0.0.0/8 to any port 5432";
    let (ok, calls) = guest.run(true, &[wide], "");
    assert!(ok);
    assert_eq!(
        calls,
        rules(&[
            "show added",
            "--force delete allow 8080/tcp",
            &format!("allow {wide}")
        ])
    );
    assert_eq!(guest.rules(), rules(&["22/tcp", "8443/tcp", wide]));

    // A rule of trog's deleted by hand meanwhile is not deleted again when the list drops it.
    guest.delete_by_hand("22/tcp");
    let (ok, calls) = guest.run(false, &[wide], "");
    assert!(ok);
    assert_eq!(calls, rules(&["show added"]));
    assert_eq!(guest.rules(), rules(&["8443/tcp", wide]));

    // ufw refusing a rule fails the script, and the rules it did not get to are tried again on
    // the next run: what the last run allowed is recorded only once every rule is in.
    let (ok, _) = guest.run(true, &[wide, "9000/tcp"], "22/tcp");
    assert!(!ok);
    let (ok, calls) = guest.run(true, &[wide, "9000/tcp"], "");
    assert!(ok);
    assert_eq!(
        calls,
        rules(&["show added", "allow 22/tcp", "allow 9000/tcp"])
    );
    // Back to the list of before: 9000/tcp, which the last run allowed, is taken back.
    let (ok, calls) = guest.run(true, &[wide], "");
    assert!(ok);
    assert_eq!(
        calls,
        rules(&["show added", "--force delete allow 9000/tcp"])
    );
    assert_eq!(guest.rules(), rules(&["8443/tcp", wide, "22/tcp"]));
}
