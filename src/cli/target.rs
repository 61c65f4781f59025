//! The arguments the verbs share, declared and typed once and flattened into each verb: which
//! hypervisors are asked and for how long, and the guest a verb acts on.

use crate::cli::values::{self, Seconds};
use crate::hypervisor::fleet::DEFAULT_ANSWER_TIMEOUT;
use crate::model::names::{DomainName, HypervisorName};

/// The longest `--timeout`: an hour is far past any answer a hypervisor gives; it is a bound on a
/// typing mistake, not a policy.
pub const LONGEST_ANSWER_TIMEOUT: u64 = 3600;

/// How long each hypervisor asked has to answer.
#[derive(Debug, Clone, clap::Args)]
pub struct AnswerTimeout {
    /// Seconds each hypervisor has to answer before it counts as unreachable.
    #[arg(long, value_name = "SECONDS",
          default_value_t = Seconds(DEFAULT_ANSWER_TIMEOUT.as_secs()),
          value_parser = values::seconds(1, LONGEST_ANSWER_TIMEOUT))]
    pub timeout: Seconds,
}

/// `--hypervisor NAME`: one hypervisor of the fleet instead of every one.
#[derive(Debug, Clone, clap::Args)]
pub struct OneHypervisor {
    /// Act on this hypervisor of hypervisors.conf only, instead of every one of the fleet.
    #[arg(long, value_name = "NAME", value_parser = values::hypervisor)]
    pub hypervisor: Option<HypervisorName>,
}

impl OneHypervisor {
    pub fn name(&self) -> Option<&str> {
        self.hypervisor.as_ref().map(HypervisorName::as_str)
    }
}

/// Where a guest is looked for: the one hypervisor named, or every one of the fleet at once,
/// each within `--timeout`.
#[derive(Debug, Clone, clap::Args)]
pub struct FleetSearch {
    #[command(flatten)]
    pub one: OneHypervisor,
    #[command(flatten)]
    pub answer: AnswerTimeout,
}

/// The guest a verb is about, by its name.
#[derive(Debug, Clone, clap::Args)]
pub struct GuestName {
    /// The guest, fully qualified (its file in recipes.d is DOMAIN.yaml).
    #[arg(value_name = "DOMAIN", value_parser = values::domain)]
    pub domain: DomainName,
}

/// One guest, and where it is looked for.
#[derive(Debug, Clone, clap::Args)]
pub struct GuestTarget {
    #[command(flatten)]
    pub guest: GuestName,
    #[command(flatten)]
    pub search: FleetSearch,
}

impl FleetSearch {
    /// `--hypervisor`, as the workflows take it.
    pub fn hypervisor_name(&self) -> Option<&str> {
        self.one.name()
    }

    /// `--hypervisor`, as its name.
    pub fn hypervisor(&self) -> Option<&HypervisorName> {
        self.one.hypervisor.as_ref()
    }

    pub fn answer_timeout(&self) -> std::time::Duration {
        self.answer.timeout.duration()
    }
}

impl GuestTarget {
    /// The guest and where to look for it, as the workflows of an existing guest take them.
    pub fn address(&self) -> crate::workflow::snapshot::GuestAddress<'_> {
        crate::workflow::snapshot::GuestAddress {
            domain: &self.guest.domain,
            hypervisor: self.search.hypervisor_name(),
            answer_timeout: self.search.answer_timeout(),
        }
    }
}
