//! The SSH connections to hypervisors that outlive a run.
//!
//! Over a distant link, most of what a run pays to reach a hypervisor is SSH's handshake: about
//! half the round trips of observing it (bench/README.md), once for libvirt's ssh transport and
//! once more for the commands trog runs there. So, as Ansible does, every hypervisor login gets
//! one OpenSSH master connection, kept in a directory only this user can reach and shared by
//! both: libvirt's transport through a small wrapper of `ssh` the URI's `command` parameter names
//! (src/libvirt/connection.rs), and trog's own commands ([`super::ssh::SshMachine`]). A master
//! closes itself once nothing used it for [`PERSIST`], so a run soon after another (the web
//! button, cron, a person at a terminal) pays no handshake, and nothing is left for long.
//!
//! A master whose link died without a word ends itself within [`DEAD_LINK_LIMIT`], and every
//! run waiting on it with it; a master that is gone leaves a socket ssh replaces. Guests never
//! share masters: a guest rebuilt at the same address would find the old one.
//!
//! Where no private directory can be had (no home, a home another user can write, a path too long
//! for a socket), a run keeps its own master for itself, as it did before.

use crate::machine::ssh::CONNECT_TIMEOUT;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a master stays after its last use.
pub const PERSIST: Duration = Duration::from_secs(60);
/// ssh asks the far side whether it is there every this many seconds when nothing else arrives…
const ALIVE_INTERVAL_S: u64 = 5;
/// …and gives up after this many questions without an answer.
const ALIVE_COUNT: u64 = 3;
/// How long a master whose link died silently lives on.
pub const DEAD_LINK_LIMIT: Duration = Duration::from_secs(ALIVE_INTERVAL_S * ALIVE_COUNT);
/// A socket's path holds at most 107 bytes; ssh names its new socket after the final one plus a
/// dot and 16 random characters, and `%C` is 40. What is left is the directory's.
const LONGEST_DIRECTORY: usize = 107 - 1 - 40 - 17;

/// The directory holding the shared masters' sockets and libvirt's wrappers of ssh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedMasters {
    dir: PathBuf,
}

/// Why no directory of shared masters can be used; the run then keeps its master to itself.
#[derive(Debug, thiserror::Error)]
pub enum MastersUnavailable {
    #[error("neither XDG_RUNTIME_DIR nor HOME names a folder")]
    NoBase,
    #[error("{path} is not this user's own, or others may write to it")]
    NotPrivate { path: PathBuf },
    #[error("{path} is too long to hold SSH sockets ({LONGEST_DIRECTORY} bytes at most)")]
    TooLong { path: PathBuf },
    #[error("cannot set up {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where this user's masters live: under the runtime directory when the session has one (it is
/// private and emptied at logout), else under the home's cache.
pub fn masters_dir(runtime_dir: Option<&Path>, home: Option<&Path>) -> Option<(PathBuf, PathBuf)> {
    match (runtime_dir, home) {
        (Some(runtime), _) if runtime.is_absolute() => {
            Some((runtime.to_path_buf(), runtime.join("trog/ssh")))
        }
        (_, Some(home)) if home.is_absolute() => {
            Some((home.to_path_buf(), home.join(".cache/trog/ssh")))
        }
        _ => None,
    }
}

/// Single quotes for `sh`.
fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The wrapper libvirt runs instead of ssh: `inner` (ssh, or the command the URI named) with the
/// shared master's options first, because ssh keeps the first value it is given for an option.
pub fn wrapper_script(inner: &str, options: &[String]) -> String {
    let mut line = format!("exec {}", sh_quote(inner));
    for option in options {
        line.push(' ');
        line.push_str(&sh_quote(option));
    }
    format!(
        "#!/bin/sh\n# Written by trog: libvirt's ssh transport through the shared master connection.\n{line} \"$@\"\n"
    )
}

impl SharedMasters {
    /// This user's directory, made private if new; why not, when there is none to use.
    pub fn for_this_user() -> Result<SharedMasters, MastersUnavailable> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        // A runtime directory that is not ours (sudo keeps the caller's) is passed over for the home.
        let runtime = runtime.filter(|dir| owned_and_private(dir, true));
        let (base, dir) =
            masters_dir(runtime.as_deref(), home.as_deref()).ok_or(MastersUnavailable::NoBase)?;
        SharedMasters::at(&base, &dir)
    }

    /// `dir`, below `base`, created where missing; every folder from `base` down must be this
    /// user's and not writable by others, or someone else could put their program in libvirt's way.
    pub fn at(base: &Path, dir: &Path) -> Result<SharedMasters, MastersUnavailable> {
        if dir.as_os_str().len() > LONGEST_DIRECTORY {
            return Err(MastersUnavailable::TooLong {
                path: dir.to_path_buf(),
            });
        }
        if !owned_and_private(base, false) {
            return Err(MastersUnavailable::NotPrivate {
                path: base.to_path_buf(),
            });
        }
        let below = dir.strip_prefix(base).unwrap_or(dir);
        let mut path = base.to_path_buf();
        for part in below.components() {
            path.push(part);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => return Err(MastersUnavailable::Io { path, source }),
            }
            if !owned_and_private(&path, false) {
                return Err(MastersUnavailable::NotPrivate { path });
            }
        }
        // The last folder holds the sockets: nobody else may even look.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| MastersUnavailable::Io {
                path: dir.to_path_buf(),
                source,
            },
        )?;
        Ok(SharedMasters {
            dir: dir.to_path_buf(),
        })
    }

    /// The options that make an ssh use (or become) the login's shared master.
    pub fn ssh_options(&self) -> Vec<String> {
        [
            "ControlMaster=auto".to_string(),
            format!("ControlPath={}/%C", self.dir.display()),
            format!("ControlPersist={}", PERSIST.as_secs()),
            format!("ServerAliveInterval={ALIVE_INTERVAL_S}"),
            format!("ServerAliveCountMax={ALIVE_COUNT}"),
            format!("ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()),
        ]
        .into_iter()
        .flat_map(|option| ["-o".to_string(), option])
        .collect()
    }

    /// The wrapper of `inner` libvirt's transport is to run, written (again) if missing or
    /// different; one per inner command, named after it.
    pub fn libvirt_ssh_command(&self, inner: &str) -> Result<PathBuf, MastersUnavailable> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(inner.as_bytes());
        let name: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let path = self.dir.join(format!("libvirt-ssh-{name}"));
        let script = wrapper_script(inner, &self.ssh_options());
        if std::fs::read_to_string(&path).ok().as_deref() == Some(script.as_str()) {
            return Ok(path);
        }
        let io = |source| MastersUnavailable::Io {
            path: path.clone(),
            source,
        };
        // Written beside and renamed over: a run reading it meanwhile sees the old or the new.
        let mut staged = tempfile::Builder::new()
            .prefix(".libvirt-ssh-")
            .tempfile_in(&self.dir)
            .map_err(io)?;
        std::io::Write::write_all(&mut staged, script.as_bytes()).map_err(io)?;
        std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(io)?;
        staged.persist(&path).map_err(|error| io(error.error))?;
        Ok(path)
    }
}

/// Whether `path` is a folder this user owns that nobody else may write to; with `strict`, that
/// nobody else may even enter (as a session's runtime directory is). A symbolic link is judged
/// by the folder it leads to (a home under `/home` that links elsewhere): only someone who may
/// write to the folder holding the link could have made it, and that folder is checked too.
fn owned_and_private(path: &Path, strict: bool) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let forbidden = if strict { 0o077 } else { 0o022 };
    metadata.is_dir() && metadata.uid() == me && metadata.mode() & forbidden == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_directory_comes_first_then_the_homes_cache() {
        let runtime = Path::new("/run/user/1000");
        let home = Path::new("/home/alice");
        assert_eq!(
            masters_dir(Some(runtime), Some(home)),
            Some((runtime.into(), "/run/user/1000/trog/ssh".into()))
        );
        assert_eq!(
            masters_dir(None, Some(home)),
            Some((home.into(), "/home/alice/.cache/trog/ssh".into()))
        );
        assert_eq!(masters_dir(Some(Path::new("relative")), None), None);
        assert_eq!(masters_dir(None, None), None);
    }

    #[test]
    fn the_wrapper_puts_the_shared_options_before_libvirts() {
        let options = vec!["-o".to_string(), "ControlPath=/h/it's/%C".to_string()];
        let script = wrapper_script("/usr/local/bin/my ssh", &options);
        assert_eq!(
            script.lines().last().unwrap(),
            r#"exec '/usr/local/bin/my ssh' '-o' 'ControlPath=/h/it'\''s/%C' "$@""#
        );
        assert!(script.starts_with("#!/bin/sh\n"));
    }

    #[test]
    fn a_private_directory_is_made_and_its_wrapper_written_once() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("trog/ssh");
        let masters = SharedMasters::at(base.path(), &dir).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&base.path().join("trog")), 0o700);
        let options = masters.ssh_options();
        assert!(options.contains(&format!("ControlPath={}/%C", dir.display())));
        assert!(options.contains(&"ControlPersist=60".to_string()));
        let wrapper = masters.libvirt_ssh_command("ssh").unwrap();
        assert_eq!(mode(&wrapper), 0o700);
        let written = std::fs::metadata(&wrapper).unwrap().modified().unwrap();
        assert_eq!(masters.libvirt_ssh_command("ssh").unwrap(), wrapper);
        assert_eq!(
            std::fs::metadata(&wrapper).unwrap().modified().unwrap(),
            written
        );
        assert_ne!(masters.libvirt_ssh_command("/opt/ssh").unwrap(), wrapper);
        // The wrapper runs: ssh's own version, through it.
        let output = std::process::Command::new(&wrapper)
            .arg("-V")
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&output.stderr).contains("OpenSSH"));
    }

    #[test]
    fn a_folder_others_may_write_to_is_refused() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = SharedMasters::at(base.path(), &base.path().join("trog/ssh")).unwrap_err();
        assert!(
            matches!(refused, MastersUnavailable::NotPrivate { .. }),
            "{refused}"
        );
        assert!(!base.path().join("trog").exists());

        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir(base.path().join("trog")).unwrap();
        std::fs::set_permissions(
            base.path().join("trog"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let refused = SharedMasters::at(base.path(), &base.path().join("trog/ssh")).unwrap_err();
        assert!(
            matches!(refused, MastersUnavailable::NotPrivate { path } if path.ends_with("trog"))
        );
    }

    #[test]
    fn a_home_that_links_elsewhere_is_judged_by_where_it_leads() {
        let real = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        let home = parent.path().join("home");
        std::os::unix::fs::symlink(real.path(), &home).unwrap();
        let dir = home.join(".cache/trog/ssh");
        SharedMasters::at(&home, &dir).unwrap();
        assert!(real.path().join(".cache/trog/ssh").is_dir());

        std::fs::set_permissions(real.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = SharedMasters::at(&home, &dir).unwrap_err();
        assert!(
            matches!(refused, MastersUnavailable::NotPrivate { .. }),
            "{refused}"
        );
    }

    #[test]
    fn a_path_too_long_for_a_socket_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a".repeat(60));
        let refused = SharedMasters::at(base.path(), &dir).unwrap_err();
        assert!(
            matches!(refused, MastersUnavailable::TooLong { .. }),
            "{refused}"
        );
        assert!(!dir.exists());
    }
}
