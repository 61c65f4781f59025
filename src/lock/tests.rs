use super::*;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;

fn locks(dir: &Path, wait: Duration) -> Locks {
    Locks::new(dir.join("locks"), wait, "provision")
}

#[test]
fn a_free_lock_is_taken_and_records_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let held = locks(dir.path(), Duration::ZERO)
        .acquire(&Subject::Guest("www.example.test".into()), &mut |_| {})
        .unwrap();
    let record = std::fs::read_to_string(&held.path).unwrap();
    let holder = Holder::from_record(&record).unwrap();
    assert_eq!(holder.pid, std::process::id());
    assert_eq!(holder.verb, "provision");
    assert_eq!(holder.host, holder::host_name());
    assert!(held.path.ends_with("locks/guest-www.example.test.lock"));
}

#[test]
fn a_held_lock_makes_the_second_wait_then_busy_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let subject = Subject::SecretStore;
    let _first = locks(dir.path(), Duration::ZERO)
        .acquire(&subject, &mut |_| {})
        .unwrap();
    let mut said = Vec::new();
    let error = locks(dir.path(), Duration::from_millis(300))
        .acquire(&subject, &mut |text| said.push(text.to_string()))
        .unwrap_err();
    assert_eq!(error.exit_status(), ExitStatus::Busy);
    let message = error.to_string();
    assert!(message.contains("the secret store is busy"), "{message}");
    assert!(
        message.contains(&format!("process {}", std::process::id())),
        "{message}"
    );
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("waiting up to 0s for the secret store"),
        "{said:?}"
    );
    assert!(error.hint().unwrap().contains("--wait SECONDS"));
}

#[test]
fn a_released_lock_is_taken_by_the_waiting_run() {
    let dir = tempfile::tempdir().unwrap();
    let subject = Subject::Guest("db.example.test".into());
    let first = locks(dir.path(), Duration::ZERO)
        .acquire(&subject, &mut |_| {})
        .unwrap();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
    });
    let second = locks(dir.path(), Duration::from_secs(30))
        .acquire(&subject, &mut |_| {})
        .unwrap();
    releaser.join().unwrap();
    drop(second);
}

#[test]
fn the_lock_of_a_killed_process_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let waiting = locks(dir.path(), Duration::from_secs(30));
    let path = waiting.dir.join(Subject::SecretStore.file_name());
    std::fs::create_dir_all(&waiting.dir).unwrap();
    // util-linux flock stands in for another run: without forking, it becomes the process that
    // holds the file until it is killed.
    let mut other_run = std::process::Command::new("flock")
        .args(["--no-fork"])
        .arg(&path)
        .args(["sleep", "120"])
        .spawn()
        .unwrap();
    let probe = locks(dir.path(), Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe.acquire(&Subject::SecretStore, &mut |_| {}).is_ok() {
        assert!(Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        other_run.kill().unwrap();
        other_run.wait().unwrap();
    });
    let mut said = Vec::new();
    let taken = waiting
        .acquire(&Subject::SecretStore, &mut |text| {
            said.push(text.to_string())
        })
        .unwrap();
    killer.join().unwrap();
    assert_eq!(
        said.len(),
        1,
        "the run waited for the live holder: {said:?}"
    );
    let record = Holder::from_record(&std::fs::read_to_string(&taken.path).unwrap()).unwrap();
    assert_eq!(record.pid, std::process::id());
}

#[test]
fn subjects_name_safe_files() {
    let subject = Subject::BaseImageUpload {
        hypervisor: "hv1".into(),
        pool: "trog pool".into(),
        volume: "base-ab12.qcow2".into(),
    };
    assert_eq!(
        subject.file_name(),
        "image-hv1-trog_pool-base-ab12.qcow2.lock"
    );
    assert_eq!(
        subject.to_string(),
        "the upload of base image base-ab12.qcow2 to pool trog pool on hv1"
    );
}

#[test]
fn timestamps_are_utc_civil_time() {
    assert_eq!(holder::utc_timestamp(0), "1970-01-01 00:00:00 UTC");
    assert_eq!(
        holder::utc_timestamp(1_796_074_947),
        "2026-11-30 21:42:27 UTC"
    );
    assert_eq!(
        holder::utc_timestamp(951_782_400),
        "2000-02-29 00:00:00 UTC"
    );
}

#[test]
fn the_lock_directory_and_its_files_are_closed_to_other_users() {
    let dir = tempfile::tempdir().unwrap();
    let held = locks(dir.path(), Duration::ZERO)
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap();
    let dir_mode = std::fs::metadata(dir.path().join("locks")).unwrap().mode();
    let file_mode = std::fs::metadata(&held.path).unwrap().mode();
    // Others may neither write (plant a link) nor open a file (and hold its lock for ever).
    assert_eq!(dir_mode & 0o007, 0, "{dir_mode:o}");
    assert_eq!(file_mode & 0o007, 0, "{file_mode:o}");
}

#[test]
fn a_locks_directory_an_older_trog_left_readable_by_everyone_is_closed_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let locks_dir = dir.path().join("locks");
    std::fs::create_dir(&locks_dir).unwrap();
    std::fs::set_permissions(&locks_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    locks(dir.path(), Duration::ZERO)
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap();
    let mode = std::fs::metadata(&locks_dir).unwrap().mode();
    assert_eq!(mode & 0o777, 0o750);
}

#[test]
fn a_link_where_a_lock_file_goes_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let locks = locks(dir.path(), Duration::ZERO);
    std::fs::create_dir(&locks.dir).unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, "someone's data\n").unwrap();
    let link = locks.dir.join(Subject::SecretStore.file_name());
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let error = locks
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(&error, LockError::LinkInPlace { path } if *path == link),
        "{error:?}"
    );
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert!(error.hint().unwrap().contains("rm -- "));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "someone's data\n"
    );

    // A link to nowhere does not make the file it names either.
    let nowhere = dir.path().join("made-through-a-link");
    let guest = Subject::Guest("www.example.test".into());
    std::os::unix::fs::symlink(&nowhere, locks.dir.join(guest.file_name())).unwrap();
    let error = locks.acquire(&guest, &mut |_| {}).unwrap_err();
    assert!(matches!(error, LockError::LinkInPlace { .. }), "{error:?}");
    assert!(!nowhere.exists());
}

#[test]
fn a_locks_directory_that_is_a_link_or_writable_by_everyone_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("locks")).unwrap();
    let error = locks(dir.path(), Duration::ZERO)
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(
            error,
            LockError::UnsafeDir {
                problem: DirProblem::SymbolicLink,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());

    let dir = tempfile::tempdir().unwrap();
    let locks_dir = dir.path().join("locks");
    std::fs::create_dir(&locks_dir).unwrap();
    std::fs::set_permissions(&locks_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let error = locks(dir.path(), Duration::ZERO)
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(
            error,
            LockError::UnsafeDir {
                problem: DirProblem::WritableByOthers { mode: 0o1777 },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("writable by every user (mode 1777)"),
        "{error}"
    );
    assert!(std::fs::read_dir(&locks_dir).unwrap().next().is_none());
}
