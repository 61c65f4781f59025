//! `trog new_guest`, run as a user runs it, against a temporary copy of the example installation
//! in `etc/`: what it writes and prints, what it refuses (writing nothing), and that what it
//! writes loads, with exactly the `CHANGEME` keys it printed.

#[path = "../support/root_warning.rs"]
mod root_warning;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use trog::config::changeme::refuse_changeme;
use trog::config::guest::load_guest_with_recipe_settings;
use trog::config::paths::InstallationPaths;
use trog::cookbook::load::load_cookbook;
use trog::generate::recipe_settings;
use trog::model::names::DomainName;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A copy of the repository's example installation.
fn installation() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&manifest_dir().join("etc"), dir.path());
    dir
}

struct Run {
    stdout: String,
    stderr: String,
    status: i32,
}

fn trog(config: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", config)
        .env("TROG_RECIPES", manifest_dir().join("recipes"))
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("trog runs");
    let output = root_warning::output_without_root_warning(output);
    Run {
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
        status: output.status.code().unwrap_or(-1),
    }
}

/// The names of the files in recipes.d, sorted.
fn recipes_d(config: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(config.join("recipes.d"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `text` with the temporary directory and `domain`'s UUID replaced, for snapshots.
fn redact(text: &str, config: &Path, uuid: Option<&str>) -> String {
    let text = text.replace(&config.display().to_string(), "[CONFIG]");
    match uuid {
        Some(uuid) => text.replace(uuid, "[UUID]"),
        None => text,
    }
}

fn paths(config: &Path) -> InstallationPaths {
    InstallationPaths::resolve(Some(config.to_str().unwrap()), None, None)
}

/// The keys listed under "Fill these in before provisioning:".
fn printed_keys(stdout: &str) -> Vec<String> {
    stdout
        .split_once("Fill these in before provisioning:\n")
        .map(|(_, rest)| rest.lines().map(|line| line.trim().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn without_hostname_a_uuid_under_test_is_picked() {
    let config = installation();
    let run = trog(config.path(), &["new_guest", "nginx", "mariadb"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let written: Vec<String> = recipes_d(config.path())
        .into_iter()
        .filter(|name| name != "example.test.yaml" && name != "example.test")
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let uuid_text = written[0].strip_suffix(".test.yaml").unwrap();
    let uuid = uuid::Uuid::parse_str(uuid_text).unwrap();
    assert_eq!(uuid.get_version_num(), 4);
    assert_eq!(uuid.hyphenated().to_string(), uuid_text, "one spelling");

    insta::assert_snapshot!(
        "uuid_guest_output",
        redact(&run.stdout, config.path(), Some(uuid_text))
    );
    let yaml = std::fs::read_to_string(config.path().join("recipes.d").join(&written[0])).unwrap();
    insta::assert_snapshot!(
        "uuid_guest_file",
        redact(&yaml, config.path(), Some(uuid_text))
    );

    // A second run picks another name.
    let again = trog(config.path(), &["new_guest", "nginx"]);
    assert_eq!(again.status, 0, "{}", again.stderr);
    let guests: Vec<String> = recipes_d(config.path())
        .into_iter()
        .filter(|name| name.ends_with(".yaml") && name != "example.test.yaml")
        .collect();
    assert_eq!(guests.len(), 2, "{guests:?}");
}

#[test]
fn hostname_and_sizes_are_written_and_nothing_is_left_to_fill() {
    let config = installation();
    let run = trog(
        config.path(),
        &[
            "new_guest",
            "--hostname",
            "web.example.test",
            "--memory",
            "2G",
            "--cpus",
            "2",
            "--size",
            "20",
            "nginx",
            "ufw",
        ],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("Fill these in"), "{}", run.stdout);
    insta::assert_snapshot!("hostname_output", redact(&run.stdout, config.path(), None));
    let yaml =
        std::fs::read_to_string(config.path().join("recipes.d/web.example.test.yaml")).unwrap();
    insta::assert_snapshot!("hostname_file", yaml);

    let cookbook = load_cookbook(&manifest_dir().join("recipes")).unwrap();
    let domain = DomainName::parse("web.example.test").unwrap();
    let guest = load_guest_with_recipe_settings(
        &paths(config.path()),
        &domain,
        &recipe_settings(&cookbook),
    )
    .unwrap();
    assert_eq!(guest.settings.memory.0, 2048);
    assert_eq!(guest.settings.cpus, 2);
    assert_eq!(guest.settings.size.whole_gib(), 20);
    assert_eq!(guest.settings.admin_user, "siteadmin", "from _base");
    refuse_changeme(&guest).unwrap();
}

#[test]
fn changeme_round_trip_names_exactly_the_printed_keys() {
    let config = installation();
    let run = trog(
        config.path(),
        &[
            "new_guest",
            "--hostname",
            "db.example.test",
            "nginx",
            "mariadb",
            "postgres",
        ],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let printed = printed_keys(&run.stdout);
    assert!(!printed.is_empty(), "{}", run.stdout);

    let cookbook = load_cookbook(&manifest_dir().join("recipes")).unwrap();
    let domain = DomainName::parse("db.example.test").unwrap();
    let settings = recipe_settings(&cookbook);
    let guest = load_guest_with_recipe_settings(&paths(config.path()), &domain, &settings).unwrap();
    let refused = refuse_changeme(&guest).unwrap_err();
    let named: Vec<String> = refused
        .keys
        .iter()
        .map(|key| key.key_path.clone())
        .collect();
    assert_eq!(named, printed);

    // new_config stops on them too, naming the same keys.
    let out = tempfile::tempdir().unwrap();
    let generate = trog(
        config.path(),
        &[
            "new_config",
            "db.example.test",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(generate.status, 3, "{}", generate.stderr);
    for key in &printed {
        assert!(
            generate.stderr.contains(key.as_str()),
            "{}",
            generate.stderr
        );
    }

    // Filled in, the guest has nothing left to refuse.
    let file = config.path().join("recipes.d/db.example.test.yaml");
    let filled = std::fs::read_to_string(&file)
        .unwrap()
        .replace("CHANGEME", "a long enough password");
    std::fs::write(&file, filled).unwrap();
    let guest = load_guest_with_recipe_settings(&paths(config.path()), &domain, &settings).unwrap();
    refuse_changeme(&guest).unwrap();
}

#[test]
fn json_output_for_programs() {
    let config = installation();
    let run = trog(
        config.path(),
        &[
            "new_guest",
            "--json",
            "--hostname",
            "db.example.test",
            "mariadb",
        ],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        summary["file"],
        config
            .path()
            .join("recipes.d/db.example.test.yaml")
            .display()
            .to_string()
    );
    assert_eq!(summary["domain"], "db.example.test");
    assert_eq!(summary["recipes"], serde_json::json!(["mariadb"]));
    assert_eq!(summary["to_fill"], serde_json::json!(["mariadb.root_pw"]));
}

#[test]
fn what_base_supplies_is_left_to_base_and_recipes_scaffold_agrees() {
    let config = installation();
    let recipes_yaml = config.path().join("recipes.yaml");
    let base = std::fs::read_to_string(&recipes_yaml).unwrap()
        + "  mariadb:\n    root_pw: secret:Databases/mariadb/root\n";
    std::fs::write(&recipes_yaml, base).unwrap();

    let scaffolded = trog(config.path(), &["recipes", "--scaffold", "mariadb"]);
    assert_eq!(scaffolded.status, 0, "{}", scaffolded.stderr);
    assert_eq!(scaffolded.stdout, "mariadb: {}\n");

    let run = trog(
        config.path(),
        &["new_guest", "--hostname", "db.example.test", "mariadb"],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("Fill these in"), "{}", run.stdout);
    let yaml =
        std::fs::read_to_string(config.path().join("recipes.d/db.example.test.yaml")).unwrap();
    assert!(
        yaml.ends_with("db.example.test:\n  mariadb: {}\n"),
        "{yaml}"
    );
}

#[test]
fn recipes_d_is_created_when_absent() {
    let config = installation();
    std::fs::remove_dir_all(config.path().join("recipes.d")).unwrap();
    let run = trog(
        config.path(),
        &["new_guest", "--hostname", "web.example.test", "nginx"],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(recipes_d(config.path()), ["web.example.test.yaml"]);
}

/// Runs `args`, expects `status`, and checks that recipes.d is as it was.
fn refused(args: &[&str], status: i32) -> String {
    let config = installation();
    let before = recipes_d(config.path());
    let example = std::fs::read(config.path().join("recipes.d/example.test.yaml")).unwrap();
    let run = trog(config.path(), args);
    assert_eq!(run.status, status, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(recipes_d(config.path()), before, "nothing is written");
    assert_eq!(
        std::fs::read(config.path().join("recipes.d/example.test.yaml")).unwrap(),
        example
    );
    redact(&run.stderr, config.path(), None)
}

#[test]
fn an_unknown_recipe_is_refused() {
    insta::assert_snapshot!(
        "refused_unknown_recipe",
        refused(&["new_guest", "nginx", "nosuch"], 3)
    );
}

#[test]
fn distro_and_machine_recipes_are_refused_with_a_hint() {
    insta::assert_snapshot!("refused_vm", refused(&["new_guest", "nginx", "vm"], 3));
    let stderr = refused(&["new_guest", "debian"], 3);
    assert!(stderr.contains("`debian` is a distro recipe"), "{stderr}");
}

#[test]
fn an_existing_file_is_not_overwritten() {
    insta::assert_snapshot!(
        "refused_existing",
        refused(&["new_guest", "--hostname", "example.test", "nginx"], 7)
    );
}

#[test]
fn bad_sizes_and_names_are_refused() {
    insta::assert_snapshot!(
        "refused_memory",
        refused(&["new_guest", "--memory", "lots", "nginx"], 2)
    );
    let stderr = refused(&["new_guest", "--size", "20X", "nginx"], 2);
    assert!(stderr.contains("--size is not a disk size"), "{stderr}");
    let stderr = refused(&["new_guest", "--cpus", "0", "nginx"], 2);
    assert!(
        stderr.contains("--cpus cannot be used: a guest needs at least 1"),
        "{stderr}"
    );
    let stderr = refused(&["new_guest", "--hostname", "web", "nginx"], 2);
    assert!(
        stderr.contains("not a fully qualified domain name"),
        "{stderr}"
    );
    let stderr = refused(&["new_guest", "nginx", "nginx"], 2);
    assert!(stderr.contains("named more than once"), "{stderr}");
    let stderr = refused(&["new_guest"], 2);
    assert!(stderr.contains("RECIPE"), "{stderr}");
}
