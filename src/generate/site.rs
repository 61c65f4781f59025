//! The site's own files beside a guest's configuration, in `recipes.d/<fqdn>/`: `users.yaml`
//! (cloud-init users), `data.tar.gz` (the site's data, restored by the `data` recipe).

use crate::config::bounded_read::{read_bounded, MAX_TEXT_FILE_BYTES};
use crate::config::paths::InstallationPaths;
use crate::model::names::DomainName;
use std::path::PathBuf;

#[derive(Debug, Default, Clone)]
pub struct SiteFiles {
    /// cloud-init `users` entries.
    pub users: Vec<serde_json::Value>,
    /// The site's archive, shipped in the payload.
    pub data_archive: Option<Vec<u8>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SiteFilesError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Users { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    DataArchive { path: PathBuf, message: String },
}

impl crate::diagnose::Diagnose for SiteFilesError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        match self {
            SiteFilesError::Users { .. } => Some("users.yaml is a list of cloud-init users: `- name: alice` with groups, ssh_authorized_keys, …".into()),
            SiteFilesError::DataArchive { .. } => Some("make it with `tar -czf data.tar.gz -C SITE_DIR .` (the data recipe restores it into site_dir)".into()),
            SiteFilesError::Read { .. } => Some("the site files are regular files in recipes.d/<fqdn>/: users.yaml and data.tar.gz; remove or replace what is there".into()),
        }
    }
}

/// Reads the site files of `domain`; absent files are simply not there.
pub fn load_site_files(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<SiteFiles, SiteFilesError> {
    let dir = paths.site_dir(domain);
    let read = |name: &str| -> Result<Option<Vec<u8>>, SiteFilesError> {
        let path = dir.join(name);
        let limit = if name == DATA_ARCHIVE {
            MAX_DATA_ARCHIVE_BYTES
        } else {
            MAX_TEXT_FILE_BYTES
        };
        match read_bounded(&path, limit) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SiteFilesError::Read { path, source }),
        }
    };
    let users = match read("users.yaml")? {
        None => Vec::new(),
        Some(bytes) => {
            let path = dir.join("users.yaml");
            let text = String::from_utf8(bytes).map_err(|_| SiteFilesError::Users {
                path: path.clone(),
                message: "it is not UTF-8 text".into(),
            })?;
            let options = serde_saphyr::options! { strict_booleans: true };
            let users: Vec<serde_json::Value> = serde_saphyr::from_str_with_options(&text, options)
                .map_err(|error| SiteFilesError::Users {
                    path: path.clone(),
                    message: error.to_string(),
                })?;
            for user in &users {
                if user
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .is_none()
                {
                    return Err(SiteFilesError::Users {
                        path,
                        message: "every user needs a `name`".into(),
                    });
                }
            }
            users
        }
    };
    let data_archive = read(DATA_ARCHIVE)?;
    if let Some(archive) = &data_archive {
        check_data_archive(archive).map_err(|message| SiteFilesError::DataArchive {
            path: dir.join(DATA_ARCHIVE),
            message,
        })?;
    }
    Ok(SiteFiles {
        users,
        data_archive,
    })
}

/// The site's archive, in the guest's site folder.
const DATA_ARCHIVE: &str = "data.tar.gz";

/// The largest site archive trog ships: it is held in memory and copied into the payload, and a
/// site's bulk data belongs on its data volume, not in every rebuild's upload.
pub const MAX_DATA_ARCHIVE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Whether `archive` is a gzip-compressed tar archive that reads to its end: a file that is not
/// would otherwise be found out only on the guest, minutes into a build.
fn check_data_archive(archive: &[u8]) -> Result<(), String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let entries = tar.entries().map_err(|error| error.to_string())?;
    for entry in entries {
        let mut entry =
            entry.map_err(|error| format!("it is not a gzip-compressed tar archive: {error}"))?;
        std::io::copy(&mut entry, &mut std::io::sink())
            .map_err(|error| format!("it is not a gzip-compressed tar archive: {error}"))?;
    }
    Ok(())
}
