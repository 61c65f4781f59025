//! The one order every verb acting on an existing guest follows: locate the guest across the
//! fleet, take its lock (when the verb changes it), open its hypervisor (with sudo settled when
//! the verb needs the hypervisor's own system), act. [`GuestSession::open`] is that order; the
//! verbs (`destroy`, `snapshot`, `restore`, `backup`, `status`, `debug_boot`) act on the
//! session it returns and hold it until they are done, and with it the guest's lock.
//!
//! The steps before the hypervisor is opened reach the fleet through [`Fleet`]: the
//! installation's ([`InstallationFleet`]: hypervisors.conf, libvirt, the lock files), or in unit
//! tests `workflow::fake_fleet`, so that each verb's failure at each step is tested without a
//! hypervisor.

use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::hypervisor::fleet::find_guest;
use crate::hypervisor::Hypervisor;
use crate::lock::{LockError, Locks};
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::workflow::hypervisor_machine::open_hypervisor_machine;
use crate::workflow::lock::{take_guest_lock, take_network_filters_lock};
use crate::workflow::open::{connect_hypervisor, fleet_observer, HypervisorAccess};
use crate::workflow::reporter::Reporter;
use crate::workflow::{fleet_for_guest, locate_guest};
use std::cell::RefCell;
use std::time::Duration;

/// Which guest, and where to look for it.
pub struct GuestAddress<'a> {
    pub domain: &'a DomainName,
    /// `--hypervisor`: act there instead of asking the fleet.
    pub hypervisor: Option<&'a str>,
    pub answer_timeout: Duration,
}

/// Whether a verb changes the guest (and so holds its lock while it acts) or only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestUse {
    Change,
    Read,
}

/// A lock held until dropped (a guest's, or a hypervisor's network filters'), here and on the
/// hypervisor.
pub type HeldLock = Box<dyn std::any::Any>;

/// The hypervisor that holds a guest, and the warning about the fleet to show first.
pub struct Located {
    pub hypervisor: HypervisorConfig,
    /// A setting of the fleet that was ignored (`warning: …`).
    pub fleet_warning: Option<String>,
}

/// Where a guest was looked for across the fleet, for a verb to which a guest on no hypervisor
/// is an answer rather than an error (`status`).
pub struct Whereabouts {
    pub holder: Option<HypervisorConfig>,
    /// Hypervisors that could not be asked, each with why.
    pub unreachable: Vec<String>,
}

/// A hypervisor opened for a verb: the [`Hypervisor`] it acts through, and the hypervisor's own
/// system when the verb asked for it ([`HypervisorAccess::WithSystem`]; `None` on libvirt's test
/// driver, which has none).
pub struct Opened {
    pub hypervisor: Box<dyn Hypervisor>,
    pub machine: Option<HypervisorMachine>,
}

/// The fleet as the verbs reach it before a hypervisor is opened.
pub trait Fleet {
    /// Where `domain` runs, as its file says ([`crate::workflow::locate::where_domain_runs`]):
    /// asked before anything is located, so that a verb about a guest refuses a domain without
    /// one first.
    fn runs_on(&self, domain: &DomainName) -> RunsOn;
    /// The hypervisor that holds `guest`: the one named, the fleet's only one, or the one that
    /// says it has the guest when all are asked at once.
    fn locate(&self, guest: &GuestAddress) -> Result<Located, Failure>;
    /// Asks the named hypervisor, or every one at once, whether it holds the guest.
    fn search(&self, guest: &GuestAddress) -> Result<Whereabouts, Failure>;
    /// Takes the guest's lock here and on its hypervisor; `reporter` is told of a wait.
    fn lock_guest(
        &self,
        domain: &DomainName,
        hypervisor: &HypervisorConfig,
        reporter: &dyn Reporter,
    ) -> Result<HeldLock, Failure>;
    /// Takes the lock of the hypervisor's network filters here and there.
    fn lock_network_filters(
        &self,
        hypervisor: &HypervisorConfig,
        reporter: &dyn Reporter,
    ) -> Result<HeldLock, LockError>;
    /// Opens the hypervisor for a verb.
    fn open(
        &self,
        hypervisor: &HypervisorConfig,
        access: HypervisorAccess,
        credentials: &mut CredentialSource<TerminalPrompter>,
    ) -> Result<Opened, Failure>;
}

/// The installation's fleet: `hypervisors.conf` (or this machine), every hypervisor's libvirt,
/// and the lock files here and on the hypervisors.
pub struct InstallationFleet<'a> {
    pub paths: &'a InstallationPaths,
    pub locks: &'a Locks,
}

impl Fleet for InstallationFleet<'_> {
    fn runs_on(&self, domain: &DomainName) -> RunsOn {
        crate::workflow::locate::where_domain_runs(self.paths, domain)
    }

    fn locate(&self, guest: &GuestAddress) -> Result<Located, Failure> {
        let fleet = fleet_for_guest(self.paths, guest.domain)?;
        let hypervisor =
            locate_guest(&fleet, guest.domain, guest.hypervisor, guest.answer_timeout)?;
        Ok(Located {
            hypervisor: hypervisor.clone(),
            fleet_warning: fleet.warning.clone(),
        })
    }

    fn search(&self, guest: &GuestAddress) -> Result<Whereabouts, Failure> {
        let whole = fleet_for_guest(self.paths, guest.domain)?;
        let fleet = match guest.hypervisor {
            Some(name) => {
                let hypervisor = whole.hypervisor_named(name)?;
                whole.narrowed_to(hypervisor)
            }
            None => whole,
        };
        let found = find_guest(&fleet, guest.domain, fleet_observer(), guest.answer_timeout);
        let holder = found.holders.first().and_then(|holder| {
            fleet
                .fleet
                .hypervisors
                .iter()
                .find(|hypervisor| &hypervisor.name == holder)
                .cloned()
        });
        Ok(Whereabouts {
            holder,
            unreachable: found
                .unreachable
                .iter()
                .map(|(name, why)| format!("{name}: {why}"))
                .collect(),
        })
    }

    fn lock_guest(
        &self,
        domain: &DomainName,
        hypervisor: &HypervisorConfig,
        reporter: &dyn Reporter,
    ) -> Result<HeldLock, Failure> {
        let held = take_guest_lock(self.locks, domain, hypervisor, None, &mut |text| {
            reporter.say(text)
        })?;
        Ok(Box::new(held))
    }

    fn lock_network_filters(
        &self,
        hypervisor: &HypervisorConfig,
        reporter: &dyn Reporter,
    ) -> Result<HeldLock, LockError> {
        let held = take_network_filters_lock(self.locks, hypervisor, None, &mut |text| {
            reporter.say(text)
        })?;
        Ok(Box::new(held))
    }

    fn open(
        &self,
        hypervisor: &HypervisorConfig,
        access: HypervisorAccess,
        credentials: &mut CredentialSource<TerminalPrompter>,
    ) -> Result<Opened, Failure> {
        // sudo first: a password is asked before libvirt is, as it always was.
        let machine = match access {
            HypervisorAccess::LibvirtOnly => None,
            HypervisorAccess::WithSystem => {
                open_hypervisor_machine(&hypervisor.libvirt_uri, credentials)?
            }
        };
        Ok(Opened {
            hypervisor: connect_hypervisor(hypervisor)?,
            machine,
        })
    }
}

/// A located guest's hypervisor, opened, with the guest's lock held for a verb that changes it.
pub struct GuestSession {
    // Declared first so that it is let go first, before the hypervisor is closed. A cell, so
    // that a verb can let it go while it still acts through the hypervisor it borrows.
    lock: RefCell<Option<HeldLock>>,
    pub domain: DomainName,
    pub config: HypervisorConfig,
    pub hypervisor: Box<dyn Hypervisor>,
    /// The hypervisor's own system, when the verb asked for it.
    pub machine: Option<HypervisorMachine>,
}

impl GuestSession {
    /// Locates `guest`, says the fleet's warning, takes the guest's lock when `guest_use` is
    /// [`GuestUse::Change`], then opens its hypervisor with `access`: the one order of every verb
    /// acting on an existing guest.
    pub fn open(
        fleet: &dyn Fleet,
        guest: &GuestAddress,
        guest_use: GuestUse,
        access: HypervisorAccess,
        credentials: &mut CredentialSource<TerminalPrompter>,
        reporter: &dyn Reporter,
    ) -> Result<GuestSession, Failure> {
        let located = fleet.locate(guest)?;
        if let Some(warning) = &located.fleet_warning {
            reporter.say(&format!("warning: {warning}"));
        }
        let lock = match guest_use {
            GuestUse::Change => {
                Some(fleet.lock_guest(guest.domain, &located.hypervisor, reporter)?)
            }
            GuestUse::Read => None,
        };
        let opened = fleet.open(&located.hypervisor, access, credentials)?;
        Ok(GuestSession {
            lock: RefCell::new(lock),
            domain: guest.domain.clone(),
            config: located.hypervisor,
            hypervisor: opened.hypervisor,
            machine: opened.machine,
        })
    }

    /// The hypervisor's name in the fleet.
    pub fn hypervisor_name(&self) -> String {
        self.config.name.to_string()
    }

    /// Lets the guest's lock go before the session ends (a restore reads the guest's status
    /// without holding it; `debug_boot --console` streams the capture without holding it).
    pub fn release_lock(&self) {
        self.lock.borrow_mut().take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::HandedInCredentials;
    use crate::exit_status::ExitStatus;
    use crate::hypervisor::fake::{FakeHypervisor, Operation};
    use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};

    fn open(
        fleet: &FakeFleet,
        guest_use: GuestUse,
        reporter: &RecordedReport,
    ) -> Result<GuestSession, Failure> {
        let domain = DomainName::parse("g.example.test").unwrap();
        let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
        GuestSession::open(
            fleet,
            &GuestAddress {
                domain: &domain,
                hypervisor: None,
                answer_timeout: Duration::from_secs(1),
            },
            guest_use,
            HypervisorAccess::LibvirtOnly,
            &mut credentials,
            reporter,
        )
    }

    #[test]
    fn a_session_locates_says_the_fleets_warning_locks_and_opens_in_that_order() {
        let fake = FakeHypervisor::new("hv1");
        let fleet = FakeFleet {
            fleet_warning: Some("libvirt_uri in g.example.test.yaml is ignored".into()),
            ..FakeFleet::of(&fake)
        };
        let reporter = RecordedReport::default();
        let session = open(&fleet, GuestUse::Change, &reporter).unwrap();
        assert_eq!(
            *reporter.0.borrow(),
            ["warning: libvirt_uri in g.example.test.yaml is ignored"]
        );
        assert_eq!(
            fake.calls(),
            ["locate g.example.test", "lock g.example.test", "open hv1"]
        );
        assert_eq!(session.hypervisor_name(), "hv1");
        session.release_lock();
        assert_eq!(fake.calls().last().unwrap(), "unlock g.example.test");
    }

    #[test]
    fn a_session_that_only_reads_takes_no_lock() {
        let fake = FakeHypervisor::new("hv1");
        let session = open(
            &FakeFleet::of(&fake),
            GuestUse::Read,
            &RecordedReport::default(),
        );
        assert!(session.is_ok());
        assert_eq!(fake.calls(), ["locate g.example.test", "open hv1"]);
    }

    #[test]
    fn a_lock_another_run_holds_ends_the_session_before_its_hypervisor_is_opened() {
        let fake = FakeHypervisor::new("hv1").failing(Operation::LockGuest);
        let failure = open(
            &FakeFleet::of(&fake),
            GuestUse::Change,
            &RecordedReport::default(),
        )
        .err()
        .unwrap();
        assert_eq!(failure.status, ExitStatus::Busy);
        assert_eq!(
            fake.calls(),
            ["locate g.example.test", "lock g.example.test"]
        );
    }
}
