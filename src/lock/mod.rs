//! Advisory locks between runs of trog on this machine: one writer of the secret store, one run
//! per guest, one upload of a base image to a pool, one run at a time changing trog's network
//! filters on a hypervisor.
//!
//! Runs overlap (cron, a person, a web button). What two runs can both change is taken under a
//! lock first: an exclusive `flock` on a file in the installation's `locks/` directory (beside
//! `secrets.kdbx`; see [`lock_dir_for_store`]). The installation, not `/run`, is where they live
//! because it is what runs that may collide share, it is writable by whoever runs trog (the
//! store is written there too), and a test's installation keeps its locks to itself.
//!
//! - The file records who holds it: host, process id, verb and since when, so a run that has to
//!   wait says for whom.
//! - A holder that dies (killed, crashed) lets go at once: the kernel drops the `flock` of a dead
//!   process, and the next run takes the lock over and overwrites the record. Nothing is left to
//!   clean up by hand.
//! - Every wait is bounded ([`Locks::wait`], the global `--wait SECONDS`), announced with what it
//!   waits for, and ends with [`LockError::Busy`] (exit status 10) naming the holder.
//! - Lock files are never removed: removing one while another run waits on it would let two runs
//!   hold "the same" lock on two different files.
//!
//! What runs share on a hypervisor (a guest, an upload into a pool) is also locked there, for
//! runs from other installations: [`hypervisor`], taken after the local lock by
//! [`Locks::acquire_with_hypervisor`] within the same `--wait`.

mod error;
mod holder;
pub mod hypervisor;

pub use error::{DirProblem, FoundDir, LockError};
pub use holder::{host_name, utc_timestamp, Holder};

use crate::machine::hypervisor_ops::HypervisorMachine;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a run waits for a lock another run holds, unless `--wait` says otherwise: a fresh
/// guest's whole run (boot and finish) takes a few minutes, and a second run of the same guest
/// should normally outlast the first and then find it converged rather than give up.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(900);

/// How often a waiting run tries again. Short enough that a released lock is taken at once.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// The directory of the locks of the installation whose secret store is `store`.
pub fn lock_dir_for_store(store: &Path) -> PathBuf {
    match store.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.join("locks"),
        _ => PathBuf::from("locks"),
    }
}

/// What a lock guards; names its file and how a message speaks of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The secret store: one writer at a time.
    SecretStore,
    /// One guest: one run acting on it at a time.
    Guest(String),
    /// The upload of one base image into one pool of one hypervisor.
    BaseImageUpload {
        hypervisor: String,
        pool: String,
        volume: String,
    },
    /// trog's network filters on one hypervisor, which every guest's interface references: held
    /// from defining them until the guest's domain (which then keeps them in use) is defined,
    /// and while a destroy removes those no domain uses, so that it never removes one a
    /// guest being defined is about to reference.
    NetworkFilters { hypervisor: String },
}

impl Subject {
    /// The lock file's name: only characters safe in a file name.
    pub fn file_name(&self) -> String {
        let raw = match self {
            Subject::SecretStore => "secret-store".to_string(),
            Subject::Guest(domain) => format!("guest-{domain}"),
            Subject::BaseImageUpload {
                hypervisor,
                pool,
                volume,
            } => format!("image-{hypervisor}-{pool}-{volume}"),
            Subject::NetworkFilters { hypervisor } => format!("network-filters-{hypervisor}"),
        };
        let safe: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{safe}.lock")
    }

    /// The lock file's name on a hypervisor: as [`Subject::file_name`], without the name this
    /// installation gives the hypervisor (another installation may call it otherwise).
    pub fn hypervisor_file_name(&self) -> String {
        match self {
            Subject::BaseImageUpload { pool, volume, .. } => Subject::BaseImageUpload {
                hypervisor: String::new(),
                pool: pool.clone(),
                volume: volume.clone(),
            }
            .file_name()
            .replacen("image--", "image-", 1),
            Subject::NetworkFilters { .. } => "network-filters.lock".to_string(),
            _ => self.file_name(),
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::SecretStore => write!(formatter, "the secret store"),
            Subject::Guest(domain) => write!(formatter, "the guest {domain}"),
            Subject::BaseImageUpload {
                hypervisor,
                pool,
                volume,
            } => write!(
                formatter,
                "the upload of base image {volume} to pool {pool} on {hypervisor}"
            ),
            Subject::NetworkFilters { hypervisor } => {
                write!(
                    formatter,
                    "the set of trog's network filters on {hypervisor}"
                )
            }
        }
    }
}

/// Where the locks are, how long to wait for one, and who is asking.
#[derive(Debug, Clone)]
pub struct Locks {
    pub dir: PathBuf,
    pub wait: Duration,
    /// The verb of this run (`provision`, `destroy`…), recorded in what it holds.
    pub verb: String,
    /// Who is told of a wait that begins where the caller passes no `on_wait` of its own (the
    /// secret store's writer lock, taken deep inside a store's update).
    waits_told_to: WaitReporter,
}

/// The reporter a [`Locks`] tells of its waits; none in tests and in a store opened on its own.
#[derive(Clone, Default)]
struct WaitReporter(Option<WaitTeller>);

/// What tells the person running trog that a wait began: the edge's printer.
pub type WaitTeller = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for WaitReporter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(if self.0.is_some() {
            "WaitReporter(told)"
        } else {
            "WaitReporter(untold)"
        })
    }
}

/// A lock held until it is dropped.
#[derive(Debug)]
pub struct HeldLock {
    // Closing the file releases the flock.
    _file: File,
    pub path: PathBuf,
}

impl Locks {
    pub fn new(dir: PathBuf, wait: Duration, verb: &str) -> Locks {
        Locks {
            dir,
            wait,
            verb: verb.to_string(),
            waits_told_to: WaitReporter::default(),
        }
    }

    /// These locks, telling `tell` (the edge's printer) of a wait [`Locks::tell_wait`] is given.
    pub fn reporting_waits_to(mut self, tell: WaitTeller) -> Locks {
        self.waits_told_to = WaitReporter(Some(tell));
        self
    }

    /// Tells the run's reporter, if it has one, that a wait began (an `on_wait` for
    /// [`Locks::acquire`] where the caller has no reporter of its own at hand).
    pub fn tell_wait(&self, text: &str) {
        if let Some(tell) = &self.waits_told_to.0 {
            tell(text);
        }
    }

    /// Takes the lock of `subject`, waiting up to [`Locks::wait`] for another run to let go;
    /// `on_wait` is told once, when a wait begins, what is waited for and who holds it.
    pub fn acquire(
        &self,
        subject: &Subject,
        on_wait: &mut dyn FnMut(&str),
    ) -> Result<HeldLock, LockError> {
        prepare_dir(&self.dir)?;
        let path = self.dir.join(subject.file_name());
        let mut file = open_lock_file(&path)?;
        let started = Instant::now();
        let mut announced = false;
        loop {
            match try_flock(&file) {
                Ok(true) => break,
                Ok(false) => {
                    let holder = read_holder(&mut file);
                    if started.elapsed() >= self.wait {
                        return Err(LockError::Busy {
                            subject: subject.to_string(),
                            holder,
                            waited_seconds: self.wait.as_secs(),
                            path,
                        });
                    }
                    if !announced {
                        on_wait(&format!(
                            "waiting up to {}s for {subject}: {holder} holds it",
                            self.wait.as_secs()
                        ));
                        announced = true;
                    }
                    std::thread::sleep(RETRY_INTERVAL.min(self.wait));
                }
                Err(source) => {
                    return Err(LockError::Take { path, source });
                }
            }
        }
        let record = Holder::this_process(&self.verb).to_record();
        let written = file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(record.as_bytes()))
            .and_then(|_| file.flush());
        written.map_err(|source| LockError::Take {
            path: path.clone(),
            source,
        })?;
        Ok(HeldLock { _file: file, path })
    }
}

/// A local lock and, when its subject lives on a hypervisor with a system, that hypervisor's;
/// both held until dropped (the hypervisor's let go first).
#[derive(Debug)]
pub struct HeldLocks {
    pub on_hypervisor: Option<hypervisor::HypervisorLock>,
    pub local: HeldLock,
}

/// A hypervisor whose own system can hold a lock: its machine and its name in messages.
#[derive(Clone, Copy)]
pub struct LockingHypervisor<'a> {
    pub machine: &'a HypervisorMachine,
    pub name: &'a str,
}

impl Locks {
    /// Takes `subject`'s lock here, then on `hypervisor` (none for libvirt's test driver, which
    /// has no system and lives in this process), waiting for both within one [`Locks::wait`].
    pub fn acquire_with_hypervisor(
        &self,
        subject: &Subject,
        hypervisor: Option<LockingHypervisor>,
        on_wait: &mut dyn FnMut(&str),
    ) -> Result<HeldLocks, LockError> {
        let started = Instant::now();
        let local = self.acquire(subject, on_wait)?;
        let on_hypervisor = match hypervisor {
            None => None,
            Some(hypervisor) => Some(hypervisor::acquire(
                hypervisor.machine,
                hypervisor.name,
                subject,
                &self.verb,
                self.wait.saturating_sub(started.elapsed()),
                on_wait,
            )?),
        };
        Ok(HeldLocks {
            on_hypervisor,
            local,
        })
    }
}

/// Makes the lock directory when it is missing, readable and writable by its owner and group
/// only: a user who could open a lock file could hold it for ever, and one who could write the
/// directory could put a link where a lock file goes. One that is a link, or that every user can
/// write, is refused; one an older trog made readable by every user (0755) is closed to them.
fn prepare_dir(dir: &Path) -> Result<(), LockError> {
    let unsafe_dir = |problem| LockError::UnsafeDir {
        dir: dir.to_path_buf(),
        problem,
    };
    let made = |source| LockError::MakeDir {
        dir: dir.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o770)
                .create(dir)
                .map_err(made)?;
            std::fs::symlink_metadata(dir).map_err(made)?
        }
        other => other.map_err(made)?,
    };
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir(DirProblem::SymbolicLink));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir(DirProblem::NotADirectory));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(unsafe_dir(DirProblem::WritableByOthers { mode }));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if mode & 0o007 != 0 && meta.uid() == unsafe { libc::geteuid() } {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & !0o007))
            .map_err(made)?;
    }
    Ok(())
}

/// Opens (or makes) a lock file, readable and writable by its owner and group only. A link in
/// its place is refused, never followed (`O_NOFOLLOW`): through it, this run would write its
/// record into whatever file the link names.
fn open_lock_file(path: &Path) -> Result<File, LockError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o660)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => LockError::LinkInPlace {
                path: path.to_path_buf(),
            },
            _ => LockError::Open {
                path: path.to_path_buf(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(|source| LockError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(LockError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Takes an exclusive `flock` on `file` without blocking: `Ok(false)` when another holds it.
fn try_flock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: the descriptor is open for as long as `file` lives.
        let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if result == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// Who holds the lock, as its file says; the file may be mid-write, so anything unreadable is
/// "another run".
fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let read = file
        .rewind()
        .and_then(|_| file.read_to_string(&mut text).map(|_| ()));
    match read.ok().and_then(|_| Holder::from_record(&text)) {
        Some(holder) => holder.to_string(),
        None => "another run of trog".to_string(),
    }
}

#[cfg(test)]
mod tests;
