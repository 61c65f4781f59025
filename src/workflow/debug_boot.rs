//! `debug_boot`: reading a guest that will not boot. The order of every verb acting on a guest
//! (`workflow::session`): locate the guest, take its lock when the action changes the guest, open
//! its hypervisor (its own system too when the action reads a file there), then refuse a domain
//! trog did not make, and act, through the `Hypervisor` trait alone.
//!
//! The actions that change the domain (`--console`, `--hold`) change only its definition, in ways
//! `--restore` takes back exactly (see `debug_boot::domain_edit`); when what follows the change
//! fails (the restart), the definition is put back as it was and a guest that was running is
//! started again from it, so no action leaves a half-changed domain.

use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::debug_boot::console::ConsoleEnd;
use crate::debug_boot::domain_edit::{console_capture_path, DebugChange, EditError};
use crate::debug_boot::keys::KeyEvent;
use crate::debug_boot::screen::{screenshot_to_png, ScreenError};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::generate::desired::serial_log_path;
use crate::hypervisor::DebugEdit;
use crate::lock::Locks;
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp};
use crate::machine::ssh::PortForward;
use crate::model::names::DomainName;
use crate::workflow::debug_boot_console::{fetch_capture, stream_capture, ConsoleBounds};
use crate::workflow::debug_boot_disk::GuestOnDisk;
use crate::workflow::debug_domain::DebugDomain;
use crate::workflow::hypervisor_machine::ssh_machine_for;
use crate::workflow::locate::{refuse_without_own_guest, GuestVerb};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, GuestSession, GuestUse, InstallationFleet};
use serde::Serialize;
use std::time::Duration;

/// One `debug_boot` action.
#[derive(Debug, Clone)]
pub enum DebugAction {
    /// Capture the serial console from the first line of firmware, restarting the guest.
    Console(ConsoleBounds),
    /// The last capture again, without a restart.
    Fetch,
    /// The screen as it is now, as a PNG.
    Shot,
    /// The firmware's boot menu on, and the guest restarted into it.
    Hold,
    /// Keystrokes, in order.
    Keys(Vec<KeyEvent>),
    /// Every change of `--console` and `--hold` taken back.
    Restore,
    /// Where a VNC viewer reaches the guest's display: for a remote hypervisor, through an SSH
    /// tunnel from this machine, held open by the report.
    Vnc,
    /// A file of the shut-off guest's disks, through libguestfs.
    Cat(String),
    /// A directory of the shut-off guest's disks, through libguestfs.
    Ls(String),
    /// `single` on the kernel command line of the shut-off guest's GRUB configuration, and the
    /// guest started into rescue mode.
    Single,
}

impl DebugAction {
    /// Whether the action changes the guest (its definition, its state, its keyboard).
    fn changes_guest(&self) -> bool {
        matches!(
            self,
            DebugAction::Console(_)
                | DebugAction::Hold
                | DebugAction::Keys(_)
                | DebugAction::Restore
                | DebugAction::Single
        )
    }

    /// Whether the action works on the hypervisor's own system (reading the capture there).
    fn access(&self) -> HypervisorAccess {
        match self {
            DebugAction::Console(_)
            | DebugAction::Fetch
            | DebugAction::Cat(_)
            | DebugAction::Ls(_)
            | DebugAction::Single
            | DebugAction::Restore => HypervisorAccess::WithSystem,
            _ => HypervisorAccess::LibvirtOnly,
        }
    }
}

pub struct DebugRequest<'a> {
    pub domain: &'a DomainName,
    /// `--hypervisor`: act there instead of asking the fleet.
    pub hypervisor: Option<&'a str>,
    pub action: DebugAction,
    pub answer_timeout: Duration,
}

/// What an action did.
#[derive(Debug, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum DebugOutcome {
    /// The capture ended, and why; the domain's definition was changed (`--restore` undoes it).
    Console { capture: String, end: ConsoleEnd },
    /// The last capture's lines.
    Fetch { capture: String, lines: Vec<String> },
    /// The screen, as a PNG of this size.
    Shot {
        width: u32,
        height: u32,
        #[serde(skip)]
        png: Vec<u8>,
    },
    /// The boot menu is on and the guest was (re)started into it.
    Hold { menu_timeout_ms: u32 },
    /// The keys sent, in order.
    Keys { sent: Vec<String> },
    /// The changes taken back (none when there were none), and whether the guest's GRUB
    /// configuration was looked at.
    Restore {
        undone: Vec<DebugChange>,
        grub: GrubCheck,
    },
    /// The bytes of a file in the guest.
    Cat {
        path: String,
        /// As text in `--json` (bytes that are not UTF-8 shown as U+FFFD); as they are otherwise.
        #[serde(rename = "content", serialize_with = "lossy_text")]
        bytes: Vec<u8>,
    },
    /// The names in a directory of the guest.
    Ls { path: String, names: Vec<String> },
    /// `single` is on the guest's kernel command line (`written` is false when it was already)
    /// and the guest was started.
    Single { written: bool },
    /// The address to point a VNC viewer at; `tunneled` when it is this machine's end of an SSH
    /// tunnel to the hypervisor. The display lets in whoever gives `password` until
    /// `valid_until` (UTC, `YYYY-MM-DDTHH:MM:SS`), and nobody without it.
    Vnc {
        address: String,
        tunneled: bool,
        password: String,
        valid_until: String,
    },
}

fn lossy_text<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}

/// Whether `--restore` could look at the guest's GRUB configuration (which only `--single`
/// changes), and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrubCheck {
    Checked,
    /// libguestfs reads the disks of a shut-off guest only.
    GuestRunning,
    NoLibguestfs,
    /// libvirt's test driver: no system, no disks.
    NoSystem,
}

#[derive(Debug, Serialize)]
pub struct DebugReport {
    pub guest: String,
    pub hypervisor: String,
    #[serde(flatten)]
    pub outcome: DebugOutcome,
    /// `--vnc` on a remote hypervisor: the tunnel, open until this is dropped or held.
    #[serde(skip)]
    pub tunnel: Option<PortForward>,
}

#[derive(Debug, thiserror::Error)]
pub enum DebugBootError {
    #[error("{domain}'s definition cannot be changed for debugging")]
    Edit {
        domain: String,
        #[source]
        source: EditError,
    },
    #[error("{domain} has no console capture on {hypervisor} yet")]
    NoCapture { domain: String, hypervisor: String },
    #[error("libvirt's test driver has no system to read a console capture on")]
    NoSystem,
    #[error("the screen of {domain} cannot be made a PNG")]
    Screen {
        domain: String,
        #[source]
        source: ScreenError,
    },
    #[error("no free port on this machine's loopback for the tunnel")]
    NoLocalPort {
        #[source]
        source: std::io::Error,
    },
    /// The restart after a change failed, and the change was taken back (or why it was not).
    #[error("{domain} did not start with the change for debugging; {aftermath}")]
    NotRestarted {
        domain: String,
        aftermath: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    #[error("reading the console capture of {domain} on {hypervisor} failed")]
    ReadCapture {
        domain: String,
        hypervisor: String,
        #[source]
        source: Box<crate::machine::MachineError>,
    },
}

impl Diagnose for DebugBootError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            DebugBootError::Edit { .. } => ExitStatus::Conflict,
            DebugBootError::NoCapture { .. } | DebugBootError::NoLocalPort { .. } => {
                ExitStatus::Failure
            }
            DebugBootError::NoSystem
            | DebugBootError::NotRestarted { .. }
            | DebugBootError::Screen { .. }
            | DebugBootError::ReadCapture { .. } => ExitStatus::Hypervisor,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DebugBootError::Edit { .. } => Some(
                "the domain was changed by hand; `trog provision` puts it back as declared".into(),
            ),
            DebugBootError::NoCapture { domain, .. } => Some(format!(
                "capture one first: trog debug_boot --console {domain}"
            )),
            DebugBootError::ReadCapture { source, .. } => source.hint(),
            _ => None,
        }
    }
}

/// A port of this machine's loopback nothing listens on, for the tunnel's end.
fn free_local_port() -> Result<u16, DebugBootError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|source| DebugBootError::NoLocalPort { source })
}

/// Redefines `domain` as `changed`, then runs `then` (the restart); when `then` fails, the
/// definition goes back to `before`, and a guest that ran before and no longer does (the failed
/// restart stopped it) is started again from it, so the domain is never left half-changed.
/// The failure says what became of the change (see [`DebugBootError::NotRestarted`]).
fn change_then<T>(
    domain: &DebugDomain,
    before: &str,
    changed: &str,
    then: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    let was_running = domain.is_running()?;
    if changed != before {
        domain.redefine(changed)?;
    }
    then().map_err(|failure| {
        let put_back = if changed == before {
            Ok(())
        } else {
            domain.redefine(before)
        };
        let started_again = (was_running && put_back.is_ok()).then(|| domain.start());
        let aftermath = match (put_back, started_again) {
            (Err(error), _) => format!(
                "taking the change back failed too ({error}): `trog debug_boot --restore {}` takes it back",
                domain.name()
            ),
            (Ok(()), None) => "the change was taken back: its definition is as it was".to_string(),
            (Ok(()), Some(Ok(()))) => "the change was taken back: its definition is as it was, and the guest runs again from it".to_string(),
            (Ok(()), Some(Err(error))) => format!(
                "the change was taken back: its definition is as it was, but starting the guest again failed too ({error})"
            ),
        };
        not_restarted(domain.name(), aftermath, failure)
    })
}

/// A start after a change that failed, said with what became of the change; the start's own
/// hint and exit status stay.
fn not_restarted(domain: &str, aftermath: String, failure: Failure) -> Failure {
    Failure {
        error: Box::new(DebugBootError::NotRestarted {
            domain: domain.to_string(),
            aftermath,
            source: failure.error,
        }),
        hint: failure.hint,
        status: failure.status,
    }
}

/// Runs one action on the guest. Console lines are handed to `on_line` as they come.
pub fn debug_boot(
    paths: &InstallationPaths,
    request: DebugRequest,
    credentials: &mut CredentialSource<TerminalPrompter>,
    locks: &Locks,
    on_line: &mut dyn FnMut(&str),
    reporter: &dyn Reporter,
) -> Result<DebugReport, Failure> {
    let fleet = InstallationFleet { paths, locks };
    debug_boot_in(&fleet, request, credentials, on_line, reporter)
}

/// [`debug_boot`] on `fleet`.
pub fn debug_boot_in(
    fleet: &dyn Fleet,
    request: DebugRequest,
    credentials: &mut CredentialSource<TerminalPrompter>,
    on_line: &mut dyn FnMut(&str),
    reporter: &dyn Reporter,
) -> Result<DebugReport, Failure> {
    // The actions that change the guest hold its lock while they do; reading it (fetch, shot,
    // vnc) does not wait for another run, and a console capture is read after the lock is let go.
    let guest_use = if request.action.changes_guest() {
        GuestUse::Change
    } else {
        GuestUse::Read
    };
    refuse_without_own_guest(
        GuestVerb::DebugBoot,
        request.domain,
        fleet.runs_on(request.domain),
    )?;
    let session = GuestSession::open(
        fleet,
        &GuestAddress {
            domain: request.domain,
            hypervisor: request.hypervisor,
            answer_timeout: request.answer_timeout,
        },
        guest_use,
        request.action.access(),
        credentials,
        reporter,
    )?;
    let hypervisor_name = session.hypervisor_name();
    let hypervisor = session.hypervisor.as_ref();
    let domain = DebugDomain::open(hypervisor, request.domain.as_str())?;
    let name = request.domain.as_str();
    let capture = console_capture_path(name);
    let provisioned_log = serial_log_path(request.domain);
    let edit_failed = |source| DebugBootError::Edit {
        domain: name.to_string(),
        source,
    };
    let system = || -> Result<&HypervisorMachine, DebugBootError> {
        session.machine.as_ref().ok_or(DebugBootError::NoSystem)
    };
    let read_failed = |source| DebugBootError::ReadCapture {
        domain: name.to_string(),
        hypervisor: hypervisor_name.clone(),
        source: Box::new(source),
    };

    let mut tunnel = None;
    let outcome = match request.action {
        DebugAction::Console(bounds) => {
            let machine = system()?;
            let before = domain.definition()?;
            let edit = DebugEdit::ConsoleCapture {
                provisioned_log: &provisioned_log,
                capture: &capture,
            };
            let changed = hypervisor.debug_edit(&before, edit).map_err(edit_failed)?;
            change_then(&domain, &before, &changed, || {
                domain.restart().map_err(Failure::from)
            })?;
            session.release_lock();
            let end = stream_capture(machine, &capture, bounds, on_line).map_err(read_failed)?;
            DebugOutcome::Console { capture, end }
        }
        DebugAction::Fetch => {
            let machine = system()?;
            let lines = fetch_capture(machine, &capture)
                .map_err(read_failed)?
                .ok_or_else(|| DebugBootError::NoCapture {
                    domain: name.to_string(),
                    hypervisor: hypervisor_name.clone(),
                })?;
            DebugOutcome::Fetch { capture, lines }
        }
        DebugAction::Shot => {
            let screen = screenshot_to_png(&domain.screenshot()?);
            let (width, height, png) = screen.map_err(|source| DebugBootError::Screen {
                domain: name.to_string(),
                source,
            })?;
            DebugOutcome::Shot { width, height, png }
        }
        DebugAction::Hold => {
            let before = domain.definition()?;
            let changed = hypervisor
                .debug_edit(&before, DebugEdit::BootMenu)
                .map_err(edit_failed)?;
            change_then(&domain, &before, &changed, || {
                domain.restart().map_err(Failure::from)
            })?;
            DebugOutcome::Hold {
                menu_timeout_ms: crate::debug_boot::domain_edit::BOOT_MENU_TIMEOUT_MS,
            }
        }
        DebugAction::Keys(events) => {
            let codes: Vec<Vec<u32>> = events.iter().map(|event| event.codes.clone()).collect();
            domain.send_keys(&codes)?;
            DebugOutcome::Keys {
                sent: events.into_iter().map(|event| event.label).collect(),
            }
        }
        DebugAction::Restore => {
            let before = domain.definition()?;
            let (restored, mut undone) =
                hypervisor.as_provisioned(&before, &provisioned_log, &capture);
            if restored != before {
                domain.redefine(&restored)?;
            }
            let grub = match &session.machine {
                None => GrubCheck::NoSystem,
                Some(_) if domain.is_running()? => GrubCheck::GuestRunning,
                Some(machine) if !machine.holds(&HypervisorOp::Libguestfs) => {
                    GrubCheck::NoLibguestfs
                }
                Some(machine) => {
                    if GuestOnDisk::open(&session.config, machine, &domain)?.put_back_grub()? {
                        undone.push(DebugChange::SingleUser);
                    }
                    GrubCheck::Checked
                }
            };
            DebugOutcome::Restore { undone, grub }
        }
        DebugAction::Cat(path) => {
            let bytes = GuestOnDisk::open(&session.config, system()?, &domain)?.cat(&path)?;
            DebugOutcome::Cat { path, bytes }
        }
        DebugAction::Ls(path) => {
            let names = GuestOnDisk::open(&session.config, system()?, &domain)?.ls(&path)?;
            DebugOutcome::Ls { path, names }
        }
        DebugAction::Single => {
            let guest = GuestOnDisk::open(&session.config, system()?, &domain)?;
            let written = guest.write_single()?;
            // A guest that will not start is not left with a changed configuration.
            if let Err(error) = domain.start() {
                let aftermath = if !written {
                    "its kernel command line already had `single`: nothing was changed".to_string()
                } else {
                    match guest.put_back_grub() {
                        Ok(true) => {
                            "the change was taken back: its GRUB configuration is as it was"
                                .to_string()
                        }
                        Ok(false) => format!(
                            "no copy of its GRUB configuration was found to put back: `trog debug_boot --restore {name}` checks it"
                        ),
                        Err(put_back) => format!(
                            "taking the change back failed too ({put_back}): `trog debug_boot --restore {name}` takes it back"
                        ),
                    }
                };
                return Err(not_restarted(name, aftermath, Failure::from(error)));
            }
            DebugOutcome::Single { written }
        }
        DebugAction::Vnc => {
            let now_unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs());
            let display = domain.open_vnc_display(now_unix)?;
            let (address, tunneled) = match ssh_machine_for(&session.config.libvirt_uri)? {
                Some(ssh) => {
                    let local_port = free_local_port()?;
                    tunnel = Some(ssh.tunnel(local_port, &display.listen, display.port)?);
                    (format!("127.0.0.1:{local_port}"), true)
                }
                None => (format!("{}:{}", display.listen, display.port), false),
            };
            DebugOutcome::Vnc {
                address,
                tunneled,
                password: display.password,
                valid_until: display.valid_until,
            }
        }
    };
    Ok(DebugReport {
        guest: name.to_string(),
        hypervisor: hypervisor_name,
        outcome,
        tunnel,
    })
}

#[cfg(test)]
#[path = "debug_boot_tests.rs"]
mod fake_tests;
