//! The installation's identity: a random UUID made once, kept in `installation-id` in the
//! installation's directory (beside `secrets.kdbx`, `ips.db` and `locks/`), and written into the
//! tag of every domain this installation defines or finishes. It is what tells, on a hypervisor
//! several installations share, this installation's guests from another's (`status --all`).
//!
//! The file is not a secret, but what it says decides which domains `status --all` offers to
//! remove, so nobody but the installation's own account (or root) may make it or point it
//! elsewhere: a link in its place is refused, never followed (`O_NOFOLLOW`); a file owned by
//! another user than this one, root and the installation directory's owner, or that others may
//! write, is refused; so is an installation directory every user may
//! write, where another user could put a file of their own. It is made whole in a temporary file
//! beside it and linked into place (`link(2)` never replaces a file), so two first runs at once
//! agree on one identity: the one that loses the race reads the winner's.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file's name in the installation's directory.
pub const INSTALLATION_ID_FILE: &str = "installation-id";

/// More than a UUID and its newline; a longer file is not one trog wrote.
const MOST_BYTES: u64 = 64;

/// An installation's identity: a hyphenated lower-case UUID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct InstallationId(String);

impl InstallationId {
    /// A new identity from `random` bytes (passed in: the caller owns the randomness).
    pub fn from_random(random: [u8; 16]) -> InstallationId {
        InstallationId(
            uuid::Builder::from_random_bytes(random)
                .into_uuid()
                .hyphenated()
                .to_string(),
        )
    }

    /// The identity a file holds, when it holds one: a UUID, surrounding white space ignored.
    pub fn parse(text: &str) -> Option<InstallationId> {
        let uuid = uuid::Uuid::try_parse(text.trim()).ok()?;
        Some(InstallationId(uuid.hyphenated().to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for InstallationId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// Why the identity file is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFileProblem {
    /// A symbolic link where the file goes: what it says would be wherever the link points.
    SymbolicLink,
    NotARegularFile,
    /// Owned by another user than this one, root and the installation directory's owner.
    AnotherUsers {
        uid: u32,
    },
    /// Others than its owner may write it.
    WritableByOthers {
        mode: u32,
    },
    /// The installation's directory: every user may write it, so any of them could have put
    /// the file there.
    DirWritableByEveryone {
        mode: u32,
    },
}

impl std::fmt::Display for IdFileProblem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdFileProblem::SymbolicLink => write!(formatter, "is a symbolic link"),
            IdFileProblem::NotARegularFile => write!(formatter, "is not a regular file"),
            IdFileProblem::AnotherUsers { uid } => {
                write!(formatter, "belongs to another user (uid {uid})")
            }
            IdFileProblem::WritableByOthers { mode } => {
                write!(
                    formatter,
                    "is writable by others than its owner (mode {mode:04o})"
                )
            }
            IdFileProblem::DirWritableByEveryone { mode } => write!(
                formatter,
                "is in a directory every user may write (mode {mode:04o})"
            ),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InstallationIdError {
    #[error("the installation's identity file {} {problem}: trog does not use it", .path.display())]
    Unsafe {
        path: PathBuf,
        problem: IdFileProblem,
    },
    #[error("the installation's identity file {} does not hold an identity trog wrote", .path.display())]
    Damaged { path: PathBuf },
    #[error("cannot read the installation's identity file {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make the installation's identity file {}", .path.display())]
    Make {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for InstallationIdError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            InstallationIdError::Unsafe {
                problem: IdFileProblem::DirWritableByEveryone { .. },
                path,
            } => format!(
                "close the installation's directory to other users (`chmod o-w {}`)",
                path.parent().unwrap_or(Path::new(".")).display()
            ),
            InstallationIdError::Unsafe { path, .. } | InstallationIdError::Damaged { path } => format!(
                "see who put it there; if the installation never ran trog before, remove {} and trog makes a new one (guests it tagged with the old one are then listed as another installation's by `trog status --all`)",
                path.display()
            ),
            InstallationIdError::Read { .. } | InstallationIdError::Make { .. } => {
                "the installation's directory must be readable and writable by the account trog runs as".into()
            }
        })
    }
}

/// The identity file of the installation whose directory is `dir`.
pub fn installation_id_path(dir: &Path) -> PathBuf {
    dir.join(INSTALLATION_ID_FILE)
}

/// The installation's identity, `None` when it has none yet: what the verbs that change
/// nothing read (`status --all`).
pub fn read_installation_id(dir: &Path) -> Result<Option<InstallationId>, InstallationIdError> {
    let path = installation_id_path(dir);
    let dir_owner = check_dir(dir, &path)?;
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(InstallationIdError::Unsafe {
                path,
                problem: IdFileProblem::SymbolicLink,
            })
        }
        Err(source) => return Err(InstallationIdError::Read { path, source }),
    };
    let meta = file
        .metadata()
        .map_err(|source| InstallationIdError::Read {
            path: path.clone(),
            source,
        })?;
    if let Some(problem) = file_problem(&meta, dir_owner) {
        return Err(InstallationIdError::Unsafe { path, problem });
    }
    let mut text = String::new();
    (&mut file)
        .take(MOST_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| InstallationIdError::Read {
            path: path.clone(),
            source,
        })?;
    if text.len() as u64 > MOST_BYTES {
        return Err(InstallationIdError::Damaged { path });
    }
    InstallationId::parse(&text)
        .map(Some)
        .ok_or(InstallationIdError::Damaged { path })
}

/// The installation's identity, made now from `random` when it has none: what a verb that
/// defines or finishes a domain reads before it touches a hypervisor.
pub fn installation_id(
    dir: &Path,
    random: [u8; 16],
) -> Result<InstallationId, InstallationIdError> {
    if let Some(existing) = read_installation_id(dir)? {
        return Ok(existing);
    }
    let path = installation_id_path(dir);
    let made = |source| InstallationIdError::Make {
        path: path.clone(),
        source,
    };
    let fresh = InstallationId::from_random(random);
    let mut staged = tempfile::Builder::new()
        .prefix(&format!(".{INSTALLATION_ID_FILE}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(made)?;
    staged
        .write_all(format!("{fresh}\n").as_bytes())
        .and_then(|()| staged.as_file().sync_all())
        .map_err(made)?;
    // link(2) puts the whole file in place or fails where anything already is (a link
    // included, which it does not follow): a run that made one meanwhile wins, and its
    // identity is read back below.
    match std::fs::hard_link(staged.path(), &path) {
        Ok(()) => {
            let _ = std::fs::File::open(dir).and_then(|directory| directory.sync_all());
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(made(error)),
    }
    drop(staged);
    read_installation_id(dir)?.ok_or_else(|| {
        made(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the file was gone as soon as it was made",
        ))
    })
}

/// Refuses an installation directory every user may write: any of them could put an identity
/// file of their own there. Returns the directory's owner, whose file is the installation's.
fn check_dir(dir: &Path, path: &Path) -> Result<u32, InstallationIdError> {
    let meta = std::fs::metadata(dir).map_err(|source| InstallationIdError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(InstallationIdError::Unsafe {
            path: path.to_path_buf(),
            problem: IdFileProblem::DirWritableByEveryone { mode },
        });
    }
    Ok(meta.uid())
}

/// What is wrong with the opened file, if anything. Its owner may be this user, root, or the
/// owner of the installation's directory (root running trog on an account's installation reads
/// the account's file; the account reads one a run as root made).
fn file_problem(meta: &std::fs::Metadata, dir_owner: u32) -> Option<IdFileProblem> {
    if !meta.is_file() {
        return Some(IdFileProblem::NotARegularFile);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if ![me, 0, dir_owner].contains(&meta.uid()) {
        return Some(IdFileProblem::AnotherUsers { uid: meta.uid() });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(IdFileProblem::WritableByOthers { mode });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn an_identity_is_made_once_and_read_back_the_same() {
        let dir = private_dir();
        assert_eq!(read_installation_id(dir.path()).unwrap(), None);
        let made = installation_id(dir.path(), [7; 16]).unwrap();
        let again = installation_id(dir.path(), [9; 16]).unwrap();
        assert_eq!(made, again, "a second run keeps the first identity");
        assert_eq!(
            read_installation_id(dir.path()).unwrap(),
            Some(made.clone())
        );
        let path = installation_id_path(dir.path());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{made}\n"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, [INSTALLATION_ID_FILE], "no temporary file is left");
    }

    #[test]
    fn runs_making_it_at_once_agree_on_one_identity() {
        let dir = private_dir();
        let made: Vec<InstallationId> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8u8)
                .map(|n| {
                    let dir = dir.path();
                    scope.spawn(move || installation_id(dir, [n; 16]).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(made.iter().all(|id| id == &made[0]), "{made:?}");
    }

    #[test]
    fn a_link_in_its_place_is_refused_and_not_followed() {
        let dir = private_dir();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, installation_id_path(dir.path())).unwrap();
        for error in [
            read_installation_id(dir.path()).unwrap_err(),
            installation_id(dir.path(), [1; 16]).unwrap_err(),
        ] {
            assert!(
                matches!(
                    error,
                    InstallationIdError::Unsafe {
                        problem: IdFileProblem::SymbolicLink,
                        ..
                    }
                ),
                "{error:?}"
            );
            assert_eq!(error.exit_status(), ExitStatus::Configuration);
        }
        // A dangling link is not made through either.
        std::fs::remove_file(&elsewhere).unwrap();
        assert!(installation_id(dir.path(), [1; 16]).is_err());
        assert!(!elsewhere.exists());
    }

    #[test]
    fn a_file_others_may_write_or_in_a_directory_everyone_may_write_is_refused() {
        let dir = private_dir();
        let made = installation_id(dir.path(), [3; 16]).unwrap();
        let path = installation_id_path(dir.path());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = read_installation_id(dir.path()).unwrap_err();
        assert!(error.to_string().contains("mode 0666"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_installation_id(dir.path()).unwrap(), Some(made));

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = read_installation_id(dir.path()).unwrap_err();
        assert!(
            matches!(
                error,
                InstallationIdError::Unsafe {
                    problem: IdFileProblem::DirWritableByEveryone { mode: 0o777 },
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.hint().unwrap().contains("chmod o-w"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    /// Only root can give a file away; run as another user, the refusal is checked by the
    /// others' runs as root (CI's).
    #[test]
    fn a_file_of_another_user_is_refused_unless_they_own_the_installation() {
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let dir = private_dir();
        let made = installation_id(dir.path(), [4; 16]).unwrap();
        let path = installation_id_path(dir.path());
        std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
        let error = read_installation_id(dir.path()).unwrap_err();
        assert!(
            matches!(
                error,
                InstallationIdError::Unsafe {
                    problem: IdFileProblem::AnotherUsers { uid: 12345 },
                    ..
                }
            ),
            "{error:?}"
        );
        // The installation is that user's: the file is theirs to make, and root reads it.
        std::os::unix::fs::chown(dir.path(), Some(12345), None).unwrap();
        assert_eq!(read_installation_id(dir.path()).unwrap(), Some(made));
    }

    #[test]
    fn a_file_that_is_not_an_identity_is_damaged_not_replaced() {
        let dir = private_dir();
        let path = installation_id_path(dir.path());
        std::fs::write(&path, "not an identity\n").unwrap();
        let error = installation_id(dir.path(), [5; 16]).unwrap_err();
        assert!(
            matches!(error, InstallationIdError::Damaged { .. }),
            "{error:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not an identity\n");
        std::fs::write(&path, "x".repeat(500)).unwrap();
        assert!(matches!(
            read_installation_id(dir.path()).unwrap_err(),
            InstallationIdError::Damaged { .. }
        ));
    }
}
