use super::*;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};

/// The group of this process, which the tests' lock directories are made for (the hypervisor's
/// is libvirt's, which a machine without libvirt lacks).
fn own_group() -> String {
    let output = std::process::Command::new("id")
        .arg("-gn")
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

fn take_in(
    dir: &str,
    verb: &str,
    wait: Duration,
    said: &mut Vec<String>,
) -> Result<HypervisorLock, LockError> {
    let group = own_group();
    acquire_in(
        LockPlace { dir, group: &group },
        &HypervisorMachine::local().into_dyn(),
        "hv1",
        &Subject::Guest("www.example.test".into()),
        verb,
        wait,
        &mut |text| said.push(text.to_string()),
    )
}

/// [`take_in`] a directory this user made for itself (mode 0700): nobody else can write it.
fn take(
    dir: &str,
    verb: &str,
    wait: Duration,
    said: &mut Vec<String>,
) -> Result<HypervisorLock, LockError> {
    if !std::path::Path::new(dir).exists() {
        std::fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
    }
    take_in(dir, verb, wait, said)
}

/// The real operation on this machine: one holder at a time, a waiting run told who holds
/// it and for how long it waits, the holder's end letting the next one in.
#[test]
fn a_lock_held_on_the_hypervisor_keeps_the_next_run_waiting_until_it_is_let_go() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("trog");
    let dir = dir.to_str().unwrap();
    let mut said = Vec::new();
    let first = take(dir, "provision", Duration::from_secs(5), &mut said).unwrap();
    assert!(
        said.is_empty(),
        "a free lock is taken without a wait: {said:?}"
    );
    let mode = std::fs::metadata(format!("{dir}/guest-www.example.test.lock"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o660, "trog's logins lock there, nobody else");
    let record = std::fs::read_to_string(format!("{dir}/guest-www.example.test.lock")).unwrap();
    let holder = Holder::from_record(&record).unwrap();
    assert_eq!(
        (holder.pid, holder.verb.as_str(), holder.host),
        (std::process::id(), "provision", super::super::host_name())
    );

    let at_once = take(dir, "destroy", Duration::ZERO, &mut said).unwrap_err();
    assert!(
        matches!(at_once, LockError::BusyOnHypervisor { .. }),
        "{at_once:?}"
    );
    assert!(said.is_empty(), "no wait announced for --wait 0: {said:?}");
    let busy = take(dir, "destroy", Duration::from_secs(1), &mut said).unwrap_err();
    let LockError::BusyOnHypervisor {
        holder,
        path,
        waited_seconds,
        ..
    } = &busy
    else {
        panic!("{busy:?}")
    };
    assert!(
        holder.starts_with(&format!("`trog provision` (process {}", std::process::id())),
        "{holder}"
    );
    assert_eq!(*waited_seconds, 1);
    assert_eq!(path, &format!("{dir}/guest-www.example.test.lock"));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]
            .starts_with("waiting up to 1s for the guest www.example.test on the hypervisor hv1"),
        "{said:?}"
    );
    assert_eq!(
        crate::diagnose::Diagnose::exit_status(&busy),
        crate::exit_status::ExitStatus::Busy
    );

    let waiter = {
        let dir = dir.to_string();
        std::thread::spawn(move || {
            take(&dir, "snapshot", Duration::from_secs(20), &mut Vec::new()).map(|_| ())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    drop(first);
    waiter.join().unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/guest-www.example.test.lock")).unwrap(),
        "",
        "a lock let go names nobody"
    );
}

#[test]
fn a_busy_line_names_the_holder_or_says_it_left_no_record() {
    assert_eq!(
        holder_of(" host=ws-b.example.test pid=4242 verb=provision since=0 "),
        "`trog provision` (process 4242 on ws-b.example.test, since 1970-01-01 00:00:00 UTC)"
    );
    assert_eq!(holder_of(" "), "a process that left no record of itself");
}

#[test]
fn file_names_on_the_hypervisor_leave_out_what_differs_between_installations() {
    let upload = Subject::BaseImageUpload {
        hypervisor: "hv1".into(),
        pool: "trog".into(),
        volume: "trog-base-0123.qcow2".into(),
    };
    // Two installations may name one hypervisor differently; its pool and volume are its own.
    assert_eq!(
        upload.hypervisor_file_name(),
        "image-trog-trog-base-0123.qcow2.lock"
    );
    assert_eq!(
        Subject::Guest("www.example.test".into()).hypervisor_file_name(),
        "guest-www.example.test.lock"
    );
    let filters = Subject::NetworkFilters {
        hypervisor: "hv1".into(),
    };
    assert_eq!(filters.hypervisor_file_name(), "network-filters.lock");
    assert_eq!(filters.file_name(), "network-filters-hv1.lock");
}

/// As root (CI runs the tests so), the missing directory is made by the root operation, as it is
/// on a hypervisor: root's, of the logins' group, set-group-ID, closed to everyone else.
#[test]
fn a_missing_lock_directory_is_made_as_root_closed_to_other_users() {
    if !crate::machine::local::LocalMachine::running_as_root() {
        eprintln!("skipped: making the lock directory is root's work, and this test is not root");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("trog");
    let dir = dir.to_str().unwrap();
    let held = take_in(dir, "provision", Duration::from_secs(5), &mut Vec::new()).unwrap();
    let meta = std::fs::symlink_metadata(dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.mode() & 0o7777, 0o2770);
    assert_eq!(meta.uid(), 0);
    let lock = std::fs::metadata(format!("{dir}/guest-www.example.test.lock")).unwrap();
    assert_eq!(lock.mode() & 0o777, 0o660);
    assert_eq!(
        lock.gid(),
        meta.gid(),
        "the lock file has the directory's group"
    );
    drop(held);
}

/// What the hypervisor's lock process says of a directory it refuses, as a typed error.
fn refused(dir: &str) -> LockError {
    match take(dir, "provision", Duration::from_secs(5), &mut Vec::new()) {
        Ok(_) => panic!("{dir} was used"),
        Err(error) => error,
    }
}

#[test]
fn a_lock_directory_others_can_write_or_a_link_is_refused_naming_owner_and_mode() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("trog");
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let dir_text = dir.to_str().unwrap();
    let error = refused(dir_text);
    let LockError::UnsafeDirOnHypervisor { found, .. } = &error else {
        panic!("{error:?}")
    };
    let found = (**found).clone();
    assert_eq!(
        (found.path.as_str(), found.parent, found.mode.as_str()),
        (dir_text, false, "1777")
    );
    assert_eq!(found.kind, "directory");
    assert!(!found.owner.is_empty());
    assert_eq!(
        crate::diagnose::Diagnose::exit_status(&error),
        crate::exit_status::ExitStatus::Hypervisor
    );
    let message = error.to_string();
    assert!(message.contains("mode 1777"), "{message}");
    let hint = crate::diagnose::Diagnose::hint(&error).unwrap();
    assert!(
        hint.contains(&format!("sudo rm -r -- {dir_text}")),
        "{hint}"
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "nothing was made in it"
    );

    // A link to a directory that would do is refused too: whoever made the link chose it.
    let safe = scratch.path().join("safe");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&safe)
        .unwrap();
    let link = scratch.path().join("linked");
    std::os::unix::fs::symlink(&safe, &link).unwrap();
    let error = refused(link.to_str().unwrap());
    assert!(
        matches!(&error, LockError::UnsafeDirOnHypervisor { found, .. }
            if found.kind == "symbolic link" && !found.parent),
        "{error:?}"
    );
    assert!(std::fs::read_dir(&safe).unwrap().next().is_none());

    // A parent every user can write without the sticky bit: the directory could be replaced.
    let open_parent = scratch.path().join("open");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&open_parent)
        .unwrap();
    std::fs::set_permissions(&open_parent, std::fs::Permissions::from_mode(0o777)).unwrap();
    let inner = open_parent.join("trog");
    let error = refused(inner.to_str().unwrap());
    let LockError::UnsafeDirOnHypervisor { found, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        (found.path.as_str(), found.parent, found.mode.as_str()),
        (open_parent.to_str().unwrap(), true, "777")
    );
    let hint = crate::diagnose::Diagnose::hint(&error).unwrap();
    assert!(hint.contains("sticky bit"), "{hint}");
}
