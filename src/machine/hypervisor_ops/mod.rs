//! The closed list of what trog does on a hypervisor's own system (everything else there goes
//! through libvirt). The list is closed by the type system: a hypervisor's system is only ever
//! held as a [`HypervisorMachine`], whose one way to act is [`HypervisorMachine::run`] with a
//! [`HypervisorOp`], and the command of an operation (built in `command.rs`) is private to this
//! module. A new kind of work on a hypervisor is a new variant here, reviewed as such; nothing
//! else can compose one.

pub mod boot_files;
mod command;
pub mod root_programs;

use crate::debug_boot::guest_disk::DiskFile;
use crate::machine::command::Input;
use crate::machine::local::LocalMachine;
use crate::machine::ssh::{PortForward, SshMachine, SshTarget, SudoPassword};
use crate::machine::{CommandOutput, HeldCommand, Machine, MachineCommand, MachineError};
use crate::model::digest::ImageDigest;
use crate::model::names::DomainName;
use root_programs::{Installed, RootProgram};
use std::sync::OnceLock;

/// What happens when a pool's file already exists under the final name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// It stays: its name is its digest, so it holds the same bytes (another run's copy won).
    KeepExisting,
    /// It is replaced, in one rename (a guest's seed, rebuilt when its contents change).
    Replace,
}

/// The form a pool's file is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredForm {
    /// The bytes as they were sent (a guest's seed).
    AsSent,
    /// A qcow2 image rewritten without compression (a base image). Cloud images ship with their
    /// clusters compressed, and QEMU inflates a whole 64 KiB cluster for every read a guest makes
    /// in one, each time: a first boot reads hundreds of megabytes of its base image in small
    /// pieces, on the same cores as the guest's vCPUs. Inflated once on the hypervisor, the
    /// transfer stays small and the guests' reads are plain reads.
    Inflated,
}

/// A hypervisor's own system: this machine or an SSH login to it. It runs the operations of
/// [`HypervisorOp`] and nothing else; the machine inside is never handed out.
pub struct HypervisorMachine<M: Machine + ?Sized = dyn Machine> {
    /// What the host has at each root program's path, asked once (one `sha256sum` of them all)
    /// before the first operation that runs one, and kept for the run.
    installed: OnceLock<Vec<(&'static RootProgram, Installed)>>,
    machine: Box<M>,
}

impl HypervisorMachine<LocalMachine> {
    /// This machine as a hypervisor.
    pub fn local() -> HypervisorMachine<LocalMachine> {
        HypervisorMachine {
            installed: OnceLock::new(),
            machine: Box::new(LocalMachine),
        }
    }
}

impl HypervisorMachine<SshMachine> {
    /// An SSH login to a hypervisor.
    pub fn ssh(machine: SshMachine) -> HypervisorMachine<SshMachine> {
        HypervisorMachine {
            installed: OnceLock::new(),
            machine: Box::new(machine),
        }
    }

    /// Uses `password` for sudo on this host for the rest of the run.
    pub fn remember_sudo_password(&mut self, password: SudoPassword) {
        self.machine.remember_sudo_password(password);
    }

    pub fn target(&self) -> &SshTarget {
        self.machine.target()
    }

    /// An SSH tunnel from `127.0.0.1:local_port` here to `remote_host:remote_port` as the
    /// hypervisor sees it (a guest's display, which listens on the hypervisor's loopback only).
    pub fn tunnel(
        &self,
        local_port: u16,
        remote_host: &str,
        remote_port: u16,
    ) -> Result<PortForward, MachineError> {
        self.machine
            .forward_local_port(local_port, remote_host, remote_port)
    }
}

#[cfg(test)]
impl HypervisorMachine<crate::machine::fake::FakeMachine> {
    /// A scripted hypervisor for unit tests, with trog's root programs installed.
    pub fn fake(machine: crate::machine::fake::FakeMachine) -> HypervisorMachine {
        let installed = OnceLock::new();
        let _ = installed.set(
            root_programs::ALL
                .iter()
                .map(|program| (*program, Installed::Current))
                .collect(),
        );
        HypervisorMachine {
            installed,
            machine: Box::new(machine),
        }
    }
}

impl<M: Machine + 'static> HypervisorMachine<M> {
    /// The same hypervisor, whatever kind of machine it is.
    pub fn into_dyn(self) -> HypervisorMachine {
        HypervisorMachine {
            installed: self.installed,
            machine: self.machine,
        }
    }
}

impl<M: Machine + ?Sized> HypervisorMachine<M> {
    /// How the host is named in messages.
    pub fn describe(&self) -> String {
        self.machine.describe()
    }

    /// Runs `op` on the hypervisor.
    pub fn run(&self, op: &HypervisorOp) -> Result<CommandOutput, MachineError> {
        self.machine.run(&self.command_for(op)?)
    }

    /// The command that carries `op` out on this host. A root program runs at its installed path
    /// through sudo, once the host is known to have the very program trog embeds; where trog is
    /// root already, nothing needs sudo, and the embedded program runs as it is.
    fn command_for(&self, op: &HypervisorOp) -> Result<MachineCommand, MachineError> {
        let command = op.command();
        let Some(program) = op.root_program() else {
            return Ok(command);
        };
        if self.machine.is_root() {
            if *op == HypervisorOp::PasswordlessSudo {
                // Root needs no sudo: the answer is yes.
                return Ok(MachineCommand::new(["true"]));
            }
            return Ok(command::embedded(program, command));
        }
        match self.installed()?.iter().find(|(p, _)| *p == program) {
            Some((_, Installed::Current)) => Ok(command),
            Some((_, Installed::Differs)) => Err(MachineError::RootProgramDiffers {
                host: self.machine.describe(),
                path: program.path(),
            }),
            _ => Err(MachineError::RootProgramMissing {
                host: self.machine.describe(),
                path: program.path(),
            }),
        }
    }

    /// What the host has at each root program's path (asked once a run); `None` where trog is
    /// root already and runs the programs it embeds.
    pub fn root_programs(
        &self,
    ) -> Result<Option<&[(&'static RootProgram, Installed)]>, MachineError> {
        if self.machine.is_root() {
            return Ok(None);
        }
        self.installed().map(|found| Some(found.as_slice()))
    }

    fn installed(&self) -> Result<&Vec<(&'static RootProgram, Installed)>, MachineError> {
        if let Some(found) = self.installed.get() {
            return Ok(found);
        }
        // As the login: the programs are readable by everyone. A missing one makes sha256sum
        // exit 1 after printing the others' lines.
        let output = self.machine.run(
            &MachineCommand::new(root_programs::digest_command_argv())
                .timeout(command::QUESTION_TIMEOUT),
        )?;
        let found = root_programs::read_installed(&output.stdout_text());
        Ok(self.installed.get_or_init(|| found))
    }

    /// Runs `op` with `input` on its standard input (the new bytes of a file it replaces).
    pub fn run_with_input(
        &self,
        op: &HypervisorOp,
        input: Vec<u8>,
    ) -> Result<CommandOutput, MachineError> {
        self.machine.run(&self.command_for(op)?.stdin(input))
    }

    /// Starts `op` and leaves it running until the returned command is dropped or this process
    /// dies: only [`HypervisorOp::HoldLock`] is meant to be kept running.
    pub fn keep_running(&self, op: &HypervisorOp) -> Result<HeldCommand, MachineError> {
        self.machine.start(&self.command_for(op)?)
    }

    /// Runs a yes-or-no operation: `true` when it exited 0. A host that cannot be asked answers
    /// no, and the caller decides what no costs.
    pub fn holds(&self, op: &HypervisorOp) -> bool {
        self.run(op)
            .map(|output| output.status == Some(0))
            .unwrap_or(false)
    }
}

/// One operation on a hypervisor's system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HypervisorOp {
    /// The login name the connection runs as (`id -un`): is it the user the URI names?
    LoginName,
    /// `sudo -n true`: does sudo work without a password? Its stderr says why not.
    PasswordlessSudo,
    /// `true` as root, through sudo as the machine runs it (with the run's password when one
    /// was handed in): does sudo accept what the run has?
    RootAccess,
    /// Whether the host has a real TPM (`/dev/tpmrm0` or `/dev/tpm0`).
    RealTpm,
    /// Whether `swtpm`, which gives a guest an emulated TPM, is installed.
    Swtpm,
    /// Whether libguestfs's `guestfish` is installed, for `debug_boot`'s reads of a guest's disk.
    Libguestfs,
    /// Where the hypervisor's `virtiofsd` is (printed), which libvirt starts for each folder a
    /// guest shares from it: on the login's PATH, or where distributions put it. Exits non-zero
    /// when there is none.
    Virtiofsd,
    /// Whether `path` is a directory on the hypervisor (as the login): a shared folder's source.
    DirectoryExists { path: String },
    /// Whether `qemu-img` is installed: placing a base image inflates it with it, and libvirt
    /// runs it to make each root disk over its base image.
    QemuImg,
    /// The filesystem holding a directory (the storage pool's): mount point, type, size and
    /// free space in bytes, as `findmnt` reports them on one line.
    FilesystemOf { path: String },
    /// A guest's serial console log from byte `from_byte` on, read as root (libvirt writes it
    /// owned by root). The log is appended to across boots; a log that is now shorter than
    /// `from_byte` was rotated, and is read whole.
    ReadSerialLog { path: String, from_byte: u64 },
    /// How many bytes a guest's serial console log holds (0 when there is none yet), read as
    /// root: where the boot about to start will begin writing.
    SerialLogSize { path: String },
    /// Whether hardware virtualisation actually works: a boot sector, then the hypervisor's own
    /// kernel when it has one, are started under KVM with the host's CPU, as root (it opens
    /// /dev/kvm), and must finish within their bound (`kvm_probe.sh`). /dev/kvm existing proves
    /// nothing on a software-paging KVM, and a boot sector running proves too little on a nested one.
    KvmWorks,
    /// The end of libvirt's log of a guest's QEMU (`/var/log/libvirt/qemu/<domain>.log`), read
    /// as root: why a guest's emulator stopped, when it did.
    ReadQemuLog { domain: DomainName },
    /// A guest's console capture (`debug_boot --console`), from byte `from_byte` on, read as root
    /// like the serial log; read again and again while the guest boots, so only what is new
    /// crosses the link.
    ReadConsoleCapture { path: String, from_byte: u64 },
    /// A file in a shut-off guest, read through libguestfs as root (the disks are libvirt's):
    /// prints `true` and the file's bytes as they are (`download`; `cat` would add a newline),
    /// or `false` when the guest has no such file.
    GuestCat { guest: GuestDisks, path: String },
    /// A directory in a shut-off guest, listed through libguestfs as root: prints `true` and
    /// the names, or `false` when the guest has no such directory.
    GuestLs { guest: GuestDisks, path: String },
    /// A file in a shut-off guest replaced by standard input through libguestfs, its old bytes
    /// first copied (with owner, mode and times) to `keep_at` beside it.
    GuestReplace {
        guest: GuestDisks,
        path: String,
        keep_at: String,
    },
    /// The copy kept by [`HypervisorOp::GuestReplace`] moved back over the file: prints `true`
    /// when there was one, `false` (exiting 1) when there was none.
    GuestPutBack {
        guest: GuestDisks,
        path: String,
        kept_at: String,
    },
    /// What QEMU's image tool tells of a disk image (`qemu-img info --output=json`), read as root
    /// (the pool's files are libvirt's): its space on the hypervisor and its internal snapshots
    /// with the memory each one holds. Shared (`-U`) because a running guest's QEMU holds the
    /// image's lock; the snapshot table and the allocation are read, never written.
    DiskImageInfo { path: String },
    /// Writes `input` as root into `<dir>/<partial>` of a storage pool's directory, checks it
    /// against `digest`, and puts it in place under `name` as `placement` says. This, not a
    /// libvirt upload stream, is how a base image and a seed reach a pool: a run killed during
    /// a stream can leave libvirtd deadlocked; killed here, it leaves a partial file.
    PlaceInPool {
        dir: String,
        partial: String,
        name: String,
        input: Input,
        /// The input's size in bytes, which bounds how long the copy may take.
        length: u64,
        digest: ImageDigest,
        placement: Placement,
        form: StoredForm,
    },
    /// The kernel, initramfs and kernel command line a base image's GRUB boots first, read out
    /// of the image once and kept beside it in the pool (`<image>.kernel`, `.initrd`,
    /// `.cmdline`), for a guest's first boot to start directly (`boot_files.sh`). As root.
    /// Prints what [`boot_files::parse`] reads.
    BootFiles { dir: String, base: String },
    /// Takes one of trog's advisory locks on the hypervisor, `<dir>/<file>`, and holds it for as
    /// long as the run keeps the operation's standard input open (see
    /// [`HypervisorMachine::keep_running`]); a run that ends or dies closes it, so a dead run's
    /// lock is let go by itself. As the login, not root: the directory is writable by `group`,
    /// the group of trog's logins, and by nobody else (one that others could write is refused,
    /// and nothing is opened in it). Prints `busy <record>` while another holds it and `held`
    /// once held; the holder's `host`, `pid` and `verb` are written into the file then, with the
    /// hypervisor's time. Prints `no-directory` when `dir` is missing ([`HypervisorOp::MakeLockDir`]
    /// makes it) and `unsafe-directory …` when it is not safe to lock in.
    HoldLock {
        dir: String,
        file: String,
        host: String,
        pid: u32,
        verb: String,
        group: String,
    },
    /// Makes the directory of trog's locks, as root (its parent, `/run/lock`, is root's): owned
    /// by root, of `group`, mode 2770, so that trog's logins lock in it and nobody else can put
    /// a link or a lock there. Anything already at `dir` is left as it is, for
    /// [`HypervisorOp::HoldLock`] to judge.
    MakeLockDir { dir: String, group: String },
}

/// A guest's disks as libguestfs opens them, and how it starts its appliance there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestDisks {
    pub disks: Vec<DiskFile>,
    /// Run libguestfs's appliance under software emulation: on a hypervisor whose guests run
    /// as `domain_type = qemu`, KVM does not work, and QEMU would abort trying it.
    pub software_only: bool,
}

/// Whether a guest gets an emulated TPM: only when the hypervisor has a real one to protect the
/// emulated TPM's state file, and swtpm to provide it. A TPM whose secrets sit in a plain file
/// beside the disk is worse than none, because software on the guest will trust it.
pub fn offers_tpm(hypervisor: &HypervisorMachine) -> bool {
    hypervisor.holds(&HypervisorOp::RealTpm) && hypervisor.holds(&HypervisorOp::Swtpm)
}

/// The path of the hypervisor's virtiofsd, `None` when it has none; `Err` says why it could not
/// be asked.
pub fn virtiofsd_path(hypervisor: &HypervisorMachine) -> Result<Option<String>, String> {
    let output = hypervisor.run(&HypervisorOp::Virtiofsd).map_err(|error| {
        error
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    })?;
    let path = output.stdout_text().trim().to_string();
    Ok((output.status == Some(0) && path.starts_with('/')).then_some(path))
}

/// What the KVM probe found on a hypervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvmVerdict {
    Works,
    DoesNotWork { reason: String },
}

/// Whether KVM works on the hypervisor; `Err` says why it could not be told (no QEMU there, sudo
/// refused, the host not reached).
pub fn kvm_verdict(hypervisor: &HypervisorMachine) -> Result<KvmVerdict, String> {
    let output = hypervisor.run(&HypervisorOp::KvmWorks).map_err(|error| {
        error
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    })?;
    let said = output.stdout_text().trim().to_string();
    match output.status {
        Some(0) => Ok(KvmVerdict::Works),
        // The probe's own "no" always says why; a bare 1 is sudo refusing to run it.
        Some(1) if !said.is_empty() => Ok(KvmVerdict::DoesNotWork { reason: said }),
        _ if !said.is_empty() => Err(said),
        _ => Err(String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("the probe failed without saying why")
            .to_string()),
    }
}

/// What `op` printed on the hypervisor, if it ran and succeeded: for reads whose failure only
/// means there is nothing to show.
fn printed(hypervisor: &HypervisorMachine, op: &HypervisorOp) -> Option<String> {
    hypervisor
        .run(op)
        .ok()
        .and_then(|output| output.success().ok())
        .map(|output| output.stdout_text())
}

/// A guest's serial console log on its hypervisor from byte `from_byte` on, if it can be read.
pub fn serial_log(hypervisor: &HypervisorMachine, path: &str, from_byte: u64) -> Option<String> {
    let path = path.to_string();
    printed(hypervisor, &HypervisorOp::ReadSerialLog { path, from_byte })
}

/// How many bytes a guest's serial console log holds on its hypervisor (0 when it has none yet),
/// if that can be read.
pub fn serial_log_size(hypervisor: &HypervisorMachine, path: &str) -> Option<u64> {
    let path = path.to_string();
    printed(hypervisor, &HypervisorOp::SerialLogSize { path })?
        .trim()
        .parse()
        .ok()
}

/// The end of libvirt's log of `domain`'s QEMU on its hypervisor, if it can be read.
pub fn qemu_log(hypervisor: &HypervisorMachine, domain: &DomainName) -> Option<String> {
    let domain = domain.clone();
    printed(hypervisor, &HypervisorOp::ReadQemuLog { domain })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes the verdicts the probe kept in /run about a QEMU under `scratch`: a test's fake.
    fn forget_verdicts_about(scratch: &std::path::Path) {
        let Ok(entries) = std::fs::read_dir("/run") else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_verdict = entry
                .file_name()
                .to_string_lossy()
                .starts_with("trog-kvm-probe.");
            let about_scratch = std::fs::read_to_string(&path)
                .ok()
                .and_then(|kept| kept.lines().next().map(str::to_string))
                .is_some_and(|asked_of| asked_of.contains(&*scratch.to_string_lossy()));
            if is_verdict && about_scratch {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    #[test]
    fn the_kvm_probe_gives_a_verdict_or_says_why_it_cannot() {
        // Whatever this machine's KVM does, the probe answers within its bound and says why not.
        match kvm_verdict(&HypervisorMachine::local().into_dyn()) {
            Ok(KvmVerdict::Works) => {}
            Ok(KvmVerdict::DoesNotWork { reason }) | Err(reason) => {
                assert!(!reason.trim().is_empty())
            }
        }
    }

    /// The probe runs as root: every file it writes is in a directory of its own (mktemp -d),
    /// never at a name beside a temporary file, where another user could put a link first.
    #[test]
    fn the_kvm_probe_writes_only_inside_a_private_directory_of_its_own() {
        if !std::path::Path::new("/dev/kvm").exists() {
            eprintln!("skipped: the probe stops before writing anything without /dev/kvm");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let bin = scratch.path().join("bin");
        let tmp = scratch.path().join("tmp");
        std::fs::create_dir(&bin).unwrap();
        std::fs::create_dir(&tmp).unwrap();
        let log = scratch.path().join("qemu.log");
        // A QEMU that tells, each time it is started, where it writes (the boot sector's disk, or
        // the kernel's console) and where its standard error goes, then ends as a working QEMU
        // does: the boot sector exits through the debug port, the kernel panics and reboots.
        let fake = bin.join("qemu-system-x86_64");
        std::fs::write(
            &fake,
            "#!/bin/sh\nstatus=3\nfor arg; do case $arg in\n\
               file=*) target=${arg#file=}; target=${target%%,*};;\n\
               file:*) target=${arg#file:}; echo 'Kernel panic - not syncing: VFS' >\"$target\"; status=0;;\n\
             esac; done\n\
             printf '%s %s %s\\n' \"$target\" \"$(readlink /proc/$$/fd/2)\" \"$(stat -c %a \"${target%/*}\")\" >>\"$TROG_TEST_LOG\"\n\
             exit $status\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let status = std::process::Command::new("sh")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/machine/kvm_probe.sh"
            ))
            .env("PATH", path)
            .env("TMPDIR", &tmp)
            .env("TROG_TEST_LOG", &log)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0));
        let said = std::fs::read_to_string(&log).unwrap();
        // The boot sector always; this machine's kernel too when /boot has one.
        assert!(!said.lines().collect::<Vec<_>>().is_empty(), "{said}");
        for line in said.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (written, stderr, mode) = (
                std::path::Path::new(fields[0]),
                std::path::Path::new(fields[1]),
                fields[2],
            );
            let own_dir = written.parent().unwrap();
            assert_eq!(own_dir.parent().unwrap(), tmp, "{said}");
            assert_eq!(stderr.parent().unwrap(), own_dir, "{said}");
            assert_eq!(mode, "700", "{said}");
            assert!(!own_dir.exists(), "removed afterwards");
        }
        assert!(std::fs::read_dir(&tmp).unwrap().next().is_none());
        forget_verdicts_about(scratch.path());
    }

    /// Run as root, the probe keeps its verdict for the boot, /dev/kvm and QEMU it asked: the
    /// second time it says the same without starting QEMU; another QEMU is asked again.
    #[test]
    fn the_kvm_probe_asks_qemu_once_for_a_boot_a_dev_kvm_and_a_qemu() {
        if !std::path::Path::new("/dev/kvm").exists() || unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the probe keeps a verdict only as root, when /dev/kvm exists");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let log = scratch.path().join("qemu.log");
        // A QEMU under which KVM does not work: the boot sector fails, saying why.
        let qemu = |dir: &str| {
            let bin = scratch.path().join(dir);
            std::fs::create_dir(&bin).unwrap();
            let fake = bin.join("qemu-system-x86_64");
            std::fs::write(
                &fake,
                "#!/bin/sh\necho started >>\"$TROG_TEST_LOG\"\necho 'no KVM for you' >&2\nexit 1\n",
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
        };
        let probe = |path: &str| {
            std::process::Command::new("sh")
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/src/machine/kvm_probe.sh"
                ))
                .env("PATH", path)
                .env("TROG_TEST_LOG", &log)
                .output()
                .unwrap()
        };
        let starts = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .count()
        };
        let first_qemu = qemu("first");
        let first = probe(&first_qemu);
        assert_eq!(first.status.code(), Some(1));
        let said = String::from_utf8_lossy(&first.stdout).into_owned();
        assert_eq!(
            said,
            "QEMU under KVM with the host's CPU failed (status 1): no KVM for you\n"
        );
        assert_eq!(starts(), 1);

        let again = probe(&first_qemu);
        assert_eq!(again.status.code(), Some(1));
        assert_eq!(String::from_utf8_lossy(&again.stdout), said);
        assert_eq!(starts(), 1, "the kept verdict was given, QEMU not started");

        let other = probe(&qemu("other"));
        assert_eq!(other.status.code(), Some(1));
        assert_eq!(starts(), 2, "another QEMU is asked");
        forget_verdicts_about(scratch.path());
    }

    #[test]
    fn a_serial_log_is_read_from_where_a_boot_began_or_whole_once_rotated() {
        let machine = HypervisorMachine::local().into_dyn();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guest-serial.log");
        let log = path.to_str().unwrap();
        // A guest that never booted has no log yet: its first boot writes from the start.
        assert_eq!(serial_log_size(&machine, log), Some(0));
        std::fs::write(&path, "the boot before\nKernel panic - not syncing: old\n").unwrap();
        let from = serial_log_size(&machine, log).unwrap();
        assert_eq!(from, 48);
        assert_eq!(serial_log(&machine, log, from).as_deref(), Some(""));
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("this boot\n");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(
            serial_log(&machine, log, from).as_deref(),
            Some("this boot\n")
        );
        std::fs::write(&path, "rotated\n").unwrap();
        assert_eq!(
            serial_log(&machine, log, from).as_deref(),
            Some("rotated\n")
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(serial_log(&machine, log, 0), None);
    }

    /// A hypervisor whose root programs are asked for, as a real one's are.
    fn scripted(fake: crate::machine::fake::FakeMachine) -> HypervisorMachine {
        HypervisorMachine {
            installed: OnceLock::new(),
            machine: Box::new(fake),
        }
    }

    #[test]
    fn a_root_program_runs_only_once_the_host_is_known_to_have_the_one_trog_embeds() {
        use crate::diagnose::Diagnose;
        use crate::machine::fake::{Answer, FakeMachine};
        // sudo-check is current, place-in-pool another version's, the rest missing (sha256sum
        // then exits 1 after the lines of those it read).
        let sums: &'static str = Box::leak(
            format!(
                "{}  /usr/libexec/trog/sudo-check\n{}  /usr/libexec/trog/place-in-pool\n",
                root_programs::SUDO_CHECK.sha256_hex(),
                "0".repeat(64)
            )
            .into_boxed_str(),
        );
        let fake = FakeMachine::new()
            .answer("sha256sum", &[Answer::Exit(1, sums)])
            .answer("sudo-check", &[Answer::Exit(0, "")]);
        let machine = scripted(fake.clone());

        machine
            .run(&HypervisorOp::RootAccess)
            .unwrap()
            .success()
            .unwrap();
        let missing = machine
            .run(&HypervisorOp::BootFiles {
                dir: "/p".into(),
                base: "b".into(),
            })
            .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "trog's root program /usr/libexec/trog/boot-files is not installed on fake.example.test"
        );
        assert!(missing.hint().unwrap().contains(
            "trog root-programs install-script --user LOGIN | ssh fake.example.test sudo sh"
        ));
        let place = HypervisorOp::MakeLockDir {
            dir: "/run/lock/trog".into(),
            group: "libvirt".into(),
        };
        assert!(matches!(
            machine.run(&place).unwrap_err(),
            MachineError::RootProgramMissing { .. }
        ));
        let lines = fake.command_lines();
        assert_eq!(fake.count("sha256sum"), 1, "asked once a run: {lines:?}");
        assert_eq!(
            lines.len(),
            2,
            "nothing ran but the check and sudo-check: {lines:?}"
        );
        assert_eq!(lines[1], "/usr/libexec/trog/sudo-check");
        // A question that needs no root asks nothing about the programs.
        let fake = FakeMachine::new().answer("id -un", &[Answer::Exit(0, "trog\n")]);
        scripted(fake.clone())
            .run(&HypervisorOp::LoginName)
            .unwrap();
        assert_eq!(fake.command_lines(), ["id -un"]);
    }

    #[test]
    fn another_versions_program_is_refused_with_the_command_that_installs_this_ones() {
        use crate::diagnose::Diagnose;
        use crate::machine::fake::{Answer, FakeMachine};
        let sums: &'static str = Box::leak(
            format!("{}  /usr/libexec/trog/kvm-probe\n", "0".repeat(64)).into_boxed_str(),
        );
        let fake = FakeMachine::new().answer("sha256sum", &[Answer::Exit(1, sums)]);
        let error = scripted(fake).run(&HypervisorOp::KvmWorks).unwrap_err();
        assert!(
            matches!(&error, MachineError::RootProgramDiffers { path, .. } if path == "/usr/libexec/trog/kvm-probe"),
            "{error}"
        );
        assert_eq!(
            error.exit_status(),
            crate::exit_status::ExitStatus::Hypervisor
        );
        assert!(error.hint().unwrap().contains("trog preflight"));
    }

    #[test]
    fn questions_are_answered_on_this_machine() {
        let machine = HypervisorMachine::local().into_dyn();
        assert!(machine
            .run(&HypervisorOp::LoginName)
            .unwrap()
            .success()
            .is_ok());
        let dir = tempfile::tempdir().unwrap();
        let output = machine
            .run(&HypervisorOp::FilesystemOf {
                path: dir.path().display().to_string(),
            })
            .unwrap()
            .success()
            .unwrap();
        assert_eq!(output.stdout_text().split_whitespace().count(), 4);
    }
}
