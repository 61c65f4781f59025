//! The `ufw` recipe's rule script (`/usr/local/lib/trog/ufw-allow`, from allow.sh.j2), rendered
//! and run against a stand-in `ufw` that keeps its rules in a file: which rules it adds, which it
//! takes back, which it leaves, and how many times it starts ufw (each a Python start on a guest).
//! The real ufw runs it on a real guest in `tests/recipes_on_guests`.

use super::stand_ins::{rendered_file, StandIns};
use serde_json::json;

/// A `ufw` that records each call in `calls`, lists `rules` as `ufw show added` does, adds and
/// deletes lines there (and a tuple line in `user.rules`, which the script reads), and fails an
/// `allow` of the rule in `fail_rule`.
const FAKE_UFW: &str = r####"#!/bin/sh
set -eu
here=$(dirname "$0")/..
echo "$*" >>"$here/calls"
case "$1" in
  show) echo "Added user rules (see 'ufw status' for running firewall):"; sed 's/^/ufw allow /' "$here/rules" ;;
  allow) shift
    [ "$*" != "$(cat "$here/fail_rule")" ] || { echo "ERROR: Bad port" >&2; exit 1; }
    echo "$*" >>"$here/rules"; echo "### tuple ### allow $*" >>"$here/user.rules" ;;
  --force) shift 3
    grep -vxF "$*" "$here/rules" >"$here/rules.new" || true; mv "$here/rules.new" "$here/rules" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"####;

struct Guest {
    stand_ins: StandIns,
}

impl Guest {
    fn new() -> Guest {
        let stand_ins = StandIns::new(&[("ufw", FAKE_UFW)]);
        for file in ["rules", "user.rules", "calls", "fail_rule"] {
            std::fs::write(stand_ins.path(file), "").unwrap();
        }
        Guest { stand_ins }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.stand_ins.path(name)
    }

    /// A rule added by hand, as `ufw allow RULE` on the guest adds it.
    fn add_by_hand(&self, rule: &str) {
        std::fs::write(
            self.path("rules"),
            self.stand_ins.read("rules") + rule + "\n",
        )
        .unwrap();
        std::fs::write(
            self.path("user.rules"),
            self.stand_ins.read("user.rules") + &format!("### tuple ### allow {rule}\n"),
        )
        .unwrap();
    }

    fn delete_by_hand(&self, rule: &str) {
        let kept: String = self
            .stand_ins
            .lines("rules")
            .into_iter()
            .filter(|line| line != rule)
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(self.path("rules"), kept).unwrap();
    }

    fn rules(&self) -> Vec<String> {
        self.stand_ins.lines("rules")
    }

    /// Runs the script rendered for `ssh` and `allow`, its paths moved into this directory, ufw
    /// refusing `fail_rule`; returns whether it succeeded and the `ufw` calls it made.
    fn run(&self, ssh: bool, allow: &[&str], fail_rule: &str) -> (bool, Vec<String>) {
        let script = rendered_file(
            "ufw",
            json!({"ssh": ssh, "allow": allow}),
            "/usr/local/lib/trog/ufw-allow",
        )
        .replace(
            "/etc/ufw/user.rules",
            &self.path("user.rules").display().to_string(),
        )
        .replace(
            "/var/lib/trog/ufw/allowed",
            &self.path("state/allowed").display().to_string(),
        );
        std::fs::write(self.path("calls"), "").unwrap();
        std::fs::write(self.path("fail_rule"), fail_rule).unwrap();
        let output = self.stand_ins.sh_script("ufw-allow", &script, &[], b"");
        (output.status.success(), self.stand_ins.lines("calls"))
    }
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

/// The `set --` line of the rule script of a guest of `recipes` (with their arguments).
fn rules_line(recipes: &[(&str, serde_json::Value)]) -> Option<String> {
    let guest = trog::cookbook::resolve::GuestRecipes {
        on_own_vm: true,
        recipes: recipes
            .iter()
            .map(|(name, args)| {
                (
                    trog::model::names::RecipeName::parse(name).unwrap(),
                    args.clone(),
                )
            })
            .collect(),
        distro: "debian".into(),
        release: None,
        distro_args: serde_json::Value::Null,
        machine_args: serde_json::Value::Null,
    };
    let resolved = trog::cookbook::resolve::resolve_recipes(&super::shipped(), &guest).unwrap();
    let files = trog::render::files::render_files(
        &trog::render::templates::template_environment(),
        &super::facts(),
        &resolved,
    )
    .unwrap();
    let script = files
        .iter()
        .find(|file| file.guest_path == "/usr/local/lib/trog/ufw-allow")?;
    let script = String::from_utf8(script.contents.clone()).unwrap();
    script
        .lines()
        .find(|line| line.starts_with("set -- "))
        .map(str::to_string)
}

#[test]
fn the_ports_a_guests_services_serve_on_are_allowed_once_each_after_its_own_rules() {
    let upstream = json!({"upstream": "http://proxy.example.test:3142", "port": 8080});
    let line = rules_line(&[
        ("aptmirror", upstream.clone()),
        ("fetchcache", json!({})),
        ("logcollector", json!({})),
        ("nginx", json!({"port": 8443})),
        ("ufw", json!({"allow": ["8443/tcp"]})),
    ]);
    // nginx's own rules, the guest's, then the ports served that no rule lists yet: the mirror's
    // as the guest set it, squid's, the collector's (nginx's 8443 is listed already).
    assert_eq!(
        line.as_deref(),
        Some("set -- 22/tcp 80/tcp 443/tcp 8443/tcp 8080/tcp 3128/tcp 514/tcp")
    );
    // Without a firewall on the guest, a service changes nothing: there is no rule script.
    assert_eq!(rules_line(&[("aptmirror", upstream)]), None);
}
