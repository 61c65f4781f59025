//! What `trog fleet` shows: every hypervisor's capacity, commitments, free space and guests.
//! Pure: an observation in, a summary (for `--json`) and a table (for people) out.

use crate::model::units::{Bytes, MiB};
use crate::placement::observed::{DefinedGuest, FleetObservation, Observation, PoolState};
use crate::placement::render::{align_columns, cpu_text, disk_text};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetSummary {
    pub source: String,
    pub hypervisors: Vec<HypervisorSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypervisorSummary {
    pub name: String,
    pub libvirt_uri: String,
    #[serde(flatten)]
    pub state: SummaryState,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum SummaryState {
    Answered {
        memory: MemorySummary,
        cpus: CpuSummary,
        pool: PoolSummary,
        max_guests: Option<u32>,
        guests: Vec<DefinedGuest>,
    },
    Unreachable {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemorySummary {
    pub physical: MiB,
    pub committed: MiB,
    pub reserved: MiB,
    /// Physical minus committed minus reserved, never below zero.
    pub free: MiB,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSummary {
    pub physical: u32,
    pub overcommit: f64,
    /// overcommit × physical: the vCPUs that may be promised.
    pub limit: f64,
    pub committed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolSummary {
    pub name: String,
    pub path: String,
    #[serde(flatten)]
    pub state: PoolState,
    pub reserved: Bytes,
    /// Available minus the reserve, when the pool is started.
    pub free_after_reserve: Option<Bytes>,
}

pub fn summarise_fleet(fleet: &FleetObservation) -> FleetSummary {
    let hypervisors = fleet
        .hypervisors
        .iter()
        .map(|hypervisor| {
            let config = &hypervisor.config;
            let state = match &hypervisor.observation {
                Observation::Unreachable { reason } => SummaryState::Unreachable {
                    reason: reason.clone(),
                },
                Observation::Answered(capacity) => {
                    let committed = capacity.committed_memory();
                    let mut guests = capacity.guests.clone();
                    guests.sort_by(|a, b| a.name.cmp(&b.name));
                    SummaryState::Answered {
                        memory: MemorySummary {
                            physical: capacity.physical_memory,
                            committed,
                            reserved: config.reserve_memory,
                            free: capacity
                                .physical_memory
                                .saturating_sub(committed)
                                .saturating_sub(config.reserve_memory),
                        },
                        cpus: CpuSummary {
                            physical: capacity.physical_cpus,
                            overcommit: config.cpu_overcommit,
                            limit: config.cpu_overcommit * f64::from(capacity.physical_cpus),
                            committed: capacity.committed_vcpus(),
                        },
                        pool: PoolSummary {
                            name: config.pool_name.clone(),
                            path: config.pool_path.display().to_string(),
                            free_after_reserve: match &capacity.pool {
                                PoolState::Active { available, .. } => {
                                    Some(available.saturating_sub(config.reserve_disk))
                                }
                                _ => None,
                            },
                            state: capacity.pool.clone(),
                            reserved: config.reserve_disk,
                        },
                        max_guests: config.max_guests,
                        guests,
                    }
                }
            };
            HypervisorSummary {
                name: config.name.to_string(),
                libvirt_uri: config.libvirt_uri.uri.clone(),
                state,
            }
        })
        .collect();
    FleetSummary {
        source: fleet.source.describe(),
        hypervisors,
    }
}

/// The table `trog fleet` prints, then each hypervisor's guests.
pub fn render_fleet(summary: &FleetSummary) -> String {
    let mut rows = vec![[
        "HYPERVISOR",
        "MEMORY",
        "VCPUS",
        "DISK",
        "GUESTS",
        "LIBVIRT URI",
    ]
    .map(String::from)
    .to_vec()];
    let mut guest_lines = String::new();
    for hypervisor in &summary.hypervisors {
        match &hypervisor.state {
            SummaryState::Unreachable { reason } => {
                rows.push(vec![
                    hypervisor.name.clone(),
                    "unreachable".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    hypervisor.libvirt_uri.clone(),
                ]);
                guest_lines.push_str(&format!(
                    "\n{}: could not be asked: {reason}\n",
                    hypervisor.name
                ));
            }
            SummaryState::Answered {
                memory,
                cpus,
                pool,
                max_guests,
                guests,
            } => {
                let disk = match (&pool.state, pool.free_after_reserve) {
                    (PoolState::Active { capacity, .. }, Some(free)) => {
                        format!(
                            "{} free of {} ({})",
                            disk_text(free),
                            disk_text(*capacity),
                            pool.name
                        )
                    }
                    (PoolState::Inactive, _) => format!("pool {} stopped", pool.name),
                    _ => format!("pool {} not yet created", pool.name),
                };
                rows.push(vec![
                    hypervisor.name.clone(),
                    format!(
                        "{} free ({} physical, {} committed, {} reserved)",
                        memory.free, memory.physical, memory.committed, memory.reserved
                    ),
                    format!("{} of {} promised", cpus.committed, cpu_text(cpus.limit)),
                    disk,
                    match max_guests {
                        Some(max) => format!("{} of {max}", guests.len()),
                        None => guests.len().to_string(),
                    },
                    hypervisor.libvirt_uri.clone(),
                ]);
                guest_lines.push_str(&format!("\n{}:\n", hypervisor.name));
                if guests.is_empty() {
                    guest_lines.push_str("  no guests\n");
                }
                let guest_rows: Vec<Vec<String>> = guests
                    .iter()
                    .map(|guest| {
                        vec![
                            format!("  {}", guest.name),
                            guest.max_memory.to_string(),
                            format!("{} vCPUs", guest.max_vcpus),
                            if guest.running { "running" } else { "shut off" }.to_string(),
                        ]
                    })
                    .collect();
                guest_lines.push_str(&align_columns(&guest_rows));
            }
        }
    }
    format!(
        "Fleet from {}\n\n{}{}",
        summary.source,
        align_columns(&rows),
        guest_lines
    )
}
