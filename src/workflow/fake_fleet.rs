//! A [`Fleet`] of one [`FakeHypervisor`], for unit tests of the verbs: locating, locking and
//! opening are recorded in the fake's list of calls (`locate`, `lock`, `unlock` when the lock is
//! let go, `open`) and fail when the fake is told to fail them.

use crate::config::settings::RunsOn;
use crate::credentials::{CredentialSource, TerminalPrompter};
use crate::diagnose::Failure;
use crate::hypervisor::fake::{FakeHypervisor, Operation};
use crate::lock::LockError;
use crate::machine::fake::FakeMachine;
use crate::machine::hypervisor_ops::HypervisorMachine;
use crate::model::hypervisor::{HypervisorConfig, LibvirtUri};
use crate::model::names::{DomainName, HypervisorName};
use crate::workflow::open::HypervisorAccess;
use crate::workflow::reporter::Reporter;
use crate::workflow::session::{Fleet, GuestAddress, HeldLock, Located, Opened, Whereabouts};
use crate::workflow::LocateError;
use std::cell::RefCell;

/// A lock another run holds, as the real locks say when `--wait` runs out.
fn busy(subject: &str) -> LockError {
    LockError::Busy {
        subject: subject.to_string(),
        holder: "another run".into(),
        waited_seconds: 0,
        path: "/fake/locks".into(),
    }
}

/// The lines a [`Reporter`] was given.
#[derive(Default)]
pub struct RecordedReport(pub RefCell<Vec<String>>);

impl Reporter for RecordedReport {
    fn say(&self, line: &str) {
        self.0.borrow_mut().push(line.to_string());
    }
}

/// A fleet whose only hypervisor is `hypervisor`, at `config`.
pub struct FakeFleet {
    pub hypervisor: FakeHypervisor,
    pub config: HypervisorConfig,
    pub fleet_warning: Option<String>,
    /// The hypervisor's own system, handed to a verb that asks for it
    /// ([`HypervisorAccess::WithSystem`]); `None` as on libvirt's test driver, which has none.
    pub system: Option<FakeMachine>,
    /// Where every domain runs, as its file would say: a guest of its own unless a test says
    /// otherwise.
    pub runs_on: RunsOn,
}

/// A guest's lock in the fake: `unlock DOMAIN` is recorded when it is let go.
struct FakeLock {
    hypervisor: FakeHypervisor,
    subject: String,
}

impl Drop for FakeLock {
    fn drop(&mut self) {
        self.hypervisor.note(format!("unlock {}", self.subject));
    }
}

impl FakeFleet {
    /// A fleet of `hypervisor`, named `hv1`, reached at a URI of libvirt's test driver.
    pub fn of(hypervisor: &FakeHypervisor) -> FakeFleet {
        FakeFleet {
            hypervisor: hypervisor.clone(),
            config: HypervisorConfig::with_defaults(
                HypervisorName::parse("hv1").unwrap(),
                LibvirtUri::parse("test:///default").unwrap(),
            ),
            fleet_warning: None,
            system: None,
            runs_on: RunsOn::OwnGuest,
        }
    }

    /// The same fleet, where the domain asked for runs as `runs_on` says (a dependent, an
    /// existing host).
    pub fn running_on(self, runs_on: RunsOn) -> FakeFleet {
        FakeFleet { runs_on, ..self }
    }

    /// The same fleet, its hypervisor's own system scripted by `machine`.
    pub fn with_system(self, machine: &FakeMachine) -> FakeFleet {
        FakeFleet {
            system: Some(machine.clone()),
            ..self
        }
    }

    /// The same fleet, its hypervisor reached over SSH (a guest there can be logged in to).
    pub fn remote(self) -> FakeFleet {
        FakeFleet {
            config: HypervisorConfig {
                libvirt_uri: LibvirtUri::parse("qemu+ssh://hv1.example/system").unwrap(),
                ..self.config
            },
            ..self
        }
    }
}

impl Fleet for FakeFleet {
    fn runs_on(&self, _domain: &DomainName) -> RunsOn {
        self.runs_on.clone()
    }

    fn locate(&self, guest: &GuestAddress) -> Result<Located, Failure> {
        self.hypervisor
            .call(Operation::Locate, format!("locate {}", guest.domain))
            .map_err(|_| LocateError::NotFound {
                domain: guest.domain.to_string(),
                fleet: "the fake fleet".into(),
                unreachable: Vec::new(),
            })?;
        Ok(Located {
            hypervisor: self.config.clone(),
            fleet_warning: self.fleet_warning.clone(),
        })
    }

    fn search(&self, guest: &GuestAddress) -> Result<Whereabouts, Failure> {
        let asked = self
            .hypervisor
            .call(Operation::Locate, format!("search {}", guest.domain));
        Ok(Whereabouts {
            holder: (asked.is_ok() && self.hypervisor.domain(guest.domain.as_str()).is_some())
                .then(|| self.config.clone()),
            unreachable: asked
                .err()
                .map(|fault| vec![format!("{}: {fault}", self.config.name)])
                .unwrap_or_default(),
        })
    }

    fn lock_guest(
        &self,
        domain: &DomainName,
        _hypervisor: &HypervisorConfig,
        _reporter: &dyn Reporter,
    ) -> Result<HeldLock, Failure> {
        self.hypervisor
            .call(Operation::LockGuest, format!("lock {domain}"))
            .map_err(|_| busy(&format!("the guest {domain}")))?;
        Ok(Box::new(FakeLock {
            hypervisor: self.hypervisor.clone(),
            subject: domain.to_string(),
        }))
    }

    fn lock_network_filters(
        &self,
        hypervisor: &HypervisorConfig,
        _reporter: &dyn Reporter,
    ) -> Result<HeldLock, LockError> {
        self.hypervisor
            .call(Operation::LockNetworkFilters, "lock network filters".into())
            .map_err(|_| busy(&format!("the network filters of {}", hypervisor.name)))?;
        Ok(Box::new(FakeLock {
            hypervisor: self.hypervisor.clone(),
            subject: "network filters".into(),
        }))
    }

    fn open(
        &self,
        hypervisor: &HypervisorConfig,
        access: HypervisorAccess,
        _credentials: &mut CredentialSource<TerminalPrompter>,
    ) -> Result<Opened, Failure> {
        self.hypervisor
            .call(Operation::Open, format!("open {}", hypervisor.name))
            .map_err(|fault| {
                Failure::new(
                    format!("cannot connect to {}: {fault}", hypervisor.libvirt_uri.uri),
                    crate::exit_status::ExitStatus::Hypervisor,
                    Some("check that the hypervisor's daemon runs there".into()),
                )
            })?;
        let machine = match access {
            HypervisorAccess::LibvirtOnly => None,
            HypervisorAccess::WithSystem => self.system.clone().map(HypervisorMachine::fake),
        };
        Ok(Opened {
            hypervisor: Box::new(self.hypervisor.clone()),
            machine,
        })
    }
}
