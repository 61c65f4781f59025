//! A run refused after the store was unlocked (or created) takes back what it added to it: a
//! refused first run leaves no secrets.kdbx and no guest key behind, and a refused run on an
//! existing store leaves it as it was but for what other runs added.

use super::{quick_kdf, PASSPHRASE};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{stored_keypair, EntryPath, FieldName, Protection, SecretStore};

/// A node of libvirt's test driver: trog plans there, but cannot finish a guest on it, so a real
/// (not dry) run is refused after the store is unlocked and the guest's key made.
const NODE: &str = "<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads><active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>
  <memory>16777216</memory>
  <pool type='dir'><name>trog</name><target><path>/vms</path></target></pool>
</node>
";

fn installation(guest_args: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::write(root.path().join("node.xml"), NODE).unwrap();
    std::fs::write(
        etc.join("hypervisors.conf"),
        format!(
            "[hv1]\nlibvirt_uri = test://{}/node.xml\n",
            root.path().display()
        ),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        etc.join("recipes.yaml"),
    )
    .unwrap();
    std::fs::write(
        etc.join("recipes.d/refused.test.yaml"),
        format!(
            "refused.test:\n  _global:\n    memory: 512\n    cpus: 1\n    size: 4G\n{guest_args}"
        ),
    )
    .unwrap();
    root
}

fn provision(root: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(["--credentials", "provision"])
        .args(args)
        .arg("refused.test")
        .env("TROG_PROVISIONER_CONFIG", root.join("etc"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    write!(child.stdin.take().unwrap(), "keepass: {PASSPHRASE}\n\n").unwrap();
    child.wait_with_output().unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_first_run_refused_after_the_store_was_made_leaves_no_store_and_no_key() {
    let root = installation("");
    let store = root.path().join("etc/secrets.kdbx");
    // The same run as a dry run plans a new key (so the refusal comes after the key was made).
    let planned = provision(root.path(), &["--dry-run"]);
    assert!(planned.status.success(), "{}", said(&planned));
    assert!(!store.exists());

    let refused = provision(root.path(), &[]);
    assert_eq!(refused.status.code(), Some(8), "{}", said(&refused));
    assert!(
        said(&refused).contains("its guests cannot be reached over SSH"),
        "{}",
        said(&refused)
    );
    assert!(!store.exists(), "the refused run left {}", store.display());
    let left: Vec<_> = std::fs::read_dir(root.path().join("etc"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("kdbx"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_refused_generation_takes_back_the_store_it_made() {
    // A recipe argument naming an entry of a store that does not exist yet.
    let root = installation("  data: {site_dir: \"secret:Sites/refused/dir\"}\n");
    let refused = provision(root.path(), &[]);
    assert_eq!(refused.status.code(), Some(4), "{}", said(&refused));
    assert!(
        said(&refused).contains("secret:Sites/refused/dir"),
        "{}",
        said(&refused)
    );
    assert!(!root.path().join("etc/secrets.kdbx").exists());
}

#[test]
fn a_refused_run_on_an_existing_store_takes_back_only_the_key_it_made() {
    let root = installation("");
    let path = root.path().join("etc/secrets.kdbx");
    let mut store = SecretStore::create(&path, &Secret::new(PASSPHRASE), quick_kdf()).unwrap();
    let kept = EntryPath::new(["Sites"], "db");
    store
        .put(
            &kept,
            &FieldName::Password,
            &Secret::new("kept-value"),
            Protection::Protected,
        )
        .unwrap();
    store.save().unwrap();

    let refused = provision(root.path(), &[]);
    assert_eq!(refused.status.code(), Some(8), "{}", said(&refused));
    let store = SecretStore::open(&path, &Secret::new(PASSPHRASE)).unwrap();
    let guest = DomainName::parse("refused.test").unwrap();
    assert!(
        stored_keypair(&store, &guest).unwrap().is_none(),
        "the key stayed"
    );
    assert_eq!(
        store.get(&kept, &FieldName::Password).unwrap().expose(),
        "kept-value"
    );
}
