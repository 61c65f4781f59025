//! Every shipped recipe rendered with values that mean something to the shell and to make, in
//! every kind of argument that reaches a command line: make and the shell must read each
//! Makefile line and script, and the value must arrive there as one quoted word.

use super::{shipped, template_environment};
use serde_json::{json, Value};
use std::process::Command;
use trog::cookbook::resolve::{resolve_recipes, GuestRecipes};
use trog::model::names::{DomainName, RecipeName};
use trog::render::files::render_files;
use trog::render::makefile::render_makefile;
use trog::render::templates::{GuestFacts, RecipeRenderError};

/// An apostrophe, `;`, `$`, a backtick, a command substitution and spaces.
const NASTY: &str = "it's; $HOME `id` $(id)";
/// The same without blanks, for arguments whose schema refuses them.
const NASTY_WORD: &str = "it's;$HOME`id`$(id)";

fn global() -> Value {
    json!({
        "admin_user": "someadmin",
        "contact_email": "ops@example.test",
        "distro": "debian",
        "mirror": format!("http://mirror.test/{NASTY_WORD}"),
        "security_mirror": format!("http://security.test/{NASTY_WORD}"),
        "cache": "http://cache.test:3128/#$x",
    })
}

/// Hostile arguments for every recipe whose arguments reach a command line.
fn nasty_args(recipe: &str) -> Value {
    match recipe {
        "adminconfig" => json!({
            "shell": NASTY,
            "editor": NASTY,
            "authorized_keys": [format!("ssh-ed25519 AAAAC3Nz {NASTY}"), "ssh-ed25519 AAAAC3Nz plain"],
        }),
        "data" => json!({
            "site_dir": format!("/srv/{NASTY_WORD}"),
            "owner": NASTY,
            "make_target": NASTY,
        }),
        "mariadb" => json!({"root_pw": NASTY}),
        "mounts" => json!({"entries": [format!("/dev/vdb /mnt/{NASTY_WORD}")]}),
        "nginx" => json!({"root": format!("/var/www/{NASTY}")}),
        "ufw" => json!({"allow": ["22/tcp", "from 10.0.0.0/8 to any port 80"]}),
        "trogrunner" => json!({
            "release_url": "http://files.test/it's;$HOME$(id)&x=1",
            "release_sha256": "0".repeat(64),
            "ssh_private_key": "key\n",
            "known_hosts": [],
            "hypervisors_conf": "",
            "recipes_yaml": "",
        }),
        _ => json!({}),
    }
}

const RECIPES: &[&str] = &[
    "adminconfig",
    "data",
    "mariadb",
    "postgres",
    "mounts",
    "nginx",
    "ufw",
    "trogrunner",
];

fn guest(distro: &str, args: impl Fn(&str) -> Value) -> GuestRecipes {
    GuestRecipes {
        on_own_vm: true,
        recipes: RECIPES
            .iter()
            .map(|name| (RecipeName::parse(name).unwrap(), args(name)))
            .collect(),
        distro: distro.to_string(),
        release: None,
        distro_args: Value::Null,
        machine_args: json!({"data_volume_size": "20G", "data_mount": format!("/data/{NASTY}")}),
    }
}

fn facts() -> GuestFacts {
    GuestFacts {
        domain: DomainName::parse("www.example.test").unwrap(),
        global: global(),
    }
}

/// A stand-in for the shell make runs: it records each line make hands it and checks its
/// syntax with `sh -n`, running nothing.
fn syntax_checking_shell(dir: &std::path::Path) -> std::path::PathBuf {
    let shell = dir.join("check-sh");
    std::fs::write(
        &shell,
        "#!/bin/sh\n[ \"$1\" = -c ] || exit 99\nprintf '%s\\0' \"$2\" >> \"$LINES_LOG\"\nexec sh -n -c \"$2\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    shell
}

#[test]
fn hostile_values_reach_make_and_the_shell_as_one_word() {
    for distro in ["debian", "ubuntu"] {
        let resolved = resolve_recipes(&shipped(), &guest(distro, nasty_args))
            .unwrap_or_else(|error| panic!("{error}"));
        let environment = template_environment();
        let files = render_files(&environment, &facts(), &resolved).unwrap();
        let makefile = render_makefile(&environment, &facts(), &resolved, &files)
            .unwrap_or_else(|error| panic!("{error}"));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Makefile"), &makefile).unwrap();
        let shell = syntax_checking_shell(dir.path());
        let log = dir.path().join("lines");
        for target in ["all", "test"] {
            let output = Command::new("make")
                .arg(format!("SHELL={}", shell.display()))
                .args(["-s", "-k", target])
                .env("LINES_LOG", &log)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "make {target}: {}\n{makefile}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let lines = std::fs::read_to_string(&log).unwrap();
        // What the shell gets: each value quoted once, `$` as it is (make took its `$$`).
        for expected in [
            r"--shell 'it'\''s; $HOME `id` $(id)'",
            r"'/srv/it'\''s;$HOME`id`$(id)'",
            r"'/var/www/it'\''s; $HOME `id` $(id)'",
            r"'/data/it'\''s; $HOME `id` $(id)'",
            r"'http://mirror.test/it'\''s;$HOME`id`$(id)'",
            r"'http://files.test/it'\''s;$HOME$(id)&x=1'",
        ] {
            assert!(lines.contains(expected), "{expected} not in:\n{lines}");
        }
        // The admin's keys reach the guest in its key script, each one word for the shell, and
        // the script is valid sh.
        let keys = files
            .iter()
            .find(|file| file.guest_path == "/usr/local/lib/trog/authorized-keys")
            .unwrap();
        let script = String::from_utf8_lossy(&keys.contents);
        assert!(
            script.contains(r"'ssh-ed25519 AAAAC3Nz it'\''s; $HOME `id` $(id)'"),
            "{script}"
        );
        let syntax = Command::new("sh")
            .args(["-n", "-c", script.as_ref()])
            .output()
            .unwrap();
        assert!(syntax.status.success(), "{syntax:?}");
        // The mounts recipe's entries reach the guest as a file its script reads, never as
        // words of a command.
        let entries = files
            .iter()
            .find(|file| file.guest_path == "/etc/trog/mounts/fstab")
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&entries.contents),
            format!("/dev/vdb /mnt/{NASTY_WORD} auto defaults,nofail 0 2\n")
        );
        assert!(
            !makefile.contains(&format!("/mnt/{NASTY_WORD}")),
            "{makefile}"
        );
        let bashrc = files
            .iter()
            .find(|file| file.guest_path.ends_with("skel/.bashrc"))
            .unwrap();
        let output = Command::new("bash")
            .arg("-n")
            .arg("-c")
            .arg(String::from_utf8_lossy(&bashrc.contents).as_ref())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    }
}

#[test]
fn the_cache_reaches_the_commands_unchanged() {
    let resolved = resolve_recipes(&shipped(), &guest("debian", nasty_args)).unwrap();
    let environment = template_environment();
    let files = render_files(&environment, &facts(), &resolved).unwrap();
    let makefile = render_makefile(&environment, &facts(), &resolved, &files).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Makefile"),
        format!("{makefile}\nshow-proxy:\n\t@printf '%s' \"$$http_proxy\"\n"),
    )
    .unwrap();
    let output = Command::new("make")
        .args(["-s", "show-proxy"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "http://cache.test:3128/#$x"
    );
}

#[test]
fn a_line_break_in_an_authorized_key_is_refused_by_the_schema() {
    let error = resolve_recipes(
        &shipped(),
        &guest("debian", |name| match name {
            "adminconfig" => json!({"authorized_keys": ["ssh-ed25519 AAAA x\nrm -rf /"]}),
            other => nasty_args(other),
        }),
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("authorized_keys"), "{message}");
}

#[test]
fn a_line_break_in_a_value_on_a_makefile_line_is_refused_naming_the_line() {
    let resolved = resolve_recipes(
        &shipped(),
        &guest("debian", |name| match name {
            "adminconfig" => json!({"shell": "/bin/bash\nrm -rf /"}),
            other => nasty_args(other),
        }),
    )
    .unwrap();
    let environment = template_environment();
    let files = render_files(&environment, &facts(), &resolved).unwrap();
    let error = render_makefile(&environment, &facts(), &resolved, &files).unwrap_err();
    assert!(
        matches!(error, RecipeRenderError::Unquotable { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("recipes/adminconfig/fragment.mk:6:") && !message.contains("rm -rf"),
        "{message}"
    );
}
