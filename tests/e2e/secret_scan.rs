//! No secret in anything the guest's life printed, logged or planned: the standard output and
//! error of every verb run (`run_verb` and the background runs record them), `provision --dry-run`
//! as text and as `--json` events, every file under the installation, the hypervisor's logs of the
//! domain and the finish log on the guest. The secrets looked for: the store's passphrase, the
//! guest's private key as the store holds it, and a value a recipe argument takes from the store
//! (`secret:`), planted before the first run and shown to have reached the guest.

use crate::support::{printed, record_printed, run_verb, PASSPHRASE};
use rand::RngCore;
use std::path::{Path, PathBuf};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{stored_keypair, EntryPath, FieldName, Protection, SecretStore, StoreKdf};

/// Where the recipe argument's value is kept, and the reference the guest's file holds.
const ENTRY_GROUP: &str = "E2E";
const ENTRY_TITLE: &str = "Site";
const ENTRY_FIELD: &str = "Token";

/// Below the pool (the guest's own disks, which hold its payload by design) nothing is looked at;
/// nor at a file this large (the cached base image: a verified copy of its download).
const LARGEST_FILE_SCANNED: u64 = 64 << 20;

/// A secret value placed where a recipe argument takes it from.
pub struct PlantedSecret {
    installation: PathBuf,
    domain: DomainName,
    /// What only the store and the guest's rendered payload may hold.
    value: String,
}

/// Before the first run: a store holding a fresh random value, and the `data` recipe's
/// `make_target` taking it from there (a `make` variable, `E2E_TOKEN=…`, which the site's
/// Makefile ignores and make does not echo).
pub fn plant(installation: &Path, domain: &DomainName) -> PlantedSecret {
    let mut random = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut random);
    let value: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    let weak = StoreKdf {
        memory_mib: 8,
        iterations: 2,
        parallelism: 1,
    };
    let mut store = SecretStore::create(
        &installation.join("secrets.kdbx"),
        &Secret::new(PASSPHRASE),
        weak,
    )
    .unwrap();
    store
        .put(
            &EntryPath::new([ENTRY_GROUP], ENTRY_TITLE),
            &FieldName::parse(ENTRY_FIELD),
            &Secret::new(format!("E2E_TOKEN={value}")),
            Protection::Protected,
        )
        .unwrap();
    store.save().unwrap();
    let guest_file = installation
        .join("recipes.d")
        .join(format!("{domain}.yaml"));
    let declared = std::fs::read_to_string(&guest_file).unwrap();
    let with_reference = declared.replace(
        "  data: {}\n",
        &format!(
            "  data:\n    make_target: \"secret:{ENTRY_GROUP}/{ENTRY_TITLE}/{ENTRY_FIELD}\"\n"
        ),
    );
    assert_ne!(
        declared, with_reference,
        "the guest's file has no `data: {{}}` line"
    );
    std::fs::write(&guest_file, with_reference).unwrap();
    PlantedSecret {
        installation: installation.to_path_buf(),
        domain: domain.clone(),
        value,
    }
}

impl PlantedSecret {
    /// Once the guest is first finished: the value reached its Makefile (the site's Makefile
    /// kept its digest, never the value), so its absence elsewhere means something.
    pub fn reached_the_guest(&self, on_guest: &dyn Fn(&str) -> String) {
        use sha2::{Digest, Sha256};
        let reached = on_guest("cat /srv/site-token.sha256");
        assert_eq!(
            reached.trim(),
            hex::encode(Sha256::digest(self.value.as_bytes())),
            "the secret did not reach the guest's Makefile"
        );
    }

    /// While the guest runs, finished: the payload that carried the value is gone and nothing
    /// under /var/lib/trog holds it; the finish's records stay (its log, kept for the scan, its
    /// status and digest, and the empty file of the lock held while make ran), and the first
    /// boot's (the distro recipe's commands, their output and status), beside what the recipes'
    /// scripts record there of their own (a folder named after a recipe, such as the mounts the
    /// vm recipe made).
    pub fn read_from_guest(&self, on_guest: &dyn Fn(&str) -> String) {
        let left = on_guest(&format!(
            "sudo grep -rlF {} /var/lib/trog || true; sudo find /var/lib/trog -mindepth 1 -maxdepth 1 -printf '%y %f\\n'",
            self.value
        ));
        let recipes = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
        let mut files: Vec<&str> = Vec::new();
        for entry in left.lines() {
            match entry.split_once(' ') {
                Some(("d", name)) if recipes.join(name).is_dir() => {}
                Some(("f", name)) => files.push(name),
                _ => panic!(
                    "the payload (with the guest's secrets) stayed on the guest: {entry}\n{left}"
                ),
            }
        }
        files.sort();
        assert_eq!(
            files,
            [
                "finish.digest",
                "finish.log",
                "finish.running",
                "finish.status",
                "first-boot-commands.log",
                "first-boot-commands.started",
                "first-boot-commands.status"
            ],
            "the payload (with the guest's secrets) stayed on the guest"
        );
        record_printed(
            "the finish log on the guest",
            &on_guest("sudo cat /var/lib/trog/finish.log"),
        );
    }

    /// At the end of the guest's life: plans once more (text and JSON), then looks for every
    /// secret in everything recorded, every file of the installation and the domain's logs.
    pub fn assert_nothing_leaked(&self) {
        let domain = self.domain.as_str();
        for args in [
            vec!["--dry-run", domain],
            vec!["--dry-run", "--json", domain],
        ] {
            let planned = run_verb("provision", &self.installation, &args);
            assert!(
                planned.status.success(),
                "{}",
                String::from_utf8_lossy(&planned.stderr)
            );
        }
        let mut places: Vec<(String, Vec<u8>)> = printed()
            .into_iter()
            .map(|(what, text)| (what, text.into_bytes()))
            .collect();
        assert!(
            places.len() > 10,
            "too little was recorded to mean anything: {} outputs",
            places.len()
        );
        places.extend(files_under(&self.installation));
        for log in [
            format!("/var/log/libvirt/qemu/{domain}.log"),
            trog::generate::desired::serial_log_path(&self.domain),
        ] {
            if let Ok(bytes) = std::fs::read(&log) {
                places.push((log, bytes));
            }
        }
        let leaks = find_leaks(&places, &self.secrets());
        assert!(leaks.is_empty(), "secrets found:\n{}", leaks.join("\n"));
    }

    /// Every secret of this installation, by name.
    fn secrets(&self) -> Vec<(String, String)> {
        let store = SecretStore::open(
            &self.installation.join("secrets.kdbx"),
            &Secret::new(PASSPHRASE),
        )
        .unwrap();
        let keypair = stored_keypair(&store, &self.domain)
            .unwrap()
            .expect("the guest's key is in the store");
        let mut secrets = vec![
            ("the store's passphrase".to_string(), PASSPHRASE.to_string()),
            (
                "the recipe argument's secret".to_string(),
                self.value.clone(),
            ),
        ];
        secrets.extend(private_key_needles(keypair.private_key_openssh().expose()));
        secrets
    }
}

/// The guest's private key, and each line of its body alone: a key printed in part is found too.
fn private_key_needles(private_key: &str) -> Vec<(String, String)> {
    let mut needles = vec![(
        "the guest's private key".to_string(),
        private_key.trim().to_string(),
    )];
    for (number, line) in private_key
        .lines()
        .filter(|line| !line.starts_with("-----") && line.trim().len() >= 16)
        .enumerate()
    {
        needles.push((
            format!("line {} of the guest's private key", number + 1),
            line.trim().to_string(),
        ));
    }
    needles
}

/// Every regular file under `root`, but the pool's and the largest.
fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().map(Result::unwrap) {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() && path != root.join("pool") {
                folders.push(path);
            } else if kind.is_file() && entry.metadata().unwrap().len() <= LARGEST_FILE_SCANNED {
                found.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    found
}

/// Each place where a secret occurs: `(where, bytes)` searched for `(name, value)`.
fn find_leaks(places: &[(String, Vec<u8>)], secrets: &[(String, String)]) -> Vec<String> {
    let mut leaks = Vec::new();
    for (place, bytes) in places {
        for (name, value) in secrets {
            let needle = value.as_bytes();
            if !needle.is_empty() && bytes.windows(needle.len()).any(|window| window == needle) {
                leaks.push(format!("{name} in {place}"));
            }
        }
    }
    leaks
}

#[test]
fn the_scan_finds_a_planted_secret_in_output_and_in_files() {
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nQyNTUxOQAAACDplanted0000000000000000000\n-----END OPENSSH PRIVATE KEY-----\n";
    let mut secrets = vec![("the passphrase".to_string(), "pass-4711".to_string())];
    secrets.extend(private_key_needles(key));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("locks")).unwrap();
    std::fs::write(dir.path().join("locks/guest"), b"held by pid 7, pass-4711").unwrap();
    std::fs::create_dir_all(dir.path().join("pool")).unwrap();
    std::fs::write(dir.path().join("pool/root.qcow2"), b"pass-4711").unwrap();
    let mut places = vec![
        ("clean output".to_string(), b"provision: converged".to_vec()),
        (
            "an error".to_string(),
            b"error: key QyNTUxOQAAACDplanted0000000000000000000 refused".to_vec(),
        ),
    ];
    places.extend(files_under(dir.path()));
    let leaks = find_leaks(&places, &secrets);
    assert_eq!(
        leaks,
        vec![
            "line 2 of the guest's private key in an error".to_string(),
            format!(
                "the passphrase in {}",
                dir.path().join("locks/guest").display()
            ),
        ]
    );
}
