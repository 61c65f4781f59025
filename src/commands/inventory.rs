//! `inventory [DOMAIN…] --format ssh-config|ansible`: the site's machines as other tools take
//! them, from what trog knows (recipes.d, ips.db, libvirt's leases, the secret store's pinned host
//! keys). Changes nothing of the site; writes only the files it is told to: the known_hosts file
//! of the pinned host keys (`--known-hosts`) and, for one machine, its login key
//! (`--identity-file`, 0600, created without following links).

use crate::cli::target::AnswerTimeout;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::inventory::ansible::{self, AnsibleFiles};
use crate::inventory::ssh_config::{self, file_value, PathNotExpressible};
use crate::inventory::{known_hosts, SshFiles};
use crate::model::names::DomainName;
use crate::output::events::{emit, Event};
use crate::workflow::site::site_inventory;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The first line of every known_hosts file `inventory` writes: a file without it is not
/// trog's, and is never replaced.
pub const KNOWN_HOSTS_HEADER: &str =
    "# The site's pinned host keys, written by `trog inventory`: replaced on every run.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InventoryFormat {
    /// An OpenSSH ssh_config block per machine (needs --known-hosts).
    SshConfig,
    /// An Ansible dynamic inventory, in JSON.
    Ansible,
}

#[derive(Debug, clap::Args)]
pub struct InventoryArgs {
    /// The machines to list, fully qualified (default: every domain of recipes.d).
    #[arg(value_name = "DOMAIN", value_parser = values::domain)]
    pub domains: Vec<DomainName>,
    /// What to print.
    #[arg(long, value_enum, default_value = "ssh-config")]
    pub format: InventoryFormat,
    /// Write the machines' pinned host keys into FILE (replacing one this verb wrote before) and
    /// point ssh at it. Required for ssh-config.
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// Write the login key of the one DOMAIN named into FILE (mode 0600, created without
    /// following a link; an existing file is replaced only by the same key) and use it.
    #[arg(long, value_name = "FILE", requires = "domains")]
    pub identity_file: Option<PathBuf>,
    #[command(flatten)]
    pub answer: AnswerTimeout,
}

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error(
        "--format ssh-config needs --known-hosts: the blocks pin each machine's host key there"
    )]
    NoKnownHosts,
    #[error("--identity-file writes one machine's key, and {count} are named")]
    IdentityForSeveral { count: usize },
    #[error("{domain} is not a domain of {recipes_d}")]
    UnknownDomain { domain: String, recipes_d: String },
    #[error("the secret store holds no login key for {domain}")]
    NoLoginKey { domain: String },
    #[error(transparent)]
    Path(#[from] PathNotExpressible),
    #[error("{} is not a known_hosts file trog wrote: it is left as it is", path.display())]
    NotTrogsKnownHosts { path: PathBuf },
    #[error("{} exists and does not hold {domain}'s login key: it is left as it is", path.display())]
    IdentityFileTaken { path: PathBuf, domain: String },
    #[error("{flag} {}: {why}", path.display())]
    OutputPath {
        flag: &'static str,
        path: PathBuf,
        why: &'static str,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for InventoryError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            InventoryError::NoKnownHosts
            | InventoryError::IdentityForSeveral { .. }
            | InventoryError::Path(_)
            | InventoryError::OutputPath { .. } => ExitStatus::Usage,
            InventoryError::UnknownDomain { .. } => ExitStatus::Configuration,
            InventoryError::NotTrogsKnownHosts { .. }
            | InventoryError::IdentityFileTaken { .. } => ExitStatus::Conflict,
            InventoryError::NoLoginKey { .. } | InventoryError::Write { .. } => ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            InventoryError::NoKnownHosts => {
                "add `--known-hosts FILE`, e.g. --known-hosts ~/.ssh/trog_known_hosts".into()
            }
            InventoryError::IdentityForSeveral { .. } => {
                "name one DOMAIN with --identity-file; run `trog inventory` once per key".into()
            }
            InventoryError::UnknownDomain { .. } => {
                "`trog inventory` without a DOMAIN lists every machine of recipes.d".into()
            }
            InventoryError::NoLoginKey { domain } => {
                format!("`trog provision {domain}` makes its key when it builds it")
            }
            InventoryError::Path(_) => "name the file by a plain absolute path".into(),
            InventoryError::NotTrogsKnownHosts { .. } => {
                "name a file of its own with --known-hosts, e.g. ~/.ssh/trog_known_hosts".into()
            }
            InventoryError::IdentityFileTaken { .. } => {
                "name a new file with --identity-file, or remove that one first".into()
            }
            InventoryError::OutputPath { flag, .. } => format!(
                "give {flag} a file in a folder that exists, e.g. {flag} {}",
                if *flag == "--known-hosts" {
                    "~/.ssh/trog_known_hosts"
                } else {
                    "~/.ssh/DOMAIN_key"
                }
            ),
            InventoryError::Write { .. } => {
                "check that this user may write in the file's folder, and that it has room".into()
            }
        })
    }
}

pub fn run(global: &GlobalArgs, args: InventoryArgs) -> Result<ExitStatus, Failure> {
    // What the command line asks is checked before anything is read or asked.
    let known_hosts_path = args.known_hosts.as_deref().map(absolute).transpose()?;
    if args.format == InventoryFormat::SshConfig && known_hosts_path.is_none() {
        return Err(InventoryError::NoKnownHosts.into());
    }
    if let Some(path) = &known_hosts_path {
        check_output_path("--known-hosts", path)?;
    }
    let identity = match &args.identity_file {
        Some(path) => match args.domains.as_slice() {
            [domain] => {
                let path = absolute(path)?;
                check_output_path("--identity-file", &path)?;
                Some((domain, path))
            }
            several => {
                return Err(InventoryError::IdentityForSeveral {
                    count: several.len(),
                }
                .into())
            }
        },
        None => None,
    };
    let known_hosts_value = known_hosts_path
        .as_deref()
        .map(|path| file_value(&path.to_string_lossy()))
        .transpose()
        .map_err(InventoryError::from)?;
    let identity_value = identity
        .as_ref()
        .map(|(_, path)| file_value(&path.to_string_lossy()))
        .transpose()
        .map_err(InventoryError::from)?;

    let paths = global.installation_paths();
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let gathered = site_inventory(
        &paths,
        args.answer.timeout.duration(),
        &mut credentials,
        identity.as_ref().map(|(domain, _)| *domain),
    )?;
    if let Some(warning) = &gathered.warning {
        crate::errln!("warning: {warning}");
    }
    let mut inventory = gathered.inventory;
    for domain in &args.domains {
        if !inventory
            .machines
            .iter()
            .any(|machine| machine.name == domain.as_str())
        {
            return Err(InventoryError::UnknownDomain {
                domain: domain.to_string(),
                recipes_d: paths.recipes_d.display().to_string(),
            }
            .into());
        }
    }
    if !args.domains.is_empty() {
        inventory
            .machines
            .retain(|machine| args.domains.iter().any(|d| d.as_str() == machine.name));
    }

    if let Some(path) = &known_hosts_path {
        write_known_hosts(path, &known_hosts(&inventory.machines))?;
    }
    if let Some((domain, path)) = &identity {
        let key = gathered
            .login_key
            .as_ref()
            .ok_or_else(|| InventoryError::NoLoginKey {
                domain: domain.to_string(),
            })?;
        write_identity(path, domain, key.expose().as_bytes())?;
    }

    for unreachable in &inventory.unreachable {
        crate::errln!("warning: could not ask {unreachable}");
    }
    if inventory.secret_store.is_none() && !inventory.machines.is_empty() {
        crate::errln!(
            "warning: there is no secret store {}: no machine has a pinned host key",
            paths.secrets_kdbx.display()
        );
    }
    if global.json {
        emit(&Event::Inventory(&inventory));
        return Ok(ExitStatus::Success);
    }
    let identity_raw = identity
        .as_ref()
        .map(|(domain, path)| (domain.as_str(), path.to_string_lossy().into_owned()));
    match args.format {
        InventoryFormat::SshConfig => {
            let files = SshFiles {
                known_hosts: known_hosts_value.as_deref().expect("checked above"),
                identity: identity_raw
                    .as_ref()
                    .zip(identity_value.as_deref())
                    .map(|((domain, _), value)| (*domain, value)),
            };
            crate::out!("{}", ssh_config::render(&inventory.machines, files));
        }
        InventoryFormat::Ansible => {
            let known_hosts_raw = known_hosts_path
                .as_deref()
                .map(|path| path.to_string_lossy().into_owned());
            let files = AnsibleFiles {
                known_hosts: known_hosts_raw.as_deref(),
                identity: identity_raw
                    .as_ref()
                    .map(|(domain, path)| (*domain, path.as_str())),
            };
            let json = ansible::render(&inventory.machines, files);
            crate::outln!(
                "{}",
                serde_json::to_string_pretty(&json).expect("a JSON value serialises")
            );
        }
    }
    Ok(ExitStatus::Success)
}

/// `path` made absolute against the current directory: ssh_config and Ansible read it from
/// wherever they run.
fn absolute(path: &Path) -> Result<PathBuf, InventoryError> {
    std::path::absolute(path).map_err(|source| InventoryError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Refuses a file `flag` names that could not be written, before anything is read or asked: a
/// folder, something that is not a regular file (a device, a pipe), or a file in a folder that
/// does not exist. A link is left to the writer, which replaces or refuses it without following.
fn check_output_path(flag: &'static str, path: &Path) -> Result<(), InventoryError> {
    let refuse = |why| {
        Err(InventoryError::OutputPath {
            flag,
            path: path.to_path_buf(),
            why,
        })
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => return refuse("it is a folder"),
        Ok(meta) if !meta.is_file() && !meta.file_type().is_symlink() => {
            return refuse("it is not a regular file (a device, a pipe or a socket)")
        }
        _ => {}
    }
    if !path.parent().is_some_and(Path::is_dir) {
        return refuse("its folder does not exist");
    }
    Ok(())
}

/// Replaces `path` with the known_hosts `lines` (behind [`KNOWN_HOSTS_HEADER`]): through a new
/// file beside it renamed over it, so a link there is replaced, never followed. A file that is
/// not one this verb wrote is left alone.
fn write_known_hosts(path: &Path, lines: &str) -> Result<(), InventoryError> {
    if let Some(existing) = read_without_following(path)? {
        if !existing.starts_with(KNOWN_HOSTS_HEADER.as_bytes()) {
            return Err(InventoryError::NotTrogsKnownHosts {
                path: path.to_path_buf(),
            });
        }
    }
    let text = format!("{KNOWN_HOSTS_HEADER}\n{lines}");
    replace_file(path, text.as_bytes(), 0o644)
}

/// Writes `domain`'s login key into `path`, 0600 from the moment the file exists. A file already
/// there is replaced only when it holds this very key (a rerun); anything else there, a link
/// included, is refused: a user's own key is never overwritten.
fn write_identity(path: &Path, domain: &DomainName, key: &[u8]) -> Result<(), InventoryError> {
    match read_without_following(path) {
        // Nothing there, or this very key (a rerun): written anew, 0600 whatever it was.
        Ok(None) => {}
        Ok(Some(existing)) if existing == key => {}
        Ok(Some(_)) | Err(InventoryError::Write { .. }) => {
            return Err(InventoryError::IdentityFileTaken {
                path: path.to_path_buf(),
                domain: domain.to_string(),
            })
        }
        Err(other) => return Err(other),
    }
    replace_file(path, key, 0o600)
}

/// The contents of the regular file at `path`, `None` when nothing is there; a link is not
/// followed (opening it fails).
fn read_without_following(path: &Path) -> Result<Option<Vec<u8>>, InventoryError> {
    let failed = |source| InventoryError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(failed(error)),
    };
    if !file.metadata().map_err(failed)?.is_file() {
        return Err(failed(std::io::Error::other("not a regular file")));
    }
    let mut contents = Vec::new();
    file.take(1 << 20)
        .read_to_end(&mut contents)
        .map_err(failed)?;
    Ok(Some(contents))
}

/// Writes `bytes` into a new file beside `path` (created exclusively, with `mode` from the
/// start), then renames it over `path`.
fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), InventoryError> {
    let failed = |source| InventoryError::Write {
        path: path.to_path_buf(),
        source,
    };
    let directory = path.parent().unwrap_or(Path::new("/"));
    let mut staged = tempfile::Builder::new()
        .prefix(".trog-inventory-")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(directory)
        .map_err(failed)?;
    staged
        .write_all(bytes)
        .and_then(|()| staged.as_file().sync_all())
        .map_err(failed)?;
    staged.persist(path).map_err(|error| failed(error.error))?;
    Ok(())
}
