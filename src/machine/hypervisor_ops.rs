//! The closed list of what trog does on a hypervisor's own system (everything else there goes
//! through libvirt). The list is closed by the type system: a hypervisor's system is only ever
//! held as a [`HypervisorMachine`], whose one way to act is [`HypervisorMachine::run`] with a
//! [`HypervisorOp`], and the command of an operation is private to this module. A new kind of work
//! on a hypervisor is a new variant here, reviewed as such; nothing else can compose one.

use crate::debug_boot::guest_disk::DiskFile;
use crate::machine::command::Input;
use crate::machine::local::LocalMachine;
use crate::machine::ssh::{PortForward, SshMachine, SshTarget, SudoPassword};
use crate::machine::{CommandOutput, Machine, MachineCommand, MachineError};
use crate::model::digest::{DigestAlgorithm, ImageDigest};
use crate::model::names::DomainName;
use std::time::Duration;

/// How long a question to a hypervisor may take. They are all quick reads; a host that needs
/// longer is stuck or its link is.
const QUESTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The KVM probe (bin/setup runs the same file): exits 0 when a guest ran under KVM with the
/// host's CPU, 1 with the reason on stdout when it did not, 2 when the host cannot be asked.
const KVM_PROBE_SCRIPT: &str = include_str!("kvm_probe.sh");

/// Fills a pool's file from standard input and puts it in place once whole (see the script).
const PLACE_IN_POOL_SCRIPT: &str = include_str!("place_in_pool.sh");

/// The slowest link a pool's file is still copied over: 1 MiB/s, about a 10 Mbit/s line. The
/// copy of a file may take as long as its size at that rate, plus [`PLACE_IN_POOL_ALLOWANCE`];
/// a copy slower than that has stalled, and is stopped rather than waited for.
const PLACE_IN_POOL_MIN_RATE: u64 = 1024 * 1024;
/// What a copy into a pool may take beyond its bytes' time: the login, sudo, checking the
/// digest and syncing the file to disk (seconds for a base image on a hypervisor's disk).
const PLACE_IN_POOL_ALLOWANCE: Duration = Duration::from_secs(120);

/// A script's lines without its comments, which would only lengthen every message naming it.
fn without_comments(script: &str) -> String {
    script
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// How long copying `length` bytes into a pool may take.
fn place_in_pool_timeout(length: u64) -> Duration {
    PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(length.div_ceil(PLACE_IN_POOL_MIN_RATE))
}

/// What happens when a pool's file already exists under the final name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// It stays: its name is its digest, so it holds the same bytes (another run's copy won).
    KeepExisting,
    /// It is replaced, in one rename (a guest's seed, rebuilt when its contents change).
    Replace,
}

/// A hypervisor's own system: this machine or an SSH login to it. It runs the operations of
/// [`HypervisorOp`] and nothing else; the machine inside is never handed out.
pub struct HypervisorMachine<M: Machine + ?Sized = dyn Machine> {
    machine: Box<M>,
}

impl HypervisorMachine<LocalMachine> {
    /// This machine as a hypervisor.
    pub fn local() -> HypervisorMachine<LocalMachine> {
        HypervisorMachine {
            machine: Box::new(LocalMachine),
        }
    }
}

impl HypervisorMachine<SshMachine> {
    /// An SSH login to a hypervisor.
    pub fn ssh(machine: SshMachine) -> HypervisorMachine<SshMachine> {
        HypervisorMachine {
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
    /// A scripted hypervisor for unit tests.
    pub fn fake(machine: crate::machine::fake::FakeMachine) -> HypervisorMachine {
        HypervisorMachine {
            machine: Box::new(machine),
        }
    }
}

impl<M: Machine + 'static> HypervisorMachine<M> {
    /// The same hypervisor, whatever kind of machine it is.
    pub fn into_dyn(self) -> HypervisorMachine {
        HypervisorMachine {
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
        self.machine.run(&op.command())
    }

    /// Runs `op` with `input` on its standard input (the new bytes of a file it replaces).
    pub fn run_with_input(
        &self,
        op: &HypervisorOp,
        input: Vec<u8>,
    ) -> Result<CommandOutput, MachineError> {
        self.machine.run(&op.command().stdin(input))
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
    /// The filesystem holding a directory (the storage pool's): mount point, type, size and
    /// free space in bytes, as `findmnt` reports them on one line.
    FilesystemOf { path: String },
    /// A guest's serial console log, read as root (libvirt writes it owned by root).
    ReadSerialLog { path: String },
    /// Whether hardware virtualisation actually works: a tiny guest is started under KVM with
    /// the host's CPU, as root (it opens /dev/kvm), and must finish within its bound
    /// (`kvm_probe.sh`). /dev/kvm existing proves nothing on a software-paging KVM.
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
    },
}

/// A guest's disks as libguestfs opens them, and how it starts its appliance there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestDisks {
    pub disks: Vec<DiskFile>,
    /// Run libguestfs's appliance under software emulation: on a hypervisor whose guests run
    /// as `domain_type = qemu`, KVM does not work, and QEMU would abort trying it.
    pub software_only: bool,
}

/// How long one libguestfs run may take: its appliance boots a small kernel (seconds under KVM,
/// about twenty under software emulation on a loaded host, building it on first use adds a
/// minute), then one read or write.
const GUESTFS_TIMEOUT: Duration = Duration::from_secs(300);

impl GuestDisks {
    /// `guestfish` on these disks (read-only unless `write`), inspecting the guest to mount its
    /// filesystems as it does, then `commands` (words; `:` separates commands).
    fn guestfish(&self, write: bool, commands: &[&str]) -> MachineCommand {
        let mut argv: Vec<String> = vec!["env".into(), "LIBGUESTFS_BACKEND=direct".into()];
        if self.software_only {
            argv.push("LIBGUESTFS_BACKEND_SETTINGS=force_tcg".into());
        }
        argv.push("guestfish".into());
        argv.push(if write { "--rw" } else { "--ro" }.into());
        for disk in &self.disks {
            argv.push(format!("--format={}", disk.format));
            argv.push("-a".into());
            argv.push(disk.path.clone());
        }
        argv.push("-i".into());
        argv.extend(commands.iter().map(|word| word.to_string()));
        MachineCommand::new(argv)
            .as_root(true)
            .timeout(GUESTFS_TIMEOUT)
    }
}

impl HypervisorOp {
    /// The command that carries the operation out; private, so that only a
    /// [`HypervisorMachine`] runs it.
    fn command(&self) -> MachineCommand {
        let command = match self {
            HypervisorOp::GuestCat { guest, path } => {
                return guest.guestfish(
                    false,
                    &[
                        "is-file",
                        path,
                        "followsymlinks:true",
                        ":",
                        "download",
                        path,
                        "-",
                    ],
                )
            }
            HypervisorOp::GuestLs { guest, path } => {
                return guest.guestfish(
                    false,
                    &["is-dir", path, "followsymlinks:true", ":", "ls", path],
                )
            }
            HypervisorOp::GuestReplace {
                guest,
                path,
                keep_at,
            } => return guest.guestfish(true, &["cp-a", path, keep_at, ":", "upload", "-", path]),
            HypervisorOp::GuestPutBack {
                guest,
                path,
                kept_at,
            } => return guest.guestfish(true, &["is-file", kept_at, ":", "mv", kept_at, path]),
            HypervisorOp::LoginName => MachineCommand::new(["id", "-un"]),
            HypervisorOp::PasswordlessSudo => MachineCommand::new(["sudo", "-n", "true"]),
            HypervisorOp::RootAccess => MachineCommand::new(["true"]).as_root(true),
            HypervisorOp::RealTpm => {
                MachineCommand::shell("test -c /dev/tpmrm0 || test -c /dev/tpm0")
            }
            HypervisorOp::Swtpm => MachineCommand::shell("command -v swtpm"),
            HypervisorOp::Libguestfs => MachineCommand::shell("command -v guestfish"),
            HypervisorOp::DiskImageInfo { path } => {
                MachineCommand::new(["qemu-img", "info", "--output=json", "-U", path.as_str()])
                    .as_root(true)
            }
            HypervisorOp::FilesystemOf { path } => MachineCommand::new([
                "findmnt",
                "--noheadings",
                "--bytes",
                "--output",
                "TARGET,FSTYPE,SIZE,AVAIL",
                "--target",
                path,
            ]),
            HypervisorOp::ReadSerialLog { path } => {
                MachineCommand::new(["cat", path]).as_root(true)
            }
            HypervisorOp::KvmWorks => MachineCommand::shell(KVM_PROBE_SCRIPT).as_root(true),
            HypervisorOp::ReadQemuLog { domain } => MachineCommand::new([
                "tail".to_string(),
                "-n".to_string(),
                QEMU_LOG_LINES.to_string(),
                format!("{QEMU_LOG_DIR}/{domain}.log"),
            ])
            .as_root(true),
            HypervisorOp::ReadConsoleCapture { path, from_byte } => {
                let from = format!("+{}", from_byte + 1);
                MachineCommand::new(["tail", "-c", from.as_str(), path.as_str()]).as_root(true)
            }
            HypervisorOp::PlaceInPool {
                dir,
                partial,
                name,
                input,
                length,
                digest,
                placement,
            } => {
                let sum = match digest.algorithm {
                    DigestAlgorithm::Sha256 => "sha256sum",
                    DigestAlgorithm::Sha512 => "sha512sum",
                };
                let placement = match placement {
                    Placement::KeepExisting => "keep",
                    Placement::Replace => "replace",
                };
                let script = without_comments(PLACE_IN_POOL_SCRIPT);
                let mut command = MachineCommand::new([
                    "sh",
                    "-c",
                    &script,
                    "trog-place-in-pool",
                    dir,
                    partial,
                    name,
                    sum,
                    &digest.hex,
                    placement,
                ])
                .as_root(true)
                .timeout(place_in_pool_timeout(*length));
                command.stdin = Some(input.clone());
                return command;
            }
        };
        command.timeout(QUESTION_TIMEOUT)
    }
}

/// Whether a guest gets an emulated TPM: only when the hypervisor has a real one to protect the
/// emulated TPM's state file, and swtpm to provide it. A TPM whose secrets sit in a plain file
/// beside the disk is worse than none, because software on the guest will trust it.
pub fn offers_tpm(hypervisor: &HypervisorMachine) -> bool {
    hypervisor.holds(&HypervisorOp::RealTpm) && hypervisor.holds(&HypervisorOp::Swtpm)
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

/// A guest's serial console log on its hypervisor, if it can be read.
pub fn serial_log(hypervisor: &HypervisorMachine, path: &str) -> Option<String> {
    hypervisor
        .run(&HypervisorOp::ReadSerialLog {
            path: path.to_string(),
        })
        .ok()
        .and_then(|output| output.success().ok())
        .map(|output| output.stdout_text())
}

/// Where libvirt keeps each guest's QEMU log on a hypervisor.
const QEMU_LOG_DIR: &str = "/var/log/libvirt/qemu";
/// Lines of a QEMU log shown when a guest stopped: its last start and the reason it ended.
const QEMU_LOG_LINES: usize = 15;

/// The end of libvirt's log of `domain`'s QEMU on its hypervisor, if it can be read.
pub fn qemu_log(hypervisor: &HypervisorMachine, domain: &DomainName) -> Option<String> {
    hypervisor
        .run(&HypervisorOp::ReadQemuLog {
            domain: domain.clone(),
        })
        .ok()
        .and_then(|output| output.success().ok())
        .map(|output| output.stdout_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_logs_the_probes_libguestfs_image_info_and_the_pool_writes_run_as_root() {
        let path = "/x".to_string();
        let guest = GuestDisks {
            disks: vec![],
            software_only: false,
        };
        let every_operation = [
            HypervisorOp::LoginName,
            HypervisorOp::PasswordlessSudo,
            HypervisorOp::RootAccess,
            HypervisorOp::RealTpm,
            HypervisorOp::Swtpm,
            HypervisorOp::Libguestfs,
            HypervisorOp::FilesystemOf { path: path.clone() },
            HypervisorOp::ReadSerialLog { path: path.clone() },
            HypervisorOp::KvmWorks,
            HypervisorOp::ReadQemuLog {
                domain: DomainName::parse("www.example.test").unwrap(),
            },
            HypervisorOp::ReadConsoleCapture {
                path: path.clone(),
                from_byte: 0,
            },
            HypervisorOp::GuestCat {
                guest: guest.clone(),
                path: path.clone(),
            },
            HypervisorOp::GuestLs {
                guest: guest.clone(),
                path: path.clone(),
            },
            HypervisorOp::GuestReplace {
                guest: guest.clone(),
                path: path.clone(),
                keep_at: path.clone(),
            },
            HypervisorOp::GuestPutBack {
                guest: guest.clone(),
                path: path.clone(),
                kept_at: path.clone(),
            },
            HypervisorOp::DiskImageInfo { path },
            place(
                "/pool",
                Input::Bytes(Vec::new()),
                &"00".repeat(32),
                Placement::Replace,
            ),
        ];
        let (libguestfs_ops, every_operation): (Vec<_>, Vec<_>) =
            every_operation.into_iter().partition(|op| {
                matches!(
                    op,
                    HypervisorOp::GuestCat { .. }
                        | HypervisorOp::GuestLs { .. }
                        | HypervisorOp::GuestReplace { .. }
                        | HypervisorOp::GuestPutBack { .. }
                )
            });
        assert_eq!(libguestfs_ops.len(), 4);
        let as_root: Vec<_> = every_operation
            .into_iter()
            .filter(|op| op.command().as_root)
            .collect();
        assert_eq!(
            as_root,
            [
                HypervisorOp::RootAccess,
                HypervisorOp::ReadSerialLog { path: "/x".into() },
                HypervisorOp::KvmWorks,
                HypervisorOp::ReadQemuLog {
                    domain: DomainName::parse("www.example.test").unwrap()
                },
                HypervisorOp::ReadConsoleCapture {
                    path: "/x".into(),
                    from_byte: 0
                },
                HypervisorOp::DiskImageInfo { path: "/x".into() },
                place(
                    "/pool",
                    Input::Bytes(Vec::new()),
                    &"00".repeat(32),
                    Placement::Replace,
                ),
            ]
        );
        assert!(libguestfs_ops.iter().all(|op| op.command().as_root));
    }

    #[test]
    fn libguestfs_opens_each_disk_in_its_format_and_under_software_emulation_when_told() {
        let guest = GuestDisks {
            disks: vec![
                DiskFile {
                    path: "/p/g.qcow2".into(),
                    format: "qcow2".into(),
                },
                DiskFile {
                    path: "/p/g data".into(),
                    format: "raw".into(),
                },
            ],
            software_only: true,
        };
        let command = HypervisorOp::GuestCat {
            guest,
            path: "/etc/a b".into(),
        }
        .command();
        assert_eq!(
            command.to_shell_line(),
            "env LIBGUESTFS_BACKEND=direct LIBGUESTFS_BACKEND_SETTINGS=force_tcg guestfish --ro \
             --format=qcow2 -a /p/g.qcow2 --format=raw -a '/p/g data' -i \
             is-file '/etc/a b' followsymlinks:true : download '/etc/a b' -"
        );
        assert_eq!(command.timeout, GUESTFS_TIMEOUT);
    }

    #[test]
    fn bin_setup_runs_the_kvm_probe_preflight_runs() {
        let setup = include_str!("../../bin/setup");
        assert!(setup.contains("sh \"$checkout/src/machine/kvm_probe.sh\""));
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

    #[test]
    fn paths_are_arguments_never_shell_text() {
        let op = HypervisorOp::ReadSerialLog {
            path: "/var/log/a b;reboot".into(),
        };
        assert_eq!(op.command().argv, ["cat", "/var/log/a b;reboot"]);
        assert_eq!(op.command().to_shell_line(), "cat '/var/log/a b;reboot'");
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

    #[test]
    fn a_console_capture_is_read_from_where_the_last_read_ended() {
        let op = HypervisorOp::ReadConsoleCapture {
            path: "/l".into(),
            from_byte: 5,
        };
        assert_eq!(op.command().argv, ["tail", "-c", "+6", "/l"]);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "SeaBIOS\nLinux").unwrap();
        let mut command = HypervisorOp::ReadConsoleCapture {
            path: file.path().display().to_string(),
            from_byte: 8,
        }
        .command();
        command.as_root = false;
        let output = crate::machine::local::LocalMachine.run(&command).unwrap();
        assert_eq!(output.stdout_text(), "Linux");
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bytes))
    }

    fn place(dir: &str, input: Input, digest_hex: &str, placement: Placement) -> HypervisorOp {
        let length = match &input {
            Input::Bytes(bytes) => bytes.len() as u64,
            Input::File(path) => std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0),
        };
        HypervisorOp::PlaceInPool {
            dir: dir.into(),
            partial: "image.part-here".into(),
            name: "image".into(),
            input,
            length,
            digest: ImageDigest::from_hex(digest_hex).expect("a digest"),
            placement,
        }
    }

    /// Runs `op` here as the test's own user (the pool is a temporary directory of its own).
    fn run_here(op: &HypervisorOp) -> CommandOutput {
        let mut command = op.command();
        command.as_root = false;
        crate::machine::local::LocalMachine.run(&command).unwrap()
    }

    #[test]
    fn a_pool_write_passes_its_names_as_arguments_and_its_bytes_on_standard_input() {
        let digest = sha256_hex(b"seed");
        let op = place(
            "/pool dir;x",
            Input::Bytes(b"seed".to_vec()),
            &digest,
            Placement::Replace,
        );
        let command = op.command();
        assert_eq!(command.argv[..2], ["sh", "-c"]);
        assert!(!command.argv[2].contains('#'), "comments left out");
        assert_eq!(
            command.argv[3..],
            [
                "trog-place-in-pool",
                "/pool dir;x",
                "image.part-here",
                "image",
                "sha256sum",
                digest.as_str(),
                "replace"
            ]
        );
        assert_eq!(command.stdin, Some(Input::Bytes(b"seed".to_vec())));
        let sha512 = ImageDigest::from_hex(&"ab".repeat(64)).unwrap();
        let HypervisorOp::PlaceInPool { digest, .. } = &op else {
            unreachable!()
        };
        assert_eq!(digest.algorithm, DigestAlgorithm::Sha256);
        assert_eq!(sha512.algorithm, DigestAlgorithm::Sha512);
    }

    #[test]
    fn a_pool_write_may_take_as_long_as_its_size_at_the_slowest_link() {
        assert_eq!(place_in_pool_timeout(0), PLACE_IN_POOL_ALLOWANCE);
        let image = 600 * 1024 * 1024;
        assert_eq!(
            place_in_pool_timeout(image),
            PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(600)
        );
        let op = place(
            "/p",
            Input::Bytes(vec![0; 3 << 20]),
            &"ab".repeat(32),
            Placement::Replace,
        );
        assert_eq!(
            op.command().timeout,
            PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(3)
        );
    }

    #[test]
    fn a_pool_file_appears_under_its_name_only_whole_and_checked() {
        let pool = tempfile::tempdir().unwrap();
        let dir = pool.path().display().to_string();
        let image = pool.path().join("image");
        let partial = pool.path().join("image.part-here");
        let source = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(source.path(), b"the verified base image").unwrap();
        let digest = sha256_hex(b"the verified base image");

        // Bytes that do not match the digest are never given the final name.
        let output = run_here(&place(
            &dir,
            Input::Bytes(b"the verified base im".to_vec()),
            &digest,
            Placement::KeepExisting,
        ));
        assert_ne!(output.status, Some(0));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("does not match its digest"),
            "{output:?}"
        );
        assert!(!image.exists());
        assert!(partial.exists(), "left for the next run to remove");

        // Streamed from the file, checked, put in place; the partial name is gone.
        let op = place(
            &dir,
            Input::File(source.path().to_path_buf()),
            &digest,
            Placement::KeepExisting,
        );
        run_here(&op).success().unwrap();
        assert_eq!(std::fs::read(&image).unwrap(), b"the verified base image");
        assert!(!partial.exists());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&image).unwrap().permissions().mode() & 0o777,
            0o600
        );

        // A file already under the digest's name is another run's whole copy: it stays.
        std::fs::write(&image, b"another run's copy").unwrap();
        run_here(&op).success().unwrap();
        assert_eq!(std::fs::read(&image).unwrap(), b"another run's copy");
        assert!(!partial.exists());

        // A seed replaces the one under its name.
        let seed = b"new seed".to_vec();
        run_here(&place(
            &dir,
            Input::Bytes(seed.clone()),
            &sha256_hex(&seed),
            Placement::Replace,
        ))
        .success()
        .unwrap();
        assert_eq!(std::fs::read(&image).unwrap(), seed);
        assert!(!partial.exists());
    }
}
