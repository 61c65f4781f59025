//! Reading an installation's files with a bound: a path that leads to something endless (a link
//! to `/dev/zero`, a FIFO nobody writes) or to a huge file put there by mistake is refused with a
//! message, never read until memory runs out or waited on forever.

use std::io::{self, Read};
use std::path::Path;

/// The largest configuration file trog reads (recipes.yaml, a guest's file, hypervisors.conf, a
/// recipe's manifest or template, users.yaml): hand-written files are a few KiB; this is a
/// thousand times that.
pub const MAX_TEXT_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads `path`, which must be a regular file (a link to one is followed) of at most `limit`
/// bytes.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a folder, not a file",
        ));
    }
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a device, a pipe or a socket)",
        ));
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {} MiB", limit / (1024 * 1024)),
        )
    };
    if metadata.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_bounded`] with [`MAX_TEXT_FILE_BYTES`], as UTF-8 text.
pub fn read_text_bounded(path: &Path) -> io::Result<String> {
    String::from_utf8(read_bounded(path, MAX_TEXT_FILE_BYTES)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused() {
        assert!(read_bounded(Path::new("/dev/zero"), 1024).is_err());
        assert!(read_bounded(Path::new("/"), 1024).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, vec![b'x'; 2048]).unwrap();
        assert!(read_bounded(&path, 1024).is_err());
        assert_eq!(read_bounded(&path, 4096).unwrap().len(), 2048);
        std::fs::write(&path, b"\xff\xfe").unwrap();
        assert!(read_text_bounded(&path).is_err());
    }
}
