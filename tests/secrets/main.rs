//! The secret store against an independent implementation: files made by `keepassxc-cli` are read
//! by trog, files trog writes are read by `keepassxc-cli`, and guest keys are checked with
//! `ssh-keygen`. Passphrases go to the tools on their standard input, never on a command line.

mod key_file_unlock;
mod missing_store;
mod refused_run;

use rand::rngs::StdRng;
use rand::SeedableRng;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use trog::credentials::{
    parse_handed_in, CredentialSource, FakePrompter, HandedInCredentials, Secret,
};
use trog::diagnose::{Diagnose, Failure};
use trog::exit_status::ExitStatus;
use trog::model::names::DomainName;
use trog::secrets::{
    guest_keypair, EntryPath, FieldName, KeypairOrigin, PrivateKeyFile, Protection,
    SecretReference, SecretStore, SecretsError, StoreKdf, UnlockKey, WhenAbsent,
};

const PASSPHRASE: &str = "correct horse battery staple";

/// Runs `tool` with `stdin` on its standard input; returns its standard output, failing the test
/// with its standard error when it fails.
fn run(tool: &str, arguments: &[&str], stdin: &str) -> String {
    let mut child = Command::new(tool)
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {tool}: {error}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{tool} {arguments:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `keepassxc-cli COMMAND -q DATABASE ARGUMENTS…`, unlocked with `passphrase` on standard input
/// followed by `more_input` lines.
fn keepassxc(
    command: &str,
    database: &Path,
    arguments: &[&str],
    passphrase: &str,
    more_input: &str,
) -> String {
    let mut all = vec![command, "-q", database.to_str().unwrap()];
    all.extend_from_slice(arguments);
    run(
        "keepassxc-cli",
        &all,
        &format!("{passphrase}\n{more_input}"),
    )
}

/// A KDBX file as KeePassXC makes it, with an entry `Infra/Databases/mariadb`.
fn store_made_by_keepassxc(directory: &Path) -> std::path::PathBuf {
    let path = directory.join("secrets.kdbx");
    let database = path.to_str().unwrap();
    // The shortest decryption time keepassxc-cli allows keeps the test quick; the KDF's strength is not under test here.
    run(
        "keepassxc-cli",
        &["db-create", "-q", "-p", "-t", "100", database],
        &format!("{PASSPHRASE}\n{PASSPHRASE}\n"),
    );
    keepassxc("mkdir", &path, &["Infra"], PASSPHRASE, "");
    keepassxc("mkdir", &path, &["Infra/Databases"], PASSPHRASE, "");
    keepassxc(
        "add",
        &path,
        &[
            "-u",
            "dbadmin",
            "--notes",
            "MariaDB root",
            "-p",
            "Infra/Databases/mariadb",
        ],
        PASSPHRASE,
        "s3cret-db-pw\n",
    );
    path
}

fn quick_kdf() -> StoreKdf {
    StoreKdf {
        memory_mib: 8,
        iterations: 2,
        parallelism: 1,
    }
}

fn reference(text: &str) -> SecretReference {
    SecretReference::parse(text).unwrap()
}

#[test]
fn a_store_made_by_keepassxc_is_read_by_trog() {
    let directory = tempfile::tempdir().unwrap();
    let path = store_made_by_keepassxc(directory.path());
    let store = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    let password = store
        .resolve(&reference("secret:Infra/Databases/mariadb/Password"))
        .unwrap();
    assert_eq!(password.expose(), "s3cret-db-pw");
    let user = store
        .get(
            &EntryPath::parse("Infra/Databases/mariadb").unwrap(),
            &FieldName::UserName,
        )
        .unwrap();
    assert_eq!(user.expose(), "dbadmin");
    assert_eq!(
        store
            .resolve(&reference("secret:Infra/Databases/mariadb/Notes"))
            .unwrap()
            .expose(),
        "MariaDB root"
    );
}

#[test]
fn missing_groups_entries_and_fields_are_errors_naming_the_reference_not_a_value() {
    let directory = tempfile::tempdir().unwrap();
    let path = store_made_by_keepassxc(directory.path());
    let store = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    let cases = [
        ("secret:Infra/Nope/mariadb/Password", "`secret:Infra/Nope/mariadb/Password`: the secret store has no group `Nope`"),
        (
            "secret:Infra/Databases/postgres/Password",
            "`secret:Infra/Databases/postgres/Password`: the secret store has no entry `Infra/Databases/postgres`",
        ),
        ("secret:Infra/Databases/mariadb/password", "`secret:Infra/Databases/mariadb/password`: the entry has no field `password`"),
    ];
    for (text, message) in cases {
        let error = store.resolve(&reference(text)).unwrap_err();
        assert_eq!(error.exit_status(), ExitStatus::Configuration);
        let rendered = Failure::from(error).render();
        assert!(
            rendered.starts_with(&format!("error: {message}\n")),
            "{rendered}"
        );
        assert!(
            !rendered.contains("s3cret-db-pw") && !rendered.contains("dbadmin"),
            "{rendered}"
        );
    }
    let hint = store
        .resolve(&reference("secret:Infra/Databases/mariadb/password"))
        .unwrap_err()
        .hint()
        .unwrap();
    assert_eq!(
        hint,
        "did you mean `Password`? Field names are case-sensitive"
    );
}

#[test]
fn a_wrong_passphrase_is_a_credentials_error_with_a_hint() {
    let directory = tempfile::tempdir().unwrap();
    let path = store_made_by_keepassxc(directory.path());
    let error = SecretStore::open(&path, &Secret::new("not the passphrase")).unwrap_err();
    assert!(
        matches!(
            &error,
            SecretsError::WrongKey {
                used: UnlockKey::Passphrase { handed_in: false },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(error.exit_status(), ExitStatus::Credentials);
    let rendered = Failure::from(error).render();
    assert!(rendered.contains("keepassxc-cli ls"), "{rendered}");
    assert!(!rendered.contains("not the passphrase"), "{rendered}");
}

#[test]
fn a_store_written_by_trog_is_read_by_keepassxc() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    let mut store = SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    let entry = EntryPath::parse("Infra/Web/nginx").unwrap();
    store
        .put(
            &entry,
            &FieldName::UserName,
            &Secret::new("www-admin"),
            Protection::Plain,
        )
        .unwrap();
    store
        .put(
            &entry,
            &FieldName::Password,
            &Secret::new("nginx-pw"),
            Protection::Protected,
        )
        .unwrap();
    store
        .put(
            &entry,
            &FieldName::parse("api token"),
            &Secret::new("tok-123"),
            Protection::Protected,
        )
        .unwrap();
    store.save().unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let shown = keepassxc(
        "show",
        &path,
        &[
            "-s",
            "-a",
            "UserName",
            "-a",
            "Password",
            "-a",
            "api token",
            "Infra/Web/nginx",
        ],
        PASSPHRASE,
        "",
    );
    assert_eq!(shown, "www-admin\nnginx-pw\ntok-123\n");
    let listing = keepassxc("ls", &path, &["-R", "-f"], PASSPHRASE, "");
    assert!(listing.contains("Infra/Web/nginx"), "{listing}");
    // Protected fields are hidden unless asked for.
    let summary = keepassxc("show", &path, &["Infra/Web/nginx"], PASSPHRASE, "");
    assert!(!summary.contains("nginx-pw"), "{summary}");
}

#[test]
fn a_keepassxc_store_changed_by_trog_keeps_everything_for_keepassxc() {
    let directory = tempfile::tempdir().unwrap();
    let path = store_made_by_keepassxc(directory.path());
    let mut store = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    let mariadb = EntryPath::parse("Infra/Databases/mariadb").unwrap();
    store
        .put(
            &mariadb,
            &FieldName::Password,
            &Secret::new("rotated-pw"),
            Protection::Protected,
        )
        .unwrap();
    let redis = EntryPath::parse("Infra/Databases/redis").unwrap();
    store
        .put(
            &redis,
            &FieldName::Password,
            &Secret::new("redis-pw"),
            Protection::Protected,
        )
        .unwrap();
    store.save().unwrap();

    let mariadb_now = keepassxc(
        "show",
        &path,
        &[
            "-s",
            "-a",
            "UserName",
            "-a",
            "Password",
            "Infra/Databases/mariadb",
        ],
        PASSPHRASE,
        "",
    );
    assert_eq!(mariadb_now, "dbadmin\nrotated-pw\n");
    let redis_now = keepassxc(
        "show",
        &path,
        &["-s", "-a", "Password", "Infra/Databases/redis"],
        PASSPHRASE,
        "",
    );
    assert_eq!(redis_now, "redis-pw\n");
    // The replaced password went into the entry's history, as KeePassXC keeps it.
    let bytes = std::fs::read(&path).unwrap();
    let database = keepass::Database::parse(
        &bytes,
        keepass::DatabaseKey::new().with_password(PASSPHRASE),
    )
    .unwrap();
    let entry = database
        .iter_all_entries()
        .find(|entry| entry.get_title() == Some("mariadb"))
        .unwrap();
    let history = entry
        .history
        .as_ref()
        .expect("the changed entry has a history");
    assert!(history
        .get_entries()
        .iter()
        .any(|old| old.get_password() == Some("s3cret-db-pw")));
    assert_eq!(entry.get_password(), Some("rotated-pw"));
}

#[test]
fn an_entry_keepassxc_adds_to_a_trog_store_is_read_by_trog() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    keepassxc("mkdir", &path, &["Mail"], PASSPHRASE, "");
    keepassxc(
        "add",
        &path,
        &["-u", "postmaster", "-p", "Mail/smtp"],
        PASSPHRASE,
        "smtp-pw\n",
    );
    let store = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    assert_eq!(
        store
            .resolve(&reference("secret:Mail/smtp/Password"))
            .unwrap()
            .expose(),
        "smtp-pw"
    );
    assert_eq!(
        store
            .resolve(&reference("secret:Mail/smtp/UserName"))
            .unwrap()
            .expose(),
        "postmaster"
    );
}

#[test]
fn unlock_creates_an_absent_store_with_the_handed_in_passphrase_then_opens_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    let handed_in = || parse_handed_in(&format!("keepass: {PASSPHRASE}\n\n")).unwrap();
    let mut credentials = CredentialSource::new(handed_in(), FakePrompter::without_terminal());
    SecretStore::unlock(&path, &mut credentials, quick_kdf()).unwrap();
    assert!(path.exists());
    keepassxc("ls", &path, &[], PASSPHRASE, "");
    let mut credentials = CredentialSource::new(handed_in(), FakePrompter::without_terminal());
    SecretStore::unlock(&path, &mut credentials, quick_kdf()).unwrap();
}

#[test]
fn creating_the_store_waits_for_another_writer_only_as_long_as_the_run_says() {
    use trog::lock::{lock_dir_for_store, LockError, Locks, Subject};
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    let other_writer = Locks::new(lock_dir_for_store(&path), Duration::ZERO, "provision");
    let _held = other_writer
        .acquire(&Subject::SecretStore, &mut |_| {})
        .unwrap();
    let handed_in = parse_handed_in(&format!("keepass: {PASSPHRASE}\n\n")).unwrap();
    let mut credentials = CredentialSource::new(handed_in, FakePrompter::without_terminal());
    let this_run = Locks::new(
        lock_dir_for_store(&path),
        Duration::from_secs(1),
        "provision",
    );
    let started = std::time::Instant::now();
    let create = WhenAbsent::Create(quick_kdf());
    let error =
        SecretStore::unlock_with(&path, None, &mut credentials, create, &this_run).unwrap_err();
    // The run's one second, not the 900 s default: anything near a minute means the default.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            error,
            SecretsError::Locked(LockError::Busy {
                waited_seconds: 1,
                ..
            })
        ),
        "{error:?}"
    );
    assert!(!path.exists());
}

#[test]
fn unlock_refuses_a_wrong_handed_in_passphrase_at_once_and_asks_again_on_a_terminal() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();

    let handed_in = parse_handed_in("keepass: wrong\n\n").unwrap();
    let mut credentials = CredentialSource::new(handed_in, FakePrompter::answering([PASSPHRASE]));
    let error = SecretStore::unlock(&path, &mut credentials, quick_kdf()).unwrap_err();
    assert!(
        matches!(
            error,
            SecretsError::WrongKey {
                used: UnlockKey::Passphrase { handed_in: true },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.hint().unwrap().contains("--credentials"));
    assert!(credentials.prompter().prompts_shown.is_empty());

    let prompter = FakePrompter::answering(["typo", PASSPHRASE]);
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), prompter);
    SecretStore::unlock(&path, &mut credentials, quick_kdf()).unwrap();
    assert_eq!(credentials.prompter().prompts_shown.len(), 2);
}

#[test]
fn unlock_without_a_passphrase_or_a_terminal_says_how_to_hand_it_in() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    let mut credentials = CredentialSource::new(
        HandedInCredentials::none(),
        FakePrompter::without_terminal(),
    );
    let error = SecretStore::unlock(&path, &mut credentials, quick_kdf()).unwrap_err();
    assert_eq!(error.exit_status(), ExitStatus::Credentials);
    let rendered = Failure::from(error).render();
    assert!(
        rendered.contains("the credential `keepass` is needed to unlock"),
        "{rendered}"
    );
    assert!(
        rendered.contains("printf 'keepass: %s\\n\\n'"),
        "{rendered}"
    );
}

#[test]
fn a_guest_key_pair_survives_reopening_and_its_halves_match_for_ssh_keygen() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    let domain = DomainName::parse("www.example.test").unwrap();
    let created = {
        let mut store = SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
        guest_keypair(&mut store, &domain, &mut StdRng::from_entropy()).unwrap()
    };
    assert_eq!(created.origin(), KeypairOrigin::Created);

    let mut reopened = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    let stored = guest_keypair(&mut reopened, &domain, &mut StdRng::from_entropy()).unwrap();
    assert_eq!(stored.origin(), KeypairOrigin::Stored);
    assert_eq!(stored.public_key_openssh(), created.public_key_openssh());
    assert_eq!(stored.private_key_openssh(), created.private_key_openssh());

    // KeePassXC sees the same public key, under the documented entry.
    let public_in_keepassxc = keepassxc(
        "show",
        &path,
        &["-a", "PublicKey", "trog/guests/www.example.test"],
        PASSPHRASE,
        "",
    );
    assert_eq!(public_in_keepassxc.trim_end(), stored.public_key_openssh());

    // OpenSSH derives the stored public key from the stored private key.
    let key_file = PrivateKeyFile::write(&stored).unwrap();
    let derived = run(
        "ssh-keygen",
        &["-y", "-f", key_file.path().to_str().unwrap()],
        "",
    );
    let key_only = |line: &str| {
        line.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(key_only(&derived), key_only(stored.public_key_openssh()));
    assert!(stored
        .public_key_openssh()
        .ends_with(" trog@www.example.test"));
    let (file, private_directory) = (
        key_file.path().to_path_buf(),
        key_file.directory().to_path_buf(),
    );
    drop(key_file);
    assert!(!file.exists() && !private_directory.exists());
}

#[test]
fn a_new_store_uses_argon2id_with_the_recommended_parameters() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("secrets.kdbx");
    SecretStore::create(&path, &Secret::new(PASSPHRASE), StoreKdf::RECOMMENDED).unwrap();
    let information = keepassxc("db-info", &path, &[], PASSPHRASE, "");
    let StoreKdf {
        memory_mib,
        iterations,
        ..
    } = StoreKdf::RECOMMENDED;
    let expected = format!(
        "KDF: Argon2id ({iterations} rounds, {} KB)",
        memory_mib * 1024
    );
    assert!(information.contains(&expected), "{information}");
}

/// Every open and save of a store runs its KDF, so the crates doing that work are built optimised
/// even in dev builds (unoptimised, a test that opens a store waits a minute). A profile override
/// names a package, not a library (`rust-argon2`, not `argon2`), and one naming no package is
/// silently ignored: this checks the overrides name the packages actually built.
#[test]
fn the_kdf_crates_are_optimised_in_dev_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let locked = |package: &str| lock.contains(&format!("name = \"{package}\"\n"));
    let optimised = |package: &str| {
        let section = format!("[profile.dev.package.{package}]\nopt-level = 3\n");
        manifest.contains(&section)
    };
    for package in ["keepass", "rust-argon2", "blake2b_simd", "aes", "sha2"] {
        assert!(
            locked(package),
            "{package} is no longer built: update this list"
        );
        assert!(
            optimised(package),
            "Cargo.toml has no [profile.dev.package.{package}] with opt-level = 3"
        );
    }
    for line in manifest.lines() {
        if let Some(package) = line
            .strip_prefix("[profile.dev.package.")
            .and_then(|rest| rest.strip_suffix(']'))
            // `"*"` is every dependency (their debug info), not a package's name.
            .filter(|package| *package != "\"*\"")
        {
            assert!(
                locked(package),
                "the profile override for {package} names no package in Cargo.lock"
            );
        }
    }
}
