//! Reading an installation's files with a bound: a path that leads to something endless (a link
//! to `/dev/zero`, a FIFO nobody writes) or to a huge file put there by mistake is refused with a
//! message, never read until memory runs out or waited on forever.

use std::io::{self, Read};
use std::path::Path;

/// The largest configuration file trog reads (recipes.yaml, a guest's file, hypervisors.conf, a
/// recipe's manifest or template, users.yaml): hand-written files are a few KiB; this is a
/// thousand times that.
pub const MAX_TEXT_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// What makes a file unreadable as configuration, carried inside the `io::Error` the readers
/// return so that a caller's hint can tell it apart from a permission or a missing file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadProblem {
    #[error("it is a folder, not a file")]
    Folder,
    #[error("it is not a regular file (a device, a pipe or a socket)")]
    NotRegular,
    #[error("it is larger than {limit_mib} MiB")]
    TooLarge { limit_mib: u64 },
    #[error("it is not UTF-8 text: line {line}, column {column} (byte {offset}) is not UTF-8")]
    NotUtf8 {
        /// Bytes from the start of the file to the first that is not UTF-8.
        offset: usize,
        line: usize,
        column: usize,
    },
}

impl ReadProblem {
    fn into_io(self) -> io::Error {
        let kind = match self {
            ReadProblem::Folder | ReadProblem::NotRegular => io::ErrorKind::InvalidInput,
            ReadProblem::TooLarge { .. } | ReadProblem::NotUtf8 { .. } => {
                io::ErrorKind::InvalidData
            }
        };
        io::Error::new(kind, self)
    }

    /// Where the first byte that is not UTF-8 is: its offset, line and column (in bytes from the
    /// start of its line, counting from 1).
    fn not_utf8(bytes: &[u8], offset: usize) -> ReadProblem {
        let before = &bytes[..offset];
        let line_start = before
            .iter()
            .rposition(|byte| *byte == b'\n')
            .map_or(0, |newline| newline + 1);
        ReadProblem::NotUtf8 {
            offset,
            line: before.iter().filter(|byte| **byte == b'\n').count() + 1,
            column: offset - line_start + 1,
        }
    }
}

/// What to do about a file the readers refused: the hint of a configuration file's `Read` error
/// (`None` when it is none of the refusals above, and permissions are the likely cause).
pub fn read_problem_hint(error: &io::Error) -> Option<String> {
    let problem = error.get_ref()?.downcast_ref::<ReadProblem>()?;
    Some(match problem {
        ReadProblem::Folder | ReadProblem::NotRegular => {
            "point at the file itself, a regular file".to_string()
        }
        ReadProblem::TooLarge { .. } => {
            "configuration files are a few KiB: check that this is the file you meant".to_string()
        }
        ReadProblem::NotUtf8 { .. } => {
            "save the file as UTF-8 text (`iconv -f LATIN1 -t UTF-8` converts one in Latin-1)"
                .to_string()
        }
    })
}

/// Reads `path`, which must be a regular file (a link to one is followed) of at most `limit`
/// bytes.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_dir() {
        return Err(ReadProblem::Folder.into_io());
    }
    if !metadata.is_file() {
        return Err(ReadProblem::NotRegular.into_io());
    }
    let too_large = || {
        ReadProblem::TooLarge {
            limit_mib: limit / (1024 * 1024),
        }
        .into_io()
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
    String::from_utf8(read_bounded(path, MAX_TEXT_FILE_BYTES)?).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        ReadProblem::not_utf8(error.as_bytes(), offset).into_io()
    })
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

    #[test]
    fn text_that_is_not_utf8_is_told_where_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recipes.yaml");
        std::fs::write(&path, b"_base:\n  _global:\n    admin_user: r\xe9mi\n").unwrap();
        let error = read_text_bounded(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "it is not UTF-8 text: line 3, column 18 (byte 35) is not UTF-8"
        );
        assert!(read_problem_hint(&error).unwrap().contains("UTF-8"));
        std::fs::write(&path, b"\xff").unwrap();
        assert!(read_text_bounded(&path)
            .unwrap_err()
            .to_string()
            .contains("line 1, column 1 (byte 0)"));
        // A file that cannot be opened is not one of these: its hint is the caller's.
        let missing = read_text_bounded(&dir.path().join("missing")).unwrap_err();
        assert_eq!(read_problem_hint(&missing), None);
        let folder = read_text_bounded(dir.path()).unwrap_err();
        assert!(read_problem_hint(&folder).unwrap().contains("regular file"));
    }
}
