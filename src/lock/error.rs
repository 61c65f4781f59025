//! How taking a lock fails, here or on a hypervisor.

use super::hypervisor::{HYPERVISOR_LOCK_DIR, HYPERVISOR_LOCK_GROUP};
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::machine::MachineError;
use std::path::PathBuf;

/// Why the installation's `locks/` directory is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirProblem {
    /// A symbolic link: the locks would be wherever it points.
    SymbolicLink,
    NotADirectory,
    /// Every user can write it, so any of them could put a link where a lock file goes.
    WritableByOthers {
        mode: u32,
    },
}

impl std::fmt::Display for DirProblem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirProblem::SymbolicLink => write!(formatter, "is a symbolic link"),
            DirProblem::NotADirectory => write!(formatter, "is not a directory"),
            DirProblem::WritableByOthers { mode } => {
                write!(formatter, "is writable by every user (mode {mode:04o})")
            }
        }
    }
}

/// A lock directory on a hypervisor (or its parent) as `stat` describes it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundDir {
    /// The lock directory, or its parent when `parent`.
    pub path: String,
    pub parent: bool,
    pub owner: String,
    pub group: String,
    /// In octal, as `stat` prints it.
    pub mode: String,
    /// `directory`, `symbolic link`…
    pub kind: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot make the lock directory {}", .dir.display())]
    MakeDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the lock directory {} {problem}: trog does not lock there", .dir.display())]
    UnsafeDir { dir: PathBuf, problem: DirProblem },
    #[error(
        "the lock file {} is a symbolic link: trog does not follow a link where a lock file goes",
        .path.display()
    )]
    LinkInPlace { path: PathBuf },
    #[error("the lock file {} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    #[error("cannot open the lock file {}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot take the lock {}", .path.display())]
    Take {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{subject} is busy: {holder} holds it, and it was not let go within {waited_seconds}s"
    )]
    Busy {
        subject: String,
        holder: String,
        waited_seconds: u64,
        path: PathBuf,
    },
    #[error(
        "{subject} is busy on the hypervisor {hypervisor}: {holder} holds it, and it was not let \
         go within {waited_seconds}s"
    )]
    BusyOnHypervisor {
        subject: String,
        hypervisor: String,
        holder: String,
        waited_seconds: u64,
        /// The lock file there.
        path: String,
    },
    #[error("cannot take the lock of {subject} on the hypervisor {hypervisor}")]
    OnHypervisor {
        subject: String,
        hypervisor: String,
        #[source]
        source: Box<MachineError>,
    },
    #[error("cannot make trog's lock directory {dir} on the hypervisor {hypervisor} (as root)")]
    MakeDirOnHypervisor {
        hypervisor: String,
        dir: String,
        group: String,
        #[source]
        source: Box<MachineError>,
    },
    #[error(
        "trog's lock directory {dir} on the hypervisor {hypervisor} was made as root, yet its \
         login does not find it"
    )]
    NoDirOnHypervisor { hypervisor: String, dir: String },
    #[error(
        "{} on the hypervisor {hypervisor} is not safe to lock in: a {} of owner {}, group {}, \
         mode {}",
        if .found.parent { format!("the parent of trog's lock directory, {},", .found.path) }
        else { format!("trog's lock directory {}", .found.path) },
        .found.kind, .found.owner, .found.group, .found.mode
    )]
    UnsafeDirOnHypervisor {
        hypervisor: String,
        /// What is there (boxed: the error travels up every caller's `Result`).
        found: Box<FoundDir>,
        /// The group of trog's logins there, which the directory is made for.
        lock_group: String,
    },
}

impl Diagnose for LockError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            LockError::Busy { .. } | LockError::BusyOnHypervisor { .. } => ExitStatus::Busy,
            LockError::OnHypervisor { source, .. }
            | LockError::MakeDirOnHypervisor { source, .. } => source.exit_status(),
            LockError::NoDirOnHypervisor { .. } | LockError::UnsafeDirOnHypervisor { .. } => {
                ExitStatus::Hypervisor
            }
            _ => ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            LockError::Busy { path, .. } => Some(format!(
                "try again when that run has ended, or wait longer with `--wait SECONDS`; \
                 the lock is {} (a lock of a process that has died is taken over by itself)",
                path.display()
            )),
            LockError::BusyOnHypervisor {
                path, hypervisor, ..
            } => Some(format!(
                "try again when that run has ended, or wait longer with `--wait SECONDS`; \
                 the lock is {path} on {hypervisor} (a lock of a run that has died is let go by \
                 itself)"
            )),
            LockError::OnHypervisor { source, .. } => Some(source.hint().unwrap_or_else(|| {
                format!(
                    "trog's login on the hypervisor locks in {HYPERVISOR_LOCK_DIR}, which is \
                     root's and writable by the group {HYPERVISOR_LOCK_GROUP} only: the login \
                     must be root or in that group (`sudo usermod -a -G {HYPERVISOR_LOCK_GROUP} \
                     LOGIN` there), and util-linux's `flock` must be installed"
                )
            })),
            LockError::MakeDirOnHypervisor { source, group, .. } => {
                Some(source.hint().unwrap_or_else(|| {
                    format!(
                        "trog makes it through sudo, owned by root, of the group {group}, mode \
                         2770; the group {group} must exist there (libvirt's packages make it)"
                    )
                }))
            }
            LockError::NoDirOnHypervisor { dir, .. } => Some(format!(
                "the login must be able to reach {dir}: every directory above it must be \
                 searchable by it"
            )),
            LockError::UnsafeDirOnHypervisor { found, .. } if found.parent => Some(format!(
                "other users could replace the lock directory in it: give it the sticky bit, as \
                 /run/lock has (`sudo chmod +t {}` there), or make it writable by root only",
                found.path
            )),
            LockError::UnsafeDirOnHypervisor {
                found, lock_group, ..
            } => Some(format!(
                "when no run of trog holds a lock there, remove it as root (`sudo rm -r -- {}` \
                 there): the next run makes it again, owned by root, of the group {lock_group}, \
                 mode 2770, so that no other user can put a link or a lock in it",
                found.path
            )),
            LockError::UnsafeDir { dir, .. } => Some(format!(
                "remove it (`rm -r -- {}`) and run trog again: it makes the directory itself, \
                 writable by its owner and group only",
                dir.display()
            )),
            LockError::LinkInPlace { path } | LockError::NotAFile { path } => Some(format!(
                "remove it (`rm -- {}`) and run trog again: it makes its lock files itself",
                path.display()
            )),
            LockError::MakeDir { .. } | LockError::Open { .. } | LockError::Take { .. } => Some(
                "the installation's directory must be writable by whoever runs trog \
                 (its `locks/` directory holds the locks between runs)"
                    .into(),
            ),
        }
    }
}
