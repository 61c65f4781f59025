//! Converging one guest: what the declaration wants ([`DesiredGuest`]), what a hypervisor has
//! ([`ObservedGuest`]), and the pure [`plan`] that turns the difference into numbered actions or
//! refuses with conflicts. No I/O here; `provision` observes, plans, prints, then executes.
//!
//! libvirt is the only state. What trog created carries its tag (the domain's metadata); the
//! domain is defined before any volume is made, so after an interruption every volume named for
//! a tagged domain is known to be trog's.

mod action;
mod backup_restore;
mod checker;
mod conflict;
mod desired;
mod observed;
mod planner;
pub mod resource_names;

pub use action::{Action, Plan};
pub use backup_restore::with_backup_restore;
pub use checker::{check_plan, PlanViolation};
pub use conflict::{Conflict, Conflicts, Resolution};
pub use desired::{DesiredDisk, DesiredGuest, DesiredVolume, GuestTag};
pub use observed::{ObservedDomain, ObservedExtraDisks, ObservedGuest, ObservedVolume, PoolState};
pub use planner::plan;

#[cfg(test)]
mod tests;
