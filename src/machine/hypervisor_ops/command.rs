//! How each operation of the closed list is carried out: the command it runs, as whom, and how
//! long it may take. Private to the module: only a [`super::HypervisorMachine`] runs one.

use super::root_programs::{
    RootProgram, BOOT_FILES, DISK_IMAGE_INFO, GUEST_DISK, KVM_PROBE, MAKE_LOCK_DIR, PLACE_IN_POOL,
    READ_LOG, SUDO_CHECK,
};
use super::{GuestDisks, HypervisorOp, Placement, StoredForm};
use crate::machine::MachineCommand;
use crate::model::digest::DigestAlgorithm;
use std::time::Duration;

/// How long a question to a hypervisor may take. They are all quick reads; a host that needs
/// longer is stuck or its link is.
pub(super) const QUESTION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long reading a base image's kernel may take: the image is written out raw once (its data
/// only, about a gigabyte for a cloud image: seconds on a disk, a minute on a slow one), then
/// three files are read from it.
const BOOT_FILES_TIMEOUT: Duration = Duration::from_secs(300);

/// Takes and holds a lock on the hypervisor, as the login: no root, so run as text (see the
/// script).
const HOLD_LOCK_SCRIPT: &str = include_str!("../hold_lock.sh");

/// The slowest link a pool's file is still copied over: 1 MiB/s, about a 10 Mbit/s line. The
/// copy of a file may take as long as its size at that rate, plus [`PLACE_IN_POOL_ALLOWANCE`];
/// a copy slower than that has stalled, and is stopped rather than waited for.
const PLACE_IN_POOL_MIN_RATE: u64 = 1024 * 1024;
/// What a copy into a pool may take beyond its bytes' time: the login, sudo, checking the
/// digest and syncing the file to disk (seconds for a base image on a hypervisor's disk).
const PLACE_IN_POOL_ALLOWANCE: Duration = Duration::from_secs(120);

/// A script's lines without its comments (and its `#!` line), which would only lengthen every
/// message naming it.
pub(super) fn without_comments(script: &str) -> String {
    script
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// How many times its compressed size a qcow2 cloud image takes inflated, at most (about three
/// for Debian's and Ubuntu's).
const INFLATION_RATIO: u64 = 5;
/// The slowest a hypervisor's disk still writes an inflated image: 20 MiB/s.
const INFLATION_MIN_RATE: u64 = 20 * 1024 * 1024;

/// How long copying `length` bytes into a pool, and keeping them in `form`, may take.
fn place_in_pool_timeout(length: u64, form: StoredForm) -> Duration {
    let copy = length.div_ceil(PLACE_IN_POOL_MIN_RATE);
    let inflate = match form {
        StoredForm::AsSent => 0,
        StoredForm::Inflated => (length * INFLATION_RATIO).div_ceil(INFLATION_MIN_RATE),
    };
    PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(copy + inflate)
}

/// How long one libguestfs run may take: its appliance boots a small kernel (seconds under KVM,
/// about twenty under software emulation on a loaded host, building it on first use adds a
/// minute), then one read or write.
const GUESTFS_TIMEOUT: Duration = Duration::from_secs(300);

/// What `guest-disk` does with a guest's file.
#[derive(Clone, Copy)]
enum GuestDiskMode {
    Cat,
    Ls,
    Replace,
    PutBack,
}

impl GuestDisks {
    /// `guest-disk` on these disks: `mode` on the guest's `path` (and `other`, the copy kept
    /// beside it), the appliance under software emulation when told.
    fn guest_disk(&self, mode: GuestDiskMode, path: &str, other: Option<&str>) -> MachineCommand {
        let mode = match mode {
            GuestDiskMode::Cat => "cat",
            GuestDiskMode::Ls => "ls",
            GuestDiskMode::Replace => "replace",
            GuestDiskMode::PutBack => "put-back",
        };
        let accel = if self.software_only { "tcg" } else { "kvm" };
        let mut argv = vec![
            GUEST_DISK.path(),
            mode.to_string(),
            accel.to_string(),
            path.to_string(),
            other.unwrap_or("-").to_string(),
        ];
        for disk in &self.disks {
            argv.push(disk.format.clone());
            argv.push(disk.path.clone());
        }
        MachineCommand::new(argv)
            .as_root(true)
            .timeout(GUESTFS_TIMEOUT)
    }
}

/// `program` at its installed path with `args`, as root.
fn root_call<S: Into<String>>(
    program: &RootProgram,
    args: impl IntoIterator<Item = S>,
) -> MachineCommand {
    let mut argv = vec![program.path()];
    argv.extend(args.into_iter().map(Into::into));
    MachineCommand::new(argv).as_root(true)
}

impl HypervisorOp {
    /// The program of trog's closed list of root programs this operation runs, if it runs one.
    pub(super) fn root_program(&self) -> Option<&'static RootProgram> {
        Some(match self {
            HypervisorOp::PasswordlessSudo | HypervisorOp::RootAccess => &SUDO_CHECK,
            HypervisorOp::ReadSerialLog { .. }
            | HypervisorOp::SerialLogSize { .. }
            | HypervisorOp::ReadQemuLog { .. }
            | HypervisorOp::ReadConsoleCapture { .. } => &READ_LOG,
            HypervisorOp::KvmWorks => &KVM_PROBE,
            HypervisorOp::GuestCat { .. }
            | HypervisorOp::GuestLs { .. }
            | HypervisorOp::GuestReplace { .. }
            | HypervisorOp::GuestPutBack { .. } => &GUEST_DISK,
            HypervisorOp::DiskImageInfo { .. } => &DISK_IMAGE_INFO,
            HypervisorOp::PlaceInPool { .. } => &PLACE_IN_POOL,
            HypervisorOp::BootFiles { .. } => &BOOT_FILES,
            HypervisorOp::MakeLockDir { .. } => &MAKE_LOCK_DIR,
            HypervisorOp::LoginName
            | HypervisorOp::RealTpm
            | HypervisorOp::Swtpm
            | HypervisorOp::Libguestfs
            | HypervisorOp::QemuImg
            | HypervisorOp::Virtiofsd
            | HypervisorOp::DirectoryExists { .. }
            | HypervisorOp::FilesystemOf { .. }
            | HypervisorOp::HoldLock { .. } => return None,
        })
    }

    /// The command that carries the operation out; private, so that only a
    /// [`HypervisorMachine`] runs it. An operation that needs root runs its program at its
    /// installed path through sudo ([`HypervisorOp::root_program`]).
    pub(super) fn command(&self) -> MachineCommand {
        let command = match self {
            HypervisorOp::GuestCat { guest, path } => {
                return guest.guest_disk(GuestDiskMode::Cat, path, None)
            }
            HypervisorOp::GuestLs { guest, path } => {
                return guest.guest_disk(GuestDiskMode::Ls, path, None)
            }
            HypervisorOp::GuestReplace {
                guest,
                path,
                keep_at,
            } => return guest.guest_disk(GuestDiskMode::Replace, path, Some(keep_at)),
            HypervisorOp::GuestPutBack {
                guest,
                path,
                kept_at,
            } => return guest.guest_disk(GuestDiskMode::PutBack, path, Some(kept_at)),
            HypervisorOp::LoginName => MachineCommand::new(["id", "-un"]),
            // As the login: sudo itself is asked, without a password, to run the check.
            HypervisorOp::PasswordlessSudo => MachineCommand::new([
                "sudo".to_string(),
                "-n".into(),
                "--".into(),
                SUDO_CHECK.path(),
            ]),
            HypervisorOp::RootAccess => root_call(&SUDO_CHECK, [] as [String; 0]),
            HypervisorOp::RealTpm => {
                MachineCommand::shell("test -c /dev/tpmrm0 || test -c /dev/tpm0")
            }
            HypervisorOp::Swtpm => MachineCommand::shell("command -v swtpm"),
            HypervisorOp::Libguestfs => MachineCommand::shell("command -v guestfish"),
            HypervisorOp::QemuImg => MachineCommand::shell("command -v qemu-img"),
            // The login's PATH first (a `cargo install --root /usr/local`), then where Debian
            // (trixie on) and older QEMU packages put it.
            HypervisorOp::Virtiofsd => MachineCommand::shell(
                "for candidate in \"$(command -v virtiofsd)\" /usr/libexec/virtiofsd /usr/lib/qemu/virtiofsd; do \
                 if [ -n \"$candidate\" ] && [ -x \"$candidate\" ]; then echo \"$candidate\"; exit 0; fi; done; exit 1",
            ),
            HypervisorOp::DirectoryExists { path } => MachineCommand::new(["test", "-d", path.as_str()]),
            HypervisorOp::BootFiles { dir, base } => {
                return root_call(&BOOT_FILES, [dir, base]).timeout(BOOT_FILES_TIMEOUT)
            }
            HypervisorOp::DiskImageInfo { path } => root_call(&DISK_IMAGE_INFO, [path]),
            HypervisorOp::FilesystemOf { path } => MachineCommand::new([
                "findmnt",
                "--noheadings",
                "--bytes",
                "--output",
                "TARGET,FSTYPE,SIZE,AVAIL",
                "--target",
                path,
            ]),
            HypervisorOp::ReadSerialLog { path, from_byte } => root_call(
                &READ_LOG,
                ["from".to_string(), path.clone(), from_byte.to_string()],
            ),
            HypervisorOp::SerialLogSize { path } => root_call(&READ_LOG, ["size", path]),
            HypervisorOp::KvmWorks => root_call(&KVM_PROBE, [] as [String; 0]),
            HypervisorOp::ReadQemuLog { domain } => {
                root_call(&READ_LOG, ["qemu".to_string(), domain.to_string()])
            }
            HypervisorOp::ReadConsoleCapture { path, from_byte } => root_call(
                &READ_LOG,
                ["after".to_string(), path.clone(), from_byte.to_string()],
            ),
            HypervisorOp::HoldLock {
                dir,
                file,
                host,
                pid,
                verb,
                group,
            } => MachineCommand::new([
                "sh".to_string(),
                "-c".to_string(),
                without_comments(HOLD_LOCK_SCRIPT),
                "trog-hold-lock".to_string(),
                dir.clone(),
                file.clone(),
                host.clone(),
                pid.to_string(),
                verb.clone(),
                group.clone(),
            ]),
            HypervisorOp::MakeLockDir { dir, group } => root_call(&MAKE_LOCK_DIR, [dir, group]),
            HypervisorOp::PlaceInPool {
                dir,
                partial,
                name,
                input,
                length,
                digest,
                placement,
                form,
            } => {
                let sum = match digest.algorithm {
                    DigestAlgorithm::Sha256 => "sha256sum",
                    DigestAlgorithm::Sha512 => "sha512sum",
                };
                let placement = match placement {
                    Placement::KeepExisting => "keep",
                    Placement::Replace => "replace",
                };
                let stored = match form {
                    StoredForm::AsSent => "as-sent",
                    StoredForm::Inflated => "inflate",
                };
                let mut command = root_call(
                    &PLACE_IN_POOL,
                    [dir, partial, name, sum, &digest.hex, placement, stored],
                )
                .timeout(place_in_pool_timeout(*length, *form));
                command.stdin = Some(input.clone());
                return command;
            }
        };
        command.timeout(QUESTION_TIMEOUT)
    }
}

#[cfg(test)]
impl HypervisorOp {
    /// The operation's command as this machine runs it as the test's own user: a root program's
    /// embedded text, without sudo (the tests give it files of their own).
    pub(super) fn command_here(&self) -> MachineCommand {
        let command = match self.root_program() {
            Some(program) => embedded(program, self.command()),
            None => self.command(),
        };
        command.as_root(false)
    }
}

/// `command`, a root program's call at its installed path, as the program's embedded text run by
/// `sh` instead: for a machine where trog already is root, which needs no sudo and so no
/// installed program (`sh -c TEXT NAME ARGS…` gives the script the same `$1`…).
pub(super) fn embedded(program: &RootProgram, command: MachineCommand) -> MachineCommand {
    let mut argv = vec![
        "sh".to_string(),
        "-c".to_string(),
        without_comments(program.text),
        format!("trog-{}", program.name),
    ];
    argv.extend(command.argv.into_iter().skip(1));
    MachineCommand { argv, ..command }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debug_boot::guest_disk::DiskFile;
    use crate::machine::command::Input;
    use crate::machine::{CommandOutput, Machine};
    use crate::model::digest::ImageDigest;
    use crate::model::names::DomainName;

    #[test]
    fn only_the_logs_the_probes_libguestfs_image_info_the_pool_writes_and_the_lock_directory_run_as_root(
    ) {
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
            HypervisorOp::QemuImg,
            HypervisorOp::Virtiofsd,
            HypervisorOp::DirectoryExists { path: path.clone() },
            HypervisorOp::FilesystemOf { path: path.clone() },
            HypervisorOp::ReadSerialLog {
                path: path.clone(),
                from_byte: 0,
            },
            HypervisorOp::SerialLogSize { path: path.clone() },
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
            hold_lock("guest-www.example.test.lock"),
            HypervisorOp::MakeLockDir {
                dir: "/run/lock/trog".into(),
                group: "libvirt".into(),
            },
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
                HypervisorOp::ReadSerialLog {
                    path: "/x".into(),
                    from_byte: 0
                },
                HypervisorOp::SerialLogSize { path: "/x".into() },
                HypervisorOp::KvmWorks,
                HypervisorOp::ReadQemuLog {
                    domain: DomainName::parse("www.example.test").unwrap()
                },
                HypervisorOp::ReadConsoleCapture {
                    path: "/x".into(),
                    from_byte: 0
                },
                HypervisorOp::DiskImageInfo { path: "/x".into() },
                HypervisorOp::MakeLockDir {
                    dir: "/run/lock/trog".into(),
                    group: "libvirt".into(),
                },
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
            "/usr/libexec/trog/guest-disk cat tcg '/etc/a b' - qcow2 /p/g.qcow2 raw '/p/g data'"
        );
        assert!(command.as_root);
        assert_eq!(command.timeout, GUESTFS_TIMEOUT);
    }

    #[test]
    fn bin_setup_runs_the_kvm_probe_preflight_runs() {
        let setup = include_str!("../../../bin/setup");
        assert!(setup.contains("sh \"$checkout/src/machine/kvm_probe.sh\""));
    }

    #[test]
    fn paths_are_arguments_never_shell_text() {
        let op = HypervisorOp::ReadQemuLog {
            domain: DomainName::parse("www.example.test").unwrap(),
        };
        assert_eq!(
            op.command().to_shell_line(),
            "/usr/libexec/trog/read-log qemu www.example.test"
        );
        let op = HypervisorOp::ReadSerialLog {
            path: "/var/log/a b;reboot".into(),
            from_byte: 7,
        };
        assert_eq!(
            op.command().argv,
            [
                "/usr/libexec/trog/read-log",
                "from",
                "/var/log/a b;reboot",
                "7"
            ]
        );
        // Where trog is root already, the same arguments follow the embedded text.
        let argv = embedded(&READ_LOG, op.command()).argv;
        assert_eq!(argv[..2], ["sh", "-c"]);
        assert!(!argv[2].contains("#!"));
        assert_eq!(
            argv[3..],
            ["trog-read-log", "from", "/var/log/a b;reboot", "7"]
        );
    }

    #[test]
    fn a_console_capture_is_read_from_where_the_last_read_ended() {
        let op = HypervisorOp::ReadConsoleCapture {
            path: "/l".into(),
            from_byte: 5,
        };
        assert_eq!(
            op.command().argv,
            ["/usr/libexec/trog/read-log", "after", "/l", "5"]
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "SeaBIOS\nLinux").unwrap();
        let command = HypervisorOp::ReadConsoleCapture {
            path: file.path().display().to_string(),
            from_byte: 8,
        }
        .command_here();
        let output = crate::machine::local::LocalMachine.run(&command).unwrap();
        assert_eq!(output.stdout_text(), "Linux");
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bytes))
    }

    fn place(dir: &str, input: Input, digest_hex: &str, placement: Placement) -> HypervisorOp {
        place_as(dir, input, digest_hex, placement, StoredForm::AsSent)
    }

    fn place_as(
        dir: &str,
        input: Input,
        digest_hex: &str,
        placement: Placement,
        form: StoredForm,
    ) -> HypervisorOp {
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
            form,
        }
    }

    /// Runs `op` here as the test's own user (the pool is a temporary directory of its own).
    fn run_here(op: &HypervisorOp) -> CommandOutput {
        crate::machine::local::LocalMachine
            .run(&op.command_here())
            .unwrap()
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
        assert!(command.as_root);
        assert_eq!(
            command.argv,
            [
                "/usr/libexec/trog/place-in-pool",
                "/pool dir;x",
                "image.part-here",
                "image",
                "sha256sum",
                digest.as_str(),
                "replace",
                "as-sent"
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
        assert_eq!(
            place_in_pool_timeout(0, StoredForm::AsSent),
            PLACE_IN_POOL_ALLOWANCE
        );
        let image = 600 * 1024 * 1024;
        assert_eq!(
            place_in_pool_timeout(image, StoredForm::AsSent),
            PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(600)
        );
        // Inflating it writes up to five times its size at 20 MiB/s more.
        assert_eq!(
            place_in_pool_timeout(image, StoredForm::Inflated),
            PLACE_IN_POOL_ALLOWANCE + Duration::from_secs(600 + 150)
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

    #[test]
    fn a_base_image_is_checked_as_sent_then_kept_inflated() {
        let pool = tempfile::tempdir().unwrap();
        let dir = pool.path().display().to_string();
        let raw = pool.path().join("disk.raw");
        let compressed = pool.path().join("sent.qcow2");
        let pattern: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(&raw, &pattern).unwrap();
        let convert = |args: &[&str]| {
            let status = std::process::Command::new("qemu-img")
                .args(args)
                .status()
                .expect("qemu-img (package qemu-utils)");
            assert!(status.success(), "qemu-img {args:?}");
        };
        let path = |p: &std::path::Path| p.display().to_string();
        convert(&[
            "convert",
            "-c",
            "-f",
            "raw",
            "-O",
            "qcow2",
            &path(&raw),
            &path(&compressed),
        ]);
        let sent = std::fs::read(&compressed).unwrap();

        let op = place_as(
            &dir,
            Input::Bytes(sent.clone()),
            &sha256_hex(&sent),
            Placement::KeepExisting,
            StoredForm::Inflated,
        );
        run_here(&op).success().unwrap();
        let image = pool.path().join("image");
        let info = std::process::Command::new("qemu-img")
            .args(["check", &path(&image)])
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&info.stdout);
        assert!(report.contains("0.00% compressed clusters"), "{report}");
        // The same disk as sent, every byte.
        let back = pool.path().join("back.raw");
        convert(&[
            "convert",
            "-f",
            "qcow2",
            "-O",
            "raw",
            &path(&image),
            &path(&back),
        ]);
        assert_eq!(std::fs::read(&back).unwrap(), pattern);
        let names: Vec<_> = std::fs::read_dir(pool.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with("image."))
            .collect();
        assert!(names.is_empty(), "no partial file left: {names:?}");
    }

    fn hold_lock(file: &str) -> HypervisorOp {
        HypervisorOp::HoldLock {
            dir: "/run/lock/trog".into(),
            file: file.into(),
            host: "work station".into(),
            pid: 4242,
            verb: "provision".into(),
            group: "libvirt".into(),
        }
    }

    #[test]
    fn a_lock_is_held_by_the_script_as_the_login_with_every_value_an_argument_of_its_own() {
        let command = hold_lock("guest-www.example.test.lock").command();
        assert!(
            !command.as_root,
            "the lock directory is writable by trog's logins"
        );
        assert_eq!(command.argv[..2], ["sh", "-c"]);
        assert!(command.argv[2].contains("flock -n -E 75 9"));
        assert!(!command.argv[2].contains("\n# "), "comments are left out");
        assert_eq!(
            command.argv[3..],
            [
                "trog-hold-lock",
                "/run/lock/trog",
                "guest-www.example.test.lock",
                "work station",
                "4242",
                "provision",
                "libvirt"
            ]
        );
        // Over SSH the line is one shell word per value: a host name with a space (or worse)
        // stays one argument.
        let line = command.to_shell_line();
        assert!(
            line.ends_with(
                "trog-hold-lock /run/lock/trog guest-www.example.test.lock 'work station' 4242 provision libvirt"
            ),
            "{line}"
        );
        assert!(command.stdin.is_none(), "its input is the run's, kept open");
    }

    #[test]
    fn the_lock_directory_is_made_by_its_script_as_root_with_its_values_as_arguments() {
        let command = HypervisorOp::MakeLockDir {
            dir: "/run/lock/trog".into(),
            group: "libvirt".into(),
        }
        .command();
        assert!(command.as_root, "/run/lock is root's");
        assert_eq!(
            command.argv,
            [
                "/usr/libexec/trog/make-lock-dir",
                "/run/lock/trog",
                "libvirt"
            ]
        );
        assert!(MAKE_LOCK_DIR.text.contains("chmod 2770"));
    }

    /// Each root program refuses arguments not of the form it takes, before it acts.
    #[test]
    fn root_programs_refuse_arguments_of_the_wrong_form() {
        let refused = |program: &RootProgram, args: &[&str]| {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(program.text)
                .arg(program.name)
                .args(args)
                .output()
                .unwrap();
            // Each says why (the KVM probe on stdout, as all its answers), but for the sudo
            // check, whose whole answer is its status.
            let said = !output.stderr.is_empty() || !output.stdout.is_empty();
            assert!(
                !output.status.success() && (said || program == &SUDO_CHECK),
                "{} {args:?}: {output:?}",
                program.name
            );
        };
        refused(&READ_LOG, &["from", "relative/log", "0"]);
        refused(&READ_LOG, &["from", "/var/log/../../etc/shadow", "0"]);
        refused(&READ_LOG, &["after", "/var/log/x", "-1"]);
        refused(&READ_LOG, &["qemu", "../../etc/shadow"]);
        refused(&READ_LOG, &["cat", "/etc/shadow"]);
        refused(&READ_LOG, &["size", "/a", "extra"]);
        refused(&DISK_IMAGE_INFO, &["-U"]);
        refused(&DISK_IMAGE_INFO, &[]);
        refused(&GUEST_DISK, &["cat", "kvm", "etc/x", "-", "raw", "/d"]);
        refused(&GUEST_DISK, &["rm", "kvm", "/etc/x", "-", "raw", "/d"]);
        refused(&GUEST_DISK, &["cat", "kvm", "/etc/x", "-", "vmdk", "/d"]);
        refused(&GUEST_DISK, &["cat", "kvm", "/etc/x", "-", "raw"]);
        refused(&GUEST_DISK, &["replace", "kvm", "/etc/x", "-", "raw", "/d"]);
        refused(
            &PLACE_IN_POOL,
            &["/p", "../x", "n", "sha256sum", "ab", "keep", "as-sent"],
        );
        refused(
            &PLACE_IN_POOL,
            &["/p", "x", "n", "rm", "ab", "keep", "as-sent"],
        );
        refused(
            &PLACE_IN_POOL,
            &["/p", "x", "n", "sha256sum", "ab;", "keep", "as-sent"],
        );
        refused(&PLACE_IN_POOL, &["/p", "x", "n"]);
        refused(&BOOT_FILES, &["/p", "../image"]);
        refused(&BOOT_FILES, &["p", "image"]);
        refused(&MAKE_LOCK_DIR, &["/run/lock/../../etc", "libvirt"]);
        refused(&MAKE_LOCK_DIR, &["/run/lock/trog", "-x"]);
        refused(&KVM_PROBE, &["extra"]);
        refused(&SUDO_CHECK, &["extra"]);
    }
}
