//! Backups of the real guest: a file under a backed-up path (the data recipe's site directory)
//! is archived by `backup`, changed, archived again by `destroy` before the guest goes, and is
//! back on the guest `provision` builds again from a new root disk; the sweep deletes only what
//! is past retention.

use super::support::*;
use super::{json_pins, on_guest, Installation};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const BACKED_UP_FILE: &str = "/srv/site/backed-up.txt";

fn write_backed_up_file(installation: &Installation, address: &str, word: &str) {
    on_guest(
        installation,
        address,
        &format!("echo {word} | sudo tee {BACKED_UP_FILE} >/dev/null && sync"),
    );
}

/// The archive a run names on a line that starts with `prefix`.
fn archive_named(said: &str, prefix: &str) -> PathBuf {
    let line = said
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{said}"));
    PathBuf::from(line.split(' ').next().unwrap())
}

/// The members of a backup archive and the contents of one of them.
fn archive_file(archive: &Path, member: &str) -> String {
    let bytes = std::fs::read(archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(member) {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            return text;
        }
    }
    panic!("{member} is not in {}", archive.display());
}

/// Backs the guest up, destroys it (a last backup first) and builds it again: the new guest holds
/// the backed-up file as the last backup had it. Returns the new guest's address.
pub fn survive_destroy(installation: &Installation, address: &str) -> String {
    let config = installation.dir.path();
    let domain = installation.domain.as_str();
    let said = |output: &std::process::Output| {
        format!("{}\n{}", text(&output.stdout), text(&output.stderr))
    };

    // A backup: the site directory, private files, the sha256 and recipe list beside it.
    write_backed_up_file(installation, address, "first");
    let taken = run_verb("backup", config, &[domain]);
    assert!(taken.status.success(), "{}", said(&taken));
    let first = archive_named(
        &text(&taken.stdout),
        &format!("{domain}: backed up /srv/site from local into "),
    );
    assert_eq!(first.parent().unwrap(), config.join("backups").join(domain));
    assert_eq!(archive_file(&first, "srv/site/backed-up.txt"), "first\n");
    let mode = std::fs::metadata(&first).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stem = first.to_str().unwrap().trim_end_matches(".tar.gz");
    assert_eq!(
        std::fs::read_to_string(format!("{stem}.tar.gz.sha256")).unwrap(),
        format!(
            "{}  {}\n",
            sha256_file(&first),
            first.file_name().unwrap().to_str().unwrap()
        )
    );
    assert_eq!(
        std::fs::read_to_string(format!("{stem}.recipes")).unwrap(),
        "data /srv/site\n"
    );

    // destroy takes a last backup before anything goes.
    write_backed_up_file(installation, address, "second");
    let destroyed = run_verb("destroy", config, &[domain]);
    assert!(destroyed.status.success(), "{}", said(&destroyed));
    let last = archive_named(&text(&destroyed.stdout), "backed up ");
    assert_ne!(last, first);
    assert_eq!(archive_file(&last, "srv/site/backed-up.txt"), "second\n");

    // An archive from long ago, past any retention.
    let old_stem = config.join("backups").join(domain).join("20200101T000000Z");
    for suffix in [".tar.gz", ".tar.gz.sha256", ".recipes"] {
        std::fs::copy(
            format!("{stem}{suffix}"),
            format!("{}{suffix}", old_stem.display()),
        )
        .unwrap();
    }

    // Built again (its data volume adopted with --force), its events in JSON: the plan restores
    // the newest backup onto the new root disk, and the file is back. The events are pinned.
    let rebuilt = run_verb("provision", config, &["--json", "--force", domain]);
    assert!(rebuilt.status.success(), "{}", said(&rebuilt));
    let events = json_pins::events(&rebuilt);
    let restore = format!(
        "restore the newest backup {} (the root disk is new)",
        last.display()
    );
    assert!(
        events.iter().any(|event| event["event"] == "step_started"
            && event["label"].as_str().unwrap().ends_with(&restore)),
        "{}",
        said(&rebuilt)
    );
    assert!(
        events.iter().any(|event| event["event"] == "guest_output"),
        "no finishing log:\n{}",
        said(&rebuilt)
    );
    let address = json_pins::first(&events, "done")["report"]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no address in:\n{}", said(&rebuilt)))
        .to_string();
    json_pins::pin(
        "provision_rebuilt",
        installation,
        rebuilt.status.code(),
        &events,
    );
    // The key host_keys.rs adopted was the old root disk's: the new one answered with trog's,
    // and the adopted key is no longer trusted.
    assert_eq!(
        crate::host_keys::stored_host_keys(installation).1,
        None,
        "the adopted host key outlived the root disk it was adopted from"
    );
    assert_eq!(
        on_guest(installation, &address, &format!("cat {BACKED_UP_FILE}")),
        "second\n"
    );
    // The data recipe unpacked the site archive again, keeping the restored files, and the
    // site's Makefile ran on the new root disk.
    assert_eq!(
        on_guest(installation, &address, "cat /srv/site-made.txt").trim(),
        "made by the site's Makefile"
    );

    // The sweep deletes the old archive's three files, naming each, and keeps the two new ones.
    let swept = run_verb("backup", config, &["--sweep"]);
    assert!(swept.status.success(), "{}", said(&swept));
    let mut deleted: Vec<String> = text(&swept.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("deleted  "))
        .map(str::to_string)
        .collect();
    deleted.sort();
    let mut expected: Vec<String> = [".recipes", ".tar.gz", ".tar.gz.sha256"]
        .iter()
        .map(|suffix| format!("{}{suffix}", old_stem.display()))
        .collect();
    expected.sort();
    assert_eq!(deleted, expected, "{}", said(&swept));
    assert!(first.exists() && last.exists());
    address
}
