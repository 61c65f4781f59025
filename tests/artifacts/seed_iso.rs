use crate::oracle::{arg, run};
use std::collections::BTreeMap;
use std::path::Path;
use trog::render::seed_iso::{build_seed_iso, SeedFiles};

fn seed_files(vendor_data: Option<&str>) -> SeedFiles {
    SeedFiles {
        user_data: b"#cloud-config\nhostname: web\nfqdn: web.example.test\n".to_vec(),
        meta_data: b"instance-id: web.example.test\nlocal-hostname: web\n".to_vec(),
        network_config: Some(b"version: 2\nethernets:\n  eth0:\n    dhcp4: true\n".to_vec()),
        vendor_data: vendor_data.map(|text| text.as_bytes().to_vec()),
    }
}

fn write_iso(directory: &Path, files: &SeedFiles) -> std::path::PathBuf {
    let path = directory.join("seed.iso");
    std::fs::write(&path, build_seed_iso(files).unwrap().bytes).unwrap();
    path
}

/// Every file xorriso extracts from the image, by name, with its mode.
fn extract(iso: &Path, into: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    run(
        "xorriso",
        &[
            "-osirrox",
            "on",
            "-indev",
            arg(iso),
            "-extract",
            "/",
            arg(into),
        ],
    );
    std::fs::read_dir(into)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let mode = entry.metadata().unwrap().permissions().mode() & 0o7777;
            (
                entry.file_name().into_string().unwrap(),
                (mode, std::fs::read(entry.path()).unwrap()),
            )
        })
        .collect()
}

#[test]
fn isoinfo_reads_the_cidata_label_with_rock_ridge_and_joliet() {
    let directory = tempfile::tempdir().unwrap();
    let iso = write_iso(directory.path(), &seed_files(None));
    let description = run("isoinfo", &["-d", "-i", arg(&iso)]);
    assert!(
        description.lines().any(|line| line == "Volume id: cidata"),
        "{description}"
    );
    assert!(
        description.contains("Rock Ridge signatures version 1 found"),
        "{description}"
    );
    assert!(
        description.contains("Joliet with UCS level 3 found"),
        "{description}"
    );
    // The Joliet tree spells the names too, for readers that skip Rock Ridge.
    let joliet = run("isoinfo", &["-J", "-l", "-i", arg(&iso)]);
    for name in ["meta-data", "network-config", "user-data"] {
        assert!(
            joliet
                .lines()
                .any(|line| line.trim_end().ends_with(&format!("]  {name}"))),
            "{joliet}"
        );
    }
}

#[test]
fn xorriso_lists_exactly_the_seed_names() {
    let directory = tempfile::tempdir().unwrap();
    let iso = write_iso(directory.path(), &seed_files(Some("#cloud-config\n")));
    let listing = run("xorriso", &["-indev", arg(&iso), "-ls"]);
    let names: Vec<&str> = listing
        .lines()
        .map(|line| line.trim_matches('\''))
        .collect();
    assert_eq!(
        names,
        ["meta-data", "network-config", "user-data", "vendor-data"]
    );
}

#[test]
fn extracted_files_hold_exactly_what_was_given() {
    let directory = tempfile::tempdir().unwrap();
    let files = seed_files(None);
    let iso = write_iso(directory.path(), &files);
    let extracted = extract(&iso, &directory.path().join("out"));
    let expected: BTreeMap<String, (u32, Vec<u8>)> = [
        ("meta-data", &files.meta_data),
        ("network-config", files.network_config.as_ref().unwrap()),
        ("user-data", &files.user_data),
    ]
    .into_iter()
    .map(|(name, bytes)| (name.to_string(), (0o444, bytes.clone())))
    .collect();
    assert_eq!(extracted, expected);
}

#[test]
fn without_network_config_the_seed_holds_two_files() {
    let directory = tempfile::tempdir().unwrap();
    let files = SeedFiles {
        network_config: None,
        ..seed_files(None)
    };
    let iso = write_iso(directory.path(), &files);
    let names: Vec<String> = extract(&iso, &directory.path().join("out"))
        .into_keys()
        .collect();
    assert_eq!(names, ["meta-data", "user-data"]);
}

#[test]
fn two_builds_written_out_are_byte_identical() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let first = std::fs::read(write_iso(first.path(), &seed_files(None))).unwrap();
    let second = std::fs::read(write_iso(second.path(), &seed_files(None))).unwrap();
    assert_eq!(first, second);
}
