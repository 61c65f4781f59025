//! What trog asks a hypervisor's own system (not libvirt) before building on it.

use crate::machine::{Machine, MachineCommand};
use std::time::Duration;

/// Whether a guest gets an emulated TPM: only when the hypervisor has a real one to protect the
/// emulated TPM's state file, and swtpm to provide it. A TPM whose secrets sit in a plain file
/// beside the disk is worse than none, because software on the guest will trust it.
pub fn offers_tpm(hypervisor: &dyn Machine) -> bool {
    let check = MachineCommand::shell(
        "{ test -c /dev/tpmrm0 || test -c /dev/tpm0; } && command -v swtpm >/dev/null",
    )
    .timeout(Duration::from_secs(30));
    hypervisor
        .run(&check)
        .map(|output| output.status == Some(0))
        .unwrap_or(false)
}

/// The tail of a guest's serial console log on its hypervisor, if it can be read.
pub fn console_log(hypervisor: &dyn Machine, path: &str) -> Option<String> {
    hypervisor
        .read_file(path, true)
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}
