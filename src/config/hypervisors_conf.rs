//! `hypervisors.conf`: the fleet, one `[block]` per hypervisor, in the INI dialect the Perl
//! provisioner read with Config::Simple, so an existing file moves over unchanged.
//!
//! ```ini
//! # comments start with `#` or `;`, on a line of their own
//! [hv1]
//! libvirt_uri    = qemu+ssh://root@hv1.example.test/system
//! reserve_memory = 4096
//! max_guests     = 20
//! ```
//!
//! [`parse_fleet`] is pure (text and the file's path in, a [`Fleet`] or an error pointing at the
//! line out); [`load_fleet`] is the thin loader. [`fleet_to_build_on`] decides where a guest is
//! built when there is no fleet file.

use crate::config::bounded_read::read_problem_hint;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::hypervisor::{
    DomainType, HypervisorConfig, LibvirtUri, LOCAL_HYPERVISOR_NAME, LOCAL_LIBVIRT_URI,
};
use crate::model::names::HypervisorName;
use crate::model::system_directory::system_directory;
use crate::model::units::{Bytes, MiB};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Every key a block may hold, in the order the documentation lists them.
pub const KEYS: [&str; 9] = [
    "libvirt_uri",
    "reserve_memory",
    "reserve_disk",
    "max_guests",
    "cpu_overcommit",
    "pool_name",
    "pool_path",
    "partition",
    "domain_type",
];

/// The hypervisors of `hypervisors.conf`, in the order of the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fleet {
    pub hypervisors: Vec<HypervisorConfig>,
}

/// Where the hypervisors a command works with came from; messages name it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FleetSource {
    /// A `hypervisors.conf`.
    File { path: PathBuf },
    /// No fleet file (it would be at `missing_file`): this machine.
    ThisMachine { missing_file: PathBuf },
    /// No fleet file, and the guest's own (deprecated) `libvirt_uri`.
    GuestLibvirtUri { missing_file: PathBuf },
}

impl FleetSource {
    /// The phrase a message puts after "no hypervisor in".
    pub fn describe(&self) -> String {
        match self {
            FleetSource::File { path } => path.display().to_string(),
            FleetSource::ThisMachine { missing_file } => {
                format!("this machine (there is no {})", missing_file.display())
            }
            FleetSource::GuestLibvirtUri { missing_file } => format!(
                "the guest's libvirt_uri (there is no {})",
                missing_file.display()
            ),
        }
    }
}

/// The hypervisors one command works with, and the warning to print if a setting was ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildFleet {
    pub source: FleetSource,
    pub fleet: Fleet,
    /// Printed on stderr before anything else happens (`warning: …`).
    pub warning: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HypervisorsConfError {
    #[error("cannot read the fleet file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {what}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        what: String,
        hint: String,
    },
    #[error("{}:{line}:{column}: unknown key `{key}` in [{block}]", path.display())]
    UnknownKey {
        path: PathBuf,
        line: usize,
        column: usize,
        block: String,
        key: String,
        suggestion: Option<&'static str>,
    },
    #[error("{}:{line}:{column}: `{key}` in [{block}] has a value trog cannot use", path.display())]
    BadValue {
        path: PathBuf,
        line: usize,
        column: usize,
        block: String,
        key: String,
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{}:{line}: `{key}` is set twice in [{block}] (first on line {first_line})", path.display())]
    DuplicateKey {
        path: PathBuf,
        line: usize,
        block: String,
        key: String,
        first_line: usize,
    },
    #[error("{}:{line}: [{block}] appears twice (first on line {first_line})", path.display())]
    DuplicateBlock {
        path: PathBuf,
        line: usize,
        block: String,
        first_line: usize,
    },
    #[error("{}:{line}: [{block}] has no libvirt_uri", path.display())]
    MissingUri {
        path: PathBuf,
        line: usize,
        block: String,
    },
    #[error("{} describes no hypervisor", path.display())]
    NoBlocks { path: PathBuf },
    #[error("--hvconf names {}, which does not exist", path.display())]
    NamedFileMissing { path: PathBuf },
    #[error("there is no hypervisor named `{name}` in {} (from --hypervisor)", fleet.describe())]
    UnknownHypervisor {
        name: String,
        fleet: FleetSource,
        known: Vec<HypervisorName>,
    },
}

impl Diagnose for HypervisorsConfError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            // Only a name given on the command line is looked up by name here.
            HypervisorsConfError::UnknownHypervisor { .. } => ExitStatus::Usage,
            _ => ExitStatus::Configuration,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            HypervisorsConfError::Read { source, .. } => {
                read_problem_hint(source).unwrap_or_else(|| {
                    "check the file's permissions, or point --hvconf at another file".to_string()
                })
            }
            HypervisorsConfError::Syntax { hint, .. } => hint.clone(),
            HypervisorsConfError::UnknownKey { suggestion, .. } => {
                let known = format!("the keys are: {}", KEYS.join(", "));
                match suggestion {
                    Some(key) => format!("did you mean `{key}`? {known}"),
                    None => known,
                }
            }
            HypervisorsConfError::BadValue { key, .. } => value_hint(key).to_string(),
            HypervisorsConfError::DuplicateKey { .. } => {
                "keep one of the two lines; trog will not guess which was meant".to_string()
            }
            HypervisorsConfError::DuplicateBlock { .. } => {
                "merge the two blocks, or rename one: each hypervisor needs its own name"
                    .to_string()
            }
            HypervisorsConfError::MissingUri { .. } => {
                "add e.g. `libvirt_uri = qemu+ssh://root@hv1.example.test/system`".to_string()
            }
            HypervisorsConfError::NamedFileMissing { .. } => {
                "correct the path, or leave out --hvconf to use hypervisors.conf in the \
                 configuration directory (absent there: build on this machine)"
                    .to_string()
            }
            HypervisorsConfError::NoBlocks { .. } => {
                "add a block per hypervisor, e.g. `[hv1]` then \
                 `libvirt_uri = qemu+ssh://root@hv1.example.test/system`, or remove the file to \
                 build on this machine"
                    .to_string()
            }
            HypervisorsConfError::UnknownHypervisor { known, fleet, .. } => {
                if let FleetSource::File { .. } = fleet {
                    let names: Vec<&str> = known.iter().map(HypervisorName::as_str).collect();
                    format!("the names it has are: {}", names.join(", "))
                } else {
                    "--hypervisor and hypervisor= name a block of hypervisors.conf; create the \
                     file, or leave the name out to build on this machine"
                        .to_string()
                }
            }
        })
    }
}

/// What to write instead of a value that was refused.
fn value_hint(key: &str) -> &'static str {
    match key {
        "libvirt_uri" => {
            "write an ssh URI such as qemu+ssh://root@hv1.example.test/system, qemu:///system \
             for this machine, or test:///path/node.xml for libvirt's test driver"
        }
        "reserve_memory" => "write MiB as a number (4096) or with a unit (4G)",
        "reserve_disk" => "write GiB as a number (50) or with a unit (50G, 1T)",
        "max_guests" => "write a whole number of guests, e.g. 20",
        "cpu_overcommit" => {
            "write virtual CPUs per physical CPU as a number above 0, e.g. 4 or 1.5"
        }
        "pool_path" => {
            "write the absolute path of a folder of the pool's own, e.g. /vms or \
             /srv/vm-disks/runner"
        }
        "pool_name" => "write a libvirt pool name: letters, digits, `-`, `_` and `.`",
        "partition" => "write a cgroup partition below /machine, e.g. /machine/runner",
        "domain_type" => "write kvm, or qemu where hardware virtualisation does not work",
        _ => "see hypervisors.conf.example",
    }
}

/// Reads `hypervisors.conf` at `path`: `None` when there is no such file (no fleet).
pub fn load_fleet(path: &Path) -> Result<Option<Fleet>, HypervisorsConfError> {
    match crate::config::bounded_read::read_text_bounded(path) {
        Ok(text) => parse_fleet(&text, path).map(Some),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HypervisorsConfError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads the installation's fleet file: `None` when there is none, unless `--hvconf` named it.
pub fn load_installation_fleet(
    paths: &crate::config::paths::InstallationPaths,
) -> Result<Option<Fleet>, HypervisorsConfError> {
    match load_fleet(&paths.hypervisors_conf)? {
        None if paths.hypervisors_conf_named => Err(HypervisorsConfError::NamedFileMissing {
            path: paths.hypervisors_conf.clone(),
        }),
        fleet => Ok(fleet),
    }
}

/// Decides which hypervisors a command works with. A fleet file, when there is one, wins, and a
/// guest's deprecated `libvirt_uri` is then ignored with a warning; without one, the guest's
/// `libvirt_uri` names the only hypervisor; without either, this machine does.
pub fn fleet_to_build_on(
    fleet_file: &Path,
    fleet: Option<Fleet>,
    guest_libvirt_uri: Option<&LibvirtUri>,
) -> BuildFleet {
    let local_name = HypervisorName::parse(LOCAL_HYPERVISOR_NAME).expect("a valid name");
    match (fleet, guest_libvirt_uri) {
        (Some(fleet), uri) => BuildFleet {
            source: FleetSource::File {
                path: fleet_file.to_path_buf(),
            },
            fleet,
            warning: uri.map(|uri| {
                format!(
                    "the guest's libvirt_uri ({uri}) is ignored because {} describes the fleet; \
                     remove it, or pin the guest with hypervisor=NAME",
                    fleet_file.display()
                )
            }),
        },
        (None, Some(uri)) => BuildFleet {
            source: FleetSource::GuestLibvirtUri {
                missing_file: fleet_file.to_path_buf(),
            },
            fleet: Fleet {
                hypervisors: vec![HypervisorConfig::with_defaults(local_name, uri.clone())],
            },
            warning: None,
        },
        (None, None) => BuildFleet {
            source: FleetSource::ThisMachine {
                missing_file: fleet_file.to_path_buf(),
            },
            fleet: Fleet {
                hypervisors: vec![HypervisorConfig::with_defaults(
                    local_name,
                    LibvirtUri::parse(LOCAL_LIBVIRT_URI).expect("the local URI parses"),
                )],
            },
            warning: None,
        },
    }
}

impl BuildFleet {
    /// The same fleet with `hypervisor` its only member: what a command that names a hypervisor
    /// asks, so the rest of the fleet is never contacted.
    pub fn narrowed_to(&self, hypervisor: &HypervisorConfig) -> BuildFleet {
        BuildFleet {
            source: self.source.clone(),
            fleet: Fleet {
                hypervisors: vec![hypervisor.clone()],
            },
            warning: None,
        }
    }

    /// The hypervisor `--hypervisor NAME` (or `hypervisor=NAME`) names.
    pub fn hypervisor_named(&self, name: &str) -> Result<&HypervisorConfig, HypervisorsConfError> {
        let found = match self.source {
            FleetSource::File { .. } => self
                .fleet
                .hypervisors
                .iter()
                .find(|hypervisor| hypervisor.name.as_str() == name),
            // Without a file, a name means a block of a file that is not there.
            _ => None,
        };
        found.ok_or_else(|| HypervisorsConfError::UnknownHypervisor {
            name: name.to_string(),
            fleet: self.source.clone(),
            known: self
                .fleet
                .hypervisors
                .iter()
                .map(|h| h.name.clone())
                .collect(),
        })
    }
}

/// Parses the text of `hypervisors.conf`; `path` is only used in messages.
pub fn parse_fleet(text: &str, path: &Path) -> Result<Fleet, HypervisorsConfError> {
    if text.starts_with('\u{feff}') {
        return Err(HypervisorsConfError::Syntax {
            path: path.to_path_buf(),
            line: 1,
            column: 1,
            what: "the file starts with a byte order mark (U+FEFF), an invisible character that is no part of a `[block]` header".into(),
            hint: "save the file as UTF-8 without a byte order mark (BOM)".into(),
        });
    }
    let mut blocks: Vec<BlockDraft> = Vec::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw_line.trim();
        let indent = raw_line.len() - raw_line.trim_start().len();
        if content.is_empty() || content.starts_with('#') || content.starts_with(';') {
            continue;
        }
        let syntax = |column: usize, what: String, hint: &str| HypervisorsConfError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            what,
            hint: hint.to_string(),
        };
        if let Some(header) = content.strip_prefix('[') {
            let name = header.strip_suffix(']').ok_or_else(|| {
                syntax(
                    indent + content.len() + 1,
                    "a block header is missing its closing `]`".into(),
                    "write the header as `[name]` on a line of its own",
                )
            })?;
            let name = HypervisorName::parse(name.trim()).map_err(|error| {
                syntax(
                    indent + 2,
                    error.to_string(),
                    "name the block after the hypervisor, e.g. `[hv1]`",
                )
            })?;
            if let Some(first) = blocks.iter().find(|block| block.name == name) {
                return Err(HypervisorsConfError::DuplicateBlock {
                    path: path.to_path_buf(),
                    line,
                    block: name.to_string(),
                    first_line: first.line,
                });
            }
            blocks.push(BlockDraft {
                name,
                line,
                values: Vec::new(),
            });
            continue;
        }
        let Some((key, value)) = content.split_once('=') else {
            return Err(syntax(
                indent + 1,
                format!(
                    "`{}` is neither a `[block]` header nor a `key = value` line",
                    crate::untrusted::one_line(content)
                ),
                "write one `key = value` per line; comments start with `#` or `;`",
            ));
        };
        let key = key.trim();
        let Some(block) = blocks.last_mut() else {
            return Err(syntax(
                indent + 1,
                format!("`{key}` is set before any `[block]` header"),
                "put every setting inside the block of the hypervisor it is for, e.g. under `[hv1]`",
            ));
        };
        let value_column = indent + content.find('=').unwrap_or(0) + 2 + leading(value);
        if !KEYS.contains(&key) {
            return Err(HypervisorsConfError::UnknownKey {
                path: path.to_path_buf(),
                line,
                column: indent + 1,
                block: block.name.to_string(),
                key: key.to_string(),
                suggestion: closest_key(key),
            });
        }
        if let Some(first) = block.values.iter().find(|entry| entry.key == key) {
            return Err(HypervisorsConfError::DuplicateKey {
                path: path.to_path_buf(),
                line,
                block: block.name.to_string(),
                key: key.to_string(),
                first_line: first.line,
            });
        }
        block.values.push(ValueDraft {
            key: key.to_string(),
            value: unquote(value.trim()).to_string(),
            line,
            column: value_column,
        });
    }
    if blocks.is_empty() {
        return Err(HypervisorsConfError::NoBlocks {
            path: path.to_path_buf(),
        });
    }
    let hypervisors = blocks
        .into_iter()
        .map(|block| block.build(path))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Fleet { hypervisors })
}

fn leading(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// Config::Simple allowed a value in double or single quotes; the quotes are not part of it.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// The known key a mistyped one most likely meant: within a third of its length in edits.
fn closest_key(key: &str) -> Option<&'static str> {
    crate::did_you_mean::nearest(key, KEYS.iter().copied(), |known| known.len().div_ceil(3))
}

struct BlockDraft {
    name: HypervisorName,
    line: usize,
    values: Vec<ValueDraft>,
}

struct ValueDraft {
    key: String,
    value: String,
    line: usize,
    column: usize,
}

type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Why(String);

fn why(text: impl Into<String>) -> Cause {
    Box::new(Why(text.into()))
}

impl BlockDraft {
    fn build(self, path: &Path) -> Result<HypervisorConfig, HypervisorsConfError> {
        let uri_entry = self
            .values
            .iter()
            .find(|entry| entry.key == "libvirt_uri")
            .ok_or_else(|| HypervisorsConfError::MissingUri {
                path: path.to_path_buf(),
                line: self.line,
                block: self.name.to_string(),
            })?;
        let bad = |entry: &ValueDraft, cause: Cause| HypervisorsConfError::BadValue {
            path: path.to_path_buf(),
            line: entry.line,
            column: entry.column,
            block: self.name.to_string(),
            key: entry.key.clone(),
            cause,
        };
        for entry in &self.values {
            plain_value(&entry.value).map_err(|cause| bad(entry, cause))?;
        }
        let uri = LibvirtUri::parse(&uri_entry.value).map_err(|e| bad(uri_entry, Box::new(e)))?;
        let mut config = HypervisorConfig::with_defaults(self.name.clone(), uri);
        for entry in &self.values {
            apply(&mut config, entry).map_err(|cause| bad(entry, cause))?;
        }
        Ok(config)
    }
}

/// The longest value a key takes: a path's limit, past any URI, name or size written by hand.
const LONGEST_VALUE: usize = 4096;

/// Refuses a value no key takes: one longer than [`LONGEST_VALUE`] (not echoed whole), or one
/// with a control character (a tab inside a path or name).
fn plain_value(value: &str) -> Result<(), Cause> {
    if value.len() > LONGEST_VALUE {
        return Err(why(format!(
            "it is {} bytes long; at most {LONGEST_VALUE} are allowed",
            value.len()
        )));
    }
    if let Some(control) = value.chars().find(|c| c.is_control()) {
        return Err(why(format!(
            "it holds the control character {}",
            control.escape_default()
        )));
    }
    Ok(())
}

/// Sets one key on `config`, or says why its value cannot be used.
fn apply(config: &mut HypervisorConfig, entry: &ValueDraft) -> Result<(), Cause> {
    let value = entry.value.as_str();
    match entry.key.as_str() {
        "libvirt_uri" => {}
        "reserve_memory" => config.reserve_memory = MiB::parse(value)?,
        "reserve_disk" => config.reserve_disk = Bytes::parse_disk(value)?,
        "max_guests" => {
            let count: u32 = value
                .parse()
                .map_err(|_| why(format!("`{value}` is not a whole number")))?;
            config.max_guests = Some(count);
        }
        "cpu_overcommit" => {
            let ratio: f64 = value
                .parse()
                .map_err(|_| why(format!("`{value}` is not a number")))?;
            if !ratio.is_finite() {
                return Err(why(format!("`{value}` is not a finite number")));
            }
            if ratio <= 0.0 {
                return Err(why(format!("`{value}` is not above 0")));
            }
            config.cpu_overcommit = ratio;
        }
        "pool_name" => {
            let valid = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !valid {
                return Err(why(format!("`{value}` is not a pool name")));
            }
            config.pool_name = value.to_string();
        }
        "pool_path" => {
            if !value.starts_with('/') {
                return Err(why(format!("`{value}` is not an absolute path")));
            }
            // A pool's folder is written into as root: a `..` would put it somewhere else than
            // the path reads.
            if value.split('/').any(|part| part == "..") {
                return Err(why(format!("`{value}` climbs out of itself with `..`")));
            }
            // libvirt would make the pool's folder there and trog write volumes into it as root,
            // among the files the hypervisor's own system runs from.
            if let Some(directory) = system_directory(value) {
                let written_otherwise = if directory == value {
                    String::new()
                } else {
                    format!(" ({directory})")
                };
                return Err(why(format!(
                    "`{value}`{written_otherwise} is a directory of the hypervisor's own system: the guests' disks would be written among its files"
                )));
            }
            config.pool_path = PathBuf::from(value);
        }
        "partition" => {
            let valid = value.starts_with("/machine/")
                && value.len() > "/machine/".len()
                && !value.split('/').skip(1).any(str::is_empty);
            if !valid {
                return Err(why(format!("`{value}` is not a partition below /machine/")));
            }
            config.partition = Some(value.to_string());
        }
        "domain_type" => {
            config.domain_type = match value {
                "kvm" => DomainType::Kvm,
                "qemu" => DomainType::Qemu,
                _ => return Err(why(format!("`{value}` is neither kvm nor qemu"))),
            }
        }
        other => unreachable!("`{other}` is checked against KEYS before it is applied"),
    }
    Ok(())
}

#[cfg(test)]
#[path = "hypervisors_conf_tests.rs"]
mod tests;
