//! One hypervisor measured against one guest: for each resource, what is free before and after
//! placing it, whether it fits, and how much room (as a fraction of what may be promised) is left.

use crate::model::hypervisor::HypervisorConfig;
use crate::model::units::{Bytes, MiB};
use crate::placement::demand::GuestDemand;
use crate::placement::observed::{HypervisorCapacity, PoolState};
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    Memory,
    Cpus,
    Disk,
    Guests,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Memory => "memory",
            Resource::Cpus => "CPUs",
            Resource::Disk => "disk",
            Resource::Guests => "guests",
        })
    }
}

/// The figures one resource is judged by, as the refusal message quotes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "resource", rename_all = "snake_case")]
pub enum Figures {
    /// Committed (every defined guest's maximum) against physical minus the reserve.
    Memory {
        wanted: MiB,
        physical: MiB,
        committed: MiB,
        reserved: MiB,
    },
    /// Committed vCPUs against `cpu_overcommit` × physical CPUs.
    Cpus {
        wanted: u64,
        physical: u32,
        overcommit: f64,
        committed: u64,
    },
    /// The guest's disk against the pool's free space minus the reserve.
    Disk {
        wanted: Bytes,
        pool_capacity: Bytes,
        pool_available: Bytes,
        reserved: Bytes,
    },
    /// The pool is not started or not defined yet, so its free space is unknown and not checked.
    DiskUnchecked {
        wanted: Bytes,
        pool_name: String,
        pool_defined: bool,
    },
    /// Defined guests against `max_guests` (no limit when it is not set). `wanted` is 1, or 0
    /// when the hypervisor already has the guest and so already counts it.
    Guests {
        wanted: u64,
        count: u64,
        max: Option<u32>,
    },
}

/// One resource of one hypervisor, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceCheck {
    pub figures: Figures,
    pub fits: bool,
    /// Free share of what may be promised, before and after placing; `None` when the resource
    /// sets no limit (no `max_guests`, pool not measurable), so it never counts as the tightest.
    pub headroom_before: Option<f64>,
    pub headroom_after: Option<f64>,
}

impl ResourceCheck {
    pub fn resource(&self) -> Resource {
        match self.figures {
            Figures::Memory { .. } => Resource::Memory,
            Figures::Cpus { .. } => Resource::Cpus,
            Figures::Disk { .. } | Figures::DiskUnchecked { .. } => Resource::Disk,
            Figures::Guests { .. } => Resource::Guests,
        }
    }

    pub(super) fn judged(figures: Figures) -> ResourceCheck {
        // (what may be promised, already promised, wanted), in the resource's own unit.
        let (limit, used, wanted, fits): (f64, f64, f64, bool) = match &figures {
            Figures::Memory {
                wanted,
                physical,
                committed,
                reserved,
            } => {
                let limit = i128::from(physical.0) - i128::from(reserved.0);
                let after = limit - i128::from(committed.0) - i128::from(wanted.0);
                (
                    limit as f64,
                    committed.0 as f64,
                    wanted.0 as f64,
                    after >= 0,
                )
            }
            Figures::Cpus {
                wanted,
                physical,
                overcommit,
                committed,
            } => {
                let limit = overcommit * f64::from(*physical);
                let promised = (*committed + *wanted) as f64;
                (limit, *committed as f64, *wanted as f64, promised <= limit)
            }
            Figures::Disk {
                wanted,
                pool_capacity,
                pool_available,
                reserved,
            } => {
                let limit = i128::from(pool_capacity.0) - i128::from(reserved.0);
                let used = i128::from(pool_capacity.0) - i128::from(pool_available.0);
                let after =
                    i128::from(pool_available.0) - i128::from(reserved.0) - i128::from(wanted.0);
                (limit as f64, used as f64, wanted.0 as f64, after >= 0)
            }
            Figures::DiskUnchecked { .. } | Figures::Guests { max: None, .. } => {
                return ResourceCheck {
                    figures,
                    fits: true,
                    headroom_before: None,
                    headroom_after: None,
                }
            }
            Figures::Guests {
                wanted,
                count,
                max: Some(max),
            } => (
                f64::from(*max),
                *count as f64,
                *wanted as f64,
                count + wanted <= u64::from(*max),
            ),
        };
        let share = |free: f64| if limit > 0.0 { free / limit } else { 0.0 };
        ResourceCheck {
            headroom_before: Some(share(limit - used)),
            headroom_after: Some(share(limit - used - wanted)),
            figures,
            fits,
        }
    }
}

/// The headroom a hypervisor would have left, by which candidates are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Score {
    /// The tightest resource and its headroom after placing (1.0 when nothing limits).
    pub tightest: Option<Resource>,
    pub min_headroom_after: f64,
    pub mean_headroom_after: f64,
    pub guest_count: u64,
}

/// Every resource of one hypervisor against one guest. `already_counted` is true when the
/// hypervisor already has the guest, whose resources are then part of what it has promised.
pub fn assess(
    config: &HypervisorConfig,
    capacity: &HypervisorCapacity,
    demand: &GuestDemand,
    already_counted: bool,
) -> Vec<ResourceCheck> {
    let (memory, vcpus, disk) = if already_counted {
        (MiB(0), 0, Bytes(0))
    } else {
        (demand.memory, u64::from(demand.vcpus), demand.disk)
    };
    let disk_figures = match &capacity.pool {
        PoolState::Active {
            capacity: pool_capacity,
            available,
            ..
        } => Figures::Disk {
            wanted: disk,
            pool_capacity: *pool_capacity,
            pool_available: *available,
            reserved: config.reserve_disk,
        },
        state => Figures::DiskUnchecked {
            wanted: disk,
            pool_name: config.pool_name.clone(),
            pool_defined: matches!(state, PoolState::Inactive),
        },
    };
    let guest_count = capacity.guests.len() as u64;
    let mut checks = vec![
        ResourceCheck::judged(Figures::Memory {
            wanted: memory,
            physical: capacity.physical_memory,
            committed: capacity.committed_memory(),
            reserved: config.reserve_memory,
        }),
        ResourceCheck::judged(Figures::Cpus {
            wanted: vcpus,
            physical: capacity.physical_cpus,
            overcommit: config.cpu_overcommit,
            committed: capacity.committed_vcpus(),
        }),
        ResourceCheck::judged(disk_figures),
        ResourceCheck::judged(Figures::Guests {
            wanted: if already_counted { 0 } else { 1 },
            count: guest_count,
            max: config.max_guests,
        }),
    ];
    if already_counted {
        // Staying where it is adds nothing, so there is no limit it could break.
        checks.iter_mut().for_each(|check| check.fits = true);
    }
    checks
}

/// Ranks a hypervisor by the tightest of its limited resources after placing, then their mean.
pub fn score(checks: &[ResourceCheck], guest_count: u64) -> Score {
    let limited: Vec<(Resource, f64)> = checks
        .iter()
        .filter_map(|check| {
            check
                .headroom_after
                .map(|headroom| (check.resource(), headroom))
        })
        .collect();
    let tightest = limited
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let mean = if limited.is_empty() {
        1.0
    } else {
        limited.iter().map(|(_, headroom)| headroom).sum::<f64>() / limited.len() as f64
    };
    Score {
        tightest: tightest.map(|(resource, _)| resource),
        min_headroom_after: tightest.map_or(1.0, |(_, headroom)| headroom),
        mean_headroom_after: mean,
        guest_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(wanted: u64, physical: u64, committed: u64, reserved: u64) -> ResourceCheck {
        ResourceCheck::judged(Figures::Memory {
            wanted: MiB(wanted),
            physical: MiB(physical),
            committed: MiB(committed),
            reserved: MiB(reserved),
        })
    }

    #[test]
    fn memory_fits_exactly_up_to_physical_minus_reserve() {
        assert!(memory(24576, 65536, 36864, 4096).fits);
        assert!(!memory(24577, 65536, 36864, 4096).fits);
        let check = memory(8192, 65536, 36864, 4096);
        assert_eq!(check.headroom_before, Some(24576.0 / 61440.0));
        assert_eq!(check.headroom_after, Some(16384.0 / 61440.0));
        assert!(
            !memory(1, 1024, 0, 2048).fits,
            "a reserve above physical leaves nothing"
        );
    }

    #[test]
    fn cpus_are_measured_against_overcommit_times_physical() {
        let cpus = |wanted, committed| {
            ResourceCheck::judged(Figures::Cpus {
                wanted,
                physical: 8,
                overcommit: 1.5,
                committed,
            })
        };
        assert!(cpus(2, 10).fits);
        assert!(!cpus(3, 10).fits);
    }

    #[test]
    fn disk_counts_the_reserve_and_guests_count_the_limit() {
        let disk = ResourceCheck::judged(Figures::Disk {
            wanted: Bytes::from_gib(500),
            pool_capacity: Bytes::from_gib(1000),
            pool_available: Bytes::from_gib(260),
            reserved: Bytes::from_gib(50),
        });
        assert!(!disk.fits);
        let full = ResourceCheck::judged(Figures::Guests {
            wanted: 1,
            count: 20,
            max: Some(20),
        });
        assert!(!full.fits);
        let unlimited = ResourceCheck::judged(Figures::Guests {
            wanted: 1,
            count: 2000,
            max: None,
        });
        assert!(unlimited.fits && unlimited.headroom_after.is_none());
    }

    #[test]
    fn a_guest_already_counted_takes_no_further_guest_slot() {
        let full_with_it = ResourceCheck::judged(Figures::Guests {
            wanted: 0,
            count: 2,
            max: Some(2),
        });
        assert!(full_with_it.fits);
        assert_eq!(full_with_it.headroom_after, full_with_it.headroom_before);
        assert_eq!(full_with_it.headroom_after, Some(0.0));
    }

    #[test]
    fn the_score_is_the_tightest_limited_resource() {
        let checks = vec![
            memory(1024, 4096, 0, 0),
            ResourceCheck::judged(Figures::Guests {
                wanted: 1,
                count: 1,
                max: Some(2),
            }),
        ];
        let score = score(&checks, 1);
        assert_eq!(score.tightest, Some(Resource::Guests));
        assert_eq!(score.min_headroom_after, 0.0);
        assert_eq!(score.mean_headroom_after, 0.375);
    }
}
