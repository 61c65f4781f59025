//! The `ufw` recipe's scripts, rendered and run against stand-ins:
//! - the rule script (`/usr/local/lib/trog/ufw-allow`, from allow.sh.j2), against a `ufw` that
//!   keeps its rules in a file and a `ufw-batch` that hands it each command: which rules it adds,
//!   which it takes back, which it leaves, and how many times it starts ufw (each a Python start
//!   on a guest);
//! - the enabling script (`ufw-enable`, from enable.sh.j2), against a `ufw-init` and a `ufw`
//!   that say they ran: when it loads the rules files itself, and what it leaves when that fails.
//!
//! The real ufw runs both on a real guest in `tests/recipes_on_guests`, where the batch's commands
//! go through ufw's own modules.

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

/// A `ufw-batch` that notes its start in `batches` and hands each command on its input to `ufw`,
/// stopping at the first that fails, as the real one does.
const FAKE_BATCH: &str = r####"#!/bin/sh
set -eu
echo start >>"$(dirname "$0")/../batches"
while IFS= read -r command; do
  # shellcheck disable=SC2086
  ufw $command
done
"####;

struct Guest {
    stand_ins: StandIns,
}

impl Guest {
    fn new() -> Guest {
        let stand_ins = StandIns::new(&[("ufw", FAKE_UFW), ("ufw-batch", FAKE_BATCH)]);
        for file in ["rules", "user.rules", "calls", "batches", "fail_rule"] {
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
    /// refusing `fail_rule`; returns whether it succeeded and the `ufw` calls it made. Every
    /// change goes through one start of `ufw-batch`, and a run without changes starts none.
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
        )
        .replace(
            "/usr/local/lib/trog/ufw-batch",
            &self.path("bin/ufw-batch").display().to_string(),
        );
        std::fs::write(self.path("calls"), "").unwrap();
        std::fs::write(self.path("batches"), "").unwrap();
        std::fs::write(self.path("fail_rule"), fail_rule).unwrap();
        let output = self.stand_ins.sh_script("ufw-allow", &script, &[], b"");
        let calls = self.stand_ins.lines("calls");
        let changes = calls.iter().filter(|call| *call != "show added").count();
        let batches = self.stand_ins.lines("batches").len();
        assert_eq!(
            batches,
            usize::from(changes > 0),
            "{changes} changes in {batches} starts of ufw-batch"
        );
        (output.status.success(), calls)
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

/// A `ufw` and a `ufw-init` that note each call in `calls`; `ufw-init` fails when `init_fails`
/// holds anything.
const FAKE_UFW_CALLS: &str = "#!/bin/sh\necho \"ufw $*\" >>\"$(dirname \"$0\")/../calls\"\n";
const FAKE_UFW_INIT: &str = r####"#!/bin/sh
here=$(dirname "$0")/..
echo "ufw-init $*" >>"$here/calls"
[ ! -s "$here/init_fails" ]
"####;

/// ufw.conf as the package ships it, and its rules files before and after ufw has written them.
const UFW_CONF: &str = "# /etc/ufw/ufw.conf\nENABLED=no\nLOGLEVEL=low\n";
const PACKAGED_RULES: &str = "*filter\n:ufw-user-input - [0:0]\n### RULES ###\nCOMMIT\n";
const WRITTEN_RULES: &str = "*filter\n:ufw-user-input - [0:0]\n### RULES ###\n### END RULES ###\n\
    ### LOGGING ###\n-A ufw-logging-deny -j LOG --log-prefix \"[UFW BLOCK] \"\n### END LOGGING ###\nCOMMIT\n";

/// Runs the enabling script over ufw.conf and rules files of the given contents; returns whether
/// it succeeded, the calls it made and ufw.conf after it.
fn enable(v4_rules: &str, v6_rules: &str, init_fails: bool) -> (bool, Vec<String>, String) {
    let stand_ins = StandIns::new(&[("ufw", FAKE_UFW_CALLS), ("ufw-init", FAKE_UFW_INIT)]);
    for (file, text) in [
        ("ufw.conf", UFW_CONF),
        ("user.rules", v4_rules),
        ("user6.rules", v6_rules),
        ("calls", ""),
        ("init_fails", if init_fails { "yes" } else { "" }),
    ] {
        std::fs::write(stand_ins.path(file), text).unwrap();
    }
    let mut script = rendered_file("ufw", json!({}), "/usr/local/lib/trog/ufw-enable");
    for (guest_path, here) in [
        ("/etc/ufw/ufw.conf", "ufw.conf"),
        ("/etc/ufw/user.rules", "user.rules"),
        ("/etc/ufw/user6.rules", "user6.rules"),
        ("/lib/ufw/ufw-init", "bin/ufw-init"),
    ] {
        assert!(
            script.contains(guest_path),
            "the script no longer names {guest_path}"
        );
        script = script.replace(guest_path, &stand_ins.path(here).display().to_string());
    }
    let output = stand_ins.sh_script("ufw-enable", &script, &[], b"");
    (
        output.status.success(),
        stand_ins.lines("calls"),
        stand_ins.read("ufw.conf"),
    )
}

#[test]
fn the_firewall_is_enabled_by_loading_the_rules_files_once_ufw_has_written_them() {
    let enabled = UFW_CONF.replace("ENABLED=no", "ENABLED=yes");

    // ufw wrote both rules files (their logging rules are in them): they are loaded as a boot
    // loads them, and ufw.conf says the firewall is on, its other settings as they were.
    let (ok, calls, conf) = enable(WRITTEN_RULES, WRITTEN_RULES, false);
    assert!(ok);
    assert_eq!(calls, ["ufw-init start"]);
    assert_eq!(conf, enabled);

    // A file as the package ships it lacks the logging rules that `ufw enable` adds: ufw does it.
    for (v4, v6) in [
        (PACKAGED_RULES, PACKAGED_RULES),
        (WRITTEN_RULES, PACKAGED_RULES),
        (PACKAGED_RULES, WRITTEN_RULES),
    ] {
        let (ok, calls, conf) = enable(v4, v6, false);
        assert!(ok);
        assert_eq!(calls, ["ufw --force enable"]);
        // ufw itself writes ufw.conf (the stand-in does not).
        assert_eq!(conf, UFW_CONF);
    }

    // A firewall that does not start is not left enabled for the next boot.
    let (ok, calls, conf) = enable(WRITTEN_RULES, WRITTEN_RULES, true);
    assert!(!ok);
    assert_eq!(calls, ["ufw-init start"]);
    assert_eq!(conf, UFW_CONF);
}

/// A `ufw` that notes each call in `calls` and fails, with status 3, the one that allows 9000.
const FAKE_UFW_FAILING_9000: &str = "#!/bin/sh\necho \"$*\" >>\"$(dirname \"$0\")/../calls\"\n\
    [ \"$*\" != 'allow 9000/tcp' ] || exit 3\n";

/// The batch script itself, where ufw's Python modules are not there to import (Python without
/// its site packages): each command on its input goes to `ufw` as its words, in order, and the
/// first that fails ends the run with its status. On a guest, the same commands go through
/// ufw's modules in one process (`tests/recipes_on_guests`).
#[test]
fn the_batch_hands_each_command_to_ufw_when_its_modules_cannot_be_imported() {
    let stand_ins = StandIns::new(&[("ufw", FAKE_UFW_FAILING_9000)]);
    let script = rendered_file("ufw", json!({}), "/usr/local/lib/trog/ufw-batch");
    std::fs::write(stand_ins.path("ufw-batch"), script).unwrap();
    let batch = |input: &str| {
        std::fs::write(stand_ins.path("calls"), "").unwrap();
        let output = stand_ins.run("python3", &["-S", "ufw-batch"], input.as_bytes());
        (output.status.code(), stand_ins.lines("calls"))
    };

    let wide = "allow from 10.0.0.0/8 to any port 5432";
    let (status, calls) = batch(&format!(
        "allow 22/tcp\n--force delete allow 80/tcp\n\n{wide}\n"
    ));
    assert_eq!(status, Some(0));
    assert_eq!(calls, ["allow 22/tcp", "--force delete allow 80/tcp", wide]);

    let (status, calls) = batch("allow 22/tcp\nallow 9000/tcp\nallow 443/tcp\n");
    assert_eq!(status, Some(3));
    assert_eq!(calls, ["allow 22/tcp", "allow 9000/tcp"]);
}
