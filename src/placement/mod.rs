//! Where a guest goes: observed capacities in, a decision or a reasoned refusal out. Pure: no
//! I/O, no clock; the same observation always gives the same answer.
//!
//! The rules: a guest a hypervisor already has stays there. Otherwise every hypervisor that
//! answered is measured: memory committed (every defined guest's maximum) against physical minus
//! `reserve_memory`; vCPUs against `cpu_overcommit` × physical; the guest's disk against the
//! pool's free space minus `reserve_disk`; guests against `max_guests`. Of those where everything
//! fits, the one whose tightest resource has the largest share left afterwards wins; ties go to
//! the larger mean share, then fewer guests, then the name. A pinned guest (`hypervisor=`) may go
//! only to its pin and must fit there; `--hypervisor` skips the search and every check.
//!
//! A pool that is not started or not yet created has no size libvirt can report: its disk is
//! not checked and does not count towards the score (the first build creates the pool at
//! `pool_path`, on a filesystem trog cannot measure through libvirt).

pub mod assess;
pub mod choose;
pub mod demand;
pub mod error;
pub mod fleet_table;
pub mod observed;
pub mod render;

pub use assess::{Figures, Resource, ResourceCheck, Score};
pub use choose::{
    place_guest, place_guests, ChoiceReason, Decision, HypervisorRow, TieBreak, Verdict,
};
pub use demand::GuestDemand;
pub use error::{PlacementError, Refusal, RefusedHypervisor};
pub use observed::{
    DefinedGuest, FleetObservation, HypervisorCapacity, Observation, ObservedHypervisor, PoolState,
};
pub use render::{render_decision, render_decisions, render_refusal};
