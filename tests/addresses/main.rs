//! `assign_ip` and `addresses` through the real binary over a real ips.db: the order addresses
//! are handed out in, hand-written addresses checked against holders, gateways and ranges, many
//! runs at once never handing out one address twice, and a file that is not SQLite left alone.

#[path = "../support/root_warning.rs"]
mod root_warning;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

const RANGE: &str = "_base:\n  _global:\n    admin_user: siteadmin\n    contact_email: ops@example.test\n    distro: debian\n    network: default\n    address_range: 192.168.122.100-192.168.122.199/24\n    gateway: 192.168.122.1\n    resolvers: [192.168.122.1]\n  adminconfig: {}\n";

/// An installation whose `_base` declares the default network's range, with `guests` each
/// given `global` (extra `_global` lines, indented four spaces).
fn installation(guests: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("recipes.yaml"), RANGE).unwrap();
    std::fs::create_dir(dir.path().join("recipes.d")).unwrap();
    for (guest, global) in guests {
        add_guest(dir.path(), guest, global);
    }
    dir
}

fn add_guest(installation: &Path, guest: &str, global: &str) {
    std::fs::write(
        installation.join("recipes.d").join(format!("{guest}.yaml")),
        format!("{guest}:\n  _global:\n    cpus: 1\n{global}"),
    )
    .unwrap();
}

fn trog(installation: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    command
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", installation);
    command
}

fn run(installation: &Path, args: &[&str]) -> Output {
    root_warning::output_without_root_warning(trog(installation, args).output().unwrap())
}

fn text(output: &Output) -> String {
    format!(
        "status {}\n{}{}",
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assigned_address(output: &Output) -> String {
    assert!(output.status.success(), "{}", text(output));
    let line = String::from_utf8_lossy(&output.stdout).to_string();
    let event: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(event["event"], "address_assigned", "{line}");
    event["holdings"][0]["address"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn addresses_are_handed_out_lowest_first_and_kept() {
    let dir = installation(&[("a.example.test", ""), ("b.example.test", "")]);
    let a = run(dir.path(), &["assign_ip", "a.example.test"]);
    assert_eq!(
        String::from_utf8_lossy(&a.stdout),
        "a.example.test: 192.168.122.100/24 on default (gateway 192.168.122.1)\n",
        "{}",
        text(&a)
    );
    let b = run(dir.path(), &["--json", "assign_ip", "b.example.test"]);
    assert_eq!(assigned_address(&b), "192.168.122.101");
    let again = run(dir.path(), &["--json", "assign_ip", "a.example.test"]);
    assert_eq!(assigned_address(&again), "192.168.122.100");

    let listing = run(dir.path(), &["addresses"]);
    let shown = text(&listing);
    assert!(shown.contains("default          192.168.122.100-192.168.122.199/24  gateway 192.168.122.1  held 2  free 98 (next: 192.168.122.102, 192.168.122.103, 192.168.122.104)"), "{shown}");
    assert!(
        shown.contains("192.168.122.101  default          assigned  b.example.test"),
        "{shown}"
    );
    let json = run(dir.path(), &["--json", "addresses"]);
    let event: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&json.stdout).trim()).unwrap();
    assert_eq!(event["event"], "addresses");
    assert_eq!(event["ranges"][0]["free"], 98);
    assert_eq!(event["holdings"][1]["guest"], "b.example.test");
}

#[test]
fn hand_written_addresses_are_checked_naming_both_guests_and_files() {
    let dir = installation(&[("a.example.test", "")]);
    assert!(run(dir.path(), &["assign_ip", "a.example.test"])
        .status
        .success());
    // The guest outside every range routes through a gateway of its own subnet.
    let cases = [
        (
            "held.example.test",
            "192.168.122.100/24",
            "",
            "which a.example.test (",
        ),
        // Without the range and with a `gateway` of its own (its own address as its gateway is
        // refused before ips.db is read), the gateway ips.db records for the range is refused.
        (
            "gateway.example.test",
            "192.168.122.1/24",
            "    address_range: null\n    gateway: 192.168.122.254\n",
            "the gateway of default",
        ),
        (
            "outside.example.test",
            "10.1.2.3/24",
            "    gateway: 10.1.2.1\n",
            "outside every address range",
        ),
    ];
    for (guest, address, gateway, says) in cases {
        add_guest(
            dir.path(),
            guest,
            &format!("    ips: [{address}]\n{gateway}"),
        );
        let output = run(dir.path(), &["assign_ip", guest]);
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(3), "{shown}");
        assert!(shown.contains(says), "{shown}");
        assert!(
            shown.contains(&format!("recipes.d/{guest}.yaml")),
            "{shown}"
        );
        assert!(shown.contains("hint: "), "{shown}");
    }
    let held = text(&run(dir.path(), &["assign_ip", "held.example.test"]));
    assert!(held.contains("recipes.d/a.example.test.yaml"), "{held}");
    add_guest(
        dir.path(),
        "fine.example.test",
        "    ips: [192.168.122.150/24]\n",
    );
    let fine = run(dir.path(), &["assign_ip", "fine.example.test"]);
    assert!(text(&fine).contains("written by hand"), "{}", text(&fine));
    let listing = text(&run(dir.path(), &["addresses"]));
    assert!(
        listing.contains("192.168.122.150  default          declared  fine.example.test"),
        "{listing}"
    );
}

#[test]
fn twenty_runs_at_once_hand_out_twenty_distinct_addresses() {
    let guests: Vec<String> = (0..20).map(|n| format!("g{n:02}.example.test")).collect();
    let entries: Vec<(&str, &str)> = guests.iter().map(|guest| (guest.as_str(), "")).collect();
    let dir = installation(&entries);
    let children: Vec<_> = guests
        .iter()
        .map(|guest| {
            trog(dir.path(), &["--json", "assign_ip", guest])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let addresses: BTreeSet<String> = children
        .into_iter()
        .map(|child| {
            assigned_address(&root_warning::output_without_root_warning(
                child.wait_with_output().unwrap(),
            ))
        })
        .collect();
    assert_eq!(addresses.len(), 20, "{addresses:?}");
    let expected: BTreeSet<String> = (100..120).map(|n| format!("192.168.122.{n}")).collect();
    assert_eq!(addresses, expected);
}

#[test]
fn a_file_that_is_not_sqlite_is_named_and_never_overwritten() {
    let dir = installation(&[("a.example.test", "")]);
    let ips_db = dir.path().join("ips.db");
    std::fs::write(&ips_db, "a.example.test 192.168.122.100\n").unwrap();
    for args in [&["assign_ip", "a.example.test"][..], &["addresses"][..]] {
        let output = run(dir.path(), args);
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(11), "{shown}");
        assert!(
            shown.contains(&format!("{} is not an SQLite database", ips_db.display())),
            "{shown}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&ips_db).unwrap(),
        "a.example.test 192.168.122.100\n"
    );
}

#[test]
fn a_network_without_a_range_is_refused_with_what_to_set() {
    let dir = installation(&[(
        "a.example.test",
        "    network: lab\n    address_range: null\n",
    )]);
    let output = run(
        dir.path(),
        &["assign_ip", "a.example.test", "--network", "lab"],
    );
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(3), "{shown}");
    assert!(shown.contains("no address range on lab"), "{shown}");
    assert!(shown.contains("hint: set `address_range`"), "{shown}");
}
