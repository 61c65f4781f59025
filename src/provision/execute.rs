//! Carrying out a prepared plan: its steps in order, the hypervisor's and the wait through
//! [`GuestSteps`], then the finish over the [`Machine`] the wait connected to.
//!
//! The order and the bookkeeping (which step failed, which ran before it, what is recorded after a
//! finish) live in [`execute_plan`]; [`HypervisorSteps`] does the steps on the guest's hypervisor,
//! through the [`crate::hypervisor::Hypervisor`] trait. The unit tests stand a fake in the place
//! of each: fake steps to walk every failure path of the order (`execute_tests.rs`), and the fake
//! hypervisor under the real steps to fail each of the hypervisor's (`execute_fake_tests.rs`).

use crate::addresses::settle::tenant_directory;
use crate::addresses::store::AddressBook;
use crate::diagnose::Failure;
use crate::generate::desired;
use crate::guest::backup::restore_backup;
use crate::guest::finish::{finish, DEFAULT_FINISH_TIMEOUT};
use crate::guest::wait::{wait_for_ssh, BootWait, GuestProbe, DEFAULT_BOOT_WAIT};
use crate::hypervisor::provisioning::{AddressLeased, BuiltArtifacts, KeptApart, PinnedLease};
use crate::lock::{HeldLocks, LockError, LockingHypervisor, Subject};
use crate::machine::hypervisor_ops;
use crate::machine::hypervisor_ops::boot_files::BootFiles;
use crate::machine::ssh::SshMachine;
use crate::machine::Machine;
use crate::model::direct_boot::DirectBoot;
use crate::model::hypervisor::Transport;
use crate::plan::{Action, GuestTag, Plan};
use crate::provision::{ConvergeError, ConvergeReport, GuestOnHypervisor, PreparedGuest};
use crate::render::domain_xml::{render_domain_xml, DomainSpec, Firmware, DEFAULT_DOMAIN_TEMPLATE};
use crate::render::network_filter::{filters_for, joined_directories};
use crate::secrets::PrivateKeyFile;
use crate::workflow::progress::Progress;
use crate::workflow::reach::{self, SshProbe};
use std::error::Error as StdError;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a plan's steps do to the world, apart from the finish (which runs over the [`Machine`] the
/// wait connected to).
pub trait GuestSteps {
    /// Defines the guest's network filter (and refreshes the tenants' filters on its hypervisor)
    /// just before its domain is defined or started; returns the step's label when it did.
    fn apply_network_filters(
        &mut self,
        progress: &mut dyn Progress,
    ) -> Result<Option<String>, Failure>;
    /// Reserves the guest's static address in the libvirt network it joins, before it boots;
    /// returns the step's label when something changed.
    fn reserve_address(&mut self) -> Result<Option<String>, Failure>;
    /// Pins the lease of a guest without a static address (docs/NETWORK.md, "Pinned leases")
    /// just before its domain is defined or started; returns the step's label when it made the
    /// pin. Should the definition then fail, the pin is taken back.
    fn pin_lease(&mut self) -> Result<Option<String>, Failure>;
    /// Carries out one of the plan's steps that are the hypervisor's (anything but the wait, the
    /// backups, the seed's retirement and the finish).
    fn hypervisor_step(
        &mut self,
        action: &Action,
        progress: &mut dyn Progress,
    ) -> Result<(), Failure>;
    /// What the wait for SSH asks of the guest and its hypervisor.
    fn reach<'s>(
        &'s mut self,
        progress: &'s dyn Progress,
    ) -> Result<Box<dyn ReachProbe + 's>, Failure>;
    /// Records the domain's tag once the finish succeeded.
    fn record_tag(&mut self, tag: &GuestTag) -> Result<(), Failure>;
    /// Backs the running guest up over SSH before its root disk is replaced; returns the archive.
    fn back_up_before_rebuild(&mut self) -> Result<PathBuf, Failure>;
    /// Drops the host key adopted for a guest built before trog made host keys, once the guest
    /// answered SSH from a root disk this run made (whose seed installed trog's own key and
    /// deleted the others); returns the step's label when there was one to drop.
    fn forget_adopted_host_key(&mut self) -> Result<Option<String>, Failure>;
    /// Retires the guest's seed once its first boot is over (`guest`: the guest, connected):
    /// `guest::retire_seed` through the guest's hypervisor.
    fn retire_seed(&mut self, guest: &dyn Machine) -> Result<(), Failure>;
}

/// A [`GuestProbe`] that keeps the connection that answered.
pub trait ReachProbe: GuestProbe {
    /// The guest, once SSH answered.
    fn connected(&mut self) -> Option<Box<dyn Machine>>;
}

/// How long the wait and the finish may take, and the clock they are measured with.
pub struct Waits<'a> {
    pub ssh: BootWait,
    pub finish: Duration,
    pub clock: &'a dyn Fn() -> Instant,
    pub pause: &'a dyn Fn(Duration),
}

/// The bounds and the clock of a real run.
pub const REAL_WAITS: Waits<'static> = Waits {
    ssh: DEFAULT_BOOT_WAIT,
    finish: DEFAULT_FINISH_TIMEOUT,
    clock: &Instant::now,
    pause: &std::thread::sleep,
};

/// The plan of one guest and what its wait and finish need.
pub struct PlanToRun<'a> {
    pub guest: &'a str,
    pub hypervisor: &'a str,
    pub mac: &'a str,
    pub plan: &'a Plan,
    pub payload: &'a [u8],
    /// The tag the domain carries once the plan's domain steps ran; a finish records it with the
    /// payload's digest.
    pub tag: GuestTag,
}

/// A step of a plan failed: which one, and which ran before it (they are done, and a rerun finds
/// them done).
#[derive(Debug, thiserror::Error)]
#[error("{guest}: step {number} of {total} failed: {step}{}", ran_before(.ran))]
pub struct StepFailed {
    pub guest: String,
    pub step: String,
    pub number: usize,
    pub total: usize,
    pub ran: Vec<String>,
    #[source]
    pub source: Box<dyn StdError + Send + Sync + 'static>,
}

fn ran_before(ran: &[String]) -> String {
    if ran.is_empty() {
        "\nno step ran before it".into()
    } else {
        format!("\nthe steps before it ran: {}", ran.join("; "))
    }
}

impl StepFailed {
    /// Wraps the step's own failure, keeping its exit status and hint.
    fn of(
        failure: Failure,
        guest: &str,
        step: &Action,
        number: usize,
        total: usize,
        ran: &[(String, f64)],
    ) -> Failure {
        let status = failure.status;
        let hint = failure.hint;
        Failure::new(
            StepFailed {
                guest: guest.to_string(),
                step: step.to_string(),
                number,
                total,
                ran: ran.iter().map(|(label, _)| label.clone()).collect(),
                source: failure.error,
            },
            status,
            hint,
        )
    }
}

/// Carries out `run.plan` step by step; stops at the first step that fails, naming it and the
/// steps that ran before it.
pub fn execute_plan(
    steps: &mut dyn GuestSteps,
    run: &PlanToRun,
    waits: &Waits,
    progress: &mut dyn Progress,
) -> Result<ConvergeReport, Failure> {
    let started = (waits.clock)();
    let mut report = ConvergeReport {
        guest: run.guest.to_string(),
        hypervisor: run.hypervisor.to_string(),
        address: None,
        converged_already: run.plan.is_converged(),
        steps: Vec::new(),
        total_seconds: 0.0,
    };
    // Before the guest boots, so that dnsmasq never leases its address to another MAC.
    let reserving = (waits.clock)();
    if let Some(reserved) = steps.reserve_address()? {
        report
            .steps
            .push((reserved, seconds((waits.clock)() - reserving)));
    }
    let mut connected: Option<Box<dyn Machine>> = None;
    let mut fresh_backup: Option<PathBuf> = None;
    let mut root_disk_made = false;
    let mut filtered = false;
    let total = run.plan.actions.len();
    for (index, action) in run.plan.actions.iter().enumerate() {
        // Just before the domain is defined (or started): its interface references the filter,
        // and the other tenants' filters learn this guest's address before it can send anything.
        // Not sooner: the filters stay locked until the domain is defined, and a first upload of
        // the base image before it may take minutes.
        if !filtered && matches!(action, Action::DefineDomain { .. } | Action::StartDomain) {
            filtered = true;
            let filtering = (waits.clock)();
            if let Some(label) = steps.apply_network_filters(progress)? {
                report
                    .steps
                    .push((label, seconds((waits.clock)() - filtering)));
            }
            // A leased guest's lease is pinned here rather than at the start, so that a run
            // ending before its domain is defined (a lock not given, an upload that failed)
            // leaves no reservation that no domain's destroy would find.
            let pinning = (waits.clock)();
            if let Some(label) = steps.pin_lease()? {
                report
                    .steps
                    .push((label, seconds((waits.clock)() - pinning)));
            }
        }
        progress.start(run.guest, index + 1, total, &action.to_string());
        let outcome: Result<(), Failure> = match action {
            Action::WaitForSsh => steps.reach(progress).and_then(|mut probe| {
                let result = wait_for_ssh(
                    probe.as_mut(),
                    run.guest,
                    run.mac,
                    waits.ssh,
                    waits.clock,
                    waits.pause,
                );
                connected = probe.connected();
                result
                    .map(|address| report.address = Some(address))
                    .map_err(Failure::from)
            }),
            Action::BackUpBeforeRebuild => steps
                .back_up_before_rebuild()
                .map(|archive| fresh_backup = Some(archive)),
            Action::RestoreBackup { .. } | Action::RestoreFreshBackup => {
                let archive = match action {
                    Action::RestoreBackup { archive } => Some(PathBuf::from(archive)),
                    _ => fresh_backup.clone(),
                };
                match (&connected, archive) {
                    (Some(machine), Some(archive)) => {
                        restore_backup(machine.as_ref(), &archive).map_err(Failure::from)
                    }
                    _ => Err(ConvergeError::NotConnected {
                        guest: run.guest.to_string(),
                    }
                    .into()),
                }
            }
            Action::RetireSeed { .. } => match &connected {
                None => Err(ConvergeError::NotConnected {
                    guest: run.guest.to_string(),
                }
                .into()),
                Some(machine) => steps.retire_seed(machine.as_ref()),
            },
            Action::Finish { payload_digest } => match &connected {
                None => Err(ConvergeError::NotConnected {
                    guest: run.guest.to_string(),
                }
                .into()),
                Some(machine) => {
                    let mut on_log = |text: &str| progress.guest_output(text);
                    finish(
                        machine.as_ref(),
                        run.payload,
                        payload_digest,
                        waits.finish,
                        &mut on_log,
                    )
                    .map_err(Failure::from)
                    .and_then(|_| {
                        steps.record_tag(&GuestTag {
                            payload_digest: Some(payload_digest.clone()),
                            ..run.tag.clone()
                        })
                    })
                }
            },
            _ => steps.hypervisor_step(action, progress),
        };
        let elapsed = progress.finish(outcome.is_ok());
        if let Err(failure) = outcome {
            return Err(StepFailed::of(
                failure,
                run.guest,
                action,
                index + 1,
                total,
                &report.steps,
            ));
        }
        report.steps.push((action.to_string(), seconds(elapsed)));
        match action {
            Action::CreateRootVolume { .. } => root_disk_made = true,
            // The guest answered with a key it is pinned to; on the disk this run made, only
            // trog's own is there to answer with, so an adopted one is stale from now on.
            Action::WaitForSsh if root_disk_made => {
                let forgetting = (waits.clock)();
                if let Some(label) = steps.forget_adopted_host_key()? {
                    report
                        .steps
                        .push((label, seconds((waits.clock)() - forgetting)));
                }
            }
            _ => {}
        }
    }
    report.total_seconds = seconds((waits.clock)() - started);
    Ok(report)
}

/// The steps on the guest's hypervisor, through its [`crate::hypervisor::Hypervisor`]; the
/// wait through its DHCP leases and OpenSSH.
pub struct HypervisorSteps<'a> {
    pub guest: &'a GuestOnHypervisor<'a>,
    pub prepared: &'a PreparedGuest,
    pub artifacts: BuiltArtifacts<'a>,
    /// The guest's key and known-hosts file live only for this run, in private temporary places.
    pub key_file: Option<PrivateKeyFile>,
    /// The lock of the hypervisor's network filters, from defining them until the domain that
    /// references them is defined.
    pub network_filters_lock: Option<HeldLocks>,
    /// The address whose lease this run pinned, until the domain is defined.
    pub lease_pinned: Option<std::net::Ipv4Addr>,
    /// The domain as it is defined once the guest's lease is pinned: its filter names the
    /// pinned address as the guest's only one, so that libvirt never learns another from the
    /// guest's own packets (docs/NETWORK.md, "Isolation").
    pub pinned_definition: Option<(DomainSpec, String)>,
    /// Where in the guest's serial log (appended to across boots) the boot this run started
    /// begins, or for a guest that ran already, where the log ended when the wait began: the
    /// wait reads from there, so a panic of an earlier boot is not taken for this one's, and
    /// only what is new crosses the link.
    pub console_from: Option<u64>,
}

impl HypervisorSteps<'_> {
    /// Carries out `action` on the guest's hypervisor, with the artifacts as they are now.
    fn carry_out(
        &self,
        action: &Action,
    ) -> Result<(), crate::hypervisor::provisioning::GuestResourceError> {
        self.guest
            .backend
            .carry_out(&self.prepared.desired, action, &self.artifacts())
    }

    /// What the domain is defined from: the prepared definition, or with a pinned lease, that
    /// lease's.
    fn domain_spec(&self) -> &DomainSpec {
        self.pinned_definition
            .as_ref()
            .map_or(&self.prepared.domain_spec, |(spec, _)| spec)
    }

    fn artifacts(&self) -> BuiltArtifacts<'_> {
        BuiltArtifacts {
            domain_xml: self
                .pinned_definition
                .as_ref()
                .map_or(self.artifacts.domain_xml, |(_, xml)| xml),
            seed_iso: self.artifacts.seed_iso,
            base_image_file: self.artifacts.base_image_file,
            extra_disks: &self.domain_spec().extra_disks,
        }
    }

    /// Removes the lease this run pinned, its domain not defined after all. At best: a pin left
    /// behind only keeps an address from other guests until this one is provisioned again.
    fn take_back_pinned_lease(&mut self) {
        if self.lease_pinned.take().is_some() {
            let _ = self.guest.backend.release_pins(
                &self.guest.inputs.config.settings.network,
                &self.guest.inputs.generated.mac_address.to_string(),
                &[],
            );
        }
    }

    /// Takes `subject`'s lock in this installation and on the guest's hypervisor, saying what a
    /// wait is for.
    fn lock_here_and_there(
        &self,
        subject: &Subject,
        progress: &mut dyn Progress,
    ) -> Result<HeldLocks, LockError> {
        let name = self.guest.hypervisor.name.to_string();
        self.guest.locks.acquire_with_hypervisor(
            subject,
            self.guest
                .hypervisor_machine
                .map(|machine| LockingHypervisor {
                    machine,
                    name: &name,
                }),
            &mut |text| progress.say(text),
        )
    }

    /// Notes where the serial log ends before the guest starts (from the start when that cannot
    /// be read: the wait then sees earlier boots too, as it did before).
    fn note_console_start(&mut self) -> u64 {
        let path = desired::serial_log_path(&self.prepared.desired.domain);
        *self.console_from.insert(
            self.guest
                .hypervisor_machine
                .and_then(|machine| hypervisor_ops::serial_log_size(machine, &path))
                .unwrap_or(0),
        )
    }

    /// Whether this start is the guest's first: a BIOS guest, on a root disk and a definition
    /// this plan made.
    fn is_first_boot(&self) -> bool {
        let actions = &self.prepared.plan.actions;
        self.domain_spec().firmware == Firmware::Bios
            && actions
                .iter()
                .any(|action| matches!(action, Action::CreateRootVolume { .. }))
            && actions
                .iter()
                .any(|action| matches!(action, Action::DefineDomain { .. }))
    }

    /// Whether the seed this first boot reads holds nothing for cloud-init's final stage that
    /// the finish needs: it installs no packages, and it is the seed rendered now. A seed kept
    /// from before (one equivalent to it, of an earlier revision or with cloud-init's package
    /// pass) may still hold `runcmd` or packages for that stage, which then runs on the boot.
    fn seed_leaves_final_stage_nothing(&self) -> bool {
        !self.guest.inputs.generated.seed.installs_packages
            && self
                .prepared
                .plan
                .actions
                .iter()
                .any(|action| matches!(action, Action::UploadSeed { .. }))
    }

    /// A first boot starts the base image's own kernel directly, with the command line its GRUB
    /// menu gives it: the firmware's disk reads and GRUB are skipped (under TCG, seconds before
    /// the kernel even starts; bench/README.md). Only that boot: the definition the guest keeps
    /// boots from its disk, so a kernel its packages install later is the one it runs after its
    /// next start. An image whose kernel cannot be read out, or whose kernel QEMU could not
    /// start, boots from its disk, and the run says why.
    fn start_first_boot(&mut self, progress: &mut dyn Progress) -> Result<(), Failure> {
        let from_disk = |why: String| format!("first boot from the disk: {why}");
        let backend = self.guest.backend;
        let desired = &self.prepared.desired;
        match backend.boot_files(desired) {
            Ok(Some(BootFiles::Direct(boot))) => {
                let boot = DirectBoot {
                    final_stage_deferred: self.seed_leaves_final_stage_nothing(),
                    ..boot
                };
                let spec = DomainSpec {
                    direct_boot: Some(boot),
                    ..self.domain_spec().clone()
                };
                let first = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE)?;
                match backend.start_once_as(desired, &first, self.artifacts().domain_xml) {
                    Ok(()) => {
                        progress.say("first boot: the base image's kernel, started directly");
                        return Ok(());
                    }
                    // The lasting definition is put back whatever failed: the start below, from
                    // the disk, says whether the guest can start at all (or finds it running).
                    Err(error) => progress.say(&from_disk(error.to_string())),
                }
            }
            Ok(Some(BootFiles::None(why))) => progress.say(&from_disk(format!(
                "the base image's kernel cannot be started directly: {why}"
            ))),
            Ok(None) => {}
            Err(error) => progress.say(&from_disk(error.to_string())),
        }
        Ok(backend.carry_out(desired, &Action::StartDomain, &self.artifacts())?)
    }
}

impl GuestSteps for HypervisorSteps<'_> {
    fn apply_network_filters(
        &mut self,
        progress: &mut dyn Progress,
    ) -> Result<Option<String>, Failure> {
        // libvirt's test driver has no network filters (and its guests never run).
        if !changes_the_domain(self.prepared)
            || self.guest.hypervisor.libvirt_uri.transport == Transport::Test
        {
            return Ok(None);
        }
        let held = self.lock_here_and_there(
            &Subject::NetworkFilters {
                hypervisor: self.guest.hypervisor.name.to_string(),
            },
            progress,
        )?;
        let label = apply_network_filters(self.guest)?;
        // Until the domain is defined, a destroy elsewhere would find the filters unused.
        if defines_the_domain(self.prepared) {
            self.network_filters_lock = Some(held);
        }
        Ok(Some(label))
    }

    fn reserve_address(&mut self) -> Result<Option<String>, Failure> {
        reserve_static_address(self.guest)
    }

    fn pin_lease(&mut self) -> Result<Option<String>, Failure> {
        let Some(pinned) = pin_guest_lease(self.guest)? else {
            return Ok(None);
        };
        self.pinned_definition = Some(pinned_definition(
            &self.prepared.domain_spec,
            pinned.address,
        )?);
        if !pinned.made {
            return Ok(None);
        }
        self.lease_pinned = Some(pinned.address);
        Ok(Some(format!(
            "pin the lease of {} for {} in network {}",
            pinned.address,
            self.guest.inputs.generated.mac_address,
            self.guest.inputs.config.settings.network
        )))
    }

    fn hypervisor_step(
        &mut self,
        action: &Action,
        progress: &mut dyn Progress,
    ) -> Result<(), Failure> {
        match action {
            Action::UploadBaseImage { .. } | Action::RemovePartialBaseImage { .. } => {
                // One upload of an image to a pool at a time, from this installation and (on
                // the hypervisor) from any other: the others wait, then find it there (or find
                // a dead run's partial upload to replace).
                let subject = Subject::BaseImageUpload {
                    hypervisor: self.guest.hypervisor.name.to_string(),
                    pool: self.prepared.desired.pool_name.clone(),
                    volume: self.prepared.desired.base_image_volume.clone(),
                };
                let held = self.lock_here_and_there(&subject, progress)?;
                if held.on_hypervisor.is_some() {
                    // Every run that writes this image into this pool, from whichever machine,
                    // holds the hypervisor's lock while it does: a partial copy there now is a
                    // dead run's, whoever's it was.
                    self.guest
                        .backend
                        .remove_partial_base_images(&self.prepared.desired)?;
                }
                Ok(self.carry_out(action)?)
            }
            Action::StartDomain => {
                self.note_console_start();
                if self.is_first_boot() {
                    self.start_first_boot(progress)
                } else {
                    Ok(self.carry_out(action)?)
                }
            }
            Action::DefineDomain { .. } => {
                if let Err(error) = self.carry_out(action) {
                    // No domain carries the MAC for a destroy to find the pin by.
                    self.take_back_pinned_lease();
                    return Err(error.into());
                }
                // The domain references the filters now: they are in use, whoever looks. And it
                // carries the MAC the pinned lease is found by.
                self.network_filters_lock = None;
                self.lease_pinned = None;
                Ok(())
            }
            _ => Ok(self.carry_out(action)?),
        }
    }

    fn reach<'s>(
        &'s mut self,
        progress: &'s dyn Progress,
    ) -> Result<Box<dyn ReachProbe + 's>, Failure> {
        let console_from = match self.console_from {
            Some(from) => from,
            None => self.note_console_start(),
        };
        let inputs = self.guest.inputs;
        let key = match &self.key_file {
            Some(key) => key,
            None => self
                .key_file
                .insert(PrivateKeyFile::write(&inputs.keypair)?),
        };
        let domain = self.prepared.desired.domain.to_string();
        let backend = self.guest.backend;
        let hypervisor_machine = self.guest.hypervisor_machine;
        let console_path = desired::serial_log_path(&self.prepared.desired.domain);
        let log_domain = self.prepared.desired.domain.clone();
        // A root disk this run made boots from the seed with trog's own key: no other key is
        // the guest's, so --adopt-host-key adopts nothing on it (whoever answers with another key
        // is refused as always).
        let new_root_disk = self
            .prepared
            .plan
            .actions
            .iter()
            .any(|action| matches!(action, Action::CreateRootVolume { .. }));
        let adopts = self.guest.adopt_host_key && !new_root_disk;
        let adoption = adopts.then(|| reach::HostKeyAdoption {
            known_hosts: key.directory().join("adopted_known_hosts"),
            alias: key.host_key_alias().to_string(),
            keep: Box::new(move |host_key: &str| {
                let mut store = inputs
                    .store
                    .lock()
                    .map_err(|_| "the store's lock was poisoned".to_string())?;
                let store = store
                    .as_mut()
                    .ok_or_else(|| "this run did not unlock the secret store".to_string())?;
                crate::secrets::record_adopted_host_key(store, &inputs.config.domain, host_key)
                    .map_err(|error| {
                        format!("cannot keep the adopted host key in the secret store: {error}")
                    })
            }),
        });
        Ok(Box::new(SshProbe {
            source: reach::address_source(backend, inputs, &domain),
            admin_user: inputs.config.settings.admin_user.clone(),
            key_file: key.path().to_path_buf(),
            host_keys: key.pinned_host_keys(),
            adoption,
            console: Box::new(move || {
                hypervisor_machine.and_then(|machine| {
                    hypervisor_ops::serial_log(machine, &console_path, console_from)
                })
            }),
            stopped: Box::new({
                let domain = domain.clone();
                move || backend.stopped_state(&domain)
            }),
            start_again: Box::new(move || {
                backend.start(&domain).map_err(|fault| fault.to_string())
            }),
            hypervisor_log: Box::new(move || {
                hypervisor_machine
                    .and_then(|machine| hypervisor_ops::qemu_log(machine, &log_domain))
            }),
            progress,
            connected: None,
        }))
    }

    fn record_tag(&mut self, tag: &GuestTag) -> Result<(), Failure> {
        Ok(self.guest.backend.record_tag(&self.prepared.desired, tag)?)
    }

    fn back_up_before_rebuild(&mut self) -> Result<PathBuf, Failure> {
        let taken = crate::workflow::backup::back_up_reached(
            self.guest.backend,
            self.guest.inputs,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| {
                    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
                }),
        )?;
        Ok(taken.archive)
    }

    fn retire_seed(&mut self, guest: &dyn Machine) -> Result<(), Failure> {
        let desired = &self.prepared.desired;
        Ok(crate::guest::retire_seed::retire_seed(
            guest,
            self.guest.backend,
            &crate::guest::retire_seed::SeedOf {
                domain: desired.domain.as_str(),
                pool: &desired.pool_name,
                volume: &desired.seed_volume,
            },
        )?)
    }

    fn forget_adopted_host_key(&mut self) -> Result<Option<String>, Failure> {
        let inputs = self.guest.inputs;
        let mut store = inputs.store.lock().unwrap_or_else(|e| e.into_inner());
        // A run that writes nothing has no store open, and changes no disk either.
        let Some(store) = store.as_mut() else {
            return Ok(None);
        };
        let forgotten = crate::secrets::forget_adopted_host_key(store, &inputs.config.domain)?;
        Ok(forgotten.then(|| {
            format!(
                "drop the adopted host key of {} from the secret store: its new root disk answers with trog's",
                inputs.config.domain
            )
        }))
    }
}

impl ReachProbe for SshProbe<'_> {
    fn connected(&mut self) -> Option<Box<dyn Machine>> {
        self.connected
            .take()
            .map(|machine: SshMachine| Box::new(machine) as Box<dyn Machine>)
    }
}

/// Carries out a prepared plan on the guest's hypervisor.
pub fn execute(
    guest: &GuestOnHypervisor,
    prepared: &PreparedGuest,
    progress: &mut dyn Progress,
) -> Result<ConvergeReport, Failure> {
    let no_file = PathBuf::new();
    let mut steps = HypervisorSteps {
        guest,
        prepared,
        artifacts: BuiltArtifacts {
            domain_xml: &prepared.domain_xml,
            seed_iso: &guest.inputs.generated.seed_iso.bytes,
            base_image_file: prepared.base_image.as_deref().unwrap_or(&no_file),
            extra_disks: &prepared.domain_spec.extra_disks,
        },
        key_file: None,
        network_filters_lock: None,
        lease_pinned: None,
        pinned_definition: None,
        console_from: None,
    };
    let domain = prepared.desired.domain.to_string();
    let mac = guest.inputs.generated.mac_address.to_string();
    let run = PlanToRun {
        guest: &domain,
        hypervisor: guest.hypervisor.name.as_str(),
        mac: &mac,
        plan: &prepared.plan,
        payload: &guest.inputs.generated.payload.bytes,
        tag: current_tag(prepared),
    };
    execute_plan(&mut steps, &run, &REAL_WAITS, progress)
}

/// The definition of a guest whose lease is pinned to `address`: its filter names that address
/// as the guest's only one. The spec and the XML rendered from it.
pub(crate) fn pinned_definition(
    spec: &DomainSpec,
    address: std::net::Ipv4Addr,
) -> Result<(DomainSpec, String), Failure> {
    let spec = DomainSpec {
        network_filter: spec.network_filter.with_pinned_lease(address),
        ..spec.clone()
    };
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE)?;
    Ok((spec, xml))
}

/// Whether the plan defines the guest's domain.
fn defines_the_domain(prepared: &PreparedGuest) -> bool {
    prepared
        .plan
        .actions
        .iter()
        .any(|action| matches!(action, Action::DefineDomain { .. }))
}

/// Whether the plan defines or starts the guest's domain (a converged guest's run changes
/// nothing, and leaves the filters alone).
fn changes_the_domain(prepared: &PreparedGuest) -> bool {
    defines_the_domain(prepared)
        || prepared
            .plan
            .actions
            .iter()
            .any(|action| matches!(action, Action::StartDomain))
}

/// Defines the guest's network filter, and refreshes every tenant's filter on the hypervisor
/// with the addresses ips.db holds now joined with those the hypervisor's domains carry; returns
/// the step's label. The caller holds the filters' lock. ips.db is read here, not when the run
/// began, so that runs of several guests at once each see the others' addresses; the domains
/// are read so that a run of another installation sharing the hypervisor (its own ips.db) never
/// takes away an address only this one knows.
fn apply_network_filters(guest: &GuestOnHypervisor) -> Result<String, Failure> {
    let mut tenants = guest.backend.tenants_with_filters()?;
    if let Some(own) = &guest.inputs.config.settings.tenant {
        tenants.push(own.to_string());
    }
    let directory = joined_directories(
        tenant_directory(&guest.inputs.paths.ips_db)?,
        guest.backend.tenant_addresses()?,
    );
    let filters = filters_for(&directory, &tenants);
    guest.backend.define_filters(&filters)?;
    let names: Vec<&str> = filters.iter().map(|filter| filter.name.as_str()).collect();
    Ok(format!("network filters {}", names.join(", ")))
}

/// Reserves a guest's static address for its MAC in the libvirt network it joins, when that
/// network hands out leases (a bridge has no DHCP of trog's to tell). Returns the step's label
/// when something changed.
fn reserve_static_address(guest: &GuestOnHypervisor) -> Result<Option<String>, Failure> {
    let settings = &guest.inputs.config.settings;
    let (None, Some(address)) = (&settings.bridge, static_ipv4(guest)) else {
        return Ok(None);
    };
    let mac = guest.inputs.generated.mac_address.to_string();
    let network = &settings.network;
    let changed = guest.backend.reserve_address(network, &mac, address)?;
    Ok(changed.then(|| format!("reserve {address} for {mac} in network {network}")))
}

/// What the reservation of the guest's static address would refuse (a running domain holding
/// a lease of it), asked without changing anything: a dry run refuses what the run would.
pub(crate) fn static_address_leased_elsewhere(
    guest: &GuestOnHypervisor,
) -> Result<Option<AddressLeased>, Failure> {
    let settings = &guest.inputs.config.settings;
    let (None, Some(address)) = (&settings.bridge, static_ipv4(guest)) else {
        return Ok(None);
    };
    let mac = guest.inputs.generated.mac_address.to_string();
    guest
        .backend
        .address_leased_elsewhere(&settings.network, &mac, address)
}

/// The guest's first static IPv4 address, if it has one.
fn static_ipv4(guest: &GuestOnHypervisor) -> Option<std::net::Ipv4Addr> {
    guest
        .inputs
        .config
        .settings
        .ips
        .iter()
        .find_map(|cidr| match cidr.address {
            std::net::IpAddr::V4(address) => Some(address),
            std::net::IpAddr::V6(_) => None,
        })
}

/// Pins the lease of a guest without a static IPv4 address in the libvirt network it joins
/// (docs/NETWORK.md, "Pinned leases"); the pin, made by this run or found.
fn pin_guest_lease(guest: &GuestOnHypervisor) -> Result<Option<PinnedLease>, Failure> {
    let settings = &guest.inputs.config.settings;
    if settings.bridge.is_some() || static_ipv4(guest).is_some() {
        return Ok(None);
    }
    let kept_apart = kept_apart_on(&guest.inputs.paths.ips_db, &settings.network)?;
    let pinned = guest.backend.pin_lease(
        &settings.network,
        &guest.inputs.generated.mac_address.to_string(),
        &kept_apart,
    )?;
    Ok(pinned)
}

/// What `ips.db` keeps for static addresses on `network`: never pinned to a leased guest.
fn kept_apart_on(ips_db: &std::path::Path, network: &str) -> Result<KeptApart, Failure> {
    let Some(book) = AddressBook::open_existing(ips_db)? else {
        return Ok(KeptApart::default());
    };
    let (ranges, holdings) = book.list()?;
    Ok(KeptApart {
        ranges: ranges
            .into_iter()
            .filter(|record| record.network == network)
            .map(|record| record.range)
            .collect(),
        held: holdings
            .into_iter()
            .filter(|holding| holding.network == network)
            .map(|holding| holding.address)
            .collect(),
    })
}

/// The tag the domain carries once the plan's domain steps have run.
fn current_tag(prepared: &PreparedGuest) -> GuestTag {
    prepared
        .plan
        .actions
        .iter()
        .rev()
        .find_map(|action| match action {
            Action::DefineDomain { tag, .. } => Some(tag.clone()),
            _ => None,
        })
        .or_else(|| {
            prepared
                .observed
                .domain
                .as_ref()
                .and_then(|domain| domain.tag.clone())
        })
        .unwrap_or_else(|| prepared.desired.tag_before_finish())
}

fn seconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10.0).round() / 10.0
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "execute_fake_tests.rs"]
mod fake_tests;
