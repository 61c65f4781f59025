//! The guest's key pair: the private half stays in the store, the public half reaches user-data.

use crate::harness::{read, Installation, PASSPHRASE};
use crate::{installation_with_both_guests, STATIC_GUEST};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use trog::model::names::DomainName;
use trog::secrets::guest_keypair;

/// Every file's bytes, the payload archive also unpacked, with the name to report.
fn everything_written(installation: &Installation) -> Vec<(String, Vec<u8>)> {
    let mut contents = Vec::new();
    for (path, bytes) in installation.every_file() {
        if path.ends_with("secrets.kdbx") {
            continue;
        }
        if path.extension().is_some_and(|extension| extension == "gz") {
            let mut unpacked = Vec::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_end(&mut unpacked)
                .unwrap();
            contents.push((format!("{} (unpacked)", path.display()), unpacked));
        }
        contents.push((path.display().to_string(), bytes));
    }
    contents
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn the_private_key_is_written_nowhere_but_the_store() {
    let installation = installation_with_both_guests();
    installation.new_config("example.test", &installation.out("example"));
    installation.new_config(STATIC_GUEST, &installation.out("static"));
    let mut store = installation.open_store();
    let mut private_key_lines = Vec::new();
    let mut host_key_lines = Vec::new();
    let key_lines = |key: &str| -> Vec<String> {
        key.lines()
            .filter(|line| !line.starts_with("-----"))
            .map(str::to_string)
            .collect()
    };
    for fqdn in ["example.test", STATIC_GUEST] {
        let keypair = guest_keypair(
            &mut store,
            &DomainName::parse(fqdn).unwrap(),
            &mut rand::rngs::OsRng,
        )
        .unwrap();
        assert_eq!(keypair.origin(), trog::secrets::KeypairOrigin::Stored);
        private_key_lines.extend(key_lines(keypair.private_key_openssh().expose()));
        host_key_lines.extend(key_lines(keypair.host_key().private_key_openssh.expose()));
    }
    // Every unencrypted OpenSSH key of one type begins with the same line (the format's header):
    // only the lines that are a login key's own say anything.
    private_key_lines.retain(|line| !host_key_lines.contains(line));
    assert!(!private_key_lines.is_empty() && !host_key_lines.is_empty());
    let written = everything_written(&installation);
    assert!(written.iter().any(|(name, _)| name.contains("recipes.d")));
    let mut seeds_with_the_host_key = 0;
    for (name, bytes) in &written {
        for line in &private_key_lines {
            assert!(
                !contains(bytes, line.as_bytes()),
                "{name} holds part of a login's private key"
            );
        }
        // The guest's own host key goes where the guest gets it from, its seed, and nowhere else.
        let in_seed = name.contains("/seed/") || name.ends_with("seed.iso");
        let holds_host_key = host_key_lines
            .iter()
            .any(|line| contains(bytes, line.as_bytes()));
        if in_seed && holds_host_key {
            seeds_with_the_host_key += 1;
            let mode = std::fs::metadata(name)
                .map(|metadata| std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()))
                .unwrap_or(0o600);
            assert_eq!(mode & 0o077, 0, "{name} is readable by others: {mode:o}");
        } else {
            assert!(
                !contains(bytes, b"PRIVATE KEY") && !holds_host_key,
                "{name} holds a private key"
            );
        }
    }
    assert!(
        seeds_with_the_host_key >= 2,
        "each guest's seed carries its host key"
    );
}

/// The guest's public key as keepassxc-cli reads it from the store.
fn public_key_by_keepassxc(installation: &Installation, fqdn: &str) -> String {
    let mut child = Command::new("keepassxc-cli")
        .args([
            "show",
            "--quiet",
            "--show-protected",
            "--attributes",
            "PublicKey",
        ])
        .arg(installation.store_path())
        .arg(format!("trog/guests/{fqdn}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keepassxc-cli runs");
    writeln!(child.stdin.take().unwrap(), "{PASSPHRASE}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

#[test]
fn user_data_carries_the_public_key_the_store_holds() {
    // A store trog made itself, with a key it made on this run.
    let installation = Installation::example();
    let out = installation.out("example");
    let outcome = installation.new_config("example.test", &out);
    let by_keepassxc = public_key_by_keepassxc(&installation, "example.test");
    assert!(
        by_keepassxc.starts_with("ssh-ed25519 ") && by_keepassxc.ends_with(" trog@example.test"),
        "{by_keepassxc}"
    );
    let mut store = installation.open_store();
    let by_trog = guest_keypair(
        &mut store,
        &DomainName::parse("example.test").unwrap(),
        &mut rand::rngs::OsRng,
    )
    .unwrap();
    assert_eq!(by_trog.public_key_openssh().trim(), by_keepassxc);
    let user_data = read(&out.join("seed/user-data"));
    let keys: Vec<&str> = user_data
        .lines()
        .filter(|line| line.contains("ssh-ed25519") && !line.contains("ed25519_public"))
        .map(|line| line.trim().trim_start_matches("- "))
        .collect();
    assert_eq!(keys, [by_keepassxc.as_str()], "{user_data}");
    assert!(outcome.stdout.contains(&by_keepassxc), "{}", outcome.stdout);

    // A second run keeps the key.
    installation.new_config("example.test", &installation.out("again"));
    assert_eq!(
        public_key_by_keepassxc(&installation, "example.test"),
        by_keepassxc
    );
}

/// A recipe argument naming an entry of the store gets the entry's value in the payload, and only
/// there; a reference to an entry that is not there stops generation, naming the reference.
#[test]
fn secret_references_are_resolved_from_the_store() {
    use trog::credentials::Secret;
    use trog::secrets::{EntryPath, FieldName, Protection};
    const PASSWORD: &str = "a database password 1234";
    let installation = Installation::example();
    let guest = "db.example.test";
    installation.store_with_fixed_keys(&[guest]);
    let mut store = installation.open_store();
    store
        .put(
            &EntryPath::new(["sites"], "db"),
            &FieldName::parse("Password"),
            &Secret::new(PASSWORD),
            Protection::Protected,
        )
        .unwrap();
    store.save().unwrap();
    installation.write_guest(
        guest,
        &format!("{guest}:\n  mariadb:\n    root_pw: secret:sites/db/Password\n"),
    );
    let out = installation.out("db");
    installation.new_config(guest, &out);
    let payload = std::fs::read(out.join("payload.tar.gz")).unwrap();
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&payload[..])
        .read_to_end(&mut unpacked)
        .unwrap();
    assert!(
        contains(&unpacked, PASSWORD.as_bytes()),
        "the payload carries the resolved value"
    );
    assert!(!read(&out.join("seed/user-data")).contains(PASSWORD));

    installation.write_guest(
        guest,
        &format!("{guest}:\n  mariadb:\n    root_pw: secret:sites/db/Missing\n"),
    );
    let outcome = installation.trog(
        &[
            "--credentials",
            "new_config",
            guest,
            "--out",
            installation.out("missing").to_str().unwrap(),
        ],
        crate::harness::Stdin::Text(crate::harness::CREDENTIALS),
    );
    assert_ne!(outcome.code, 0);
    assert!(
        outcome.stderr.contains("secret:sites/db/Missing"),
        "{}",
        outcome.stderr
    );
    assert!(!outcome.stderr.contains(PASSWORD));
}

/// Ten runs at once, each making a new guest's key in one store: the store's writer lock and the
/// re-read under it keep every key (without them, each save would drop what the others added),
/// and KeePassXC reads the result.
#[test]
fn ten_concurrent_runs_adding_keys_keep_all_ten() {
    let installation = Installation::example();
    installation.store_with_fixed_keys(&[]);
    let example = std::fs::read_to_string(
        installation
            .config_dir()
            .join("recipes.d")
            .join("example.test.yaml"),
    )
    .unwrap();
    let fqdns: Vec<String> = (0..10).map(|n| format!("g{n}.example.test")).collect();
    for fqdn in &fqdns {
        installation.write_guest(fqdn, &example.replace("example.test:", &format!("{fqdn}:")));
    }
    std::thread::scope(|scope| {
        for fqdn in &fqdns {
            let installation = &installation;
            scope.spawn(move || installation.new_config(fqdn, &installation.out(fqdn)));
        }
    });
    let mut child = Command::new("keepassxc-cli")
        .args(["ls", "--quiet"])
        .arg(installation.store_path())
        .arg("trog/guests")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keepassxc-cli runs");
    writeln!(child.stdin.take().unwrap(), "{PASSPHRASE}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut listed: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.trim().to_string())
        .collect();
    listed.sort();
    let mut expected = fqdns.clone();
    expected.sort();
    assert_eq!(listed, expected);
    for fqdn in &fqdns {
        assert!(public_key_by_keepassxc(&installation, fqdn).ends_with(&format!(" trog@{fqdn}")));
    }
}
