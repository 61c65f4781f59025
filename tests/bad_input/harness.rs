//! One bad input, run against the real `trog` in a temporary installation, and what must hold of
//! the run: its exit status, an `error:` line (and a `hint:` where there is something to do), no
//! panic, no internal debug text (nor a library's `<input>` or its own `error:` inside trog's), a
//! configuration refusal caused by an edited text file pointing at `<path>:<line>` of it, and not
//! one byte changed under the temporary root.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{guest_keypair, SecretStore, StoreKdf};

/// The passphrase of the store [`Case::with_store`] puts in place.
pub const PASSPHRASE: &str = "corpus passphrase";
/// The guest every installation describes.
pub const GUEST: &str = "example.test";
/// Its file.
pub const GUEST_FILE: &str = "etc/recipes.d/example.test.yaml";
/// A run that does not end in this long is a hang, which is a defect of its own.
const LONGEST_RUN: Duration = Duration::from_secs(30);

/// The guest's file with `global` as its `_global` lines (indented by four) and `recipes` as the
/// rest (indented by two).
pub fn guest(global: &str, recipes: &str) -> String {
    let global: String = global.lines().map(|line| format!("    {line}\n")).collect();
    let recipes: String = recipes.lines().map(|line| format!("  {line}\n")).collect();
    format!("example.test:\n  _global:\n{global}{recipes}")
}

/// The guest's file with one `_global` line changed from the example's.
pub fn guest_with(global_line: &str) -> String {
    guest(&format!("cpus: 1\nsize: 4G\n{global_line}"), "nginx: {}")
}

/// A change to the temporary root before the run; paths are relative to it (`etc/` is the
/// installation, `recipes/` the cookbook, `home/` the user's home).
#[derive(Clone)]
pub enum Edit {
    Write(String, Vec<u8>),
    Remove(String),
    Link(String, String),
    Dir(String),
}

pub fn write(path: &str, text: impl Into<String>) -> Edit {
    Edit::Write(path.into(), text.into().into_bytes())
}
pub fn write_bytes(path: &str, bytes: &[u8]) -> Edit {
    Edit::Write(path.into(), bytes.to_vec())
}
pub fn remove(path: &str) -> Edit {
    Edit::Remove(path.into())
}
pub fn link(path: &str, target: &str) -> Edit {
    Edit::Link(path.into(), target.into())
}
pub fn dir(path: &str) -> Edit {
    Edit::Dir(path.into())
}

/// What is written to standard input.
#[derive(Clone)]
pub enum Input {
    /// Nothing: standard input is /dev/null.
    Nothing,
    /// This text, then the end of input.
    Text(String),
    /// This text, and standard input is kept open until the run ends.
    HeldOpen(String),
}

/// One bad input and what trog must answer.
#[derive(Clone)]
pub struct Case {
    pub name: String,
    pub edits: Vec<Edit>,
    pub args: Vec<String>,
    pub input: Input,
    pub status: i32,
    pub hint: bool,
    pub says: Vec<String>,
    pub store: bool,
    /// Which edited file the message must point into as `<path>:<line>`: by default (`None`) the
    /// first text file a configuration refusal's case writes; `Some("")` when the fault has no
    /// line to point at (a file's name, a missing file, an archive).
    pub at: Option<String>,
}

/// A case: `args` (split on spaces; `{ROOT}` is the temporary root) must exit with `status`.
pub fn case(name: &str, args: &str, status: i32) -> Case {
    Case {
        name: name.to_string(),
        edits: Vec::new(),
        args: args.split(' ').map(str::to_string).collect(),
        input: Input::Nothing,
        status,
        hint: true,
        says: Vec::new(),
        store: false,
        at: None,
    }
}

impl Case {
    pub fn edit(mut self, edit: Edit) -> Case {
        self.edits.push(edit);
        self
    }
    /// Hands the store's passphrase in with `--credentials`.
    pub fn credentials(self) -> Case {
        self.input(&format!("keepass: {PASSPHRASE}\n\n"))
    }
    /// Hands `text` in with `--credentials`.
    pub fn input(mut self, text: &str) -> Case {
        self.args.insert(0, "--credentials".into());
        self.input = Input::Text(text.into());
        self
    }
    /// Hands `text` in with `--credentials` and keeps standard input open.
    pub fn held_open(mut self, text: &str) -> Case {
        self.args.insert(0, "--credentials".into());
        self.input = Input::HeldOpen(text.into());
        self
    }
    /// The installation has a store with the guest's key pair in it.
    pub fn with_store(mut self) -> Case {
        self.store = true;
        self
    }
    /// The message must contain `text`.
    pub fn says(mut self, text: &str) -> Case {
        self.says.push(text.into());
        self
    }
    /// The message must point at a line of `path` (relative to the temporary root), not of the
    /// first file the case writes.
    pub fn at(mut self, path: &str) -> Case {
        self.at = Some(path.into());
        self
    }
    /// The fault is in no line of the files the case writes (a file's name, a file that is
    /// missing, a folder, an archive): no `<path>:<line>` required.
    pub fn no_line(mut self) -> Case {
        self.at = Some(String::new());
        self
    }
    /// A refusal with nothing to do about it but what the message says (no hint required).
    pub fn no_hint(mut self) -> Case {
        self.hint = false;
        self
    }
}

/// The store every `with_store` case starts from, made once: a weak KDF keeps opening it fast.
pub fn store_bytes() -> &'static [u8] {
    static STORE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.kdbx");
        let weak = StoreKdf {
            memory_mib: 1,
            iterations: 1,
            parallelism: 1,
        };
        let mut store = SecretStore::create(&path, &Secret::new(PASSPHRASE), weak).unwrap();
        let domain = DomainName::parse(GUEST).unwrap();
        guest_keypair(&mut store, &domain, &mut rand::rngs::OsRng).unwrap();
        std::fs::read(&path).unwrap()
    })
}

/// A libvirt test-driver hypervisor with room for the example guest.
const NODE: &str = "<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads><active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>
  <memory>16777216</memory>
  <pool type='dir'><name>trog</name><target><path>/vms</path></target></pool>
</node>
";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A temporary root: `etc/` (the example installation on one test-driver hypervisor),
/// `recipes/` (the shipped recipes), `home/`, `node.xml`.
pub fn root(with_store: bool) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&repo.join("etc"), &root.path().join("etc"));
    std::fs::remove_file(root.path().join("etc/hypervisors.conf.example")).unwrap();
    copy_dir(&repo.join("recipes"), &root.path().join("recipes"));
    std::fs::create_dir(root.path().join("home")).unwrap();
    std::fs::write(root.path().join("node.xml"), NODE).unwrap();
    std::fs::write(
        root.path().join("etc/hypervisors.conf"),
        format!(
            "[hv1]\nlibvirt_uri = test://{}/node.xml\n",
            root.path().display()
        ),
    )
    .unwrap();
    if with_store {
        std::fs::write(root.path().join("etc/secrets.kdbx"), store_bytes()).unwrap();
        std::fs::set_permissions(
            root.path().join("etc/secrets.kdbx"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    root
}

fn apply(root: &Path, edit: &Edit) {
    let placed = |path: &str| {
        let path = root.join(path.replace("{ROOT}", &root.display().to_string()));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        path
    };
    let fill = |text: &[u8]| {
        String::from_utf8(text.to_vec())
            .map(|text| {
                text.replace("{ROOT}", &root.display().to_string())
                    .into_bytes()
            })
            .unwrap_or_else(|error| error.into_bytes())
    };
    match edit {
        Edit::Write(path, bytes) => std::fs::write(placed(path), fill(bytes)).unwrap(),
        Edit::Remove(path) => {
            let path = root.join(path);
            if path.is_dir() {
                std::fs::remove_dir_all(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
        // A link or a folder takes the place of a file the example installation has.
        Edit::Link(path, target) => {
            let target = target.replace("{ROOT}", &root.display().to_string());
            let path = placed(path);
            if path.is_file() {
                std::fs::remove_file(&path).unwrap();
            }
            std::os::unix::fs::symlink(target, path).unwrap()
        }
        Edit::Dir(path) => {
            let path = placed(path);
            if path.is_file() {
                std::fs::remove_file(&path).unwrap();
            }
            std::fs::create_dir_all(path).unwrap()
        }
    }
}

/// Every file, folder and link under `dir`: its kind, mode and contents (links not followed).
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            let mode = metadata.mode() & 0o7777;
            let description = if metadata.file_type().is_symlink() {
                format!("link to {}", std::fs::read_link(&path).unwrap().display())
            } else if metadata.is_dir() {
                pending.push(path.clone());
                format!("folder {mode:o}")
            } else if metadata.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                format!("file {mode:o} {} bytes {:x?}", bytes.len(), digest(&bytes))
            } else {
                format!("special {mode:o}")
            };
            seen.insert(path.strip_prefix(dir).unwrap().to_path_buf(), description);
        }
    }
    seen
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// The edited text file a configuration refusal must point into, if any: a file with lines (UTF-8,
/// something besides blanks) that the case writes, or the one it names with [`Case::at`].
pub fn file_with_lines(case: &Case) -> Option<String> {
    const CONFIG: i32 = 3;
    if case.status != CONFIG {
        return None;
    }
    if let Some(at) = &case.at {
        return (!at.is_empty()).then(|| at.clone());
    }
    case.edits.iter().find_map(|edit| match edit {
        Edit::Write(path, bytes) => std::str::from_utf8(bytes)
            .ok()
            .filter(|text| !text.trim().is_empty())
            .map(|_| path.clone()),
        _ => None,
    })
}

/// Whether `message` points at a line of `path` (relative to the root): `…/<path>:<line>`.
pub fn points_at_line(message: &str, path: &str) -> bool {
    message.match_indices(path).any(|(index, _)| {
        let rest = &message[index + path.len()..];
        rest.strip_prefix(':')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// Internal text that must never reach a user: Debug output of Rust values and panics, a
/// library's name for its input, and a library's own `error:` inside trog's.
pub fn debug_text(text: &str) -> Option<&'static str> {
    if let Some(first) = text.find("error:") {
        if text[first + "error:".len()..].contains("error:") {
            return Some("a nested `error:`");
        }
    }
    const MARKERS: [&str; 11] = [
        "<input>",
        "Some(",
        "Ok(",
        "Err(",
        "Os { code",
        "kind: ",
        "Custom {",
        "panicked",
        "RUST_BACKTRACE",
        "\\\"",
        "Error {",
    ];
    if let Some(marker) = MARKERS.iter().find(|marker| text.contains(*marker)) {
        return Some(marker);
    }
    // `Name { field: …` is a struct's Debug.
    let words: Vec<&str> = text.split_whitespace().collect();
    for window in words.windows(3) {
        if window[0].starts_with(|c: char| c.is_ascii_uppercase())
            && window[0].chars().all(|c| c.is_ascii_alphanumeric())
            && window[1] == "{"
            && window[2].ends_with(':')
        {
            return Some("a struct's Debug");
        }
    }
    None
}

/// Runs `case` and says what is wrong with how trog answered, if anything.
pub fn run(case: &Case) -> Result<(), String> {
    let root = root(case.store);
    for edit in &case.edits {
        apply(root.path(), edit);
    }
    let before = snapshot(root.path());
    let args: Vec<String> = case
        .args
        .iter()
        .map(|arg| arg.replace("{ROOT}", &root.path().display().to_string()))
        .collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_trog"));
    command
        .args(&args)
        .current_dir(root.path().join("home"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TROG_PROVISIONER_CONFIG", root.path().join("etc"))
        .env("TROG_RECIPES", root.path().join("recipes"))
        .env("HOME", root.path().join("home"))
        .env("XDG_CACHE_HOME", root.path().join("home/.cache"))
        .stdin(match case.input {
            Input::Nothing => Stdio::null(),
            _ => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // No controlling terminal, as under cron or a web application: nothing can be asked.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    // Read as the run writes: a long message must not fill a pipe and stop the run.
    let reader = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout_reader = reader(Box::new(child.stdout.take().unwrap()));
    let stderr_reader = reader(Box::new(child.stderr.take().unwrap()));
    let mut held = None;
    match &case.input {
        Input::Nothing => {}
        Input::Text(text) => {
            let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
        }
        Input::HeldOpen(text) => {
            let mut stdin = child.stdin.take().unwrap();
            let _ = stdin.write_all(text.as_bytes());
            held = Some(stdin);
        }
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LONGEST_RUN {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {LONGEST_RUN:?}: a hang"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(held);
    let output = std::process::Output {
        status,
        stdout: stdout_reader.join().unwrap(),
        stderr: stderr_reader.join().unwrap(),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown = |why: String| {
        Err(format!(
            "{why}\n    args: {}\n    status: {:?}\n    stdout: {}\n    stderr: {}",
            args.join(" "),
            status.code(),
            stdout.trim_end().replace('\n', "\n            "),
            stderr.trim_end().replace('\n', "\n            ")
        ))
    };
    if status.code() != Some(case.status) {
        return shown(format!(
            "exit status {:?}, not {}",
            status.code(),
            case.status
        ));
    }
    let json = args.iter().any(|arg| arg == "--json");
    let message = if json { &stdout } else { &stderr };
    if !message.contains("error") {
        return shown("no error message".into());
    }
    if !json && !stderr.lines().any(|line| line.starts_with("error: ")) {
        return shown("no `error:` line".into());
    }
    if case.hint && !message.contains("hint") {
        return shown("no hint".into());
    }
    for text in &case.says {
        if !message.contains(text.as_str()) {
            return shown(format!("the message does not say `{text}`"));
        }
    }
    if let Some(marker) = debug_text(&stderr).or_else(|| debug_text(&stdout)) {
        return shown(format!("internal debug text ({marker})"));
    }
    if let Some(path) = file_with_lines(case) {
        if !points_at_line(message, &path) {
            return shown(format!(
                "the message does not point at a line: `{path}:LINE`"
            ));
        }
    }
    if stderr.contains(PASSPHRASE) || stdout.contains(PASSPHRASE) {
        return shown("the passphrase was printed".into());
    }
    let after = snapshot(root.path());
    if before != after {
        let changed: Vec<String> = before
            .keys()
            .chain(after.keys())
            .filter(|path| before.get(*path) != after.get(*path))
            .map(|path| {
                format!(
                    "{}: {} -> {}",
                    path.display(),
                    before.get(path).map_or("absent", String::as_str),
                    after.get(path).map_or("absent", String::as_str)
                )
            })
            .collect();
        return shown(format!("changed on disk: {}", changed.join("; ")));
    }
    Ok(())
}
