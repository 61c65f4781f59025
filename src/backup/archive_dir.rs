//! The backup directory on this machine: `<dir>/<fqdn>/<UTC time>.tar.gz`, beside it its sha256
//! and the recipe list it came from. Every file is private (0600; the folders 0700): backups hold
//! site data. An archive is written under a temporary name and renamed once whole, its digest and
//! recipe list first, so a listing never sees a partial archive.

use crate::backup::{
    newest, past_retention, stem_time, ARCHIVE_SUFFIX, DIGEST_SUFFIX, RECIPES_SUFFIX,
};
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use flate2::write::GzEncoder;
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

/// The deterministic gzip of `tar`, as [`GuestBackups::begin`] writes it: no time, no file name
/// in its header, a fixed level.
#[cfg(test)]
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

    /// Writes a backup named `stem` whose tar is `tar`, held in memory (see [`Self::begin`]).
    pub fn write(
        &self,
        stem: &str,
        tar: &[u8],
        recipes: &str,
    ) -> Result<WrittenArchive, ArchiveDirError> {
        let mut pending = self.begin(stem)?;
        pending
            .write_all(tar)
            .map_err(write_error(&pending.temporary))?;
        pending.finish(recipes)
    }

    /// Starts the backup named `stem`: the tar written into the returned [`PendingArchive`] is
    /// compressed and digested as it comes, into a private temporary file in the folder, so an
    /// archive of any size takes no more memory than gzip's window; nothing has the archive's
    /// name until [`PendingArchive::finish`].
    pub fn begin(&self, stem: &str) -> Result<PendingArchive, ArchiveDirError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.folder)
            .map_err(write_error(&self.folder))?;
        let archive = self.archive_path(stem);
        if archive.exists() {
            return Err(ArchiveDirError::Exists { path: archive });
        }
        // Not a name `write_private` gives the digest's and the recipes' temporary files.
        let temporary = self.folder.join(format!("{stem}.archive.trog-partial"));
        // What a run that was killed left: this stem's archive was never finished.
        match std::fs::remove_file(&temporary) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(write_error(&temporary)(error))
            }
            _ => {}
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(write_error(&temporary))?;
        let encoder = GzBuilder::new().mtime(0).write(
            Digesting {
                file,
                digest: Sha256::new(),
                bytes: 0,
            },
            Compression::new(BACKUP_GZIP_LEVEL),
        );
        Ok(PendingArchive {
            folder: self.folder.clone(),
            stem: stem.to_string(),
            archive,
            temporary,
            encoder: Some(encoder),
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

/// A file being written that digests what passes through it.
struct Digesting {
    file: std::fs::File,
    digest: Sha256,
    bytes: u64,
}

impl Write for Digesting {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes)?;
        self.digest.update(&bytes[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A backup being written: the tar written into it is compressed into a temporary file in the
/// guest's folder; [`PendingArchive::finish`] gives it its name, and dropping it unfinished
/// deletes the temporary file.
pub struct PendingArchive {
    folder: PathBuf,
    stem: String,
    archive: PathBuf,
    temporary: PathBuf,
    encoder: Option<GzEncoder<Digesting>>,
}

impl Write for PendingArchive {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self.encoder.as_mut() {
            Some(encoder) => encoder.write(bytes),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.encoder.as_mut() {
            Some(encoder) => encoder.flush(),
            None => Ok(()),
        }
    }
}

impl PendingArchive {
    /// Ends the archive and files it: its sha256 and `recipes` beside it first, then the archive
    /// under its own name, so an archive under its name is whole with its digest beside it.
    pub fn finish(mut self, recipes: &str) -> Result<WrittenArchive, ArchiveDirError> {
        let encoder = self.encoder.take().expect("finished once");
        let Digesting {
            file,
            digest,
            bytes,
        } = encoder.finish().map_err(write_error(&self.temporary))?;
        file.sync_all().map_err(write_error(&self.temporary))?;
        let sha256 = hex::encode(digest.finalize());
        let stem = &self.stem;
        write_private(
            &self.folder.join(format!("{stem}{DIGEST_SUFFIX}")),
            format!("{sha256}  {stem}{ARCHIVE_SUFFIX}\n").as_bytes(),
        )?;
        write_private(
            &self.folder.join(format!("{stem}{RECIPES_SUFFIX}")),
            recipes.as_bytes(),
        )?;
        std::fs::rename(&self.temporary, &self.archive).map_err(write_error(&self.archive))?;
        Ok(WrittenArchive {
            archive: self.archive.clone(),
            sha256,
            bytes,
        })
    }
}

impl Drop for PendingArchive {
    fn drop(&mut self) {
        if self.encoder.is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// What a sweep deleted, and what it could not.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SweepOutcome {
    pub deleted: Vec<PathBuf>,
    pub left: Vec<(PathBuf, String)>,
}

/// The file beside an archive that ends in `suffix` instead.
fn beside(archive: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}{suffix}",
        archive
            .display()
            .to_string()
            .trim_end_matches(ARCHIVE_SUFFIX),
    ))
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveDirError + '_ {
    move |source| ArchiveDirError::Read {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks the archive at `path` against the sha256 file beside it, reading it as a stream.
pub fn verify(path: &Path) -> Result<(), ArchiveDirError> {
    let digest_file = beside(path, DIGEST_SUFFIX);
    let expected =
        String::from_utf8_lossy(&std::fs::read(&digest_file).map_err(read_error(&digest_file))?)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
    let mut digest = Sha256::new();
    let mut file = std::fs::File::open(path).map_err(read_error(path))?;
    std::io::copy(&mut file, &mut digest).map_err(read_error(path))?;
    let found = hex::encode(digest.finalize());
    if expected != found {
        return Err(ArchiveDirError::DigestMismatch {
            path: path.to_path_buf(),
            expected,
            found,
        });
    }
    Ok(())
}

/// The paths the backup at `archive` recorded (its recipes file: `recipe path` lines), each as
/// written there.
pub fn recorded_paths(archive: &Path) -> Result<Vec<String>, ArchiveDirError> {
    let file = beside(archive, RECIPES_SUFFIX);
    let text = std::fs::read_to_string(&file).map_err(read_error(&file))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(_, path)| path.to_string()))
        .collect())
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
        verify(&written.archive).unwrap();
        assert_eq!(
            std::fs::read(&written.archive).unwrap(),
            compress(b"tar bytes")
        );
        assert_eq!(recorded_paths(&written.archive).unwrap(), ["/srv/site"]);
        // The same tar gives the same archive.
        assert_eq!(compress(b"tar bytes"), compress(b"tar bytes"));
        assert!(matches!(
            backups.write("20261201T010203Z", b"other", ""),
            Err(ArchiveDirError::Exists { .. })
        ));
        std::fs::write(&written.archive, b"changed").unwrap();
        assert!(matches!(
            verify(&written.archive),
            Err(ArchiveDirError::DigestMismatch { .. })
        ));
    }

    /// A command's output of megabytes streamed through this machine into the folder: the
    /// archive is the deterministic gzip of it, its digest the file's.
    #[test]
    fn a_commands_output_is_streamed_into_an_archive() {
        use crate::machine::{local::LocalMachine, Machine, MachineCommand};
        let dir = tempfile::tempdir().unwrap();
        let backups = GuestBackups::new(dir.path(), "www.example.test");
        let mut pending = backups.begin("20261201T010203Z").unwrap();
        let output = LocalMachine
            .run_streamed(
                &MachineCommand::shell(
                    "i=0; while [ $i -lt 6000 ]; do seq -f \"$i %g\" 100; i=$((i+1)); done",
                ),
                &mut pending,
            )
            .unwrap();
        assert_eq!(output.status, Some(0));
        let written = pending.finish("data /srv/site\n").unwrap();
        let mut expected = Vec::new();
        for i in 0..6000 {
            for n in 1..=100 {
                expected.extend_from_slice(format!("{i} {n}\n").as_bytes());
            }
        }
        assert!(expected.len() > 4 << 20, "{}", expected.len());
        let archive = std::fs::read(&written.archive).unwrap();
        assert_eq!(archive, compress(&expected));
        assert_eq!(written.sha256, hex::encode(Sha256::digest(&archive)));
        assert_eq!(written.bytes, archive.len() as u64);
        verify(&written.archive).unwrap();
    }

    #[test]
    fn an_archive_left_unfinished_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let backups = GuestBackups::new(dir.path(), "www.example.test");
        let mut pending = backups.begin("20261201T010203Z").unwrap();
        pending.write_all(&[7u8; 100_000]).unwrap();
        drop(pending);
        assert_eq!(std::fs::read_dir(&backups.folder).unwrap().count(), 0);
        // The stem is free again.
        backups.write("20261201T010203Z", b"tar", "").unwrap();
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
