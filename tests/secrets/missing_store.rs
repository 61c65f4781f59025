//! A secret store that is missing while the installation has guests is never replaced on the quiet
//! (a new store means new keys, and every guest's seed changes with its key): `provision` and
//! `provision --dry-run` refuse before anything is written, naming the store and the guests;
//! `--new-secret-store` makes one on purpose. Beside it: a store reached through a link stays a
//! link when trog saves it, and a key file that is a FIFO is refused at once.

use super::{quick_kdf, PASSPHRASE};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{stored_keypair, SecretStore};

const GUEST: &str = "kept.test";

/// A test-driver node holding `domains` (name, whether it carries trog's tag).
fn node(domains: &[(&str, bool)]) -> String {
    let mut xml = String::from(
        "<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads><active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>
  <memory>16777216</memory>
",
    );
    // The root disks of trog's guests, as trog made them.
    xml.push_str("  <pool type='dir'><name>trog</name><target><path>/vms</path></target>\n");
    for (name, _) in domains.iter().filter(|(_, tagged)| *tagged) {
        xml.push_str(&format!(
            "    <volume type='file'><name>{name}-root.qcow2</name><capacity unit='G'>4</capacity><target><path>/vms/{name}-root.qcow2</path><format type='qcow2'/></target></volume>\n"
        ));
    }
    xml.push_str("  </pool>\n");
    for (name, tagged) in domains {
        let metadata = if *tagged {
            format!(
                "<metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='{name}' boot='b' shape='s' payload=''/></metadata>"
            )
        } else {
            String::new()
        };
        xml.push_str(&format!(
            "  <domain type='test'><name>{name}</name><memory>524288</memory><vcpu>1</vcpu><os><type>hvm</type></os>{metadata}</domain>\n"
        ));
    }
    xml.push_str("</node>\n");
    xml
}

/// An installation in `ROOT/etc` declaring GUEST, its fleet one test-driver node with `domains`.
fn installation(domains: &[(&str, bool)], global: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::write(root.path().join("node.xml"), node(domains)).unwrap();
    std::fs::write(
        etc.join("hypervisors.conf"),
        format!(
            "[hv1]\nlibvirt_uri = test://{}/node.xml\n",
            root.path().display()
        ),
    )
    .unwrap();
    let recipes =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"))
            .unwrap()
            .replace(
                "    timezone: Etc/UTC\n",
                &format!("    timezone: Etc/UTC\n{global}"),
            );
    std::fs::write(etc.join("recipes.yaml"), recipes).unwrap();
    std::fs::write(
        etc.join(format!("recipes.d/{GUEST}.yaml")),
        format!(
            "{GUEST}:\n  _global:\n    memory: 512\n    cpus: 1\n    size: 4G\n  nginx: {{}}\n"
        ),
    )
    .unwrap();
    root
}

/// `trog ARGS…` on the installation, `stdin` on its standard input; a run that has not ended
/// within a minute is killed and fails the test (a FIFO read would hang forever).
fn trog(root: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", root.join("etc"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!("trog {args:?} did not end within a minute: {output:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn provision(root: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--credentials", "provision"];
    all.extend_from_slice(args);
    all.push(GUEST);
    trog(root, &all, &format!("keepass: {PASSPHRASE}\n\n"))
}

fn said(output: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Every file under `directory`, with its contents.
fn snapshot(directory: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(snapshot(&path));
        } else {
            files.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    files.sort();
    files
}

#[test]
fn a_store_moved_away_while_a_guest_exists_is_refused_and_nothing_is_written() {
    let root = installation(&[(GUEST, true)], "");
    let before = snapshot(root.path());
    let store = root.path().join("etc/secrets.kdbx");
    for args in [&["--dry-run"][..], &[][..]] {
        let refused = provision(root.path(), args);
        let text = said(&refused);
        assert_eq!(refused.status.code(), Some(11), "{args:?}: {text}");
        assert!(
            text.contains(&format!(
                "error: the secret store {} does not exist, but this installation has guests: {GUEST} on hv1",
                store.display()
            )),
            "{args:?}: {text}"
        );
        assert!(
            text.contains("hint: restore") && text.contains("--new-secret-store"),
            "{args:?}: {text}"
        );
        assert!(!text.contains("delete volume"), "{args:?}: {text}");
        assert_eq!(
            snapshot(root.path()),
            before,
            "{args:?} wrote something (a store, a lock, ips.db, the node)"
        );
    }
}

#[test]
fn a_guest_of_another_installation_does_not_stop_a_first_run() {
    // trog's domain of another installation, and this installation's name on a domain trog did
    // not make: neither is a guest of this installation.
    let root = installation(&[("elsewhere.test", true)], "");
    let run = provision(root.path(), &[]);
    // Past the store (made, then taken back): refused only where the test driver ends every run.
    assert_eq!(run.status.code(), Some(8), "{}", said(&run));
    assert!(
        said(&run).contains("its guests cannot be reached over SSH"),
        "{}",
        said(&run)
    );
}

#[test]
fn a_new_store_is_made_deliberately_and_the_plan_shows_the_rebuild() {
    let root = installation(&[(GUEST, true)], "");
    let planned = provision(root.path(), &["--dry-run", "--new-secret-store"]);
    let text = said(&planned);
    assert_eq!(planned.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!(
            "delete volume {GUEST}-root.qcow2 (the boot inputs changed)"
        )),
        "{text}"
    );
    assert!(!root.path().join("etc/secrets.kdbx").exists(), "{text}");

    // The real run goes past the store; the test driver ends it before the guest's first step.
    let run = provision(root.path(), &["--new-secret-store"]);
    assert_eq!(run.status.code(), Some(8), "{}", said(&run));

    // With a store there, asking for a new one is refused and changes nothing.
    let store = root.path().join("etc/secrets.kdbx");
    SecretStore::create(&store, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    let before = std::fs::read(&store).unwrap();
    let refused = provision(root.path(), &["--new-secret-store"]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        said(&refused).contains(&format!(
            "--new-secret-store: the secret store {} exists",
            store.display()
        )),
        "{}",
        said(&refused)
    );
    assert_eq!(std::fs::read(&store).unwrap(), before);
}

#[test]
fn a_store_behind_a_link_stays_a_link_when_a_key_is_saved() {
    let root = installation(&[], "");
    let elsewhere = tempfile::tempdir().unwrap();
    let real = elsewhere.path().join("real.kdbx");
    SecretStore::create(&real, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    let link = root.path().join("etc/secrets.kdbx");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let out = root.path().join("out");
    let run = trog(
        root.path(),
        &[
            "--credentials",
            "new_config",
            GUEST,
            "--out",
            out.to_str().unwrap(),
        ],
        &format!("keepass: {PASSPHRASE}\n\n"),
    );
    assert!(run.status.success(), "{}", said(&run));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced by a file"
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), real);
    let store = SecretStore::open(&real, &Secret::new(PASSPHRASE)).unwrap();
    let guest = DomainName::parse(GUEST).unwrap();
    assert!(stored_keypair(&store, &guest).unwrap().is_some());
    assert_eq!(
        std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_store_link_to_nothing_is_refused_not_replaced() {
    let root = installation(&[], "");
    let link = root.path().join("etc/secrets.kdbx");
    let gone = root.path().join("unmounted/secrets.kdbx");
    std::os::unix::fs::symlink(&gone, &link).unwrap();
    for args in [&["--dry-run"][..], &[][..]] {
        let refused = provision(root.path(), args);
        assert_eq!(refused.status.code(), Some(11), "{}", said(&refused));
        assert!(
            said(&refused).contains("which is not there"),
            "{}",
            said(&refused)
        );
    }
    assert_eq!(std::fs::read_link(&link).unwrap(), gone);
    assert!(!gone.exists());
}

#[test]
fn a_key_file_that_is_a_fifo_is_refused_at_once() {
    let root = installation(&[], "    keepass_key_file: store.keyx\n");
    let key_file = root.path().join("etc/store.keyx");
    let status = Command::new("mkfifo").arg(&key_file).status().unwrap();
    assert!(status.success());
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = root.path().join("out");
    let started = Instant::now();
    let refused = trog(
        root.path(),
        &["new_config", GUEST, "--out", out.to_str().unwrap()],
        "",
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(4), "{}", said(&refused));
    assert!(
        said(&refused).contains(&format!(
            "cannot read the secret store's key file {}",
            key_file.display()
        )) && said(&refused).contains("not a regular file"),
        "{}",
        said(&refused)
    );
    assert!(!root.path().join("etc/secrets.kdbx").exists());
}
