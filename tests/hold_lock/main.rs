//! hold_lock.sh and make_lock_dir.sh, the scripts that keep trog's locks on a hypervisor, run
//! here as trog runs them (`sh -c SCRIPT NAME ARGS…`) against temporary lock directories: a link
//! where a lock file goes is never followed, a directory other users can write is refused before
//! anything is opened in it, lock files are made 0660, and (as root, as CI runs) another local
//! user can neither make, hold nor rewrite a lock in the directory root makes.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const HOLD_LOCK: &str = include_str!("../../src/machine/hold_lock.sh");
const MAKE_LOCK_DIR: &str = include_str!("../../src/machine/make_lock_dir.sh");

/// The hypervisor's group of trog's logins where this machine has it, else root's.
fn lock_group() -> &'static str {
    let libvirt = Command::new("getent")
        .args(["group", "libvirt"])
        .output()
        .is_ok_and(|output| output.status.success());
    if libvirt {
        "libvirt"
    } else {
        "root"
    }
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The command that takes `file`'s lock in `dir` for a run on `host`, as trog starts it,
/// optionally as `nobody`.
fn hold_lock_for(host: &str, dir: &Path, file: &str, as_nobody: bool) -> Command {
    let mut command = match as_nobody {
        true => {
            let mut command = Command::new("setpriv");
            command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "sh"]);
            command
        }
        false => Command::new("sh"),
    };
    command
        .args(["-c", HOLD_LOCK, "trog-hold-lock"])
        .arg(dir)
        .args([file, host, "4242", "provision", lock_group()]);
    command
}

fn hold_lock(dir: &Path, file: &str, as_nobody: bool) -> Command {
    hold_lock_for("ws-b.example.test", dir, file, as_nobody)
}

/// Runs the lock's process with its input closed at once: it takes the lock (or fails) and,
/// holding it, lets go at once.
fn run_once(mut command: Command) -> Output {
    command.stdin(Stdio::null()).output().unwrap()
}

/// A lock held by its script until the returned process's input closes.
fn hold(dir: &Path, file: &str) -> Child {
    hold_for("ws-b.example.test", dir, file)
}

fn hold_for(host: &str, dir: &Path, file: &str) -> Child {
    let mut holder = hold_lock_for(host, dir, file, false)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (sender, lines) = mpsc::channel();
    let stdout = holder.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let said = lines.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(said, "held");
    holder
}

fn let_go(mut holder: Child) {
    drop(holder.stdin.take());
    holder.wait().unwrap();
}

/// A directory made by this user for itself: nobody else can write it.
fn private_dir(scratch: &tempfile::TempDir) -> PathBuf {
    let dir = scratch.path().join("trog");
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_link_where_the_lock_file_goes_is_not_followed() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = private_dir(&scratch);
    let target = scratch.path().join("precious");
    std::fs::write(&target, "someone's data\n").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("guest-a.example.test.lock")).unwrap();
    let output = run_once(hold_lock(&dir, "guest-a.example.test.lock", false));
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        text(&output.stderr).contains("is not a regular file"),
        "{output:?}"
    );
    assert!(!text(&output.stdout).contains("held"), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "someone's data\n"
    );

    // A link to nowhere does not make the file it names.
    let nowhere = scratch.path().join("made-through-a-link");
    std::os::unix::fs::symlink(&nowhere, dir.join("guest-b.example.test.lock")).unwrap();
    let output = run_once(hold_lock(&dir, "guest-b.example.test.lock", false));
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(!nowhere.exists());
}

#[test]
fn a_directory_others_can_write_is_refused_before_anything_is_made_in_it() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = private_dir(&scratch);
    // As /run/lock/trog was made before: world-writable with the sticky bit.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let output = run_once(hold_lock(&dir, "guest-a.example.test.lock", false));
    assert_eq!(output.status.code(), Some(5), "{output:?}");
    let said = text(&output.stdout);
    assert!(
        said.starts_with("unsafe-directory which=lock owner=") && said.contains(" mode=1777 "),
        "{said}"
    );
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());

    // A missing one is said to be missing: trog makes it as root, then starts this again.
    let output = run_once(hold_lock(&scratch.path().join("none"), "x.lock", false));
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    assert_eq!(text(&output.stdout), "no-directory\n");
}

#[test]
fn lock_files_are_made_0660_and_the_holder_written_then_cleared_through_the_lock() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = private_dir(&scratch);
    let holder = hold(&dir, "guest-a.example.test.lock");
    let lock = dir.join("guest-a.example.test.lock");
    let meta = std::fs::symlink_metadata(&lock).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o660);
    let record = std::fs::read_to_string(&lock).unwrap();
    assert!(
        record.starts_with("host=ws-b.example.test\npid=4242\nverb=provision\nsince="),
        "{record}"
    );
    let_go(holder);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        "",
        "let go, it names nobody"
    );

    // A holder killed outright leaves its record; the next one's replaces it whole, a shorter
    // one leaving nothing of it behind.
    let mut killed = hold_for(
        "a-long-name.ws-b.example.test",
        &dir,
        "guest-a.example.test.lock",
    );
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(std::fs::read_to_string(&lock)
        .unwrap()
        .starts_with("host=a-long-name."));
    let next = hold_for("ws", &dir, "guest-a.example.test.lock");
    let record = std::fs::read_to_string(&lock).unwrap();
    assert!(
        record.starts_with("host=ws\npid=4242\nverb=provision\nsince=")
            && record.lines().count() == 4,
        "{record}"
    );
    let_go(next);
}

/// As root: the directory root makes (make_lock_dir.sh) is root's, of trog's group, 2770, and a
/// second local user (`nobody`, no groups) can make no lock file, open none to hold it, put no
/// link there and rewrite no record.
#[test]
fn another_user_cannot_make_hold_or_forge_a_lock_in_the_directory_root_makes() {
    if !running_as_root() {
        eprintln!("skipped: only root can make the directory and act as another user");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    // Every user may reach the lock directory; only its own mode keeps them out.
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = scratch.path().join("trog");
    let made = Command::new("sh")
        .args(["-c", MAKE_LOCK_DIR, "trog-make-lock-dir"])
        .arg(&dir)
        .arg(lock_group())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o2770));

    // trog's login holds one lock and has let go of another, whose file stays.
    std::fs::write(scratch.path().join("precious"), "root's data\n").unwrap();
    let held = hold(&dir, "guest-held.example.test.lock");
    let_go(hold(&dir, "guest-free.example.test.lock"));
    let held_file = dir.join("guest-held.example.test.lock");
    let record = std::fs::read_to_string(&held_file).unwrap();

    // The same script as nobody: no new lock file, no lock on a free file.
    for file in [
        "guest-new.example.test.lock",
        "guest-free.example.test.lock",
    ] {
        let output = run_once(hold_lock(&dir, file, true));
        assert_eq!(output.status.code(), Some(3), "{file}: {output:?}");
        assert!(
            text(&output.stderr).contains("cannot open the lock file"),
            "{output:?}"
        );
    }
    assert!(!dir.join("guest-new.example.test.lock").exists());
    let as_nobody = |script: &str| {
        Command::new("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "sh",
                "-c",
                script,
                "attacker",
            ])
            .arg(&dir)
            .arg(scratch.path().join("precious"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // Holding a free lock for ever with util-linux's flock directly, rewriting the holder,
    // putting a link where a lock file goes: each refused.
    for script in [
        r#"flock -n "$1/guest-free.example.test.lock" true"#,
        r#"echo 'host=forged pid=1 verb=provision since=0' >"$1/guest-held.example.test.lock""#,
        r#"ln -s "$2" "$1/guest-link.example.test.lock""#,
    ] {
        let output = as_nobody(script);
        assert!(!output.status.success(), "{script}: {output:?}");
    }
    assert_eq!(std::fs::read_to_string(&held_file).unwrap(), record);
    assert!(std::fs::symlink_metadata(dir.join("guest-link.example.test.lock")).is_err());
    let_go(held);
}
