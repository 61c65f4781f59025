//! `debug_boot DOMAIN ACTION`: read a guest that will not boot. One action at a time: the serial
//! console from the first line of firmware (`--console`, again with `--fetch`), the screen
//! (`--shot`), the firmware's boot menu (`--hold`) and keystrokes (`--keys`), and `--restore`,
//! which takes back what `--console` and `--hold` changed.

use crate::cli::target::GuestTarget;
use crate::cli::values::{self, Seconds};
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::debug_boot::keys::parse_keys;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event};
use crate::workflow::debug_boot::{
    debug_boot, DebugAction, DebugOutcome, DebugReport, DebugRequest, GrubCheck,
};
use crate::workflow::debug_boot_console::ConsoleBounds;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("action").required(true).args(["console", "fetch", "shot", "hold", "keys", "restore", "vnc", "cat", "ls", "single"])))]
pub struct DebugBootArgs {
    #[command(flatten)]
    pub target: GuestTarget,
    /// Point the serial port at a capture file, restart the guest, and print every line from
    /// the first line of firmware on, until a login prompt, a panic, silence, or the bound.
    #[arg(long)]
    pub console: bool,
    /// Print the last --console capture again, without a restart.
    #[arg(long)]
    pub fetch: bool,
    /// Write the screen as it is now to FILE (PNG).
    #[arg(long, value_name = "FILE")]
    pub shot: Option<PathBuf>,
    /// Turn on the firmware's boot menu and restart the guest into it.
    #[arg(long)]
    pub hold: bool,
    /// Send keystrokes, in order: named keys (esc, enter, down, f12…), single characters, or
    /// text:WORDS.
    #[arg(long, value_name = "KEY", num_args = 1..)]
    pub keys: Option<Vec<String>>,
    /// Print a file of the shut-off guest's disks (libguestfs on the hypervisor); PATH is
    /// absolute, from the guest's root.
    #[arg(long, value_name = "PATH", value_parser = values::guest_path)]
    pub cat: Option<String>,
    /// List a directory of the shut-off guest's disks (libguestfs on the hypervisor); PATH is
    /// absolute, from the guest's root.
    #[arg(long, value_name = "PATH", value_parser = values::guest_path)]
    pub ls: Option<String>,
    /// Put `single` on the kernel command line of the shut-off guest's GRUB configuration
    /// (libguestfs on the hypervisor) and start it into rescue mode.
    #[arg(long)]
    pub single: bool,
    /// Put the serial port, the boot menu and the guest's GRUB configuration back as provision
    /// made them.
    #[arg(long)]
    pub restore: bool,
    /// Print the address of the guest's VNC display; for a remote hypervisor, the local end of
    /// an SSH tunnel to it, held open until interrupted.
    #[arg(long)]
    pub vnc: bool,
    /// --console: stop after this many seconds without a new line.
    #[arg(long, value_name = "SECONDS",
          default_value_t = Seconds(ConsoleBounds::default().silence.as_secs()),
          value_parser = values::seconds(1, values::LONGEST_SECONDS))]
    pub silence: Seconds,
    /// --console: stop after this many seconds in all.
    #[arg(long, value_name = "SECONDS",
          default_value_t = Seconds(ConsoleBounds::default().total.as_secs()),
          value_parser = values::seconds(1, values::LONGEST_SECONDS))]
    pub total: Seconds,
}

#[derive(Debug, thiserror::Error)]
pub enum DebugBootCommandError {
    #[error("cannot write the screenshot to {path}")]
    WriteShot {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the screenshot to {path}: {why}")]
    ShotPath { path: String, why: &'static str },
}

impl Diagnose for DebugBootCommandError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            DebugBootCommandError::ShotPath { .. } => ExitStatus::Usage,
            DebugBootCommandError::WriteShot { .. } => ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DebugBootCommandError::WriteShot { .. } | DebugBootCommandError::ShotPath { .. } => {
                Some("name a file in a directory you can write to".into())
            }
        }
    }
}

fn action(args: &DebugBootArgs) -> Result<DebugAction, Failure> {
    Ok(if args.console {
        DebugAction::Console(ConsoleBounds {
            silence: args.silence.duration(),
            total: args.total.duration(),
        })
    } else if args.fetch {
        DebugAction::Fetch
    } else if args.shot.is_some() {
        DebugAction::Shot
    } else if args.hold {
        DebugAction::Hold
    } else if let Some(keys) = &args.keys {
        DebugAction::Keys(parse_keys(keys)?)
    } else if args.vnc {
        DebugAction::Vnc
    } else if let Some(path) = &args.cat {
        DebugAction::Cat(path.clone())
    } else if let Some(path) = &args.ls {
        DebugAction::Ls(path.clone())
    } else if args.single {
        DebugAction::Single
    } else {
        DebugAction::Restore
    })
}

/// Refuses a `--shot` file that could not be written, before the guest's screen is asked for:
/// a folder, or a file in a folder that does not exist.
fn check_shot_path(path: &Path) -> Result<(), DebugBootCommandError> {
    let refuse = |why| {
        Err(DebugBootCommandError::ShotPath {
            path: path.display().to_string(),
            why,
        })
    };
    if path.is_dir() {
        return refuse("it is a folder");
    }
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return refuse("its folder does not exist");
    }
    Ok(())
}

const RESTORE_NOTE: &str = "--restore puts it back as provision made it";

pub fn run(global: &GlobalArgs, args: DebugBootArgs) -> Result<ExitStatus, Failure> {
    let domain = &args.target.guest.domain;
    let action = action(&args)?;
    if let Some(path) = &args.shot {
        check_shot_path(path)?;
    }
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let json = global.json;
    let mut on_line = |line: &str| {
        if json {
            emit(&Event::ConsoleLine { text: line });
        } else {
            crate::outln!("{line}");
        }
    };
    let report = debug_boot(
        &global.installation_paths(),
        DebugRequest {
            domain,
            hypervisor: args.target.search.hypervisor_name(),
            action,
            answer_timeout: args.target.search.answer_timeout(),
        },
        &mut credentials,
        &global.locks("debug_boot"),
        &mut on_line,
        &crate::commands::StderrReporter,
    )?;
    if let (DebugOutcome::Shot { png, .. }, Some(path)) = (&report.outcome, &args.shot) {
        std::fs::write(path, png).map_err(|source| DebugBootCommandError::WriteShot {
            path: path.display().to_string(),
            source,
        })?;
    }
    if json {
        if let DebugOutcome::Fetch { lines, .. } = &report.outcome {
            for line in lines {
                emit(&Event::ConsoleLine { text: line });
            }
        }
        emit(&Event::DebugBoot(&report));
        return hold_tunnel(report);
    }
    let guest = &report.guest;
    let hypervisor = &report.hypervisor;
    match &report.outcome {
        DebugOutcome::Console { capture, end } => {
            crate::errln!("debug_boot: {end}.");
            crate::errln!(
                "debug_boot: {guest}'s serial port now writes to {capture} on {hypervisor} and its firmware to the serial port; {RESTORE_NOTE}."
            );
        }
        DebugOutcome::Fetch { lines, .. } => {
            for line in lines {
                crate::outln!("{line}");
            }
        }
        DebugOutcome::Shot { width, height, .. } => {
            let path = args.shot.as_ref().expect("--shot names a file");
            crate::outln!(
                "{} ({width}x{height}): the screen of {guest}",
                path.display()
            );
        }
        DebugOutcome::Hold { menu_timeout_ms } => {
            crate::outln!(
                "{guest} restarted with its firmware's boot menu on: press ESC (--keys esc) within {}s to open it; {RESTORE_NOTE}.",
                menu_timeout_ms / 1000
            );
        }
        DebugOutcome::Keys { sent } => crate::outln!("sent to {guest}: {}", sent.join(" ")),
        DebugOutcome::Vnc {
            address,
            tunneled,
            password,
            valid_until,
        } => {
            if *tunneled {
                crate::outln!(
                    "{address}: point a VNC viewer here for {guest}'s display (an SSH tunnel to {hypervisor}, open until interrupted)"
                );
            } else {
                crate::outln!(
                    "{address}: point a VNC viewer here for {guest}'s display on {hypervisor}"
                );
            }
            crate::outln!(
                "password: {password} (lets a viewer in until {valid_until} UTC; a connection made by then stays)"
            );
            crate::output::print::write_stdout_bytes(b"");
        }
        DebugOutcome::Restore { undone, grub } => {
            if undone.is_empty() {
                crate::outln!("{guest}: nothing to restore, it is as provision made it");
            } else {
                crate::outln!("{guest} restored as provision made it (from its next start):");
                for change in undone {
                    crate::outln!("  undone: {change}");
                }
            }
            match grub {
                GrubCheck::Checked | GrubCheck::NoSystem => {}
                GrubCheck::GuestRunning => crate::errln!(
                    "debug_boot: {guest} runs, so its GRUB configuration (which --single changes) was not looked at; shut it off and run --restore again to check it"
                ),
                GrubCheck::NoLibguestfs => crate::errln!(
                    "debug_boot: no libguestfs on {hypervisor}, so {guest}'s GRUB configuration (which only --single changes) was not looked at"
                ),
            }
        }
        DebugOutcome::Cat { bytes, .. } => {
            // A failure other than a reader gone is reported once the run ends (main).
            crate::output::print::write_stdout_bytes(bytes);
        }
        DebugOutcome::Ls { names, .. } => {
            for name in names {
                crate::outln!("{name}");
            }
        }
        DebugOutcome::Single { written } => {
            if *written {
                crate::outln!(
                    "{guest} started with `single` on its kernel command line, into rescue mode; {RESTORE_NOTE}."
                );
            } else {
                crate::outln!(
                    "{guest} started; its kernel command line already had `single`; {RESTORE_NOTE}."
                );
            }
        }
    }
    hold_tunnel(report)
}

/// Holds a `--vnc` tunnel open until it ends or the run is interrupted.
fn hold_tunnel(report: DebugReport) -> Result<ExitStatus, Failure> {
    if let Some(tunnel) = report.tunnel {
        tunnel.hold()?;
    }
    Ok(ExitStatus::Success)
}
