//! Why a guest could not be placed.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::names::{DomainName, HypervisorName};
use crate::placement::assess::Figures;
use crate::placement::demand::GuestDemand;
use crate::placement::render::render_refusal;
use serde::Serialize;

/// Nowhere to put a guest: what it wants, and for each hypervisor it could have gone to, every
/// resource that does not fit with its figures, or why it could not be asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub demand: GuestDemand,
    /// Where the hypervisors came from (the fleet file, or this machine), for the message.
    pub fleet: String,
    /// Every hypervisor considered: all of them, or only the one the guest is pinned to.
    pub hypervisors: Vec<RefusedHypervisor>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RefusedHypervisor {
    TooFull {
        hypervisor: HypervisorName,
        shortfalls: Vec<Figures>,
    },
    Unreachable {
        hypervisor: HypervisorName,
        reason: String,
    },
}

impl Refusal {
    /// Only unreachable hypervisors: the trouble is reaching them, not their room.
    pub fn nothing_answered(&self) -> bool {
        self.hypervisors
            .iter()
            .all(|h| matches!(h, RefusedHypervisor::Unreachable { .. }))
    }
}

/// Which setting named a hypervisor the fleet does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownNameFrom {
    /// `--hypervisor NAME`.
    CommandLine,
    /// The guest's `hypervisor=` setting.
    GuestSetting,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementError {
    #[error("{}", render_refusal(.0).trim_end())]
    Nowhere(Refusal),
    #[error("{}there is no hypervisor named `{name}` in {fleet} ({})", written_at.as_ref().map(|place| format!("{place}: ")).unwrap_or_default(), match from {
        UnknownNameFrom::CommandLine => "from --hypervisor",
        UnknownNameFrom::GuestSetting => "from the guest's hypervisor= setting",
    })]
    UnknownHypervisor {
        name: HypervisorName,
        from: UnknownNameFrom,
        fleet: String,
        known: Vec<HypervisorName>,
        /// Where the guest's `hypervisor` setting was written (`file:line:column`), once the
        /// configuration's layer said.
        written_at: Option<String>,
    },
    #[error(
        "{domain} is pinned to {pinned_to} (hypervisor={pinned_to}), but {holder} already has it"
    )]
    PinnedButElsewhere {
        domain: DomainName,
        pinned_to: HypervisorName,
        holder: HypervisorName,
    },
    #[error("{domain} is defined on more than one hypervisor: {}", names(holders))]
    HeldByMany {
        domain: DomainName,
        holders: Vec<HypervisorName>,
    },
}

fn names(list: &[HypervisorName]) -> String {
    list.iter()
        .map(HypervisorName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PlacementError {
    /// Says where the guest's `hypervisor` setting that named an unknown hypervisor was written;
    /// any other error is returned as it is.
    pub fn pin_written_at(mut self, place: Option<String>) -> PlacementError {
        if let PlacementError::UnknownHypervisor {
            from: UnknownNameFrom::GuestSetting,
            written_at,
            ..
        } = &mut self
        {
            *written_at = place;
        }
        self
    }
}

impl Diagnose for PlacementError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            PlacementError::Nowhere(refusal) if refusal.nothing_answered() => {
                ExitStatus::Hypervisor
            }
            PlacementError::Nowhere(_) => ExitStatus::NoPlacement,
            PlacementError::UnknownHypervisor {
                from: UnknownNameFrom::CommandLine,
                ..
            } => ExitStatus::Usage,
            PlacementError::UnknownHypervisor { .. } => ExitStatus::Configuration,
            PlacementError::PinnedButElsewhere { .. } | PlacementError::HeldByMany { .. } => {
                ExitStatus::Conflict
            }
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            PlacementError::Nowhere(refusal) if refusal.nothing_answered() => {
                "check that the hypervisors are up and reachable (`trog fleet` shows what each \
                 answers)"
                    .to_string()
            }
            PlacementError::Nowhere(_) => "ask for less (memory, cpus, size in the guest's \
                 settings), free room on a hypervisor, raise its limits in hypervisors.conf, or \
                 add a hypervisor; `trog fleet` shows what each has left"
                .to_string(),
            PlacementError::UnknownHypervisor { known, .. } if known.is_empty() => {
                "the fleet has no hypervisors".to_string()
            }
            PlacementError::UnknownHypervisor { known, .. } => {
                format!("the names it has are: {}", names(known))
            }
            PlacementError::PinnedButElsewhere { holder, .. } => format!(
                "a guest stays where it is: set hypervisor={holder}, or move the guest by hand \
                 first"
            ),
            PlacementError::HeldByMany { .. } => {
                "undefine the copies that should not exist, then run the command again".to_string()
            }
        })
    }
}
