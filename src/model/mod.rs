//! Plain data shared by every layer: names, sizes, the typed settings of a hypervisor, and the
//! system directories no setting may name.
//! Nothing here does I/O.

pub mod address_range;
pub mod digest;
pub mod direct_boot;
pub mod hypervisor;
pub mod names;
pub mod system_directory;
pub mod units;
