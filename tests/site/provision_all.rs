//! `provision --all --dry-run`: every guest of recipes.d placed together and planned; a guest
//! that cannot be planned is named in the summary with why, and does not stop the others.

use super::{said, Site};

/// The site with a guest whose configuration is refused (a `CHANGEME` left), first in order.
fn site_with_a_refused_guest() -> Site {
    let site = Site::with_two_built_guests();
    std::fs::write(
        site.path("etc/recipes.d/bad.site.test.yaml"),
        "bad.site.test:\n  _global:\n    cpus: 1\n  nginx:\n    server_names: [CHANGEME]\n",
    )
    .unwrap();
    site
}

#[test]
fn a_guest_that_fails_is_in_the_summary_and_the_others_are_planned() {
    let site = site_with_a_refused_guest();
    let output = site.trog(&["provision", "--all", "--dry-run"]);
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    // The first guest that failed, in recipes.d's order, gives the exit status: CHANGEME's.
    assert_eq!(output.status.code(), Some(3), "{}", said(&output));
    let summary = &text[text
        .find("5 guests:")
        .unwrap_or_else(|| panic!("{}", said(&output)))..];
    let lines: Vec<&str> = summary
        .lines()
        .filter(|line| !line.starts_with("    ") && !line.starts_with("  -"))
        .collect();
    assert_eq!(
        lines[0],
        "5 guests: 3 to change, 0 converged already, 2 failed"
    );
    assert!(
        lines[1].starts_with("  FAILED             bad.site.test: "),
        "{summary}"
    );
    assert!(summary.contains("CHANGEME"), "{summary}");
    assert_eq!(lines[2], "  would change       db.site.test", "{summary}");
    assert!(
        lines[3].starts_with("  FAILED             foreign.site.test: "),
        "{summary}"
    );
    assert!(summary.contains("--force adopts it"), "{summary}");
    assert_eq!(lines[4], "  would change       new.site.test", "{summary}");
    assert_eq!(lines[5], "  would change       www.site.test", "{summary}");
    // Each guest that could be planned was, with one placement: the new guest is counted beside
    // the ones already there.
    assert!(text.contains("new.site.test: 11 steps"), "{text}");
    assert!(text.contains("www.site.test: 12 steps"), "{text}");
    // A dry run writes nothing.
    assert!(!site.path("etc/ips.db").exists());
}

#[test]
fn with_json_the_plans_come_first_and_the_summary_last() {
    let site = site_with_a_refused_guest();
    let output = site.trog(&["--json", "provision", "--all", "--dry-run"]);
    assert_eq!(output.status.code(), Some(3), "{}", said(&output));
    let events: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["plan", "plan", "plan", "site_provisioned"]);
    let summary = &events[3];
    assert_eq!(summary["dry_run"], true);
    let outcomes: Vec<(&str, &str)> = summary["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| {
            (
                line["guest"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("bad.site.test", "failed"),
            ("db.site.test", "changed"),
            ("foreign.site.test", "failed"),
            ("new.site.test", "changed"),
            ("www.site.test", "changed"),
        ]
    );
    assert_eq!(summary["guests"][0]["failure"]["exit_status"]["code"], 3);
    assert_eq!(summary["guests"][2]["failure"]["exit_status"]["code"], 7);
    assert_eq!(summary["guests"][1]["failure"], serde_json::Value::Null);
}

#[test]
fn a_real_run_goes_past_each_failed_guest_and_gives_back_the_keys_it_made() {
    // Guests on libvirt's test driver cannot be reached over SSH, so each is refused before its
    // first step: every guest fails on its own, and the run still reaches them all.
    let site = site_with_a_refused_guest();
    let output = site.trog(&["provision", "--all"]);
    assert_eq!(output.status.code(), Some(3), "{}", said(&output));
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(
        text.contains("5 guests: 0 changed, 0 converged already, 5 failed"),
        "{}",
        said(&output)
    );
    for guest in ["db", "foreign", "new", "www"] {
        assert!(
            text.contains(&format!("  FAILED             {guest}.site.test: ")),
            "{guest}: {text}"
        );
    }
    assert!(text.contains("libvirt's test driver"), "{text}");

    // The key made for the guest never built is taken back; the built guests' keys stay.
    let store = trog::secrets::SecretStore::open(
        &site.path("etc/secrets.kdbx"),
        &trog::credentials::Secret::new(super::PASSPHRASE),
    )
    .unwrap();
    let key_of = |name: &str| {
        trog::secrets::stored_keypair(
            &store,
            &trog::model::names::DomainName::parse(name).unwrap(),
        )
        .unwrap()
    };
    assert!(key_of("new.site.test").is_none(), "taken back");
    assert_eq!(
        key_of("www.site.test").unwrap().public_key_openssh(),
        site.www.public_key_openssh()
    );
    assert!(key_of("db.site.test").is_some());
}

#[test]
fn guests_converged_at_once_end_the_same_and_the_bound_is_checked() {
    let site = site_with_a_refused_guest();
    for parallel in ["1", "4"] {
        let output = site.trog(&["provision", "--all", "--parallel", parallel]);
        assert_eq!(output.status.code(), Some(3), "{}", said(&output));
        let text = String::from_utf8(output.stdout).unwrap();
        let summary = &text[text.find("5 guests:").unwrap()..];
        let heads: Vec<&str> = summary
            .lines()
            .filter(|line| line.starts_with("  FAILED ") || line.starts_with("5 guests"))
            .map(|line| line.split(':').next().unwrap())
            .collect();
        assert_eq!(
            heads,
            [
                "5 guests",
                "  FAILED             bad.site.test",
                "  FAILED             db.site.test",
                "  FAILED             foreign.site.test",
                "  FAILED             new.site.test",
                "  FAILED             www.site.test",
            ],
            "--parallel {parallel}: in recipes.d's order whatever ended first"
        );
    }
    for refused in [
        vec!["provision", "--all", "--parallel", "0"],
        vec!["provision", "--all", "--parallel", "33"],
        vec!["provision", "--parallel", "2", "www.site.test"],
    ] {
        let output = site.trog(&refused);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{refused:?}: {}",
            said(&output)
        );
    }
}

#[test]
fn a_site_on_a_machine_that_failed_is_skipped_naming_it_and_one_on_a_machine_never_built_says_so() {
    let site = site_with_a_refused_guest();
    let on = |guest: &str, machine: &str| {
        std::fs::write(
            site.path(&format!("etc/recipes.d/{guest}.yaml")),
            format!("{guest}:\n  _global:\n    depends_on: {machine}\n  nginx: {{}}\n"),
        )
        .unwrap();
    };
    on("blog.site.test", "bad.site.test");
    on("wiki.site.test", "new.site.test");

    let output = site.trog(&["provision", "--all", "--dry-run"]);
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", said(&output));
    assert!(
        text.contains("7 guests: 3 to change, 0 converged already, 3 failed, 1 skipped"),
        "{}",
        said(&output)
    );
    assert!(
        text.contains("  SKIPPED            blog.site.test: runs on bad.site.test's machine, and bad.site.test did not converge in this run"),
        "{}",
        said(&output)
    );
    // new.site.test is planned, not built: its machine has no key to log in with yet.
    assert!(
        text.contains("/wiki.site.test.yaml:3:5: `depends_on` of wiki.site.test (new.site.test's machine): wiki.site.test runs on new.site.test's machine, which has no key in the secret store"),
        "{}",
        said(&output)
    );

    // Asked for alone, the machine is planned first, then the dependent says what to do.
    let alone = site.trog(&["provision", "--dry-run", "wiki.site.test"]);
    let out = String::from_utf8_lossy(&alone.stdout);
    let err = String::from_utf8_lossy(&alone.stderr);
    assert_eq!(alone.status.code(), Some(3), "{}", said(&alone));
    assert!(out.contains("new.site.test: 11 steps"), "{}", said(&alone));
    assert!(
        err.contains("hint: provision new.site.test first: `trog provision new.site.test`"),
        "{}",
        said(&alone)
    );
    let status = site.trog(&["status", "wiki.site.test"]);
    assert_eq!(status.status.code(), Some(1), "{}", said(&status));
    assert!(
        String::from_utf8_lossy(&status.stdout)
            .contains("wiki.site.test: on new.site.test's machine, not converged"),
        "{}",
        said(&status)
    );
}
