//! The payload archive: the rendered Makefile, the recipes' files and the site's `data.tar.gz`,
//! as one `tar.gz` that is poured into a command on the guest.
//!
//! One set of entries gives one archive, byte for byte, so its sha256 says whether the payload
//! changed ("finish again") without comparing contents. What would make two builds differ is
//! pinned: entries are sorted by path, every time is 0, every owner is 0:0 with no user or group
//! name, paths are relative and checked, and the gzip header carries neither a time nor a file
//! name. The compression level is fixed too; the bytes can still differ between two builds of
//! trog that link different deflate implementations, which is fine: a digest is only compared
//! with digests the same trog computed.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use flate2::{Compression, GzBuilder};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// gzip level 6, zlib's own default: a middle point between size and time that never changes
/// with a library's idea of "default".
const PAYLOAD_GZIP_LEVEL: u32 = 6;

/// Mode of the directories the archive implies from its files' paths.
pub const IMPLIED_DIRECTORY_MODE: u32 = 0o755;

/// What an entry is.
#[derive(Clone, PartialEq, Eq)]
pub enum PayloadContent {
    File(Vec<u8>),
    Directory,
}

/// One entry of the archive: where it goes inside it, its permission bits, and what it is.
#[derive(Clone, PartialEq, Eq)]
pub struct PayloadEntry {
    /// A relative path with `/` between components; checked when the archive is built.
    pub path: String,
    /// Permission bits only (`0o7777` at most); the entry's kind comes from `content`.
    pub mode: u32,
    pub content: PayloadContent,
}

impl std::fmt::Debug for PayloadEntry {
    // Rendered files may hold resolved secrets: print their size, never their bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.content {
            PayloadContent::File(bytes) => format!("file of {} bytes", bytes.len()),
            PayloadContent::Directory => "directory".to_string(),
        };
        write!(f, "PayloadEntry({:?}, {:o}, {kind})", self.path, self.mode)
    }
}

impl PayloadEntry {
    pub fn file(path: impl Into<String>, mode: u32, bytes: impl Into<Vec<u8>>) -> PayloadEntry {
        PayloadEntry {
            path: path.into(),
            mode,
            content: PayloadContent::File(bytes.into()),
        }
    }

    pub fn directory(path: impl Into<String>, mode: u32) -> PayloadEntry {
        PayloadEntry {
            path: path.into(),
            mode,
            content: PayloadContent::Directory,
        }
    }
}

/// The archive and the sha256 of its bytes (lower-case hex).
#[derive(Clone, PartialEq, Eq)]
pub struct Payload {
    pub bytes: Vec<u8>,
    pub sha256_hex: String,
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payload")
            .field("len", &self.bytes.len())
            .field("sha256_hex", &self.sha256_hex)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("payload path `{path}` is not a plain relative path: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("payload path `{path}` has mode {mode:o}, beyond permission bits")]
    InvalidMode { path: String, mode: u32 },
    #[error("payload path `{path}` is given twice")]
    Duplicate { path: String },
    #[error("payload path `{path}` is a file, but `{inside}` is inside it")]
    FileAsDirectory { path: String, inside: String },
    #[error("could not write `{path}` into the payload archive")]
    Archive {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not read `{}` to put it into the payload", host_path.display())]
    ReadHostFile {
        host_path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for PayloadError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            PayloadError::ReadHostFile { .. } => ExitStatus::Failure,
            PayloadError::Archive { .. } => ExitStatus::Failure,
            _ => ExitStatus::Configuration,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            PayloadError::InvalidPath { .. } | PayloadError::InvalidMode { .. } => {
                Some("fix the recipe's `files` entry that names this path".to_string())
            }
            PayloadError::Duplicate { .. } | PayloadError::FileAsDirectory { .. } => {
                Some("two recipes write the same path; give one of them another path".to_string())
            }
            PayloadError::ReadHostFile { .. } => {
                Some("check that the file exists and is readable".to_string())
            }
            PayloadError::Archive { .. } => None,
        }
    }
}

/// Checks that `path` is relative and plain: no leading `/`, no `.` or `..` components, no
/// empty components, no NUL, no trailing `/`. Returns its components.
fn archive_path_components(path: &str) -> Result<Vec<&str>, PayloadError> {
    let invalid = |reason| PayloadError::InvalidPath {
        path: path.to_string(),
        reason,
    };
    if path.is_empty() {
        return Err(invalid("it is empty"));
    }
    if path.starts_with('/') {
        return Err(invalid("it is absolute"));
    }
    if path.contains('\0') {
        return Err(invalid("it contains a NUL byte"));
    }
    if path.contains('\\') {
        // A backslash is an ordinary byte to tar but a separator to some readers.
        return Err(invalid("it contains a backslash"));
    }
    let components: Vec<&str> = path.split('/').collect();
    for component in &components {
        match *component {
            "" => {
                return Err(invalid(
                    "it has an empty component (`//` or a trailing `/`)",
                ))
            }
            "." => return Err(invalid("it has a `.` component")),
            ".." => return Err(invalid("it has a `..` component")),
            _ => {}
        }
    }
    Ok(components)
}

/// Builds the archive from `entries`. Directories above each file are added with
/// [`IMPLIED_DIRECTORY_MODE`] unless given explicitly; the order of `entries` does not matter.
pub fn build_payload(entries: &[PayloadEntry]) -> Result<Payload, PayloadError> {
    // Keyed by components, so a directory sorts right before its contents (`a`, `a/b`, `a-b`)
    // and the archive order does not depend on the order entries were given in.
    let mut by_components: BTreeMap<Vec<&str>, &PayloadEntry> = BTreeMap::new();
    for entry in entries {
        let components = archive_path_components(&entry.path)?;
        if entry.mode > 0o7777 {
            return Err(PayloadError::InvalidMode {
                path: entry.path.clone(),
                mode: entry.mode,
            });
        }
        if by_components.insert(components, entry).is_some() {
            return Err(PayloadError::Duplicate {
                path: entry.path.clone(),
            });
        }
    }
    let implied: Vec<Vec<&str>> = by_components
        .keys()
        .flat_map(|components| (1..components.len()).map(move |depth| components[..depth].to_vec()))
        .collect();
    let implied_directory = PayloadEntry::directory(String::new(), IMPLIED_DIRECTORY_MODE);
    for parent in implied {
        match by_components.get(&parent) {
            Some(PayloadEntry {
                content: PayloadContent::File(_),
                path,
                ..
            }) => {
                let inside = by_components
                    .iter()
                    .find(|(components, _)| {
                        components.starts_with(&parent) && components.len() > parent.len()
                    })
                    .map(|(_, entry)| entry.path.clone())
                    .unwrap_or_default();
                return Err(PayloadError::FileAsDirectory {
                    path: path.clone(),
                    inside,
                });
            }
            Some(_) => {}
            None => {
                by_components.insert(parent, &implied_directory);
            }
        }
    }

    let encoder = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::new(PAYLOAD_GZIP_LEVEL));
    let mut archive = tar::Builder::new(encoder);
    for (components, entry) in &by_components {
        let path = components.join("/");
        let archive_error = |source| PayloadError::Archive {
            path: path.clone(),
            source,
        };
        let mut header = tar::Header::new_gnu();
        header.set_mode(entry.mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        // GNU headers start with empty user and group names; say so rather than rely on it.
        header.set_username("").map_err(archive_error)?;
        header.set_groupname("").map_err(archive_error)?;
        match &entry.content {
            PayloadContent::File(bytes) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(bytes.len() as u64);
                archive
                    .append_data(&mut header, &path, bytes.as_slice())
                    .map_err(archive_error)?;
            }
            PayloadContent::Directory => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                archive
                    .append_data(&mut header, format!("{path}/"), std::io::empty())
                    .map_err(archive_error)?;
            }
        }
    }
    let finish_error = |source| PayloadError::Archive {
        path: String::new(),
        source,
    };
    let bytes = archive
        .into_inner()
        .map_err(finish_error)?
        .finish()
        .map_err(finish_error)?;
    let sha256_hex = hex::encode(Sha256::digest(&bytes));
    Ok(Payload { bytes, sha256_hex })
}

/// Reads a file of this machine (such as the site's `data.tar.gz`) into an entry at
/// `archive_path` with `mode`. Only the bytes travel: neither the host path nor the host
/// file's owner, time or mode reaches the archive. This is the one function here that does I/O.
pub fn read_host_file_entry(
    archive_path: &str,
    mode: u32,
    host_path: &Path,
) -> Result<PayloadEntry, PayloadError> {
    let bytes = std::fs::read(host_path).map_err(|source| PayloadError::ReadHostFile {
        host_path: host_path.to_path_buf(),
        source,
    })?;
    Ok(PayloadEntry::file(archive_path, mode, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<PayloadEntry> {
        vec![
            PayloadEntry::file("Makefile", 0o644, "all:\n\ttrue\n"),
            PayloadEntry::file("files/etc/nginx/sites-enabled/site", 0o644, "server {}\n"),
            PayloadEntry::file("files/usr/local/bin/hook", 0o755, "#!/bin/sh\n"),
            PayloadEntry::directory("files/var/empty", 0o700),
        ]
    }

    #[test]
    fn same_entries_give_same_bytes_whatever_their_order() {
        let first = build_payload(&entries()).unwrap();
        let mut reversed = entries();
        reversed.reverse();
        let second = build_payload(&reversed).unwrap();
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(first.sha256_hex, hex::encode(Sha256::digest(&first.bytes)));
    }

    #[test]
    fn contents_and_modes_change_the_digest() {
        let base = build_payload(&entries()).unwrap().sha256_hex;
        let mut changed = entries();
        changed[0] = PayloadEntry::file("Makefile", 0o644, "all:\n\tfalse\n");
        assert_ne!(build_payload(&changed).unwrap().sha256_hex, base);
        let mut changed = entries();
        changed[0].mode = 0o600;
        assert_ne!(build_payload(&changed).unwrap().sha256_hex, base);
    }

    #[test]
    fn the_gzip_header_has_no_time_and_no_name() {
        let bytes = build_payload(&entries()).unwrap().bytes;
        assert_eq!(&bytes[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(bytes[3], 0, "no FNAME, FCOMMENT or FEXTRA flag");
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0], "MTIME is zero");
    }

    #[test]
    fn paths_that_escape_or_are_not_plain_are_refused() {
        for path in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "a/",
            "./a",
            "a\\b",
            "a\0b",
        ] {
            let result = build_payload(&[PayloadEntry::file(path, 0o644, "x")]);
            assert!(
                matches!(result, Err(PayloadError::InvalidPath { .. })),
                "{path:?} gave {result:?}"
            );
        }
    }

    #[test]
    fn duplicates_files_under_files_and_modes_beyond_permissions_are_refused() {
        let duplicate = [
            PayloadEntry::file("a", 0o644, "1"),
            PayloadEntry::file("a", 0o644, "2"),
        ];
        assert!(matches!(
            build_payload(&duplicate),
            Err(PayloadError::Duplicate { .. })
        ));
        let nested = [
            PayloadEntry::file("a", 0o644, "1"),
            PayloadEntry::file("a/b", 0o644, "2"),
        ];
        assert!(
            matches!(build_payload(&nested), Err(PayloadError::FileAsDirectory { path, inside }) if path == "a" && inside == "a/b")
        );
        let typed = [PayloadEntry::file("a", 0o100644, "1")];
        assert!(matches!(
            build_payload(&typed),
            Err(PayloadError::InvalidMode { .. })
        ));
    }

    #[test]
    fn the_debug_form_hides_contents() {
        let entry = PayloadEntry::file("secret.conf", 0o600, "password=hunter2");
        assert!(!format!("{entry:?}").contains("hunter2"));
    }
}
