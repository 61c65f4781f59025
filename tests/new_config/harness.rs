//! A temporary copy of the repository's example installation (`etc/`) and runs of the built
//! `trog new_config` against it: always in a new session (`setsid`), so there is no controlling
//! terminal to ask on, with standard input either the credentials or `/dev/null`, and a deadline.

use rand::SeedableRng;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{guest_keypair, SecretStore, StoreKdf};

/// The passphrase of every store the tests make or have trog make.
pub const PASSPHRASE: &str = "correct horse battery staple";
/// Credentials as a caller hands them in.
pub const CREDENTIALS: &str = "keepass: correct horse battery staple\n\n";
/// How long a run may take; one that waits for a terminal or for standard input never finishes.
const RUN_DEADLINE: Duration = Duration::from_secs(60);
/// A cheap KDF for the stores the tests make themselves (trog's own choice is tested elsewhere).
const TEST_KDF: StoreKdf = StoreKdf {
    memory_mib: 8,
    iterations: 2,
    parallelism: 1,
};

/// What standard input of a run holds.
pub enum Stdin<'a> {
    /// Written to a pipe that is then closed.
    Text(&'a str),
    /// `/dev/null`: nothing handed in.
    Null,
}

/// How a run of trog ended.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// A temporary installation: `<root>/etc` copied from the repository, outputs under `<root>`.
pub struct Installation {
    root: tempfile::TempDir,
}

impl Installation {
    /// A copy of the repository's `etc/`.
    pub fn example() -> Installation {
        let root = tempfile::tempdir().unwrap();
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("etc"),
            &root.path().join("etc"),
        );
        Installation { root }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn config_dir(&self) -> PathBuf {
        self.root().join("etc")
    }

    pub fn store_path(&self) -> PathBuf {
        self.config_dir().join("secrets.kdbx")
    }

    /// Where a test asks trog to write (`--out`).
    pub fn out(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Writes `recipes.d/<fqdn>.yaml`.
    pub fn write_guest(&self, fqdn: &str, yaml: &str) {
        std::fs::write(
            self.config_dir()
                .join("recipes.d")
                .join(format!("{fqdn}.yaml")),
            yaml,
        )
        .unwrap();
    }

    /// Writes a site file, `recipes.d/<fqdn>/<name>`.
    pub fn write_site_file(&self, fqdn: &str, name: &str, contents: &str) {
        let dir = self.config_dir().join("recipes.d").join(fqdn);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), contents).unwrap();
    }

    /// Makes the store with a key pair for each of `fqdns` drawn from a seeded generator, so the
    /// guests' keys, and everything derived from them, are the same on every run of the tests.
    pub fn store_with_fixed_keys(&self, fqdns: &[&str]) {
        let mut store =
            SecretStore::create(&self.store_path(), &Secret::new(PASSPHRASE), TEST_KDF).unwrap();
        for (seed, fqdn) in fqdns.iter().enumerate() {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 1);
            guest_keypair(&mut store, &DomainName::parse(fqdn).unwrap(), &mut rng).unwrap();
        }
    }

    /// Opens the store the way trog does.
    pub fn open_store(&self) -> SecretStore {
        SecretStore::open(&self.store_path(), &Secret::new(PASSPHRASE)).unwrap()
    }

    /// Runs `trog ARGS…` with this installation, from its root directory.
    pub fn trog(&self, args: &[&str], stdin: Stdin) -> Outcome {
        let mut command = Command::new("setsid");
        command
            .arg("--wait")
            .arg(env!("CARGO_BIN_EXE_trog"))
            .args(args)
            .current_dir(self.root())
            .env("TROG_PROVISIONER_CONFIG", self.config_dir())
            .env_remove(trog::cookbook::load::RECIPES_DIR_VARIABLE)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match stdin {
            Stdin::Text(_) => command.stdin(Stdio::piped()),
            Stdin::Null => command.stdin(Stdio::null()),
        };
        let started = Instant::now();
        let mut child = command.spawn().expect("setsid (util-linux) runs");
        if let Stdin::Text(text) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(text.as_bytes()).unwrap();
        }
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > RUN_DEADLINE {
                child.kill().unwrap();
                panic!("trog {args:?} was still running after {RUN_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = started.elapsed();
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        Outcome {
            code: status.code().expect("trog exits, it is not killed"),
            stdout: crate::root_warning::without_root_warning(&stdout),
            stderr: crate::root_warning::without_root_warning(&stderr),
            elapsed,
        }
    }

    /// `trog --credentials new_config FQDN --out OUT` with the passphrase handed in, asking for a
    /// new store when there is none (this installation has no guests); must succeed.
    pub fn new_config(&self, fqdn: &str, out: &Path) -> Outcome {
        let mut args = vec![
            "--credentials",
            "new_config",
            fqdn,
            "--out",
            out.to_str().unwrap(),
        ];
        if !self.store_path().exists() {
            args.push("--new-secret-store");
        }
        let outcome = self.trog(&args, Stdin::Text(CREDENTIALS));
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        outcome
    }

    /// Replaces this installation's paths in `text` by `[ROOT]`.
    pub fn redact_paths(&self, text: &str) -> String {
        text.replace(self.root().to_str().unwrap(), "[ROOT]")
    }

    /// Every file below the root, by path relative to it, with its contents.
    pub fn every_file(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        files_below(self.root())
    }
}

/// Every file below `dir`, by path relative to it, with its contents.
pub fn files_below(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_path_buf();
                files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (relative, contents) in files_below(from) {
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, contents).unwrap();
    }
}

/// The text of `path`.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Runs the shell script `script` in a mount namespace of its own, so the tmpfs it mounts over
/// this machine's directories (/etc/apt, apt's state) are gone when it ends; returns whether it
/// succeeded and what it printed, standard output then standard error.
pub fn in_own_mount_namespace(script: &str) -> (bool, String) {
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .output()
        .unwrap_or_else(|error| panic!("unshare runs: {error}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

/// Runs an oracle program; returns its standard output, failing the test if it fails.
pub fn oracle(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{program} runs: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}
