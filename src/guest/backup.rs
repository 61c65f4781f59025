//! Putting a backup back on a guest whose root disk is new: once cloud-init is done (its
//! packages installed, so what the backup holds lands over their defaults), before the Makefile
//! runs (so the recipes find the site's files and dumps in place).

use crate::backup::archive_dir::{read_verified, ArchiveDirError};
use crate::backup::guest_restore_script;
use crate::guest::cloud_init::wait_for_cloud_init;
use crate::guest::finish::FinishError;
use crate::machine::{Machine, MachineCommand, MachineError, FILE_TRANSFER_TIMEOUT};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum RestoreBackupError {
    #[error("cannot restore the backup onto {guest}")]
    Archive {
        guest: String,
        #[source]
        source: ArchiveDirError,
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
            RestoreBackupError::CloudInit { source, .. } => source.hint(),
            RestoreBackupError::Unpack { .. } => Some("check the guest's free space; move the archive out of the backup directory to build the guest without it (the next newest is used then)".into()),
        }
    }
}

/// Checks `archive` against its sha256 file and unpacks it over the guest's `/` as root.
pub fn restore_backup(guest: &dyn Machine, archive: &Path) -> Result<(), RestoreBackupError> {
    let name = guest.describe();
    let bytes = read_verified(archive).map_err(|source| RestoreBackupError::Archive {
        guest: name.clone(),
        source,
    })?;
    wait_for_cloud_init(guest).map_err(|source| RestoreBackupError::CloudInit {
        guest: name.clone(),
        source: Box::new(source),
    })?;
    let unpack = MachineCommand::shell(&guest_restore_script())
        .as_root(true)
        .stdin(bytes)
        .timeout(FILE_TRANSFER_TIMEOUT);
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
