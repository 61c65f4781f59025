//! What a successful run writes: snapshots, cloud-init's schema check, the seed ISO read back,
//! and the same bytes from a second run.

use crate::harness::{files_below, oracle, read, Installation, Stdin, CREDENTIALS};
use crate::{installation_with_both_guests, STATIC_GUEST};

#[test]
fn the_example_guest_output_and_files_match_their_snapshots() {
    let installation = installation_with_both_guests();
    let out = installation.out("example");
    let outcome = installation.new_config("example.test", &out);
    assert_eq!(outcome.stderr, "");
    insta::assert_snapshot!("example_cli", installation.redact_paths(&outcome.stdout));
    insta::assert_snapshot!("example_user_data", read(&out.join("seed/user-data")));
    insta::assert_snapshot!("example_meta_data", read(&out.join("seed/meta-data")));
    insta::assert_snapshot!(
        "example_network_config",
        read(&out.join("seed/network-config"))
    );
    insta::assert_snapshot!("example_makefile", read(&out.join("payload/Makefile")));
    let listing: Vec<String> = files_below(&out)
        .keys()
        .map(|path| path.display().to_string())
        .collect();
    insta::assert_snapshot!("example_files_written", listing.join("\n"));
}

#[test]
fn the_json_summary_matches_its_snapshot() {
    let installation = installation_with_both_guests();
    let out = installation.out("example");
    let outcome = installation.trog(
        &[
            "--credentials",
            "--json",
            "new_config",
            "example.test",
            "--out",
            out.to_str().unwrap(),
        ],
        Stdin::Text(CREDENTIALS),
    );
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    let summary: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
    insta::assert_snapshot!(
        "example_json",
        installation.redact_paths(&serde_json::to_string_pretty(&summary).unwrap())
    );
}

#[test]
fn a_first_run_makes_the_store_and_a_key_and_says_so() {
    let installation = Installation::example();
    assert!(!installation.store_path().exists());
    let outcome = installation.new_config("example.test", &installation.out("first"));
    assert!(installation.store_path().exists());
    // The key is new on every run: it and the digests made from it are replaced.
    insta::with_settings!({filters => vec![
        (r"ssh-ed25519 [A-Za-z0-9+/=]+", "ssh-ed25519 [PUBLIC KEY]"),
        (r"seed\.iso \(sha256 [0-9a-f]{16}\)", "seed.iso (sha256 [DEPENDS ON THE KEY])"),
    ]}, {
        insta::assert_snapshot!("first_run_cli", installation.redact_paths(&outcome.stdout));
    });
}

#[test]
fn the_static_guest_files_match_their_snapshots() {
    let installation = installation_with_both_guests();
    let out = installation.out("static");
    installation.new_config(STATIC_GUEST, &out);
    insta::assert_snapshot!("static_user_data", read(&out.join("seed/user-data")));
    insta::assert_snapshot!(
        "static_network_config",
        read(&out.join("seed/network-config"))
    );
}

#[test]
fn cloud_init_accepts_the_user_data_of_both_guests() {
    let installation = installation_with_both_guests();
    for fqdn in ["example.test", STATIC_GUEST] {
        let out = installation.out(fqdn);
        installation.new_config(fqdn, &out);
        let user_data = out.join("seed/user-data");
        let verdict = oracle("cloud-init", &["schema", "-c", user_data.to_str().unwrap()]);
        assert!(verdict.contains("Valid cloud-config"), "{fqdn}: {verdict}");
    }
    let static_user_data = read(&installation.out(STATIC_GUEST).join("seed/user-data"));
    assert!(
        static_user_data.contains("- name: alice"),
        "{static_user_data}"
    );
    assert!(
        static_user_data.contains("uri: http://mirror.example.test/debian"),
        "{static_user_data}"
    );
}

#[test]
fn the_seed_iso_reads_back_as_cidata_with_the_three_files_byte_for_byte() {
    let installation = installation_with_both_guests();
    let out = installation.out("example");
    installation.new_config("example.test", &out);
    let iso = out.join("seed.iso");
    let iso = iso.to_str().unwrap();

    let description = oracle("isoinfo", &["-d", "-i", iso]);
    assert!(
        description.lines().any(|line| line == "Volume id: cidata"),
        "{description}"
    );
    let listing = oracle("xorriso", &["-indev", iso, "-ls"]);
    let names: Vec<&str> = listing
        .lines()
        .filter(|line| line.starts_with('\''))
        .collect();
    assert_eq!(
        names,
        ["'meta-data'", "'network-config'", "'user-data'"],
        "{listing}"
    );

    let extracted = installation.out("extracted");
    oracle(
        "xorriso",
        &[
            "-osirrox",
            "on",
            "-indev",
            iso,
            "-extract",
            "/",
            extracted.to_str().unwrap(),
        ],
    );
    assert_eq!(files_below(&extracted), files_below(&out.join("seed")));
}

#[test]
fn two_runs_give_the_same_bytes_and_digests() {
    let installation = installation_with_both_guests();
    let run = |name: &str| {
        let out = installation.out(name);
        let outcome = installation.trog(
            &[
                "--credentials",
                "--json",
                "new_config",
                "example.test",
                "--out",
                out.to_str().unwrap(),
            ],
            Stdin::Text(CREDENTIALS),
        );
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        let mut summary: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
        summary.as_object_mut().unwrap().remove("directory");
        (summary, files_below(&out))
    };
    let (first_summary, first_files) = run("first");
    let (second_summary, second_files) = run("second");
    assert_eq!(first_summary, second_summary);
    for name in ["payload.tar.gz", "seed.iso", "payload.sha256"] {
        let name = std::path::Path::new(name);
        assert!(first_files[name] == second_files[name], "{name:?} differs");
    }
    assert!(first_files == second_files, "the directories differ");
    assert_eq!(
        read(&installation.out("first").join("payload.sha256")),
        format!(
            "{}  payload.tar.gz\n",
            first_summary["payload_sha256"].as_str().unwrap()
        )
    );
}

/// The files in `payload/`, by path, as the archive holds them.
fn archive_files(archive: &std::path::Path) -> Vec<String> {
    let listing = oracle("tar", &["-tzf", archive.to_str().unwrap()]);
    listing
        .lines()
        .filter(|name| !name.ends_with('/'))
        .map(str::to_string)
        .collect()
}

#[test]
fn regenerating_into_the_same_directory_leaves_no_file_of_a_dropped_recipe() {
    let installation = installation_with_both_guests();
    let out = installation.out("static");
    installation.new_config(STATIC_GUEST, &out);
    let nginx_site = out.join("payload/files/etc/nginx/sites-available/static.example.test.conf");
    assert!(nginx_site.exists());
    installation.write_guest(
        STATIC_GUEST,
        &crate::STATIC_GUEST_YAML.replace("  nginx: {}\n", ""),
    );
    installation.new_config(STATIC_GUEST, &out);
    assert!(
        !nginx_site.exists(),
        "the dropped recipe's file is still there"
    );
    let on_disk: Vec<String> = files_below(&out.join("payload"))
        .keys()
        .map(|path| path.display().to_string())
        .collect();
    let mut in_archive = archive_files(&out.join("payload.tar.gz"));
    in_archive.sort();
    assert_eq!(on_disk, in_archive);
}
