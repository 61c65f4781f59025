//! trog runs here as an ordinary account (support.rs's [`TestAccount`]: group `libvirt`, the
//! sudoers lines trog prints and nothing more), and its locks are its own: while a run holds its
//! guest's lock, a second local user outside group `libvirt` can neither make, open nor link
//! anything in the hypervisor's lock directory or the installation's `locks/`, and what it tries
//! changes nothing there.

use crate::support::verbs_run_as;
use crate::Installation;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use trog::lock::hypervisor::HYPERVISOR_LOCK_DIR;

/// The account every verb of this binary runs as.
pub const ACCOUNT: &str = "trog-e2e";

/// The guest's lock files: in the installation's `locks/`, and on the hypervisor (this machine).
fn guest_lock_files(installation: &Installation) -> [PathBuf; 2] {
    let name = format!("guest-{}.lock", installation.domain);
    [
        installation.dir.path().join("locks").join(&name),
        Path::new(HYPERVISOR_LOCK_DIR).join(&name),
    ]
}

/// The running provision `pid` is the account's process, and the guest's lock files it made are
/// the account's: trog did not run as root.
pub fn the_run_is_the_accounts(installation: &Installation, pid: u32) {
    let account = verbs_run_as().expect("e2e runs its verbs as an ordinary account");
    let process = std::fs::metadata(format!("/proc/{pid}")).unwrap();
    assert_eq!(
        process.uid(),
        account.uid,
        "provision (process {pid}) runs as {}",
        account.name
    );
    for file in guest_lock_files(installation) {
        let meta = std::fs::symlink_metadata(&file)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        assert_eq!(
            meta.uid(),
            account.uid,
            "{} is the account's",
            file.display()
        );
        assert_eq!(
            meta.mode() & 0o007,
            0,
            "{} is closed to other users: {:o}",
            file.display(),
            meta.mode()
        );
    }
}

/// A lock file as the test sees it: what it holds and which file it is.
fn state_of(file: &Path) -> (String, u64, u32, u32) {
    let meta = std::fs::symlink_metadata(file).unwrap();
    (
        std::fs::read_to_string(file).unwrap(),
        meta.ino(),
        meta.uid(),
        meta.mode(),
    )
}

/// While the account's run holds the guest's lock: `nobody`, without any group, tries to make a
/// lock file, open the held one (to read, to rewrite its holder, to hold its `flock`), list the
/// directory, and put a link where a lock file goes, in both lock directories. Each is refused,
/// and the held files are as they were.
pub fn another_user_cannot_hold_forge_or_redirect_the_locks(installation: &Installation) {
    let held = guest_lock_files(installation);
    let before: Vec<_> = held.iter().map(|file| state_of(file)).collect();
    let target = installation.dir.path().join("precious");
    std::fs::write(&target, "the account's data\n").unwrap();
    for file in &held {
        let dir = file.parent().unwrap();
        for script in [
            r#"ls "$1""#,
            r#": >"$1/guest-planted.lock""#,
            r#"cat "$2""#,
            r#"echo 'host=forged pid=1 verb=provision since=0' >"$2""#,
            r#"flock -n "$2" true"#,
            r#"flock -n -s "$2" true"#,
            r#"ln -s "$3" "$1/guest-link.lock""#,
            r#"ln "$3" "$1/guest-hard.lock""#,
            r#"mv "$2" "$1/guest-moved.lock""#,
        ] {
            let tried = Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .args(["sh", "-c", script, "another-user"])
                .arg(dir)
                .arg(file)
                .arg(&target)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                !tried.status.success(),
                "as nobody in {}: `{script}` succeeded: {tried:?}",
                dir.display()
            );
        }
        for planted in [
            "guest-planted.lock",
            "guest-link.lock",
            "guest-hard.lock",
            "guest-moved.lock",
        ] {
            assert!(
                std::fs::symlink_metadata(dir.join(planted)).is_err(),
                "{planted} appeared in {}",
                dir.display()
            );
        }
    }
    let after: Vec<_> = held.iter().map(|file| state_of(file)).collect();
    assert_eq!(after, before, "the held lock files changed");
    assert!(
        before.iter().all(|(record, ..)| record.contains("pid=")),
        "each held file names its holder: {before:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "the account's data\n"
    );
    std::fs::remove_file(&target).unwrap();
}
