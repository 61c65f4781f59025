//! A key file instead of the passphrase, or with it, through the real binary: what trog makes
//! with a key file `keepassxc-cli` opens with it, what `keepassxc-cli` makes with one trog opens,
//! with nothing on standard input; a key file others may read is refused.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const GUEST: &str = "web.example.test";

/// The example installation naming `store.keyx` as its key file, and one guest.
fn installation() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc");
    let recipes = std::fs::read_to_string(example.join("recipes.yaml"))
        .unwrap()
        .replace(
            "    timezone: Etc/UTC\n",
            "    timezone: Etc/UTC\n    keepass_key_file: store.keyx\n",
        );
    assert!(recipes.contains("keepass_key_file"));
    std::fs::write(dir.path().join("recipes.yaml"), recipes).unwrap();
    std::fs::create_dir(dir.path().join("recipes.d")).unwrap();
    std::fs::write(
        dir.path().join("recipes.d").join(format!("{GUEST}.yaml")),
        format!("{GUEST}:\n  nginx: {{}}\n"),
    )
    .unwrap();
    dir
}

/// `keepassxc-cli db-create` makes a key file (KeePassXC's XML format, version 2.0) when the one
/// it is given does not exist; with `passphrase`, the database takes it too.
fn keepassxc_create(database: &Path, key_file: &Path, passphrase: Option<&str>) {
    let mut command = Command::new("keepassxc-cli");
    command.args([
        "db-create",
        "-q",
        "--decryption-time",
        "100",
        "--set-key-file",
    ]);
    command.arg(key_file).arg(database);
    if passphrase.is_some() {
        command.arg("--set-password");
    }
    let stdin = passphrase
        .map(|text| format!("{text}\n{text}\n"))
        .unwrap_or_default();
    let output = piped(&mut command, &stdin);
    assert!(output.status.success(), "{output:?}");
}

/// `keepassxc-cli ls` of the guests' keys, with the key file and nothing else.
fn keepassxc_lists_guest_keys(database: &Path, key_file: &Path) -> String {
    let output = piped(
        Command::new("keepassxc-cli")
            .args(["ls", "-q", "--no-password", "--key-file"])
            .arg(key_file)
            .arg(database)
            .arg("trog/guests"),
        "",
    );
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn piped(command: &mut Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `trog new_config` (a verb that writes the store) with nothing on standard input.
fn new_config(installation: &Path, credentials: Option<&str>) -> Output {
    let out = installation.join("generated");
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    if credentials.is_some() {
        command.arg("--credentials");
    }
    command
        .args(["new_config", GUEST, "--out"])
        .arg(&out)
        .env("TROG_PROVISIONER_CONFIG", installation);
    // A new installation: new_config makes its store only when asked.
    if !installation.join("secrets.kdbx").exists() {
        command.arg("--new-secret-store");
    }
    match credentials {
        Some(text) => piped(&mut command, text),
        None => command.stdin(Stdio::null()).output().unwrap(),
    }
}

fn key_file(installation: &Path) -> PathBuf {
    installation.join("store.keyx")
}

#[test]
fn a_store_trog_makes_with_a_key_file_is_opened_by_keepassxc_with_it() {
    let dir = installation();
    // A key file of KeePassXC's own making (its throwaway database is not used).
    keepassxc_create(
        &dir.path().join("throwaway.kdbx"),
        &key_file(dir.path()),
        None,
    );

    let output = new_config(dir.path(), None);
    assert!(output.status.success(), "{output:?}");
    let store = dir.path().join("secrets.kdbx");
    assert_eq!(
        keepassxc_lists_guest_keys(&store, &key_file(dir.path())).trim(),
        GUEST
    );
    // And trog opens it again, nothing on standard input.
    let output = new_config(dir.path(), None);
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn a_store_keepassxc_makes_with_a_key_file_is_opened_by_trog_with_it() {
    let dir = installation();
    let store = dir.path().join("secrets.kdbx");
    keepassxc_create(&store, &key_file(dir.path()), None);

    let output = new_config(dir.path(), None);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        keepassxc_lists_guest_keys(&store, &key_file(dir.path())).trim(),
        GUEST
    );
}

#[test]
fn a_key_file_and_a_passphrase_together() {
    let dir = installation();
    let store = dir.path().join("secrets.kdbx");
    keepassxc_create(&store, &key_file(dir.path()), Some("both of them"));

    // The key file alone does not open it, and without a terminal nobody can type the rest: the
    // error blames the key file it used, and says how to hand in the passphrase.
    let output = new_config(dir.path(), None);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let named = format!(
        "the key file {} alone does not unlock",
        key_file(dir.path()).display()
    );
    assert!(stderr.contains(&named), "{stderr}");
    assert!(
        stderr.contains("hint: if the store also needs a passphrase, hand it in"),
        "{stderr}"
    );
    assert!(stderr.contains("--credentials"), "{stderr}");

    // A wrong passphrase with the key file: both are named.
    let output = new_config(dir.path(), Some("keepass: not this one\n\n"));
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let named = format!(
        "the passphrase together with the key file {} does not unlock",
        key_file(dir.path()).display()
    );
    assert!(stderr.contains(&named), "{stderr}");
    assert!(stderr.contains("--credentials may be wrong"), "{stderr}");
    assert!(stderr.contains("keepassxc-cli ls --key-file"), "{stderr}");

    let output = new_config(dir.path(), Some("keepass: both of them\n\n"));
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn a_key_file_others_may_read_is_refused_with_a_hint() {
    let dir = installation();
    let store = dir.path().join("secrets.kdbx");
    keepassxc_create(&store, &key_file(dir.path()), None);
    std::fs::set_permissions(key_file(dir.path()), std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(&store).unwrap();

    let output = new_config(dir.path(), None);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("may be read by others (mode 644)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: it alone may unlock the store: `chmod 600"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&store).unwrap(), before);
}

#[test]
fn another_key_file_is_named_in_the_error_and_nothing_is_written() {
    let dir = installation();
    let store = dir.path().join("secrets.kdbx");
    keepassxc_create(&store, &key_file(dir.path()), None);
    // Another store's key file in its place.
    let other = tempfile::tempdir().unwrap();
    keepassxc_create(
        &other.path().join("other.kdbx"),
        &key_file(other.path()),
        None,
    );
    std::fs::copy(key_file(other.path()), key_file(dir.path())).unwrap();
    std::fs::set_permissions(key_file(dir.path()), std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::read(&store).unwrap();

    let output = new_config(dir.path(), None);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("the passphrase does not"), "{stderr}");
    let named = format!(
        "the key file {} alone does not unlock",
        key_file(dir.path()).display()
    );
    assert!(stderr.contains(&named), "{stderr}");
    assert!(stderr.contains("names this store's key file"), "{stderr}");
    assert_eq!(std::fs::read(&store).unwrap(), before);
}
