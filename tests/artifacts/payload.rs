use crate::oracle::{arg, run};
use std::path::Path;
use trog::render::payload::{build_payload, read_host_file_entry, PayloadEntry};

const LONG_DIRECTORY: &str = "files/srv/a-directory-name-long-enough/that-the-whole-path/passes-the-hundred-bytes-of/an-old-tar-header";

fn write_payload(directory: &Path, entries: &[PayloadEntry]) -> std::path::PathBuf {
    let path = directory.join("payload.tar.gz");
    std::fs::write(&path, build_payload(entries).unwrap().bytes).unwrap();
    path
}

fn sample_entries(directory: &Path) -> Vec<PayloadEntry> {
    let site_data = directory.join("data.tar.gz");
    std::fs::write(&site_data, b"not really gzip, only bytes to carry").unwrap();
    vec![
        PayloadEntry::file("Makefile", 0o644, "all:\n\ttrue\n"),
        PayloadEntry::file("files/usr/local/bin/hook", 0o755, "#!/bin/sh\n"),
        PayloadEntry::directory("files/var/empty", 0o700),
        PayloadEntry::file(format!("{LONG_DIRECTORY}/file.conf"), 0o600, "key=value\n"),
        read_host_file_entry("site/data.tar.gz", 0o644, &site_data).unwrap(),
    ]
}

#[test]
fn tar_lists_sorted_entries_owned_by_0_0_at_time_0() {
    let directory = tempfile::tempdir().unwrap();
    let archive = write_payload(directory.path(), &sample_entries(directory.path()));
    // No --numeric-owner: with empty user and group names tar falls back to the numbers.
    let listing = run("tar", &["--utc", "--full-time", "-tvzf", arg(&archive)]);
    let mut rows = Vec::new();
    for line in listing.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, date, time, name) =
            (fields[0], fields[1], fields[3], fields[4], fields[5]);
        assert_eq!(owner, "0/0", "{line}");
        assert_eq!((date, time), ("1970-01-01", "00:00:00"), "{line}");
        rows.push(format!("{mode} {name}"));
    }
    let long_parents: Vec<String> = {
        let parts: Vec<&str> = LONG_DIRECTORY.split('/').collect();
        (3..=parts.len())
            .map(|depth| format!("drwxr-xr-x {}/", parts[..depth].join("/")))
            .collect()
    };
    let mut expected = vec![
        "-rw-r--r-- Makefile".to_string(),
        "drwxr-xr-x files/".to_string(),
        "drwxr-xr-x files/srv/".to_string(),
    ];
    expected.extend(long_parents);
    expected.extend([
        format!("-rw------- {LONG_DIRECTORY}/file.conf"),
        "drwxr-xr-x files/usr/".to_string(),
        "drwxr-xr-x files/usr/local/".to_string(),
        "drwxr-xr-x files/usr/local/bin/".to_string(),
        "-rwxr-xr-x files/usr/local/bin/hook".to_string(),
        "drwxr-xr-x files/var/".to_string(),
        "drwx------ files/var/empty/".to_string(),
        "drwxr-xr-x site/".to_string(),
        "-rw-r--r-- site/data.tar.gz".to_string(),
    ]);
    assert_eq!(rows, expected);
}

#[test]
fn tar_extracts_the_exact_contents() {
    let directory = tempfile::tempdir().unwrap();
    let archive = write_payload(directory.path(), &sample_entries(directory.path()));
    let out = directory.path().join("out");
    std::fs::create_dir(&out).unwrap();
    run("tar", &["-xzf", arg(&archive), "-C", arg(&out)]);
    assert_eq!(
        std::fs::read(out.join("Makefile")).unwrap(),
        b"all:\n\ttrue\n"
    );
    assert_eq!(
        std::fs::read(out.join(LONG_DIRECTORY).join("file.conf")).unwrap(),
        b"key=value\n"
    );
    assert_eq!(
        std::fs::read(out.join("site/data.tar.gz")).unwrap(),
        std::fs::read(directory.path().join("data.tar.gz")).unwrap()
    );
    assert!(out.join("files/var/empty").is_dir());
}

#[test]
fn file_sees_a_gzip_header_with_no_original_name_and_no_time() {
    let directory = tempfile::tempdir().unwrap();
    let archive = write_payload(directory.path(), &sample_entries(directory.path()));
    // `file` prints `was "NAME"` and `last modified: …` when the header stores them.
    let description = run("file", &["--brief", arg(&archive)]);
    assert!(
        description.starts_with("gzip compressed data"),
        "{description}"
    );
    assert!(!description.contains("was \""), "{description}");
    assert!(!description.contains("last modified"), "{description}");
}

#[test]
fn two_builds_are_byte_identical() {
    let directory = tempfile::tempdir().unwrap();
    let entries = sample_entries(directory.path());
    assert_eq!(
        build_payload(&entries).unwrap().bytes,
        build_payload(&entries).unwrap().bytes
    );
}
