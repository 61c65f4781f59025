//! `--json` through the real binary: every outcome is events on stdout, failures included, and
//! the events of real runs are pinned by snapshots (machine-specific parts redacted). Also: verbs
//! that change nothing (`status`, `provision --dry-run`) write nothing, the secret store included.
//! Fleets are libvirt test-driver hypervisors; the events of a real guest's provision and destroy
//! are pinned by the end-to-end test (tests/e2e/json_pins.rs).

#[path = "../support/root_warning.rs"]
mod root_warning;

#[path = "../placement/fixtures.rs"]
mod fixtures;

use fixtures::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The example installation with `fleet` as its hypervisors.conf and one guest: no secret store.
fn installation(fleet: &TestFleet, guest: &str, global: &str) -> tempfile::TempDir {
    fleet.build();
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc");
    std::fs::copy(
        example.join("recipes.yaml"),
        dir.path().join("recipes.yaml"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("recipes.d")).unwrap();
    std::fs::write(
        dir.path().join("recipes.d").join(format!("{guest}.yaml")),
        format!("{guest}:\n  _global:\n{global}  nginx: {{}}\n"),
    )
    .unwrap();
    std::fs::copy(fleet.conf_path(), dir.path().join("hypervisors.conf")).unwrap();
    dir
}

/// Runs trog in `installation` with nothing on standard input unless `stdin` is given (then
/// with `--credentials`).
fn trog(installation: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    if stdin.is_some() {
        command.arg("--credentials");
    }
    let mut child = command
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", installation)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    root_warning::output_without_root_warning(child.wait_with_output().unwrap())
}

/// Every line of stdout parsed as an event, each checked to carry the schema version.
fn events(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    stdout
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
            assert_eq!(event["schema"], 1, "{line}");
            assert!(event["event"].is_string(), "{line}");
            event
        })
        .collect()
}

/// The events, pretty, with the temporary folders named.
fn pinned(events: &[Value], fleet: &TestFleet, installation: &Path) -> String {
    let text = serde_json::to_string_pretty(events).unwrap();
    fleet
        .redact(&text)
        .replace(&installation.display().to_string(), "[INSTALL]")
}

/// Every file under `root` with its mode and contents: what "byte-identical" compares.
fn tree(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut files = BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            if metadata.is_dir() {
                folders.push(path.clone());
                files.insert(name, (metadata.permissions().mode(), Vec::new()));
            } else {
                files.insert(
                    name,
                    (metadata.permissions().mode(), std::fs::read(&path).unwrap()),
                );
            }
        }
    }
    files
}

fn two_hypervisors() -> TestFleet {
    TestFleet::new()
        .hypervisor(
            "hv1",
            node(16384, 4).with([guest("busy.test", 12288, 4)]),
            "reserve_memory = 2048",
        )
        .unreachable("hv2")
}

const SMALL: &str = "    memory: 2048\n    cpus: 2\n    size: 10G\n";

/// The guest's key is new in every run here, and so are the digests of what carries it.
fn digest_filters() -> Vec<(&'static str, &'static str)> {
    vec![(r#""[0-9a-f]{64}""#, r#""[SHA256]""#)]
}

#[test]
fn a_dry_run_in_a_fresh_installation_prints_the_plan_and_writes_nothing() {
    let fleet = two_hypervisors();
    let dir = installation(&fleet, "web.example.test", SMALL);
    let before = tree(dir.path());

    // Nothing on standard input: with no store yet, a dry run needs no passphrase.
    let output = trog(
        dir.path(),
        &["provision", "--dry-run", "--json", "web.example.test"],
        None,
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "plan");
    assert_eq!(events[0]["guest_key"], "new");
    insta::with_settings!({ filters => digest_filters() }, {
        insta::assert_snapshot!("dry_run", pinned(&events, &fleet, dir.path()));
    });

    let output = trog(dir.path(), &["status", "--json", "web.example.test"], None);
    assert_eq!(output.status.code(), Some(1), "not converged: not built");
    insta::assert_snapshot!("status", pinned(&events_of(&output), &fleet, dir.path()));

    assert_eq!(
        tree(dir.path()),
        before,
        "the dry run and status changed the installation"
    );
    assert!(!dir.path().join("secrets.kdbx").exists());
}

fn events_of(output: &Output) -> Vec<Value> {
    events(output)
}

#[test]
fn a_dry_run_with_a_store_and_a_stored_key_writes_nothing_either() {
    let fleet = two_hypervisors();
    let dir = installation(&fleet, "web.example.test", SMALL);
    let out = tempfile::tempdir().unwrap();
    // new_config is a verb that writes: asked to, it makes the store and the guest's key.
    let made = trog(
        dir.path(),
        &[
            "new_config",
            "--new-secret-store",
            "web.example.test",
            "--out",
            out.path().to_str().unwrap(),
        ],
        Some("keepass: a passphrase for the test\n\n"),
    );
    assert_eq!(
        made.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let before = tree(dir.path());
    let output = trog(
        dir.path(),
        &["provision", "--dry-run", "--json", "web.example.test"],
        Some("keepass: a passphrase for the test\n\n"),
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(events(&output)[0]["guest_key"], "stored");
    assert_eq!(tree(dir.path()), before);

    // The same without the passphrase: the store exists, so it is needed, and the refusal is an
    // error event.
    let output = trog(
        dir.path(),
        &["provision", "--dry-run", "--json", "web.example.test"],
        None,
    );
    assert_eq!(output.status.code(), Some(4));
    let events = events(&output);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "error");
    assert_eq!(events[0]["exit_status"]["name"], "credentials");
    insta::assert_snapshot!("no_passphrase", pinned(&events, &fleet, dir.path()));
}

#[test]
fn refusals_are_error_events() {
    let fleet = two_hypervisors();
    let dir = installation(
        &fleet,
        "hungry.test",
        "    memory: 65536\n    cpus: 16\n    size: 500G\n",
    );
    let output = trog(
        dir.path(),
        &["provision", "--dry-run", "--json", "hungry.test"],
        None,
    );
    assert_eq!(output.status.code(), Some(5));
    let events = events(&output);
    assert_eq!(events.last().unwrap()["exit_status"]["code"], 5);
    insta::assert_snapshot!("no_placement", pinned(&events, &fleet, dir.path()));

    let output = trog(dir.path(), &["destroy", "--json", "absent.test"], None);
    insta::assert_snapshot!(
        "destroy_absent",
        format!(
            "status {:?}\n{}",
            output.status.code(),
            pinned(&events_of(&output), &fleet, dir.path())
        )
    );

    let output = trog(dir.path(), &["provision", "--json", "--no-such-flag"], None);
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!("usage", pinned(&events_of(&output), &fleet, dir.path()));
}

#[test]
fn preflight_prints_one_event() {
    let fleet = two_hypervisors();
    let dir = installation(&fleet, "web.example.test", SMALL);
    let output = trog(dir.path(), &["preflight", "--json"], None);
    let events = events(&output);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "preflight");
    assert_eq!(
        output.status.code(),
        Some(if events[0]["worth_starting"] == true {
            0
        } else {
            1
        })
    );
    insta::with_settings!({ filters => vec![
        (r"\d+\.\d+\.\d+", "[VERSION]"),
        (r"\d+(\.\d+)? [KMGT]iB", "[SIZE]"),
    ] }, {
        insta::assert_snapshot!("preflight", pinned(&events, &fleet, dir.path()));
    });
}

/// `backup --sweep`: the files of the archives past retention (30 days by default, counted from
/// the time in their names), of a configured guest and of one no longer configured, are deleted
/// and each named; a recent archive and a file that is no archive stay.
#[test]
fn backup_sweep_names_every_file_past_retention_and_keeps_the_rest() {
    let fleet = two_hypervisors();
    let dir = installation(&fleet, "web.example.test", SMALL);
    let backups = dir.path().join("backups");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let recent = trog::snapshot::utc_compact(now - 86_400);
    let mut expected = Vec::new();
    for (guest, stem, swept) in [
        ("web.example.test", "20200101T000000Z", true),
        ("web.example.test", recent.as_str(), false),
        ("gone.example.test", "20200102T000000Z", true),
    ] {
        std::fs::create_dir_all(backups.join(guest)).unwrap();
        for suffix in [".tar.gz", ".tar.gz.sha256", ".recipes"] {
            let file = backups.join(guest).join(format!("{stem}{suffix}"));
            std::fs::write(&file, "x").unwrap();
            if swept {
                expected.push(file.display().to_string());
            }
        }
    }
    std::fs::write(backups.join("web.example.test/notes.txt"), "mine").unwrap();
    let output = trog(dir.path(), &["backup", "--sweep", "--json"], None);
    assert!(output.status.success(), "{output:?}");
    let events = events_of(&output);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "backups_swept");
    let mut deleted: Vec<String> = events[0]["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file.as_str().unwrap().to_string())
        .collect();
    deleted.sort();
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(backups
        .join(format!("web.example.test/{recent}.tar.gz"))
        .exists());
    assert!(backups.join("web.example.test/notes.txt").exists());
    let again = trog(dir.path(), &["backup", "--sweep"], None);
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "no backup is past its retention\n"
    );
}
