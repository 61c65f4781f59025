//! `preflight`'s core: what was found on each hypervisor and in the configuration (facts,
//! gathered by the command through the machine and libvirt backends), turned into checks that
//! each say `ok`, `FAILED` or `note` and what to do. Pure: facts in, checks and text out.
//!
//! A `note` is something a run survives but someone should know (no TPM, no mirror, a pool that
//! can fill the disk); only `FAILED` makes a run not worth starting.

pub mod checks;
pub mod existing_hosts;
pub mod render;

use crate::machine::hypervisor_ops::root_programs::Installed;
use serde::Serialize;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Note,
}

/// One line of the report, with what to do when it is not `ok`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub outcome: Outcome,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

impl Check {
    pub fn ok(summary: impl Into<String>) -> Check {
        Check {
            outcome: Outcome::Ok,
            summary: summary.into(),
            advice: None,
        }
    }
    pub fn failed(summary: impl Into<String>, advice: impl Into<String>) -> Check {
        Check {
            outcome: Outcome::Failed,
            summary: summary.into(),
            advice: Some(advice.into()),
        }
    }
    pub fn note(summary: impl Into<String>, advice: impl Into<String>) -> Check {
        Check {
            outcome: Outcome::Note,
            summary: summary.into(),
            advice: Some(advice.into()),
        }
    }
}

/// What `sudo -n true` said, and what the password handed in did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SudoFact {
    Passwordless,
    /// sudo wants a password and none was handed in.
    WantsPassword,
    /// sudo wants a password and the one handed in works.
    PasswordHandedInWorks,
    /// sudo wants a password and refused the one handed in.
    PasswordHandedInRefused,
    /// sudo is missing or refuses the login; what it said.
    Refused(String),
}

/// The storage pool as libvirt reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolFacts {
    pub path: String,
    pub active: bool,
}

/// The filesystem holding a directory, from `findmnt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesystemFacts {
    pub mount_point: String,
    pub fs_type: String,
    pub size_bytes: u64,
    pub available_bytes: u64,
}

/// What libvirt said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibvirtFacts {
    /// The daemon's libvirt, `major * 1_000_000 + minor * 1000 + release`.
    pub daemon_version: u32,
    /// The hypervisor (qemu) version, same encoding; 0 when libvirt does not say.
    pub hypervisor_version: u32,
    /// `None`: no pool of that name.
    pub pool: Option<PoolFacts>,
    /// Each IPv4 DHCP range of the hypervisor's libvirt networks.
    pub dhcp_pools: Vec<DhcpPool>,
}

/// One IPv4 range a libvirt network's DHCP leases from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpPool {
    pub network: String,
    pub first: std::net::Ipv4Addr,
    pub last: std::net::Ipv4Addr,
}

/// The addresses trog gives one guest itself on a libvirt network (`address_range`, `ips`),
/// which that network's DHCP should not lease to anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnAddresses {
    pub guest: String,
    /// The hypervisor it is pinned to, if any: otherwise it may be placed on any.
    pub hypervisor: Option<String>,
    pub network: String,
    pub address_range: Option<crate::model::address_range::AddressRange>,
    pub ips: Vec<std::net::Ipv4Addr>,
}

/// Everything found about one hypervisor. `Err` holds why something could not be found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HypervisorFacts {
    pub name: String,
    pub uri: String,
    /// The host as messages name it (`10.0.0.2`, `this machine`).
    pub host: String,
    /// The login the URI names, when it names one.
    pub expected_user: Option<String>,
    /// The login the connection runs as (`id -un`).
    pub login: Result<String, String>,
    pub sudo: Result<SudoFact, String>,
    /// What the host has at each of trog's root programs' paths (the program's path and whether
    /// it is this trog's); `None` where trog is root already and needs none installed.
    pub root_programs: Result<Option<Vec<(String, Installed)>>, String>,
    pub libvirt: Result<LibvirtFacts, String>,
    /// The libvirt library this trog is linked against.
    pub linked_version: u32,
    pub pool_name: String,
    /// The filesystem of the pool's directory, when the pool exists.
    pub pool_filesystem: Option<Result<FilesystemFacts, String>>,
    pub real_tpm: Result<bool, String>,
    pub swtpm: Result<bool, String>,
    pub libguestfs: Result<bool, String>,
    /// Where virtiofsd is (`None`: it is not there), which serves guests' shared folders.
    pub virtiofsd: Result<Option<String>, String>,
    /// Whether `qemu-img` is installed (base images and root disks are made with it).
    pub qemu_img: Result<bool, String>,
    /// The `domain_type` hypervisors.conf gives it.
    pub domain_type: crate::model::hypervisor::DomainType,
    /// Whether KVM actually works there (a guest started under it).
    pub kvm: Result<crate::machine::hypervisor_ops::KvmVerdict, String>,
    /// Over SSH: whether the connection is kept between runs, or why it cannot be (this user has
    /// no private folder for it). `None` for this machine and the test driver.
    pub connection_kept: Option<Result<(), String>>,
}

/// How one configuration file fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFact {
    Missing,
    /// Loaded; a short description of what it holds.
    Loaded(String),
    Invalid(String),
}

/// Why the guests of recipes.d could not be listed, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestListingProblem {
    pub why: String,
    pub hint: String,
}

/// Everything found about the installation's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurationFacts {
    pub dir: String,
    pub dir_exists: bool,
    pub hypervisors_conf: FileFact,
    pub recipes_yaml: FileFact,
    /// Every guest file of recipes.d: its name and the error when it does not load; or why
    /// recipes.d cannot be listed (unreadable, or a file in it not named after a guest).
    pub guests: Result<Vec<(String, Option<String>)>, GuestListingProblem>,
    /// Whether `_global` of `_base` names a mirror and a cache (`None`: recipes.yaml unread).
    pub mirror: Option<bool>,
    pub cache: Option<bool>,
    /// The addresses each guest that loads is given by trog on a libvirt network.
    pub own_addresses: Vec<OwnAddresses>,
}

/// A whole preflight: the configuration, then each hypervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreflightReport {
    pub configuration_dir: String,
    pub configuration: Vec<Check>,
    pub hypervisors: Vec<HypervisorReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HypervisorReport {
    pub name: String,
    pub uri: String,
    pub checks: Vec<Check>,
}

impl PreflightReport {
    /// A run is worth starting when nothing FAILED.
    pub fn worth_starting(&self) -> bool {
        self.configuration
            .iter()
            .chain(self.hypervisors.iter().flat_map(|h| h.checks.iter()))
            .all(|check| check.outcome != Outcome::Failed)
    }
}
