//! The guest's lock on the hypervisor, between two installations (two temporary directories, so
//! their own locks never meet) acting on one guest of this machine's libvirtd, reached as
//! `qemu:///system` and, through tests/services/remote-host.sh, over SSH as two different logins
//! (the lock process lives on the hypervisor's system either way): a run waits for
//! the holder and says for whom, `--wait 1` ends with status 10 naming the holder and the
//! hypervisor, and a holder that dies (the lock's own process on the hypervisor, or the run of
//! trog holding it) lets the next run in. The guest runs with no OS, so it ignores `destroy`'s
//! ACPI request: the destroying run holds the lock through the grace it gives the guest.

use super::TestGuest;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

const LOCK_DIR: &str = "/run/lock/trog";

/// `file`'s lock on this machine as another machine's run takes it (`ws-b.example.test`,
/// process 4242, `provision`): the lock's own process, as trog starts it on a hypervisor, in
/// the directory trog makes as root there (made here first, as trog would).
pub(super) fn held_elsewhere(file: &str) -> Command {
    let made = Command::new("sh")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/machine/make_lock_dir.sh"
        ))
        .args([LOCK_DIR, "libvirt"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let mut command = Command::new("sh");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/machine/hold_lock.sh"
        ))
        .args([
            LOCK_DIR,
            file,
            "ws-b.example.test",
            "4242",
            "provision",
            "libvirt",
        ]);
    command
}

/// An installation whose fleet is this machine's libvirtd through `uri`, named `local`, with
/// `pool`.
pub(super) fn installation(uri: &str, pool: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hypervisors.conf"),
        format!("[local]\nlibvirt_uri = {uri}\ndomain_type = qemu\npool_name = {pool}\n"),
    )
    .unwrap();
    dir
}

pub(super) fn trog(installation: &tempfile::TempDir, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    command
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", installation.path())
        .stdin(Stdio::null());
    command
}

/// The lines `pipe` gives, as they come.
pub(super) fn lines(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The first line `lines` gives that contains `needle`, within `within`; `None` after that.
pub(super) fn line_with(
    lines: &Receiver<String>,
    needle: &str,
    within: Duration,
) -> Option<String> {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Waits until `check` holds, at most `within`.
fn eventually(within: Duration, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kills `child` (SIGKILL) and reaps it.
fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn two_installations_take_turns_with_a_guest_through_its_lock_on_the_hypervisor() {
    take_turns("hvlock", ["qemu:///system", "qemu:///system"]);
}

/// Both installations act on one guest of the hypervisor at `uris` (each its own way there),
/// as described at the top.
pub fn take_turns(prefix: &str, uris: [&str; 2]) {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = TestGuest::new(prefix, false);
    guest.build_without_starting(&connection);
    let domain = guest.desired.domain.to_string();
    connection
        .lookup_domain_by_name(&domain)
        .unwrap()
        .create()
        .unwrap();
    let file = format!("guest-{domain}.lock");
    let lock = format!("{LOCK_DIR}/{file}");
    let (first, second) = (
        installation(uris[0], &guest.desired.pool_name),
        installation(uris[1], &guest.desired.pool_name),
    );

    // Another machine's run holds the guest: the lock's own process, as trog starts it there.
    let mut elsewhere = held_elsewhere(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let said = lines(elsewhere.stdout.take().unwrap());
    assert!(line_with(&said, "held", Duration::from_secs(30)).is_some());
    let held_elsewhere = "`trog provision` (process 4242 on ws-b.example.test, since ";

    // The first installation's destroy waits for it, saying for whom.
    let mut waiting = trog(&first, &["destroy", &domain, "--wait", "120"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waiting_said = lines(waiting.stderr.take().unwrap());
    let wait_line = line_with(&waiting_said, "waiting up to", Duration::from_secs(60))
        .expect("the run says what it waits for");
    assert!(
        wait_line.starts_with(&format!(
            "waiting up to 120s for the guest {domain} on the hypervisor local (its lock {lock} there): {held_elsewhere}"
        )),
        "{wait_line}"
    );

    // The second installation's own lock is free; the hypervisor's is not: status 10, naming
    // the holder and the hypervisor.
    let refused = trog(&second, &["destroy", &domain, "--wait", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(10), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the guest {domain} is busy on the hypervisor local: {held_elsewhere}"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("the lock is {lock} on local")),
        "{stderr}"
    );

    // The holder dies: the waiting run takes the lock over and destroys, holding it while the
    // guest (no OS) gets its grace to answer the ACPI request.
    kill(&mut elsewhere);
    drop(elsewhere.stdin.take());
    let holder_pid = format!("pid={}\n", waiting.id());
    eventually(
        Duration::from_secs(30),
        "the waiting run holds the lock",
        || std::fs::read_to_string(&lock).is_ok_and(|record| record.contains(&holder_pid)),
    );
    let refused = trog(&second, &["destroy", &domain, "--wait", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(10), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the guest {domain} is busy on the hypervisor local: `trog destroy` (process {} on ",
            waiting.id()
        )),
        "{stderr}"
    );

    // The run holding it is killed: its lock goes with it, and the second installation's run
    // takes it and destroys the guest (forced off here, so that no grace is waited for again).
    kill(&mut waiting);
    let _ = connection.lookup_domain_by_name(&domain).unwrap().destroy();
    let taken_over = trog(&second, &["destroy", &domain, "--wait", "30"])
        .output()
        .unwrap();
    assert_eq!(
        taken_over.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&taken_over.stderr)
    );
    assert!(connection.lookup_domain_by_name(&domain).is_err());
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        "",
        "a lock let go names nobody"
    );
    let _ = std::fs::remove_file(&lock);
}

/// The same over SSH, with two logins of the hypervisor (tests/services/remote-host.sh: an sshd
/// in a network namespace in front of this machine), one per installation: the lock lives on
/// the hypervisor's system whoever logs in, and a killed run's SSH session lets go.
#[test]
fn two_logins_take_turns_with_a_guest_over_ssh() {
    let host = crate::remote_host::RemoteHost::set_up();
    take_turns(
        "hvlockssh",
        [
            &host.uri(&host.user_nopasswd, "/system"),
            &host.uri(&host.user_password, "/system"),
        ],
    );
}
