//! The closed list of what trog does on a hypervisor's own system (everything else there goes
//! through libvirt). No other code composes a command for a hypervisor: a new kind of work there
//! is a new variant here, and the test below, which counts them, has to be changed with it.

use crate::machine::{CommandOutput, Machine, MachineCommand, MachineError};
use std::time::Duration;

/// How long a question to a hypervisor may take. They are all quick reads; a host that needs
/// longer is stuck or its link is.
const QUESTION_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// Whether libguestfs's tools (`guestfish`, `virt-cat`) are installed, for `debug_boot`.
    Libguestfs,
    /// The filesystem holding a directory (the storage pool's): mount point, type, size and
    /// free space in bytes, as `findmnt` reports them on one line.
    FilesystemOf { path: String },
    /// A guest's serial console log, read as root (libvirt writes it owned by root).
    ReadSerialLog { path: String },
}

impl HypervisorOp {
    /// The command that carries the operation out.
    pub fn command(&self) -> MachineCommand {
        let command = match self {
            HypervisorOp::LoginName => MachineCommand::new(["id", "-un"]),
            HypervisorOp::PasswordlessSudo => MachineCommand::new(["sudo", "-n", "true"]),
            HypervisorOp::RootAccess => MachineCommand::new(["true"]).as_root(true),
            HypervisorOp::RealTpm => {
                MachineCommand::shell("test -c /dev/tpmrm0 || test -c /dev/tpm0")
            }
            HypervisorOp::Swtpm => MachineCommand::shell("command -v swtpm"),
            HypervisorOp::Libguestfs => {
                MachineCommand::shell("command -v guestfish && command -v virt-cat")
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
        };
        command.timeout(QUESTION_TIMEOUT)
    }

    /// Runs the operation on `hypervisor`.
    pub fn run_on(&self, hypervisor: &dyn Machine) -> Result<CommandOutput, MachineError> {
        hypervisor.run(&self.command())
    }

    /// Runs a yes-or-no operation: `true` when it exited 0. A host that cannot be asked answers
    /// no, and the caller decides what no costs.
    pub fn holds_on(&self, hypervisor: &dyn Machine) -> bool {
        self.run_on(hypervisor)
            .map(|output| output.status == Some(0))
            .unwrap_or(false)
    }
}

/// Whether a guest gets an emulated TPM: only when the hypervisor has a real one to protect the
/// emulated TPM's state file, and swtpm to provide it. A TPM whose secrets sit in a plain file
/// beside the disk is worse than none, because software on the guest will trust it.
pub fn offers_tpm(hypervisor: &dyn Machine) -> bool {
    HypervisorOp::RealTpm.holds_on(hypervisor) && HypervisorOp::Swtpm.holds_on(hypervisor)
}

/// A guest's serial console log on its hypervisor, if it can be read.
pub fn serial_log(hypervisor: &dyn Machine, path: &str) -> Option<String> {
    HypervisorOp::ReadSerialLog {
        path: path.to_string(),
    }
    .run_on(hypervisor)
    .ok()
    .and_then(|output| output.success().ok())
    .map(|output| output.stdout_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation, one of each. The match is exhaustive, so a new variant does not compile
    /// until it is listed here, and the count below says the list was widened on purpose.
    fn every_operation() -> Vec<HypervisorOp> {
        let path = "/x".to_string();
        let all = vec![
            HypervisorOp::LoginName,
            HypervisorOp::PasswordlessSudo,
            HypervisorOp::RootAccess,
            HypervisorOp::RealTpm,
            HypervisorOp::Swtpm,
            HypervisorOp::Libguestfs,
            HypervisorOp::FilesystemOf { path: path.clone() },
            HypervisorOp::ReadSerialLog { path },
        ];
        for op in &all {
            match op {
                HypervisorOp::LoginName
                | HypervisorOp::PasswordlessSudo
                | HypervisorOp::RootAccess
                | HypervisorOp::RealTpm
                | HypervisorOp::Swtpm
                | HypervisorOp::Libguestfs
                | HypervisorOp::FilesystemOf { .. }
                | HypervisorOp::ReadSerialLog { .. } => {}
            }
        }
        all
    }

    #[test]
    fn the_list_of_hypervisor_operations_is_closed() {
        assert_eq!(
            every_operation().len(),
            8,
            "widening what trog does on a hypervisor is a deliberate change: update this count"
        );
    }

    #[test]
    fn only_the_serial_log_and_the_sudo_probe_run_as_root() {
        let as_root: Vec<_> = every_operation()
            .into_iter()
            .filter(|op| op.command().as_root)
            .collect();
        assert_eq!(
            as_root,
            [
                HypervisorOp::RootAccess,
                HypervisorOp::ReadSerialLog { path: "/x".into() }
            ]
        );
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
        let machine = crate::machine::local::LocalMachine;
        assert!(HypervisorOp::LoginName
            .run_on(&machine)
            .unwrap()
            .success()
            .is_ok());
        let dir = tempfile::tempdir().unwrap();
        let output = HypervisorOp::FilesystemOf {
            path: dir.path().display().to_string(),
        }
        .run_on(&machine)
        .unwrap()
        .success()
        .unwrap();
        assert_eq!(output.stdout_text().split_whitespace().count(), 4);
    }
}
