//! The store's file on disk: read with a size limit, replaced atomically, the key file read only
//! when it is private, and a failed open told apart as a wrong key or a damaged file. The
//! database itself (groups, entries, the writer lock) is `store`'s.

use super::error::SecretsError;
use crate::config::bounded_read::read_bounded;
use keepass::config::DatabaseVersion;
use keepass::db::DatabaseOpenError;
use keepass::Database;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The largest key file trog reads: KeePassXC's are an XML file of a few hundred bytes (or 32 to
/// 64 raw bytes); a path that leads to a huge file, a device or a pipe is a mistake, refused
/// rather than read without end or waited on forever.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The key file's contents, refused when anyone but its owner may read it (it alone may unlock
/// the store), when it is not a regular file (a FIFO nobody writes would hang the run; a device
/// has no end) or when it is larger than [`MAX_KEY_FILE_BYTES`].
pub(super) fn read_key_file(path: &Path) -> Result<zeroize::Zeroizing<Vec<u8>>, SecretsError> {
    let fail = |source| SecretsError::ReadKeyFile {
        path: path.into(),
        source,
    };
    let mode = std::fs::metadata(path).map_err(fail)?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(SecretsError::KeyFileNotPrivate {
            path: path.into(),
            mode: mode & 0o777,
        });
    }
    read_bounded(path, MAX_KEY_FILE_BYTES)
        .map(zeroize::Zeroizing::new)
        .map_err(fail)
}

/// What is at the store's path, told before anything is unlocked, created or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorePresence {
    /// A regular file (or a link to one): the store, to be opened.
    Present,
    /// Nothing at all: no file and no link.
    Absent,
}

/// Whether the store is there. Only a path with nothing at it is absent: a link whose target is
/// gone (a moved or unmounted store), a path that cannot be looked at (a folder this user may not
/// enter) and anything but a regular file are refused, so that none of them is ever taken for a
/// missing store and replaced by a new one.
pub fn store_presence(path: &Path) -> Result<StorePresence, SecretsError> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(StorePresence::Absent)
        }
        Err(source) => {
            return Err(SecretsError::ReadStore {
                path: path.into(),
                source,
            })
        }
        Ok(_) => {}
    }
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => Ok(StorePresence::Present),
        Ok(_) => Err(SecretsError::NotAFile { path: path.into() }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Err(SecretsError::DanglingLink {
                path: path.into(),
                target: std::fs::read_link(path).unwrap_or_default(),
            })
        }
        Err(source) => Err(SecretsError::ReadStore {
            path: path.into(),
            source,
        }),
    }
}

/// The largest store file trog reads: a store of thousands of guests' keys is well under a
/// megabyte, and a store path that leads to something endless (a device, a huge file put there by
/// mistake) is refused rather than read until memory runs out.
pub const MAX_STORE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads the store's bytes: a regular file (a link to one is followed) of at most
/// [`MAX_STORE_BYTES`].
pub(super) fn read_store_file(path: &Path) -> Result<Vec<u8>, SecretsError> {
    use std::io::Read;
    let read_error = |source| SecretsError::ReadStore {
        path: path.into(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if !metadata.is_file() {
        return Err(SecretsError::NotAFile { path: path.into() });
    }
    let too_large = || SecretsError::TooLarge {
        path: path.into(),
        limit: MAX_STORE_BYTES,
    };
    if metadata.len() > MAX_STORE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(read_error)?
        .take(MAX_STORE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_STORE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Whether opening failed for the passphrase rather than the file. KDBX 4 checks the key before
/// decrypting anything (an HMAC of the header), so only `IncorrectKey` means a wrong passphrase.
/// KDBX 3.1 decrypts first and checks the key afterwards, so with a wrong key the decryption
/// itself fails on the padding of the last block: for those files a decryption error means a
/// wrong passphrase too (a damaged file could do the same, which the hint mentions).
pub(super) fn is_wrong_passphrase(error: &DatabaseOpenError, file: &[u8]) -> bool {
    match error {
        DatabaseOpenError::Key(keepass::error::DatabaseKeyError::IncorrectKey) => true,
        DatabaseOpenError::Cryptography(_) => {
            matches!(
                Database::get_version(&mut &file[..]),
                Ok(DatabaseVersion::KDB3(_))
            )
        }
        _ => false,
    }
}

/// Replaces `path` with `bytes` so that a crash at any moment leaves either the old file or the
/// new one: a temporary file in the same directory (a rename is atomic only within a file
/// system), created 0600, synced, renamed over `path`, then the directory synced so the rename
/// itself survives a power cut. When `path` is a symbolic link (a store kept elsewhere, on an
/// encrypted or backed-up disk), the file it leads to is replaced, in its own directory, and the
/// link stays as it was: renaming over the link itself would put a plain file in its place and
/// leave the real store behind, stale.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let is_link = std::fs::symlink_metadata(path)
        .map(|metadata| metadata.file_type().is_symlink())
        .unwrap_or(false);
    let target = if is_link {
        std::fs::canonicalize(path)?
    } else {
        path.to_path_buf()
    };
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(directory)?;
    temporary.write_all(bytes)?;
    temporary.as_file().sync_all()?;
    temporary.persist(&target).map_err(|error| error.error)?;
    std::fs::File::open(directory)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_it_0600() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("secrets.kdbx");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names: Vec<_> = std::fs::read_dir(directory.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("secrets.kdbx")],
            "no temporary file is left behind"
        );
    }

    #[test]
    fn a_failed_atomic_write_leaves_the_old_file() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("secrets.kdbx");
        std::fs::write(&path, b"old").unwrap();
        // A directory in the way of the rename makes it fail after the temporary file is written.
        let blocked = directory.path().join("blocked");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(write_atomically(&blocked, b"new").is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(directory.path()).unwrap().count(),
            2,
            "the temporary file is removed"
        );
    }

    #[test]
    fn a_write_through_a_link_replaces_its_target_and_keeps_the_link() {
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("real.kdbx");
        std::fs::write(&target, b"old").unwrap();
        let installation = tempfile::tempdir().unwrap();
        let link = installation.path().join("secrets.kdbx");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_link(&link).unwrap(), target);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1);
        assert_eq!(std::fs::read_dir(installation.path()).unwrap().count(), 1);
    }

    #[test]
    fn only_a_path_with_nothing_at_it_is_an_absent_store() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("secrets.kdbx");
        assert_eq!(store_presence(&path).unwrap(), StorePresence::Absent);
        std::os::unix::fs::symlink(directory.path().join("moved.kdbx"), &path).unwrap();
        assert!(
            matches!(
                store_presence(&path),
                Err(SecretsError::DanglingLink { .. })
            ),
            "a link to a store that is gone"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(
            store_presence(&path),
            Err(SecretsError::NotAFile { .. })
        ));
        std::fs::remove_dir(&path).unwrap();
        make_fifo(&path);
        assert!(matches!(
            store_presence(&path),
            Err(SecretsError::NotAFile { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"x").unwrap();
        assert_eq!(store_presence(&path).unwrap(), StorePresence::Present);
    }

    #[test]
    fn a_key_file_that_is_a_fifo_is_refused_at_once() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("store.keyx");
        make_fifo(&path);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Nobody writes the FIFO: a read would wait forever.
        let error = read_key_file(&path).unwrap_err();
        assert!(
            matches!(&error, SecretsError::ReadKeyFile { .. }),
            "{error:?}"
        );
        let large = directory.path().join("large.keyx");
        std::fs::write(&large, vec![b'k'; MAX_KEY_FILE_BYTES as usize + 1]).unwrap();
        std::fs::set_permissions(&large, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_key_file(&large).is_err());
    }

    fn make_fifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    }
}
