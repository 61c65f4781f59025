//! The execution of a plan against fake steps and a fake guest: every failure path, without a
//! hypervisor.

use super::*;
use crate::exit_status::ExitStatus;
use crate::guest::wait::AttemptFailed;
use crate::hypervisor::provisioning::GuestResourceError;
use crate::machine::fake::{Answer, FakeClock, FakeMachine};
use crate::model::units::Bytes;
use crate::workflow::progress::RecordedProgress;

/// A guest during the wait, scripted by rounds.
#[derive(Clone, Copy)]
struct Boot {
    /// The round from which the guest has an address.
    address_from: usize,
    /// The round from which SSH answers.
    ssh_from: usize,
    /// The round from which its domain no longer runs.
    stops_from: usize,
}

const NEVER: usize = usize::MAX;

/// The fake libvirt executor: records the steps asked of it and fails the one named.
struct FakeSteps {
    fail_step: Option<&'static str>,
    boot: Boot,
    guest: FakeMachine,
    ran: Vec<String>,
    /// How many libvirt steps had run each time the network filters were applied.
    filtered_after: Vec<usize>,
    /// How many libvirt steps had run each time a lease was pinned.
    pinned_after: Vec<usize>,
    tags: Vec<GuestTag>,
    probes: usize,
    /// The run's time: the wait's pauses and the logins' hangs pass on it.
    clock: FakeClock,
    /// When set, SSH logins hang (sshd not up yet, a loaded host) and the guest's domain dies
    /// this long after the run began.
    dies_after: Option<Duration>,
    /// Where the logins go while SSH does not answer yet.
    login: FakeMachine,
    /// What a backup before a rebuild writes; `None` fails it, as a guest that cannot be read.
    fresh_backup: Option<std::path::PathBuf>,
    /// Whether the guest's entry in the store holds an adopted host key.
    adopted_host_key: bool,
    /// How many libvirt steps had run each time the adopted host key was asked to be dropped.
    forgotten_after: Vec<usize>,
    /// The guest's hypervisor as the seed's retirement sees it: the domain attaching its seed,
    /// the seed in the pool.
    hypervisor: crate::hypervisor::fake::FakeHypervisor,
}

const SEED_VOLUME: &str = "www.example.test-seed.iso";

fn hypervisor_with_seed() -> crate::hypervisor::fake::FakeHypervisor {
    crate::hypervisor::fake::FakeHypervisor::new("hv1")
        .with_domain(
            "www.example.test",
            crate::hypervisor::fake::FakeDomain {
                trogs: true,
                running: true,
                seed: Some(SEED_VOLUME.into()),
                ..Default::default()
            },
        )
        .with_volumes("trog", &[SEED_VOLUME])
}

impl FakeSteps {
    fn new(boot: Boot, guest: FakeMachine) -> FakeSteps {
        let clock = FakeClock::default();
        FakeSteps {
            fail_step: None,
            boot,
            guest,
            ran: Vec::new(),
            filtered_after: Vec::new(),
            pinned_after: Vec::new(),
            tags: Vec::new(),
            probes: 0,
            login: FakeMachine::new()
                .with_clock(&clock)
                .answer("true", &[Answer::Hangs]),
            clock,
            dies_after: None,
            fresh_backup: None,
            adopted_host_key: false,
            forgotten_after: Vec::new(),
            hypervisor: hypervisor_with_seed(),
        }
    }
}

impl GuestSteps for FakeSteps {
    fn apply_network_filters(
        &mut self,
        _progress: &mut dyn Progress,
    ) -> Result<Option<String>, Failure> {
        self.filtered_after.push(self.ran.len());
        Ok(None)
    }

    fn reserve_address(&mut self) -> Result<Option<String>, Failure> {
        Ok(None)
    }

    fn pin_lease(&mut self) -> Result<Option<String>, Failure> {
        self.pinned_after.push(self.ran.len());
        Ok(None)
    }

    fn hypervisor_step(
        &mut self,
        action: &Action,
        _progress: &mut dyn Progress,
    ) -> Result<(), Failure> {
        let label = action.to_string();
        self.ran.push(label.clone());
        match self.fail_step {
            Some(needle) if label.contains(needle) => Err(GuestResourceError {
                backend: "libvirt",
                hypervisor: "hv1".into(),
                operation: label,
                source: "Storage volume not found: no storage vol with matching path".into(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    fn reach<'s>(
        &'s mut self,
        _progress: &'s dyn Progress,
    ) -> Result<Box<dyn ReachProbe + 's>, Failure> {
        self.probes += 1;
        Ok(Box::new(FakeProbe {
            boot: self.boot,
            round: 0,
            guest: self.guest.clone(),
            connected: false,
            clock: self.clock.clone(),
            dies_after: self.dies_after,
            login: self.login.clone(),
        }))
    }

    fn record_tag(&mut self, tag: &GuestTag) -> Result<(), Failure> {
        self.tags.push(tag.clone());
        Ok(())
    }

    fn back_up_before_rebuild(&mut self) -> Result<std::path::PathBuf, Failure> {
        self.ran.push(Action::BackUpBeforeRebuild.to_string());
        self.fresh_backup.clone().ok_or_else(|| {
            Failure::from(crate::machine::MachineError::Unreachable {
                host: "trogadmin@192.168.122.50".into(),
                detail: "Connection refused".into(),
            })
        })
    }

    fn retire_seed(&mut self, guest: &dyn Machine) -> Result<(), Failure> {
        self.ran.push(format!("retire seed {SEED_VOLUME}"));
        Ok(crate::guest::retire_seed::retire_seed(
            guest,
            &self.hypervisor,
            &crate::guest::retire_seed::SeedOf {
                domain: "www.example.test",
                pool: "trog",
                volume: SEED_VOLUME,
            },
        )?)
    }

    fn forget_adopted_host_key(&mut self) -> Result<Option<String>, Failure> {
        self.forgotten_after.push(self.ran.len());
        Ok(std::mem::take(&mut self.adopted_host_key)
            .then(|| "drop the adopted host key of www.example.test".into()))
    }
}

struct FakeProbe {
    boot: Boot,
    round: usize,
    guest: FakeMachine,
    connected: bool,
    clock: FakeClock,
    dies_after: Option<Duration>,
    login: FakeMachine,
}

/// Whether the domain has died by the time `clock` shows.
fn died(clock: &FakeClock, dies_after: Option<Duration>) -> Option<String> {
    dies_after
        .filter(|after| clock.passed() >= *after)
        .map(|_| "shut off (crashed)".into())
}

impl GuestProbe for FakeProbe {
    fn candidate_addresses(&mut self) -> Vec<String> {
        self.round += 1;
        if self.round >= self.boot.address_from {
            vec!["192.168.122.60".into()]
        } else {
            vec![]
        }
    }
    fn try_ssh(&mut self, _address: &str) -> Result<(), AttemptFailed> {
        if self.round >= self.boot.ssh_from {
            self.connected = true;
            Ok(())
        } else if self.dies_after.is_some() {
            let (clock, dies_after) = (self.clock.clone(), self.dies_after);
            reach::attempt_login(&self.login, &mut || died(&clock, dies_after))
        } else {
            Err(AttemptFailed::NoAnswer("Connection refused".into()))
        }
    }
    fn console(&mut self) -> Option<String> {
        Some("[  OK  ] Reached target cloud-init.target".into())
    }
    fn stopped(&mut self) -> Option<String> {
        (self.round >= self.boot.stops_from)
            .then(|| "shut off (crashed)".into())
            .or_else(|| died(&self.clock, self.dies_after))
    }
    fn hypervisor_log(&mut self) -> Option<String> {
        Some("qemu-system-x86_64: terminating on signal 15".into())
    }
}

impl ReachProbe for FakeProbe {
    fn connected(&mut self) -> Option<Box<dyn Machine>> {
        self.connected
            .then(|| Box::new(self.guest.clone()) as Box<dyn Machine>)
    }
}

fn tag() -> GuestTag {
    GuestTag {
        boot_fingerprint: "b".repeat(64),
        shape_fingerprint: "s".repeat(64),
        payload_digest: None,
    }
}

/// A fresh guest's plan.
fn fresh_plan() -> Plan {
    Plan {
        domain: "www.example.test".into(),
        actions: vec![
            Action::DefinePool {
                name: "trog".into(),
                path: "/var/lib/trog/pool".into(),
            },
            Action::UploadBaseImage {
                volume: "base-abc.qcow2".into(),
                source: "/cache/abc.qcow2".into(),
                digest: "a".repeat(64),
            },
            Action::DefineDomain {
                tag: tag(),
                redefine: false,
                until_next_start: false,
            },
            Action::CreateRootVolume {
                volume: "www.example.test-root.qcow2".into(),
                backing_volume: "base-abc.qcow2".into(),
                capacity: Bytes(10 << 30),
            },
            Action::UploadSeed {
                volume: "www.example.test-seed.iso".into(),
                sha256: "c".repeat(64),
            },
            Action::StartDomain,
            Action::WaitForSsh,
            Action::Finish {
                payload_digest: "d".repeat(64),
            },
        ],
    }
}

/// A finish that goes well on the fake guest.
fn healthy_guest() -> FakeMachine {
    FakeMachine::new().answer("cat /var/lib/trog/finish.status", &[Answer::Exit(0, "0\n")])
}

const BOOTS: Boot = Boot {
    address_from: 2,
    ssh_from: 4,
    stops_from: NEVER,
};

/// Runs `plan` with a clock that moves only when the run pauses or a login hangs: a five-minute
/// wait takes no time.
fn run(steps: &mut FakeSteps, plan: &Plan) -> Result<ConvergeReport, Failure> {
    let time = steps.clock.clone();
    let clock = || time.now();
    let pause = |step: Duration| time.advance(step);
    let waits = Waits {
        ssh: crate::guest::wait::BootWait::fixed(Duration::from_secs(300)),
        finish: Duration::from_secs(3600),
        clock: &clock,
        pause: &pause,
    };
    let run = PlanToRun {
        guest: "www.example.test",
        hypervisor: "hv1",
        mac: "52:54:00:aa:bb:cc",
        plan,
        payload: b"payload",
        tag: tag(),
    };
    execute_plan(steps, &run, &waits, &mut RecordedProgress::default())
}

fn labels(plan: &Plan, range: std::ops::Range<usize>) -> Vec<String> {
    plan.actions[range].iter().map(Action::to_string).collect()
}

#[test]
fn a_plan_that_goes_well_runs_every_step_then_records_the_finished_payload() {
    let plan = fresh_plan();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    let report = run(&mut steps, &plan).unwrap();
    assert_eq!(steps.ran, labels(&plan, 0..6));
    assert_eq!(report.address.as_deref(), Some("192.168.122.60"));
    let done: Vec<&str> = report
        .steps
        .iter()
        .map(|(label, _)| label.as_str())
        .collect();
    assert_eq!(done, labels(&plan, 0..8));
    assert_eq!(guest.count("make test"), 1);
    assert_eq!(
        steps.tags,
        vec![GuestTag {
            payload_digest: Some("d".repeat(64)),
            ..tag()
        }]
    );
}

#[test]
fn a_hypervisor_step_failing_midway_is_named_with_what_ran_and_nothing_after_it_runs() {
    let plan = fresh_plan();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    steps.fail_step = Some("create root disk");
    let failure = run(&mut steps, &plan).unwrap_err();
    let chain = failure.chain();
    assert_eq!(
        chain[0],
        format!(
            "www.example.test: step 4 of 8 failed: {}\nthe steps before it ran: {}",
            plan.actions[3],
            labels(&plan, 0..3).join("; ")
        )
    );
    assert!(
        chain[1].starts_with("libvirt on hv1 could not create root disk"),
        "{chain:?}"
    );
    assert!(chain[2].contains("Storage volume not found"), "{chain:?}");
    assert_eq!(
        failure.status,
        ExitStatus::Hypervisor,
        "the step's own status"
    );
    assert!(failure
        .hint
        .unwrap()
        .contains("rerunning `provision` continues"));
    assert_eq!(
        steps.ran,
        labels(&plan, 0..4),
        "no step after the failed one"
    );
    assert_eq!(steps.probes, 0);
    assert!(guest.command_lines().is_empty());
    assert!(steps.tags.is_empty());
}

#[test]
fn a_failed_first_step_says_nothing_ran() {
    let plan = fresh_plan();
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    steps.fail_step = Some("define storage pool");
    let chain = run(&mut steps, &plan).unwrap_err().chain();
    assert!(
        chain[0]
            .ends_with(": define storage pool trog at /var/lib/trog/pool\nno step ran before it"),
        "{chain:?}"
    );
}

#[test]
fn an_upload_that_fails_stops_the_run_before_the_domain_is_defined() {
    let plan = fresh_plan();
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    steps.fail_step = Some("upload base image");
    let failure = run(&mut steps, &plan).unwrap_err();
    assert!(failure.chain()[0]
        .starts_with("www.example.test: step 2 of 8 failed: upload base image base-abc.qcow2"));
    assert_eq!(steps.ran, labels(&plan, 0..2));
    assert!(steps.filtered_after.is_empty(), "no filters for no domain");
    assert!(
        steps.pinned_after.is_empty(),
        "no pinned lease for no domain"
    );
}

#[test]
fn the_network_filters_are_applied_and_the_lease_pinned_once_just_before_the_domain_is_defined() {
    // After the pool and the upload (which may take minutes, and the filters stay locked
    // until the domain is defined), never before; a run that ends before leaves no pin.
    let plan = fresh_plan();
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    run(&mut steps, &plan).unwrap();
    assert_eq!(steps.filtered_after, vec![2]);
    assert_eq!(steps.pinned_after, vec![2]);
    assert_eq!(plan.actions[2].to_string(), steps.ran[2]);
    assert!(matches!(plan.actions[2], Action::DefineDomain { .. }));

    // A guest that is only started again: just before the start.
    let restart = Plan {
        domain: plan.domain.clone(),
        actions: plan.actions[5..].to_vec(),
    };
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    run(&mut steps, &restart).unwrap();
    assert_eq!(steps.filtered_after, vec![0]);
    assert_eq!(steps.pinned_after, vec![0]);
}

#[test]
fn ssh_that_never_answers_ends_the_wait_at_its_bound_and_nothing_is_finished() {
    let plan = fresh_plan();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(
        Boot {
            address_from: 1,
            ssh_from: NEVER,
            stops_from: NEVER,
        },
        guest.clone(),
    );
    let failure = run(&mut steps, &plan).unwrap_err();
    let chain = failure.chain();
    assert!(
        chain[0].starts_with(
            "www.example.test: step 7 of 8 failed: wait for the guest's address and SSH\n"
        ),
        "{chain:?}"
    );
    assert!(
        chain[1].starts_with(
            "www.example.test has 192.168.122.60 but SSH did not answer there: waited 300s"
        ),
        "{chain:?}"
    );
    assert_eq!(failure.status, ExitStatus::Guest);
    assert!(failure.hint.unwrap().contains("Connection refused"));
    assert!(guest.command_lines().is_empty(), "no finish without SSH");
    assert!(steps.tags.is_empty());
}

#[test]
fn a_guest_without_an_address_is_named_by_its_mac() {
    let mut steps = FakeSteps::new(
        Boot {
            address_from: NEVER,
            ssh_from: NEVER,
            stops_from: NEVER,
        },
        healthy_guest(),
    );
    let chain = run(&mut steps, &fresh_plan()).unwrap_err().chain();
    assert!(
        chain[1].starts_with("www.example.test never asked for an address: waited 300s for a DHCP lease on MAC 52:54:00:aa:bb:cc"),
        "{chain:?}"
    );
}

#[test]
fn a_domain_that_stops_during_the_wait_ends_it_at_once_with_its_reason() {
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(
        Boot {
            address_from: NEVER,
            ssh_from: NEVER,
            stops_from: 3,
        },
        guest.clone(),
    );
    let failure = run(&mut steps, &fresh_plan()).unwrap_err();
    let chain = failure.chain();
    assert!(chain[0].contains("step 7 of 8 failed: wait for the guest's address and SSH"));
    assert!(
        chain[1].starts_with("www.example.test stopped while it was waited for: libvirt says it is shut off (crashed), after 1s")
            && chain[1].contains("terminating on signal 15"),
        "{chain:?}"
    );
    assert!(guest.command_lines().is_empty());
}

#[test]
fn a_domain_that_dies_during_a_long_login_attempt_is_reported_at_once() {
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(
        Boot {
            address_from: 1,
            ssh_from: NEVER,
            stops_from: NEVER,
        },
        guest.clone(),
    );
    // The first login hangs (it would take its whole minute); the domain dies 2 s into it.
    steps.dies_after = Some(Duration::from_secs(2));
    let failure = run(&mut steps, &fresh_plan()).unwrap_err();
    let chain = failure.chain();
    assert!(
        chain[0].contains("step 7 of 8 failed: wait for the guest's address and SSH"),
        "{chain:?}"
    );
    assert!(
        chain[1].starts_with("www.example.test stopped while it was waited for: libvirt says it is shut off (crashed), after 2s")
            && chain[1].contains("last lines of its QEMU log on the hypervisor:\nqemu-system-x86_64: terminating on signal 15"),
        "{chain:?}"
    );
    assert_eq!(failure.status, ExitStatus::Guest);
    assert_eq!(steps.login.count("true"), 1, "one login, given up");
    assert_eq!(
        steps.clock.passed(),
        Duration::from_secs(2),
        "noticed within the watch's half second, not at the login's bound"
    );
    assert!(guest.command_lines().is_empty(), "nothing finished");
}

#[test]
fn a_failing_finish_is_named_and_the_payload_is_not_recorded() {
    let guest = FakeMachine::new()
        // One fetch: make's status line, then its log.
        .answer(
            "tail -c +",
            &[Answer::Exit(0, "2\nmake: *** [all] Error 2\n")],
        );
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    let plan = fresh_plan();
    let failure = run(&mut steps, &plan).unwrap_err();
    let chain = failure.chain();
    assert!(
        chain[0].starts_with(&format!(
            "www.example.test: step 8 of 8 failed: {}",
            plan.actions[7]
        )),
        "{chain:?}"
    );
    assert!(
        chain[0].ends_with(&labels(&plan, 0..7).join("; ")),
        "{chain:?}"
    );
    assert!(
        chain[1]
            .starts_with("the Makefile's default target failed on fake.example.test with status 2")
            && chain[1].contains("Error 2"),
        "{chain:?}"
    );
    assert_eq!(failure.status, ExitStatus::Guest);
    assert!(steps.tags.is_empty(), "a failed finish records no payload");
}

#[test]
fn a_finish_whose_upload_fails_is_named() {
    let guest = FakeMachine::new().answer("tar -xzf", &[Answer::Unreachable]);
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    let chain = run(&mut steps, &fresh_plan()).unwrap_err().chain();
    assert!(chain[0].contains("step 8 of 8 failed: finish"), "{chain:?}");
    assert_eq!(chain[1], "cannot unpack the payload on fake.example.test");
    assert!(chain[2].contains("Connection reset by peer"), "{chain:?}");
    assert_eq!(guest.count("setsid"), 0);
    assert!(steps.tags.is_empty());
}

#[test]
fn a_finish_without_a_wait_before_it_is_refused() {
    let plan = Plan {
        domain: "www.example.test".into(),
        actions: vec![Action::Finish {
            payload_digest: "d".repeat(64),
        }],
    };
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    let chain = run(&mut steps, &plan).unwrap_err().chain();
    assert_eq!(
        chain[1],
        "the plan was to wait for www.example.test, but no connection to it was made"
    );
}

/// The fresh plan with the restore of `archive` just before its finish.
fn fresh_plan_restoring(archive: &std::path::Path) -> Plan {
    let mut plan = fresh_plan();
    let finish = plan.actions.len() - 1;
    plan.actions.insert(
        finish,
        Action::RestoreBackup {
            archive: archive.display().to_string(),
        },
    );
    plan
}

#[test]
fn a_backup_is_unpacked_on_the_guest_before_its_payload_and_a_changed_one_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let backups = crate::backup::archive_dir::GuestBackups::new(dir.path(), "www.example.test");
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(5);
    header.set_mode(0o644);
    tar.append_data(&mut header, "srv/site/index.html", &b"hello"[..])
        .unwrap();
    let written = backups
        .write(
            "20261201T010203Z",
            &tar.into_inner().unwrap(),
            "data /srv/site\n",
        )
        .unwrap();
    let plan = fresh_plan_restoring(&written.archive);
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    run(&mut steps, &plan).unwrap();
    let lines = guest.command_lines();
    let restored = lines
        .iter()
        .position(|line| line.contains("tar --extract --gzip --file=- -C /"))
        .expect("the backup was unpacked");
    assert!(lines[restored].ends_with("-- srv/site'"), "{lines:?}");
    let unpacked = lines
        .iter()
        .position(|line| line.contains("payload.new"))
        .expect("the payload was unpacked");
    assert!(restored < unpacked, "{lines:?}");

    // An archive that no longer matches its sha256: the step fails, nothing is unpacked and the
    // guest is not finished.
    std::fs::write(&written.archive, b"changed").unwrap();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    let failure = run(&mut steps, &plan).unwrap_err();
    assert!(
        failure.chain()[0].contains("step 8 of 9 failed: restore the newest backup"),
        "{:?}",
        failure.chain()
    );
    assert_eq!(guest.count("tar --extract"), 0);
    assert_eq!(guest.count("make test"), 0);
    assert!(steps.tags.is_empty());
}

/// A running, finished guest's root disk replaced, backed up first and that backup restored.
fn rebuild_plan() -> Plan {
    let mut plan = fresh_plan();
    let finish = plan.actions.len() - 1;
    plan.actions.insert(finish, Action::RestoreFreshBackup);
    plan.actions.insert(0, Action::StopDomain);
    plan.actions.insert(0, Action::BackUpBeforeRebuild);
    plan
}

#[test]
fn a_rebuild_restores_the_backup_it_took_first_and_a_failed_backup_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backups = crate::backup::archive_dir::GuestBackups::new(dir.path(), "www.example.test");
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o644);
    tar.append_data(&mut header, "srv/site/now.txt", &b"now"[..])
        .unwrap();
    let fresh = backups
        .write(
            "20261204T101010Z",
            &tar.into_inner().unwrap(),
            "data /srv/site\n",
        )
        .unwrap();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    steps.fresh_backup = Some(fresh.archive.clone());
    run(&mut steps, &rebuild_plan()).unwrap();
    assert_eq!(steps.ran[0], Action::BackUpBeforeRebuild.to_string());
    assert_eq!(
        guest.count("tar --extract"),
        1,
        "{:?}",
        guest.command_lines()
    );

    // The guest cannot be read: the run stops at its first step, before anything is stopped or
    // deleted.
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    let failure = run(&mut steps, &rebuild_plan()).unwrap_err();
    assert!(
        failure.chain()[0].contains("step 1 of"),
        "{:?}",
        failure.chain()
    );
    assert_eq!(steps.ran, [Action::BackUpBeforeRebuild.to_string()]);
    assert_eq!(guest.count("tar --extract"), 0);
}

/// A guest's definition on libvirt's NAT network, its address leased.
fn leased_spec() -> DomainSpec {
    use crate::render::domain_xml::{
        mac_address_for, CpuMode, DiskBus, DiskSpec, NetworkAttachment,
    };
    use crate::render::network_filter::interface_filter;
    let name = crate::model::names::DomainName::parse("leased.example.test").unwrap();
    let mac = mac_address_for(&name, 0);
    DomainSpec {
        name: name.clone(),
        uuid: desired::domain_uuid(&name),
        memory: crate::model::units::MiB(1024),
        vcpus: 1,
        domain_type: crate::model::hypervisor::DomainType::Qemu,
        cpu_mode: CpuMode::HostPassthrough,
        firmware: Firmware::Bios,
        machine_type: "q35".into(),
        disk_bus: DiskBus::Virtio,
        root_disk: DiskSpec::qcow2("trog", "leased-root.qcow2"),
        data_disk: None,
        extra_disks: Vec::new(),
        seed_volume: Some("leased-seed.iso".into()),
        mac_address: mac,
        network: NetworkAttachment::Network("default".into()),
        network_filter: interface_filter(None, mac, &[], &[]),
        serial_log_path: desired::serial_log_path(&name),
        tpm: false,
        shared_folders: Vec::new(),
        virtiofsd: None,
        partition: None,
        tag: tag(),
        installation: None,
        direct_boot: None,
    }
}

#[test]
fn a_pinned_lease_is_the_only_address_the_definition_names_to_its_filter() {
    let leased = leased_spec();
    let (spec, xml) = pinned_definition(&leased, "192.168.122.57".parse().unwrap()).unwrap();
    assert_eq!(
        spec.network_filter.ipv4,
        ["192.168.122.57".parse::<std::net::Ipv4Addr>().unwrap()]
    );
    assert!(
        xml.contains("<parameter name='IP' value='192.168.122.57'/>")
            && xml.contains("<parameter name='CTRL_IP_LEARNING' value='none'/>"),
        "{xml}"
    );
    let unpinned = render_domain_xml(&leased, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert!(
        !unpinned.contains("name='IP'")
            && unpinned.contains("<parameter name='CTRL_IP_LEARNING' value='dhcp'/>"),
        "{unpinned}"
    );
}

#[test]
fn a_definition_names_the_installation_in_its_tag_and_one_without_names_none() {
    let spec = |installation: Option<&str>| DomainSpec {
        installation: installation.map(str::to_string),
        ..leased_spec()
    };
    let metadata = |xml: &str| {
        let document = roxmltree::Document::parse(xml).unwrap();
        let element = document
            .descendants()
            .find(|node| node.tag_name().name() == "guest")
            .unwrap();
        crate::render::domain_xml::metadata::maker_of(Some(&xml[element.range()]))
    };
    let named = render_domain_xml(
        &spec(Some("0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10")),
        DEFAULT_DOMAIN_TEMPLATE,
    )
    .unwrap();
    assert_eq!(
        metadata(&named),
        crate::render::domain_xml::metadata::Maker::Trog {
            installation: "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10".into()
        }
    );
    let unnamed = render_domain_xml(&spec(None), DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert!(!unnamed.contains("installation="), "{unnamed}");
    assert_eq!(
        metadata(&unnamed),
        crate::render::domain_xml::metadata::Maker::TrogUnrecorded
    );
}

/// A guest adopted with `--adopt-host-key` given a new root disk (its seed installs trog's host
/// key and deletes the others), without a backup to carry over.
fn new_root_disk_plan() -> Plan {
    Plan {
        domain: "www.example.test".into(),
        actions: vec![
            Action::StopDomain,
            Action::DeleteVolume {
                volume: "www.example.test-root.qcow2".into(),
                why: "the boot inputs changed".into(),
            },
            Action::CreateRootVolume {
                volume: "www.example.test-root.qcow2".into(),
                backing_volume: "base-abc.qcow2".into(),
                capacity: Bytes(10 << 30),
            },
            Action::UploadSeed {
                volume: "www.example.test-seed.iso".into(),
                sha256: "c".repeat(64),
            },
            Action::StartDomain,
            Action::WaitForSsh,
            Action::Finish {
                payload_digest: "d".repeat(64),
            },
        ],
    }
}

#[test]
fn a_new_root_disk_that_answered_ssh_drops_the_adopted_host_key_before_the_finish() {
    let plan = new_root_disk_plan();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    steps.adopted_host_key = true;
    let report = run(&mut steps, &plan).unwrap();
    assert_eq!(steps.forgotten_after, [5], "once, after the libvirt steps");
    assert!(!steps.adopted_host_key);
    let done: Vec<&str> = report
        .steps
        .iter()
        .map(|(label, _)| label.as_str())
        .collect();
    let mut expected = labels(&plan, 0..6);
    expected.push("drop the adopted host key of www.example.test".into());
    expected.extend(labels(&plan, 6..7));
    assert_eq!(done, expected, "after the wait, before the finish");
    assert_eq!(guest.count("make test"), 1);

    // A guest built fresh has no adopted key: nothing to drop, and no step said.
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    let report = run(&mut steps, &fresh_plan()).unwrap();
    assert_eq!(steps.forgotten_after, [6]);
    assert_eq!(report.steps.len(), fresh_plan().actions.len());
}

#[test]
fn a_new_root_disk_that_never_answered_ssh_keeps_the_adopted_host_key() {
    let mut steps = FakeSteps::new(
        Boot {
            address_from: 1,
            ssh_from: NEVER,
            stops_from: NEVER,
        },
        healthy_guest(),
    );
    steps.adopted_host_key = true;
    run(&mut steps, &new_root_disk_plan()).unwrap_err();
    assert!(steps.forgotten_after.is_empty());
    assert!(steps.adopted_host_key);

    // Nor when the disk was never made.
    let mut steps = FakeSteps::new(BOOTS, healthy_guest());
    steps.adopted_host_key = true;
    steps.fail_step = Some("create root disk");
    run(&mut steps, &new_root_disk_plan()).unwrap_err();
    assert!(steps.forgotten_after.is_empty());
    assert!(steps.adopted_host_key);
}

#[test]
fn a_guest_that_keeps_its_root_disk_keeps_the_adopted_host_key() {
    let plan = Plan {
        domain: "www.example.test".into(),
        actions: vec![
            Action::StartDomain,
            Action::WaitForSsh,
            Action::Finish {
                payload_digest: "d".repeat(64),
            },
        ],
    };
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    steps.adopted_host_key = true;
    run(&mut steps, &plan).unwrap();
    assert_eq!(
        guest.count("make test"),
        1,
        "the guest answered and was finished"
    );
    assert!(steps.forgotten_after.is_empty());
    assert!(steps.adopted_host_key);
}

/// A fresh guest's plan, as the planner makes it: the seed is retired once SSH answers.
fn fresh_plan_retiring_the_seed() -> Plan {
    let mut plan = fresh_plan();
    let finish = plan
        .actions
        .iter()
        .position(|action| matches!(action, Action::Finish { .. }))
        .unwrap();
    plan.actions.insert(
        finish,
        Action::RetireSeed {
            volume: SEED_VOLUME.into(),
        },
    );
    plan
}

#[test]
fn the_seed_is_retired_once_ssh_answered_and_before_the_payload_is_sent() {
    let plan = fresh_plan_retiring_the_seed();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    run(&mut steps, &plan).unwrap();
    assert_eq!(
        steps.hypervisor.calls(),
        [
            format!("detach_seed www.example.test {SEED_VOLUME}"),
            format!("delete_volume trog {SEED_VOLUME}"),
        ]
    );
    assert_eq!(
        steps.hypervisor.domain("www.example.test").unwrap().seed,
        None
    );
    assert!(steps.hypervisor.volumes("trog").is_empty());
    // On the guest: cloud-init done and the datasource pinned before the payload goes.
    let lines = guest.command_lines();
    let pinned = lines
        .iter()
        .position(|line| line.contains(crate::guest::retire_seed::DATASOURCE_PIN_PATH))
        .unwrap();
    let unpacked = lines
        .iter()
        .position(|line| line.contains("tar -xzf"))
        .unwrap();
    assert!(pinned < unpacked, "{lines:?}");
    assert_eq!(guest.count("make test"), 1);
    assert_eq!(steps.tags.len(), 1);
}

/// A running guest's plan when a disk is added to its list: the disk made, hot-plugged, and the
/// guest finished again to format and mount it.
fn added_disk_plan() -> Plan {
    Plan {
        domain: "www.example.test".into(),
        actions: vec![
            Action::CreateExtraDisk {
                disk: "db".into(),
                volume: "www.example.test-disk-db.qcow2".into(),
                capacity: Bytes(2 << 30),
            },
            Action::AttachExtraDisk {
                disk: "db".into(),
                volume: "www.example.test-disk-db.qcow2".into(),
                to_running: true,
                to_definition: true,
            },
            Action::WaitForSsh,
            Action::Finish {
                payload_digest: "d".repeat(64),
            },
        ],
    }
}

/// A guest that already runs: SSH answers at once.
const RUNNING: Boot = Boot {
    address_from: 0,
    ssh_from: 0,
    stops_from: NEVER,
};

#[test]
fn an_added_disk_is_made_attached_then_the_guest_finished() {
    let plan = added_disk_plan();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(RUNNING, guest.clone());
    run(&mut steps, &plan).unwrap();
    assert_eq!(steps.ran, labels(&plan, 0..2));
    assert_eq!(guest.count("make test"), 1);
    assert_eq!(steps.tags.len(), 1);
}

#[test]
fn a_seed_that_cannot_be_detached_stops_the_run_before_the_finish_and_stays() {
    let plan = fresh_plan_retiring_the_seed();
    let guest = healthy_guest();
    let mut steps = FakeSteps::new(BOOTS, guest.clone());
    steps.hypervisor =
        hypervisor_with_seed().failing(crate::hypervisor::fake::Operation::DetachSeed);
    let failure = run(&mut steps, &plan).unwrap_err();
    assert_eq!(failure.status, ExitStatus::Hypervisor);
    let chain = failure.chain().join("\n");
    assert!(
        chain.starts_with(&format!(
            "www.example.test: step 8 of 9 failed: retire cloud-init seed {SEED_VOLUME}"
        )) && chain.contains("the steps before it ran: ")
            && chain.contains(&format!(
                "cannot detach seed {SEED_VOLUME} from www.example.test on hv1"
            )),
        "{chain}"
    );
    // Left as it was: attached, in the pool, the guest running and not finished (no tag with
    // the payload recorded), so that the next provision retires it and finishes.
    let domain = steps.hypervisor.domain("www.example.test").unwrap();
    assert_eq!(domain.seed.as_deref(), Some(SEED_VOLUME));
    assert!(domain.running);
    assert_eq!(steps.hypervisor.volumes("trog"), [SEED_VOLUME]);
    assert_eq!(guest.count("tar -xzf"), 0);
    assert!(steps.tags.is_empty());
}

#[test]
fn a_disk_that_cannot_be_made_or_attached_stops_the_run_before_the_finish() {
    for (needle, step, ran_before) in [("create disk db", 1, 0), ("attach disk db", 2, 1)] {
        let plan = added_disk_plan();
        let guest = healthy_guest();
        let mut steps = FakeSteps::new(RUNNING, guest.clone());
        steps.fail_step = Some(needle);
        let failure = run(&mut steps, &plan).unwrap_err();
        let chain = failure.chain();
        assert!(
            chain[0].starts_with(&format!(
                "www.example.test: step {step} of 4 failed: {}",
                plan.actions[step - 1]
            )),
            "{chain:?}"
        );
        if ran_before == 0 {
            assert!(chain[0].contains("no step ran before it"), "{chain:?}");
        } else {
            assert!(
                chain[0].contains(&labels(&plan, 0..ran_before).join("; ")),
                "{chain:?}"
            );
        }
        assert!(
            chain[1].starts_with(&format!("libvirt on hv1 could not {needle}")),
            "{chain:?}"
        );
        assert_eq!(failure.status, ExitStatus::Hypervisor);
        assert_eq!(steps.probes, 0, "{needle}: no wait");
        assert!(guest.command_lines().is_empty(), "{needle}: no finish");
        assert!(
            steps.tags.is_empty(),
            "{needle}: the payload is not recorded"
        );
    }
}
