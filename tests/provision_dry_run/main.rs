//! `provision --dry-run` through the real binary, over fleets of libvirt test-driver hypervisors:
//! the placement table and the numbered plan, the refusal when nothing fits, a pin that does not
//! fit, `--hypervisor`, and that a dry run changes nothing. With `--hypervisor`, every verb asks
//! the named hypervisor only: one elsewhere in the fleet that hangs delays and fails nothing.

#[path = "../support/root_warning.rs"]
mod root_warning;

#[path = "../placement/fixtures.rs"]
mod fixtures;

#[path = "../support/apt_mirror.rs"]
mod apt_mirror;
mod baked;

use fixtures::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The repository's example installation with `fleet` as its hypervisors.conf, plus a guest of
/// the given shape.
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

fn provision(installation: &Path, args: &[&str]) -> Output {
    let mut all = vec!["provision", "--dry-run"];
    all.extend_from_slice(args);
    trog(installation, &all)
}

fn report(fleet: &TestFleet, installation: &Path, output: &Output) -> String {
    let text = format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    fleet
        .redact(&text)
        .replace(&installation.display().to_string(), "[INSTALL]")
}

fn three_hypervisors() -> TestFleet {
    TestFleet::new()
        .hypervisor(
            "hv1",
            node(16384, 4).with([guest("busy.test", 12288, 4)]),
            "reserve_memory = 2048",
        )
        .hypervisor(
            "hv2",
            node(32768, 8).with([guest("other.test", 4096, 2)]),
            "reserve_memory = 2048",
        )
        .unreachable("hv3")
}

#[test]
fn the_dry_run_prints_the_placement_and_the_plan() {
    let fleet = three_hypervisors();
    let dir = installation(
        &fleet,
        "web.example.test",
        "    memory: 2048\n    cpus: 2\n    size: 10G\n",
    );
    let output = provision(dir.path(), &["web.example.test"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        report(&fleet, dir.path(), &output)
    );
    // The guest's key is new in every run, and so is the seed that carries it.
    let filters = vec![
        (
            r"boot [0-9a-f]{12}, shape [0-9a-f]{12}",
            "boot [BOOT], shape [SHAPE]",
        ),
        (
            r"seed\.iso \(sha256 [0-9a-f]{12}\)",
            "seed.iso (sha256 [SEED])",
        ),
    ];
    insta::with_settings!({ filters => filters }, {
        insta::assert_snapshot!(report(&fleet, dir.path(), &output));
    });
}

#[test]
fn a_hungry_guest_is_refused_with_the_figures() {
    let fleet = three_hypervisors();
    let dir = installation(
        &fleet,
        "hungry.test",
        "    memory: 65536\n    cpus: 16\n    size: 500G\n",
    );
    let output = provision(dir.path(), &["hungry.test"]);
    assert_eq!(output.status.code(), Some(5));
    insta::assert_snapshot!(report(&fleet, dir.path(), &output));
}

#[test]
fn a_pin_that_does_not_fit_is_an_error_not_a_reassignment() {
    let fleet = three_hypervisors();
    let dir = installation(
        &fleet,
        "pinned.test",
        "    memory: 8192\n    hypervisor: hv1\n",
    );
    let output = provision(dir.path(), &["pinned.test"]);
    assert_eq!(
        output.status.code(),
        Some(5),
        "{}",
        report(&fleet, dir.path(), &output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("hv1") && !String::from_utf8_lossy(&output.stdout).contains("hv2"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_hypervisor_on_the_command_line_lists_the_known_ones() {
    let fleet = three_hypervisors();
    let dir = installation(&fleet, "web.example.test", "    memory: 1024\n");
    let output = provision(dir.path(), &["--hypervisor", "hv9", "web.example.test"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("hv9")
            && stderr.contains("hv1")
            && stderr.contains("hv2")
            && stderr.contains("hv3"),
        "{stderr}"
    );
}

#[test]
fn a_dry_run_defines_nothing() {
    let fleet = three_hypervisors();
    let dir = installation(&fleet, "web.example.test", "    memory: 1024\n");
    let output = provision(dir.path(), &["--hypervisor", "hv2", "web.example.test"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        report(&fleet, dir.path(), &output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("define the domain"), "{stdout}");
    // The test driver reads its node file afresh on every connection: the file is the state, and
    // a dry run must not have written anything next to it either.
    let names: Vec<String> = std::fs::read_dir(fleet.dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["hv1.xml", "hv2.xml", "hypervisors.conf"]);
}

/// Naming a hypervisor skips the search: the others are not asked, so one that cannot be reached
/// (hv3 here) neither delays the run nor appears in its placement.
#[test]
fn a_named_hypervisor_is_the_only_one_asked() {
    let fleet = three_hypervisors();
    let dir = installation(&fleet, "web.example.test", "    memory: 1024\n");
    let output = provision(dir.path(), &["--hypervisor", "hv2", "web.example.test"]);
    let text = report(&fleet, dir.path(), &output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("hv2"), "{text}");
    assert!(
        !text.contains("hv1") && !text.contains("hv3") && !text.contains("unreachable"),
        "{text}"
    );
}

/// Runs `trog --credentials ARGS…` on the installation, the store's answers on stdin.
fn trog(installation: &Path, args: &[&str]) -> Output {
    run_trog(installation, &[&["--credentials"], args].concat(), None)
}

/// Runs `trog ARGS…` on the installation, the store's answers on stdin (read when ARGS has
/// `--credentials`), with `cache` as its XDG cache directory when given.
fn run_trog(installation: &Path, args: &[&str], cache: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    if let Some(cache) = cache {
        command.env("XDG_CACHE_HOME", cache);
    }
    let mut child = command
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", installation)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(b"keepass: dry-run\n\n");
    root_warning::output_without_root_warning(child.wait_with_output().unwrap())
}

/// hv1 holds running.test; hv2's link swallows everything and never answers.
fn one_healthy_one_hanging() -> (TestFleet, tempfile::TempDir) {
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(16384, 4).with([guest("running.test", 1024, 1)]),
            "",
        )
        .hanging("hv2");
    let dir = installation(&fleet, "web.example.test", "    memory: 1024\n");
    std::fs::write(
        dir.path().join("recipes.d").join("running.test.yaml"),
        "running.test:\n  _global:\n    memory: 1024\n  nginx: {}\n",
    )
    .unwrap();
    (fleet, dir)
}

/// A hypervisor that hangs is not asked by a run that names another: snapshot, destroy,
/// debug_boot, backup, status and a provision's placement and plan each answer from hv1 alone,
/// never waiting out hv2's answer timeout (a run that asked it would wait, then say "did not
/// answer"; the verbs that search take a minute here).
#[test]
fn a_hanging_hypervisor_is_not_asked_by_a_run_that_names_another() {
    let (fleet, dir) = one_healthy_one_hanging();
    // hv1's guest was not made by trog, so the verbs that act on it stop there (exit 7; a backup,
    // which needs a real guest, exits 8 saying the guest is on the test driver) — after they
    // found it on hv1. The text each run's output has, beside never naming hv2:
    let runs: [(&[&str], i32, &str); 6] = [
        (
            &["snapshot", "--list", "--hypervisor", "hv1", "running.test"],
            7,
            "running.test on hv1",
        ),
        (
            &["destroy", "--hypervisor", "hv1", "running.test"],
            7,
            "running.test on hv1",
        ),
        (
            &[
                "debug_boot",
                "--fetch",
                "--hypervisor",
                "hv1",
                "running.test",
            ],
            7,
            "running.test on hv1",
        ),
        (
            &["backup", "--hypervisor", "hv1", "running.test"],
            8,
            "on libvirt's test driver",
        ),
        (
            &[
                "status",
                "--hypervisor",
                "hv1",
                "--timeout",
                "60",
                "running.test",
            ],
            1,
            "running.test: on hv1",
        ),
        (
            &[
                "provision",
                "--dry-run",
                "--hypervisor",
                "hv1",
                "--timeout",
                "60",
                "web.example.test",
            ],
            0,
            "hv1",
        ),
    ];
    for (args, status, expected) in runs {
        let output = trog(dir.path(), args);
        let text = report(&fleet, dir.path(), &output);
        assert_eq!(output.status.code(), Some(status), "{args:?}\n{text}");
        assert!(text.contains(expected), "{args:?}\n{text}");
        assert!(
            !text.contains("hv2") && !text.contains("answer"),
            "{args:?}\n{text}"
        );
    }
    let output = trog(
        dir.path(),
        &[
            "status",
            "--hypervisor",
            "hv1",
            "--timeout",
            "60",
            "web.example.test",
        ],
    );
    let text = report(&fleet, dir.path(), &output);
    assert!(text.contains("web.example.test: not on hv1"), "{text}");
    assert!(!text.contains("hv2"), "{text}");
}

/// Without --hypervisor the hanging one is asked, and said not to answer: the fixture above
/// hangs indeed.
#[test]
fn without_a_name_the_hanging_hypervisor_is_asked_and_reported() {
    let (fleet, dir) = one_healthy_one_hanging();
    let output = trog(dir.path(), &["status", "--timeout", "1", "running.test"]);
    let text = report(&fleet, dir.path(), &output);
    assert!(text.contains("running.test: on hv1"), "{text}");
    assert!(
        text.contains("could not ask hv2: did not answer within 1s"),
        "{text}"
    );
}
