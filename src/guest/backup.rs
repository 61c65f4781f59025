//! Putting a backup back on a guest whose root disk is new: once cloud-init is done (its
//! packages installed, so what the backup holds lands over their defaults), before the Makefile
//! runs (so the recipes find the site's files and dumps in place). The archive is checked on
//! this machine first (its digest, and every member inside the paths the backup recorded), then
//! streamed from its file into the guest's tar, which extracts those paths only.

use crate::backup::archive_dir::{recorded_paths, verify, ArchiveDirError};
use crate::backup::guest_restore_script;
use crate::backup::members::{check_members, ArchiveMembersError};
use crate::guest::cloud_init::wait_for_cloud_init;
use crate::guest::finish::FinishError;
use crate::machine::{Machine, MachineCommand, MachineError};
use std::path::Path;
use std::time::Duration;

/// How long unpacking a backup on the guest may take: as long as taking it may
/// (`workflow::backup`'s tar), since the same gigabytes go back the other way.
const UNPACK_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, thiserror::Error)]
pub enum RestoreBackupError {
    #[error("cannot restore the backup onto {guest}")]
    Archive {
        guest: String,
        #[source]
        source: ArchiveDirError,
    },
    #[error("cannot restore the backup onto {guest}")]
    Members {
        guest: String,
        #[source]
        source: ArchiveMembersError,
    },
    #[error("cannot restore the backup onto {guest}")]
    CloudInit {
        guest: String,
        #[source]
        source: Box<FinishError>,
    },
    #[error("cannot unpack the backup {archive} on {guest}")]
    Unpack {
        guest: String,
        archive: String,
        #[source]
        source: Box<MachineError>,
    },
}

impl crate::diagnose::Diagnose for RestoreBackupError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Guest
    }

    fn hint(&self) -> Option<String> {
        match self {
            RestoreBackupError::Archive { source, .. } => source.hint(),
            RestoreBackupError::Members { source, .. } => source.hint(),
            RestoreBackupError::CloudInit { source, .. } => source.hint(),
            RestoreBackupError::Unpack { .. } => Some("check the guest's free space; move the archive out of the backup directory to build the guest without it (the next newest is used then)".into()),
        }
    }
}

/// The recorded paths `archive` holds, relative to `/`, once its digest and every member are
/// checked: what may be extracted on the guest.
pub fn checked_members(archive: &Path, guest: &str) -> Result<Vec<String>, RestoreBackupError> {
    let archive_error = |source| RestoreBackupError::Archive {
        guest: guest.to_string(),
        source,
    };
    verify(archive).map_err(archive_error)?;
    let recorded = recorded_paths(archive).map_err(archive_error)?;
    check_members(archive, &recorded).map_err(|source| RestoreBackupError::Members {
        guest: guest.to_string(),
        source,
    })
}

/// Checks `archive` (see [`checked_members`]) and unpacks the recorded paths it holds over the
/// guest's `/` as root, streamed from the file.
pub fn restore_backup(guest: &dyn Machine, archive: &Path) -> Result<(), RestoreBackupError> {
    let name = guest.describe();
    let members = checked_members(archive, &name)?;
    wait_for_cloud_init(guest).map_err(|source| RestoreBackupError::CloudInit {
        guest: name.clone(),
        source: Box::new(source),
    })?;
    if members.is_empty() {
        // Every member lies inside a recorded path, so an archive holding none is empty.
        return Ok(());
    }
    let unpack = MachineCommand::shell(&guest_restore_script(&members))
        .as_root(true)
        .stdin_file(archive.to_path_buf())
        .timeout(UNPACK_TIMEOUT);
    guest
        .run(&unpack)
        .and_then(|output| output.success())
        .map_err(|source| RestoreBackupError::Unpack {
            guest: name,
            archive: archive.display().to_string(),
            source: Box::new(source),
        })?;
    Ok(())
}
