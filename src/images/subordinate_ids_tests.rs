//! bin/setup's grant of subordinate ids (`grant_subordinate_ids.sh`), run by the real `usermod`
//! on a system of files in a temporary folder (`usermod --prefix`): a free range to an account
//! without one, nothing to one with one, and the same on a second run.

use std::path::Path;
use std::process::Command;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/images/grant_subordinate_ids.sh"
);

/// A system with `trog` (uid 998) and `other` (uid 1000), and these subordinate id files.
fn system(subuid: &str, subgid: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    for (file, text) in [
        ("passwd", "root:x:0:0:root:/root:/bin/bash\ntrog:x:998:998::/etc/trog-provisioner:/usr/sbin/nologin\nother:x:1000:1000::/home/other:/bin/bash\n"),
        ("group", "root:x:0:\ntrog:x:998:\nother:x:1000:\n"),
        ("shadow", "root:*:1::::::\ntrog:!:1::::::\nother:!:1::::::\n"),
        ("subuid", subuid),
        ("subgid", subgid),
    ] {
        std::fs::write(etc.join(file), text).unwrap();
    }
    root
}

fn grant(root: &Path) -> String {
    let output = Command::new("bash")
        .args([SCRIPT, "trog", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join("etc").join(file)).unwrap()
}

/// `usermod --prefix` writes another system's files only as root (CI runs as root).
fn as_root() -> bool {
    // SAFETY: getuid has no preconditions and touches no memory.
    unsafe { libc::getuid() == 0 }
}

#[test]
fn an_account_without_subordinate_ids_gets_a_free_range_once() {
    if !as_root() {
        eprintln!("skipped: usermod changes another system's files as root only");
        return;
    }
    // Ranges up to 231072 (by name and by uid), one in each file: the next multiple of 65536.
    let root = system(
        "other:100000:65536\n",
        "other:100000:65536\n1000:165536:65536\n",
    );
    assert_eq!(
        grant(root.path()),
        "gave trog the subordinate ids 262144-327679 (subuids subgids)"
    );
    assert_eq!(
        read(root.path(), "subuid"),
        "other:100000:65536\ntrog:262144:65536\n"
    );
    assert_eq!(
        read(root.path(), "subgid"),
        "other:100000:65536\n1000:165536:65536\ntrog:262144:65536\n"
    );
    // Again: nothing changes.
    assert_eq!(grant(root.path()), "trog has subordinate ids already");
    assert_eq!(
        read(root.path(), "subuid"),
        "other:100000:65536\ntrog:262144:65536\n"
    );
}

#[test]
fn an_account_with_a_range_keeps_it_and_empty_files_start_at_100000() {
    if !as_root() {
        eprintln!("skipped: usermod changes another system's files as root only");
        return;
    }
    // Its range given by uid in one file: only the other file gets one.
    let root = system("998:500000:65536\n", "");
    assert_eq!(
        grant(root.path()),
        "gave trog the subordinate ids 589824-655359 (subgids)"
    );
    assert_eq!(read(root.path(), "subuid"), "998:500000:65536\n");
    assert_eq!(read(root.path(), "subgid"), "trog:589824:65536\n");

    let root = system("", "");
    assert_eq!(
        grant(root.path()),
        "gave trog the subordinate ids 100000-165535 (subuids subgids)"
    );
}
