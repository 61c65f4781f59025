//! Plain data shared by every layer: names, sizes, and the typed settings of a hypervisor.
//! Nothing here does I/O.

pub mod address_range;
pub mod digest;
pub mod direct_boot;
pub mod hypervisor;
pub mod names;
pub mod units;
