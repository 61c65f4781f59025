//! What went wrong talking to libvirt, naming the hypervisor and the operation.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LibvirtError {
    #[error("cannot connect to {uri}: {message}")]
    Connect { uri: String, message: String },
    #[error("{uri}: cannot {operation}: {message}")]
    Query {
        uri: String,
        operation: &'static str,
        message: String,
    },
}

impl LibvirtError {
    pub(crate) fn query(
        uri: &str,
        operation: &'static str,
        error: virt::error::Error,
    ) -> LibvirtError {
        LibvirtError::Query {
            uri: uri.to_string(),
            operation,
            message: error.message().to_string(),
        }
    }
}

impl Diagnose for LibvirtError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Hypervisor
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            LibvirtError::Connect { .. } => {
                "check that libvirtd runs there and that you can log in \
                 without a password (`virsh -c URI list` should work)"
                    .to_string()
            }
            LibvirtError::Query { .. } => {
                "check libvirtd's log on that hypervisor; the operation can be tried with virsh"
                    .to_string()
            }
        })
    }
}
