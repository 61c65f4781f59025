//! Handing a guest's private key to OpenSSH for the length of a run.
//!
//! OpenSSH reads an identity from a file (`ssh -i PATH`, `IdentityFile`, the `openssh` crate's
//! `keyfile`). The key goes into a file of its own, mode 0600, in a directory of its own, mode
//! 0700, made for this run under `$XDG_RUNTIME_DIR` (a per-user tmpfs: the key never reaches a
//! disk) or, without one, the system's temporary directory; both are removed when the
//! [`PrivateKeyFile`] is dropped. Only the path appears on a command line, never the key, and the
//! file is never in a domain's directory.
//!
//! Why not ssh-agent: trog would have to start an agent (a process outside the machine layer)
//! and stop it on every way out of a run, and while it lives the agent lends the key to every
//! process of the same user through its socket — no narrower than a 0600 file in a 0700
//! directory, and with more to clean up. A killed run can leave the directory behind (no drop
//! runs on SIGKILL), on a disk where there is no runtime directory (cron, the web button): its
//! name carries the run's process id (`trog-key-<pid>-…`), and the next run of the same user
//! removes the ones whose process is gone before it writes its own.

use super::error::SecretsError;
use super::keypair::GuestKeypair;
use std::fs::{OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The name a guest's host keys are looked up by in its known_hosts file (OpenSSH's
/// `HostKeyAlias`): the guest's name, not its address, so the pin holds at whatever address the
/// guest answers and a key pinned for one guest is never taken for another's.
pub fn host_key_alias(domain: &str) -> String {
    format!("trog-guest.{domain}")
}

/// How the name of a run's key directory begins; the run's process id and a random part follow.
const KEY_DIRECTORY_PREFIX: &str = "trog-key-";

/// Removes the key directories under `parent` that runs of this user left when they were
/// killed: named with a process id that no process has now. Another user's, a link, or one of
/// a live run is left alone; what cannot be removed stays (at worst, as before).
fn remove_dead_runs_keys(parent: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(KEY_DIRECTORY_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !metadata.is_dir() || metadata.uid() != me || process_exists(pid) {
            continue;
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// Whether a process `pid` exists (whoever's it is).
fn process_exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// A guest's private key in a private file, removed with its directory on drop; beside it, the
/// known_hosts file that pins the guest's host keys.
#[derive(Debug)]
pub struct PrivateKeyFile {
    path: PathBuf,
    known_hosts: PathBuf,
    host_key_alias: String,
    // Dropped after `Drop::drop` has emptied the file: removes the directory and the file.
    directory: tempfile::TempDir,
}

/// Where the run's private directories go: the user's runtime directory when there is one.
pub fn private_directory_parent() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(runtime) if runtime.is_absolute() && runtime.is_dir() => runtime,
        _ => std::env::temp_dir(),
    }
}

impl PrivateKeyFile {
    /// Writes `keypair`'s private key into a new private directory under
    /// [`private_directory_parent`].
    pub fn write(keypair: &GuestKeypair) -> Result<PrivateKeyFile, SecretsError> {
        PrivateKeyFile::write_in(&private_directory_parent(), keypair)
    }

    /// Writes `keypair`'s private key into a new private directory under `parent`.
    pub fn write_in(parent: &Path, keypair: &GuestKeypair) -> Result<PrivateKeyFile, SecretsError> {
        let failed = |path: &Path, source| SecretsError::WriteKeyFile {
            domain: keypair.domain().to_string(),
            path: path.to_path_buf(),
            source,
        };
        remove_dead_runs_keys(parent);
        let prefix = format!("{KEY_DIRECTORY_PREFIX}{}-", std::process::id());
        let directory = tempfile::Builder::new()
            .prefix(&prefix)
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(parent)
            .map_err(|source| failed(parent, source))?;
        let path = directory.path().join("id_ed25519");
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| failed(&path, source))?;
        file.write_all(keypair.private_key_openssh().expose().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|source| failed(&path, source))?;
        let host_key_alias = host_key_alias(keypair.domain().as_str());
        let known_hosts = directory.path().join("known_hosts");
        let lines: String = keypair
            .accepted_host_keys()
            .iter()
            .map(|key| format!("{host_key_alias} {key}\n"))
            .collect();
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&known_hosts)
            .and_then(|mut file| file.write_all(lines.as_bytes()))
            .map_err(|source| failed(&known_hosts, source))?;
        Ok(PrivateKeyFile {
            path,
            known_hosts,
            host_key_alias,
            directory,
        })
    }

    /// The known_hosts file holding the host keys the guest may answer with, under
    /// [`PrivateKeyFile::host_key_alias`].
    pub fn known_hosts(&self) -> &Path {
        &self.known_hosts
    }

    /// The name the guest's host keys are pinned under.
    pub fn host_key_alias(&self) -> &str {
        &self.host_key_alias
    }

    /// What a connection to the guest with this key trusts: its pinned host keys only.
    pub fn pinned_host_keys(&self) -> crate::machine::ssh::HostKeys {
        crate::machine::ssh::HostKeys::Pinned {
            known_hosts: self.known_hosts.clone(),
            alias: self.host_key_alias.clone(),
        }
    }

    /// The file to give OpenSSH (`-i`, `IdentityFile`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The private directory holding it.
    pub fn directory(&self) -> &Path {
        self.directory.path()
    }
}

impl Drop for PrivateKeyFile {
    /// Empties the file before the directory is removed, so the key's blocks are freed at once
    /// even if something still holds the file open.
    fn drop(&mut self) {
        if let Ok(file) = OpenOptions::new().write(true).open(&self.path) {
            let _ = file.set_len(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Secret;
    use crate::model::names::DomainName;
    use crate::secrets::keypair::guest_keypair;
    use crate::secrets::store::{SecretStore, StoreKdf};
    use rand::SeedableRng;

    fn keypair(directory: &Path) -> GuestKeypair {
        let kdf = StoreKdf {
            memory_mib: 1,
            iterations: 1,
            parallelism: 1,
        };
        let mut store =
            SecretStore::create(&directory.join("secrets.kdbx"), &Secret::new("p"), kdf).unwrap();
        let domain = DomainName::parse("www.example.test").unwrap();
        guest_keypair(
            &mut store,
            &domain,
            &mut rand::rngs::StdRng::seed_from_u64(7),
        )
        .unwrap()
    }

    #[test]
    fn the_key_file_is_private_and_gone_after_drop() {
        let store_directory = tempfile::tempdir().unwrap();
        let keypair = keypair(store_directory.path());
        let parent = tempfile::tempdir().unwrap();
        let key_file = PrivateKeyFile::write_in(parent.path(), &keypair).unwrap();
        let (path, directory) = (
            key_file.path().to_path_buf(),
            key_file.directory().to_path_buf(),
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            keypair.private_key_openssh().expose()
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&directory).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(directory
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("trog-key-"));
        drop(key_file);
        assert!(!path.exists());
        assert!(!directory.exists());
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_killed_runs_key_is_removed_by_the_next_run_and_a_live_ones_stays() {
        let store_directory = tempfile::tempdir().unwrap();
        let keypair = keypair(store_directory.path());
        let parent = tempfile::tempdir().unwrap();
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = ended.id();
        ended.wait().unwrap();
        let dead = parent.path().join(format!("trog-key-{dead_pid}-a1b2c3"));
        let live = parent
            .path()
            .join(format!("trog-key-{}-d4e5f6", std::process::id()));
        let not_a_run = parent.path().join("trog-key-unrelated");
        for directory in [&dead, &live, &not_a_run] {
            std::fs::create_dir(directory).unwrap();
            std::fs::write(directory.join("id_ed25519"), "key").unwrap();
        }
        let key_file = PrivateKeyFile::write_in(parent.path(), &keypair).unwrap();
        assert!(!dead.exists(), "the killed run's key stayed");
        assert!(live.exists() && not_a_run.exists());
        assert!(key_file
            .directory()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("trog-key-{}-", std::process::id())));
    }

    #[test]
    fn the_guests_host_keys_are_pinned_beside_the_key_under_its_name() {
        let store_directory = tempfile::tempdir().unwrap();
        let keypair = keypair(store_directory.path());
        let parent = tempfile::tempdir().unwrap();
        let key_file = PrivateKeyFile::write_in(parent.path(), &keypair).unwrap();
        assert_eq!(key_file.host_key_alias(), "trog-guest.www.example.test");
        assert_eq!(key_file.known_hosts().parent(), Some(key_file.directory()));
        assert_eq!(
            std::fs::read_to_string(key_file.known_hosts()).unwrap(),
            format!(
                "trog-guest.www.example.test {}\n",
                keypair.host_key().public_key_openssh
            )
        );
        assert_eq!(
            std::fs::metadata(key_file.known_hosts())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }

    #[test]
    fn an_unwritable_parent_is_an_error_naming_it() {
        let store_directory = tempfile::tempdir().unwrap();
        let keypair = keypair(store_directory.path());
        let missing = store_directory.path().join("missing");
        let error = PrivateKeyFile::write_in(&missing, &keypair).unwrap_err();
        assert!(
            matches!(&error, SecretsError::WriteKeyFile { path, .. } if path == &missing),
            "{error:?}"
        );
    }
}
