//! The store's file on disk: read with a size limit, replaced atomically, the key file read only
//! when it is private, and a failed open told apart as a wrong key or a damaged file. The
//! database itself (groups, entries, the writer lock) is `store`'s.

use super::error::SecretsError;
use keepass::config::DatabaseVersion;
use keepass::db::DatabaseOpenError;
use keepass::Database;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The key file's contents, refused when anyone but its owner may read it: it alone may unlock
/// the store.
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
    std::fs::read(path)
        .map(zeroize::Zeroizing::new)
        .map_err(fail)
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
/// itself survives a power cut.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path
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
    temporary.persist(path).map_err(|error| error.error)?;
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
}
