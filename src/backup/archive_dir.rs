//! The backup directory on this machine: `<dir>/<fqdn>/<UTC time>.tar.gz`, beside it its sha256
//! and the recipe list it came from. Every file is private (0600; the folders 0700): backups hold
//! site data. An archive is written under a temporary name and renamed once whole, its digest and
//! recipe list first, so a listing never sees a partial archive.

use crate::backup::{
    newest, past_retention, stem_time, ARCHIVE_SUFFIX, DIGEST_SUFFIX, RECIPES_SUFFIX,
};
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use flate2::{Compression, GzBuilder};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// gzip level 6, zlib's own default, fixed so the same tar gives the same archive.
const BACKUP_GZIP_LEVEL: u32 = 6;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveDirError {
    #[error("cannot write the backup {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("a backup named {} already exists", path.display())]
    Exists { path: PathBuf },
    #[error("cannot read the backups in {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the backup {} does not match its sha256 file (expected {expected}, found {found})", path.display())]
    DigestMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
}

impl Diagnose for ArchiveDirError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ArchiveDirError::Exists { .. } => "backups are named by the second they are taken: run `trog backup` again in a second".into(),
            ArchiveDirError::DigestMismatch { .. } => "the archive changed since it was written: move it out of the backup directory (the next newest is used then), or take a new one with `trog backup`".into(),
            _ => "check the backup directory's permissions and free space (`backup_dir` in _global, docs/CONFIGURATION.md)".into(),
        })
    }
}

/// One guest's folder of backups.
#[derive(Debug, Clone)]
pub struct GuestBackups {
    pub folder: PathBuf,
}

/// An archive written: where, and its sha256.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WrittenArchive {
    pub archive: PathBuf,
    pub sha256: String,
    pub bytes: u64,
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveDirError + '_ {
    move |source| ArchiveDirError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `contents` to `path` through a private temporary file renamed into place.
fn write_private(path: &Path, contents: &[u8]) -> Result<(), ArchiveDirError> {
    let temporary = path.with_extension("trog-partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(write_error(&temporary))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(write_error(&temporary))?;
    std::fs::rename(&temporary, path).map_err(write_error(path))
}

/// The deterministic gzip of `tar`: no time, no file name in its header, a fixed level.
pub fn compress(tar: &[u8]) -> Vec<u8> {
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::new(BACKUP_GZIP_LEVEL));
    encoder
        .write_all(tar)
        .expect("writing into memory cannot fail");
    encoder.finish().expect("writing into memory cannot fail")
}

impl GuestBackups {
    pub fn new(backup_dir: &Path, fqdn: &str) -> GuestBackups {
        GuestBackups {
            folder: backup_dir.join(fqdn),
        }
    }

    pub fn archive_path(&self, stem: &str) -> PathBuf {
        self.folder.join(format!("{stem}{ARCHIVE_SUFFIX}"))
    }

    /// Writes a backup named `stem`: the archive (`tar` compressed), its sha256 and `recipes`.
    pub fn write(
        &self,
        stem: &str,
        tar: &[u8],
        recipes: &str,
    ) -> Result<WrittenArchive, ArchiveDirError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.folder)
            .map_err(write_error(&self.folder))?;
        let archive = self.archive_path(stem);
        if archive.exists() {
            return Err(ArchiveDirError::Exists { path: archive });
        }
        let compressed = compress(tar);
        let sha256 = hex::encode(Sha256::digest(&compressed));
        write_private(
            &self.folder.join(format!("{stem}{DIGEST_SUFFIX}")),
            format!("{sha256}  {stem}{ARCHIVE_SUFFIX}\n").as_bytes(),
        )?;
        write_private(
            &self.folder.join(format!("{stem}{RECIPES_SUFFIX}")),
            recipes.as_bytes(),
        )?;
        // Last: an archive under its own name is whole, with its digest beside it.
        write_private(&archive, &compressed)?;
        Ok(WrittenArchive {
            archive,
            sha256,
            bytes: compressed.len() as u64,
        })
    }

    /// The stems of the archives in the folder (none when it does not exist), sorted.
    pub fn stems(&self) -> Result<Vec<String>, ArchiveDirError> {
        let entries = match std::fs::read_dir(&self.folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ArchiveDirError::Read {
                    path: self.folder.clone(),
                    source,
                })
            }
        };
        let mut stems = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| ArchiveDirError::Read {
                path: self.folder.clone(),
                source,
            })?;
            if let Some(stem) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_suffix(ARCHIVE_SUFFIX))
                .filter(|stem| stem_time(stem).is_some())
            {
                stems.push(stem.to_string());
            }
        }
        stems.sort();
        Ok(stems)
    }

    /// The newest archive, if there is one.
    pub fn newest(&self) -> Result<Option<PathBuf>, ArchiveDirError> {
        let stems = self.stems()?;
        Ok(newest(&stems).map(|stem| self.archive_path(stem)))
    }

    /// Deletes the archives taken more than `retention_days` before `now_unix`, each with its
    /// sha256 and recipe list; returns every file deleted. A file that cannot be deleted is
    /// returned with why, and the rest go on.
    pub fn sweep(
        &self,
        now_unix: i64,
        retention_days: u32,
    ) -> Result<SweepOutcome, ArchiveDirError> {
        let mut outcome = SweepOutcome::default();
        for stem in past_retention(&self.stems()?, now_unix, retention_days) {
            for suffix in [ARCHIVE_SUFFIX, DIGEST_SUFFIX, RECIPES_SUFFIX] {
                let file = self.folder.join(format!("{stem}{suffix}"));
                match std::fs::remove_file(&file) {
                    Ok(()) => outcome.deleted.push(file),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => outcome.left.push((file, error.to_string())),
                }
            }
        }
        Ok(outcome)
    }
}

/// What a sweep deleted, and what it could not.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SweepOutcome {
    pub deleted: Vec<PathBuf>,
    pub left: Vec<(PathBuf, String)>,
}

/// Reads the archive at `path` and checks it against the sha256 file beside it.
pub fn read_verified(path: &Path) -> Result<Vec<u8>, ArchiveDirError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| ArchiveDirError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let bytes = read(path)?;
    let digest_file = PathBuf::from(format!(
        "{}{}",
        path.display().to_string().trim_end_matches(ARCHIVE_SUFFIX),
        DIGEST_SUFFIX
    ));
    let expected = String::from_utf8_lossy(&read(&digest_file)?)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let found = hex::encode(Sha256::digest(&bytes));
    if expected != found {
        return Err(ArchiveDirError::DigestMismatch {
            path: path.to_path_buf(),
            expected,
            found,
        });
    }
    Ok(bytes)
}

/// The guest folders in `backup_dir` (none when it does not exist), sorted.
pub fn guest_folders(backup_dir: &Path) -> Result<Vec<String>, ArchiveDirError> {
    let entries = match std::fs::read_dir(backup_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ArchiveDirError::Read {
                path: backup_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut folders = Vec::new();
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            if let Some(name) = entry.file_name().to_str() {
                folders.push(name.to_string());
            }
        }
    }
    folders.sort();
    Ok(folders)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::stem_time;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_archive_is_written_private_with_its_digest_and_recipes() {
        let dir = tempfile::tempdir().unwrap();
        let backups = GuestBackups::new(dir.path(), "www.example.test");
        let written = backups
            .write("20261201T010203Z", b"tar bytes", "data /srv/site\n")
            .unwrap();
        assert_eq!(
            written.archive,
            dir.path().join("www.example.test/20261201T010203Z.tar.gz")
        );
        for name in [
            "20261201T010203Z.tar.gz",
            "20261201T010203Z.tar.gz.sha256",
            "20261201T010203Z.recipes",
        ] {
            let mode = std::fs::metadata(backups.folder.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        let folder_mode = std::fs::metadata(&backups.folder)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(folder_mode & 0o777, 0o700);
        assert_eq!(
            read_verified(&written.archive).unwrap(),
            compress(b"tar bytes")
        );
        // The same tar gives the same archive.
        assert_eq!(compress(b"tar bytes"), compress(b"tar bytes"));
        assert!(matches!(
            backups.write("20261201T010203Z", b"other", ""),
            Err(ArchiveDirError::Exists { .. })
        ));
        std::fs::write(&written.archive, b"changed").unwrap();
        assert!(matches!(
            read_verified(&written.archive),
            Err(ArchiveDirError::DigestMismatch { .. })
        ));
    }

    #[test]
    fn the_newest_is_found_and_the_sweep_names_every_file_it_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let backups = GuestBackups::new(dir.path(), "www.example.test");
        assert_eq!(backups.newest().unwrap(), None);
        for stem in ["20261101T000000Z", "20261130T000000Z", "20261201T000000Z"] {
            backups.write(stem, stem.as_bytes(), "").unwrap();
        }
        std::fs::write(backups.folder.join("notes.txt"), "mine").unwrap();
        assert_eq!(
            backups.newest().unwrap(),
            Some(backups.archive_path("20261201T000000Z"))
        );
        let now = stem_time("20261202T000000Z").unwrap();
        let outcome = backups.sweep(now, 2).unwrap();
        let names: Vec<String> = outcome
            .deleted
            .iter()
            .map(|path| path.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "20261101T000000Z.tar.gz",
                "20261101T000000Z.tar.gz.sha256",
                "20261101T000000Z.recipes"
            ]
        );
        assert!(outcome.left.is_empty());
        assert_eq!(
            backups.stems().unwrap(),
            ["20261130T000000Z", "20261201T000000Z"]
        );
        assert!(backups.folder.join("notes.txt").exists());
        assert_eq!(guest_folders(dir.path()).unwrap(), ["www.example.test"]);
    }
}
