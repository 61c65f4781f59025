//! A provision's steps carried out by [`HypervisorSteps`] on the fake hypervisor: a guest's
//! plan made from what the fake has, each of the hypervisor's steps failed in turn, what the run
//! reports and what it leaves, and that a rerun plans only what is left and converges. The wait
//! for SSH and the finish are the guest's (their failures: `execute_tests.rs`): these runs stop
//! before them.

use super::*;
use crate::addresses::settle::AddressPolicy;
use crate::config::paths::InstallationPaths;
use crate::credentials::{CredentialSource, HandedInCredentials, TerminalPrompter};
use crate::exit_status::ExitStatus;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::hypervisor::Hypervisor;
use crate::lock::Locks;
use crate::model::hypervisor::{DomainType, HypervisorConfig, LibvirtUri};
use crate::model::names::{DomainName, HypervisorName};
use crate::model::units::Bytes;
use crate::plan::Resolution;
use crate::provision::{prepare, ready_to_execute};
use crate::workflow::fake_fleet::RecordedReport;
use crate::workflow::inputs::{load_guest_inputs, GuestInputs, StoreUse};
use crate::workflow::progress::RecordedProgress;
use std::net::Ipv4Addr;

const GUEST: &str = "www.example.test";
const POOL: &str = "trog";
const NETWORK: &str = "default";

/// An installation of one guest, its file's `_global` extra lines `global`, on hypervisor `hv1`
/// (a local libvirt, as far as the steps can tell: its network filters are applied).
struct Installation {
    root: tempfile::TempDir,
    inputs: GuestInputs,
    locks: Locks,
    hypervisor: HypervisorConfig,
    base_image: PathBuf,
}

fn installation(global: &str) -> Installation {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        etc.join("recipes.yaml"),
    )
    .unwrap();
    std::fs::write(
        etc.join(format!("recipes.d/{GUEST}.yaml")),
        format!("{GUEST}:\n  _global:\n    cpus: 1\n{global}  nginx: {{}}\n"),
    )
    .unwrap();
    let paths = InstallationPaths::resolve(etc.to_str(), None, None);
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let inputs = load_guest_inputs(
        &paths,
        &DomainName::parse(GUEST).unwrap(),
        &mut credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        &RecordedReport::default(),
    )
    .unwrap();
    let base_image = root.path().join("base.qcow2");
    std::fs::write(&base_image, b"an image of 21 bytes.").unwrap();
    Installation {
        locks: Locks::new(etc.join("locks"), Duration::from_secs(5), "provision"),
        hypervisor: HypervisorConfig::with_defaults(
            HypervisorName::parse("hv1").unwrap(),
            LibvirtUri::parse("qemu:///system").unwrap(),
        ),
        inputs,
        base_image,
        root,
    }
}

/// A guest that takes a lease from `default`.
fn leased() -> Installation {
    installation("")
}

/// A guest of a static address in `default`, which the network reserves for its MAC.
fn static_address() -> Installation {
    installation("    ips: [192.168.122.50/24]\n")
}

/// A hypervisor whose network leases from .2 to .254.
fn hypervisor() -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_lease_range(
        NETWORK,
        Ipv4Addr::new(192, 168, 122, 2),
        Ipv4Addr::new(192, 168, 122, 254),
    )
}

impl Installation {
    fn on<'a>(&'a self, fake: &'a FakeHypervisor) -> GuestOnHypervisor<'a> {
        GuestOnHypervisor {
            inputs: &self.inputs,
            hypervisor: &self.hypervisor,
            backend: fake,
            hypervisor_machine: None,
            locks: &self.locks,
            adopt_host_key: false,
        }
    }

    /// The guest's plan from what `fake` has now.
    fn plan(&self, fake: &FakeHypervisor) -> PreparedGuest {
        let mut prepared = prepare(
            &self.on(fake),
            Resolution::default(),
            None,
            &self.root.path().join("cache"),
        )
        .unwrap();
        prepared.base_image = Some(self.base_image.clone());
        prepared
    }

    /// Plans, then carries out the plan's steps up to the wait for SSH, as `execute` does.
    fn run(&self, fake: &FakeHypervisor) -> Result<ConvergeReport, Failure> {
        self.run_prepared(fake, &self.plan(fake))
    }

    /// Carries out `prepared`'s steps up to the wait for SSH.
    fn run_prepared(
        &self,
        fake: &FakeHypervisor,
        prepared: &PreparedGuest,
    ) -> Result<ConvergeReport, Failure> {
        let guest = self.on(fake);
        let mut steps = HypervisorSteps {
            guest: &guest,
            prepared,
            artifacts: BuiltArtifacts {
                domain_xml: &prepared.domain_xml,
                seed_iso: &self.inputs.generated.seed_iso.bytes,
                base_image_file: &self.base_image,
                extra_disks: &prepared.domain_spec.extra_disks,
            },
            key_file: None,
            network_filters_lock: None,
            lease_pinned: None,
            pinned_definition: None,
            console_from: None,
        };
        let before_the_wait = Plan {
            domain: GUEST.into(),
            actions: hypervisors_part(&prepared.plan),
        };
        let mac = self.inputs.generated.mac_address.to_string();
        let run = PlanToRun {
            guest: GUEST,
            hypervisor: "hv1",
            mac: &mac,
            plan: &before_the_wait,
            payload: b"payload",
            tag: current_tag(prepared),
        };
        execute_plan(
            &mut steps,
            &run,
            &REAL_WAITS,
            &mut RecordedProgress::default(),
        )
    }

    fn mac(&self) -> String {
        self.inputs.generated.mac_address.to_string()
    }
}

/// The plan's steps before the wait for SSH: the hypervisor's.
fn hypervisors_part(plan: &Plan) -> Vec<Action> {
    plan.actions
        .iter()
        .take_while(|action| !matches!(action, Action::WaitForSsh))
        .cloned()
        .collect()
}

fn labels(actions: &[Action]) -> Vec<String> {
    actions.iter().map(Action::to_string).collect()
}

/// The plan's steps after the hypervisor's: the guest's.
const THE_GUESTS_STEPS: [&str; 3] = [
    "wait for the guest's address and SSH",
    "retire cloud-init seed www.example.test-seed.iso: detach it and delete it, the first boot is over",
    "finish over SSH: payload",
];

/// Whether what is left of `plan` is the guest's part only: the hypervisor has every step done.
fn only_the_guests_steps_left(plan: &Plan) -> bool {
    let left = labels(&plan.actions);
    left.len() == THE_GUESTS_STEPS.len()
        && left
            .iter()
            .zip(THE_GUESTS_STEPS)
            .all(|(step, expected)| step.starts_with(expected))
}

#[test]
fn a_new_guests_steps_leave_it_defined_running_and_pinned_and_a_rerun_has_only_the_guests_steps_left(
) {
    let guest = leased();
    let fake = hypervisor();
    let planned = hypervisors_part(&guest.plan(&fake).plan);
    let report = guest.run(&fake).unwrap();
    let pinned = format!(
        "pin the lease of 192.168.122.2 for {} in network default",
        guest.mac()
    );
    let mut expected = labels(&planned);
    expected.splice(
        3..3,
        [
            "network filters trog-isolated, trog-ipv6, trog-guest".to_string(),
            pinned,
        ],
    );
    let ran: Vec<String> = report
        .steps
        .iter()
        .map(|(label, _)| label.clone())
        .collect();
    assert_eq!(ran, expected);
    assert!(
        labels(&planned)[3].starts_with("define the domain"),
        "{planned:?}"
    );
    // What the hypervisor has: the pool started with the image and the guest's disks, the
    // domain defined, tagged, running and starting with the hypervisor, its lease pinned.
    assert!(fake.pool_is_active(POOL));
    let base = &guest.plan(&fake).desired.base_image_volume.clone();
    assert_eq!(
        fake.volumes(POOL),
        [
            base.as_str(),
            "www.example.test-root.qcow2",
            "www.example.test-seed.iso"
        ]
    );
    let domain = fake.domain(GUEST).unwrap();
    assert!(domain.running && domain.autostart && domain.tag.is_some());
    assert_eq!(domain.seed.as_deref(), Some("www.example.test-seed.iso"));
    assert_eq!(
        fake.reservations(NETWORK),
        [(guest.mac(), Ipv4Addr::new(192, 168, 122, 2))]
    );
    assert_eq!(fake.filters(), ["trog-guest", "trog-ipv6", "trog-isolated"]);
    assert!(only_the_guests_steps_left(&guest.plan(&fake).plan));
}

/// A built guest whose hypervisor's `pool_name` is renamed is refused, naming both pools, and
/// nothing is planned in the new pool: its data volume would be made there anew, empty.
#[test]
fn a_renamed_pool_refuses_a_built_guest_and_plans_nothing_there() {
    let mut guest = leased();
    let fake = hypervisor();
    guest.run(&fake).unwrap();
    guest.hypervisor.pool_name = "elsewhere".into();
    let Err(refused) = prepare(
        &guest.on(&fake),
        Resolution {
            force: true,
            ..Resolution::default()
        },
        None,
        &guest.root.path().join("cache"),
    ) else {
        panic!("a guest whose pool was renamed was planned");
    };
    assert_eq!(refused.status, ExitStatus::Conflict);
    let said = refused.render();
    assert!(
        said.contains("the guest's disks are in pool trog, but hypervisors.conf's pool_name now says elsewhere"),
        "{said}"
    );
    assert!(!fake.pool_is_active("elsewhere"));
    assert_eq!(fake.volumes("elsewhere"), Vec::<String>::new());
}

/// A guest built while its hypervisor ran guests under software emulation is defined again for
/// KVM once hypervisors.conf says KVM works (and back): stopped, redefined, started, its disks
/// kept. A rerun then has only the guest's steps left.
#[test]
fn a_changed_domain_type_redefines_a_built_guest_and_restarts_it() {
    let mut guest = leased();
    guest.hypervisor.domain_type = DomainType::Qemu;
    let fake = hypervisor();
    guest.run(&fake).unwrap();
    let defined_type = |fake: &FakeHypervisor| {
        crate::render::domain_xml::defined::domain_type_of(&fake.domain(GUEST).unwrap().definition)
    };
    assert_eq!(defined_type(&fake), Some(DomainType::Qemu));
    assert!(only_the_guests_steps_left(&guest.plan(&fake).plan));
    let disks = fake.volumes(POOL);

    for (now, before) in [
        (DomainType::Kvm, DomainType::Qemu),
        (DomainType::Qemu, DomainType::Kvm),
    ] {
        guest.hypervisor.domain_type = now;
        let planned = labels(&hypervisors_part(&guest.plan(&fake).plan));
        assert_eq!(planned.len(), 3, "{before:?} to {now:?}: {planned:?}");
        assert_eq!(planned[0], "stop the guest");
        assert!(planned[1].starts_with("redefine the domain"), "{planned:?}");
        assert_eq!(planned[2], "start the guest");
        guest.run(&fake).unwrap();
        assert_eq!(defined_type(&fake), Some(now));
        assert!(fake.domain(GUEST).unwrap().running);
        assert_eq!(fake.volumes(POOL), disks);
        assert!(only_the_guests_steps_left(&guest.plan(&fake).plan));
    }
}

/// A built guest whose `data_volume_size` was made smaller is refused (exit 7) naming both
/// sizes and the line, with its volume left as it is; made bigger, it is refused as before;
/// with `--destroy-data` the volume is recreated at the declared size, and a rerun converges.
#[test]
fn a_data_volume_declared_smaller_than_it_is_is_refused_and_kept() {
    const DATA: &str = "www.example.test-data.qcow2";
    let fake = hypervisor();
    installation("    data_volume_size: 4G\n")
        .run(&fake)
        .unwrap();
    assert_eq!(fake.volume_capacity(DATA), Some(Bytes::from_gib(4)));

    let smaller = installation("    data_volume_size: 2G\n");
    let prepared = |guest: &Installation, resolution| {
        prepare(
            &guest.on(&fake),
            resolution,
            None,
            &guest.root.path().join("cache"),
        )
    };
    for resolution in [
        Resolution::default(),
        Resolution {
            force: true,
            ..Resolution::default()
        },
    ] {
        let Err(refused) = prepared(&smaller, resolution) else {
            panic!("a data volume declared smaller was planned");
        };
        assert_eq!(refused.status, ExitStatus::Conflict);
        let said = refused.render();
        assert!(
            said.contains(&format!(
                "data volume {DATA} holds 4GB but 2GB is declared at {}:4:5",
                smaller
                    .root
                    .path()
                    .join(format!("etc/recipes.d/{GUEST}.yaml"))
                    .display()
            )),
            "{said}"
        );
        assert!(
            said.contains("declare `data_volume_size: 4G` again"),
            "{said}"
        );
        assert!(said.contains("hint: "), "{said}");
    }
    assert_eq!(fake.volume_capacity(DATA), Some(Bytes::from_gib(4)));

    let Err(bigger) = prepared(
        &installation("    data_volume_size: 8G\n"),
        Resolution::default(),
    ) else {
        panic!("a data volume declared bigger was planned");
    };
    assert!(
        bigger.render().contains("holds 4GB but 8GB is declared"),
        "{}",
        bigger.render()
    );

    let destroy = Resolution {
        destroy_data: true,
        ..Resolution::default()
    };
    let mut recreating = prepared(&smaller, destroy).unwrap();
    recreating.base_image = Some(smaller.base_image.clone());
    smaller.run_prepared(&fake, &recreating).unwrap();
    assert_eq!(fake.volume_capacity(DATA), Some(Bytes::from_gib(2)));
    assert!(only_the_guests_steps_left(&smaller.plan(&fake).plan));
}

/// How a failed run ends: the step that failed, as the run names it.
enum Ends {
    /// At the plan's step of this label, numbered, with those before it done.
    AtStep(&'static str),
    /// Before the step of this label, with the plan's steps before it done.
    Before(&'static str),
}

/// Where the step `label` names is in `planned`: the step of that label, or the first that
/// begins with it.
fn position_of(planned: &[String], label: &str) -> usize {
    planned
        .iter()
        .position(|step| step == label)
        .or_else(|| planned.iter().position(|step| step.starts_with(label)))
        .unwrap_or_else(|| panic!("{label} is not planned: {planned:?}"))
}

/// Fails the first `operation` of a run of `guest`'s plan on a fresh hypervisor: checks how the
/// run ends and what it leaves, then that a rerun plans the steps from there on and converges.
/// Returns the hypervisor after the failed run's rerun.
fn fail_then_rerun(guest: &Installation, operation: Operation, ends: Ends) -> FakeHypervisor {
    let fake = hypervisor().failing_nth(operation, 1);
    let planned = labels(&hypervisors_part(&guest.plan(&fake).plan));
    let failure = guest.run(&fake).unwrap_err();
    assert_eq!(failure.status, ExitStatus::Hypervisor, "{operation:?}");
    let said = format!("{}", failure.error);
    let mut causes = String::new();
    let mut source = failure.error.source();
    while let Some(cause) = source {
        causes.push_str(&format!("{cause}\n"));
        source = cause.source();
    }
    let done = match ends {
        Ends::AtStep(label) => {
            let at = position_of(&planned, label);
            assert!(
                said.starts_with(&format!(
                    "{GUEST}: step {} of {} failed: {label}",
                    at + 1,
                    planned.len()
                )),
                "{operation:?}: {said}"
            );
            assert!(causes.starts_with("fake on hv1 could not "), "{causes}");
            at
        }
        Ends::Before(label) => {
            assert!(
                failure.error.downcast_ref::<StepFailed>().is_none(),
                "{operation:?}: {said}"
            );
            assert!(
                said.contains("refused by the fake"),
                "{operation:?}: {said}"
            );
            position_of(&planned, label)
        }
    };
    assert!(
        failure.hint.is_some() || matches!(ends, Ends::Before(_)),
        "{operation:?}: no hint"
    );
    // What was left: the steps before the failure done, none after it.
    let replanned = labels(&hypervisors_part(&guest.plan(&fake).plan));
    assert_eq!(replanned, planned[done..], "{operation:?}");
    guest.run(&fake).unwrap();
    assert!(
        only_the_guests_steps_left(&guest.plan(&fake).plan),
        "{operation:?}: {}",
        guest.plan(&fake).plan
    );
    fake
}

#[test]
fn a_failure_at_each_of_the_hypervisors_steps_names_it_leaves_the_steps_before_done_and_a_rerun_converges(
) {
    let guest = leased();
    for (operation, step) in [
        (Operation::DefinePool, "define storage pool trog"),
        (Operation::StartPool, "start storage pool trog"),
        (Operation::UploadBaseImage, "upload base image"),
        (Operation::DefineDomain, "define the domain"),
        (Operation::CreateVolume, "create root disk"),
        (Operation::UploadSeed, "upload cloud-init seed"),
        (
            Operation::SetAutostart,
            "start the guest with the hypervisor",
        ),
        (Operation::StartDomain, "start the guest"),
    ] {
        let fake = fail_then_rerun(&guest, operation, Ends::AtStep(step));
        assert_eq!(fake.reservations(NETWORK).len(), 1, "{operation:?}");
    }
}

#[test]
fn a_failed_definition_takes_back_the_lease_its_run_pinned() {
    let guest = leased();
    let fake = hypervisor().failing(Operation::DefineDomain);
    guest.run(&fake).unwrap_err();
    assert!(fake.domain(GUEST).is_none());
    assert_eq!(fake.reservations(NETWORK), []);
    assert!(fake.calls().ends_with(&[
        "define_domain".to_string(),
        format!("release_pins {NETWORK} {}", guest.mac())
    ]));
}

#[test]
fn filters_or_a_pin_that_fail_end_the_run_before_the_domain_is_defined_and_a_rerun_converges() {
    let guest = leased();
    for operation in [
        Operation::TenantsWithFilters,
        Operation::TenantAddresses,
        Operation::DefineFilters,
        Operation::PinLease,
    ] {
        fail_then_rerun(&guest, operation, Ends::Before("define the domain"));
    }
    // A pin that failed leaves the filters, which a domain defined later uses, and no pin.
    let fake = hypervisor().failing(Operation::PinLease);
    guest.run(&fake).unwrap_err();
    assert_eq!(fake.filters(), ["trog-guest", "trog-ipv6", "trog-isolated"]);
    assert_eq!(fake.reservations(NETWORK), []);
    assert!(fake.domain(GUEST).is_none());
}

#[test]
fn a_static_address_is_reserved_before_any_step_once_and_a_failed_reservation_changes_nothing() {
    let guest = static_address();
    let fake = fail_then_rerun(
        &guest,
        Operation::ReserveAddress,
        Ends::Before("define storage pool"),
    );
    let address = Ipv4Addr::new(192, 168, 122, 50);
    assert_eq!(fake.reservations(NETWORK), [(guest.mac(), address)]);
    // The failed run's calls: the reservation, and nothing after it.
    let calls = fake.calls();
    let first_run: Vec<&String> = calls
        .iter()
        .skip_while(|call| call.starts_with("observe_guest"))
        .take_while(|call| !call.starts_with("observe_guest"))
        .collect();
    assert_eq!(
        first_run,
        [&format!(
            "reserve_address {NETWORK} {} {address}",
            guest.mac()
        )]
    );
    // A guest of a static address has no lease to pin.
    assert!(!calls.iter().any(|call| call.starts_with("pin_lease")));
    // Reserved already: a rerun says nothing of it.
    let report = guest.run(&fake).unwrap();
    assert!(report.steps.is_empty(), "{:?}", report.steps);
}

/// A static address that the network's DHCP has leased to a running domain's interface of
/// another MAC (a machine trog did not build, its address from the network's pool): the run is
/// refused at the reservation, its first step, with the holder named and what to do, and nothing
/// is changed on the hypervisor. The same lease whose holder is shut off (a destroyed guest's,
/// left until it runs out) is no obstacle, nor is the guest's own MAC holding it.
#[test]
fn a_static_address_a_running_domain_holds_a_lease_on_is_refused_before_anything_changes() {
    let guest = static_address();
    let address = Ipv4Addr::new(192, 168, 122, 50);
    let holder = "52:54:00:0f:0f:0f";
    let holding = |running: bool| FakeDomain {
        running,
        interfaces: vec![(NETWORK.to_string(), holder.to_string())],
        ..FakeDomain::default()
    };
    let fake = hypervisor()
        .with_domain("other.example.test", holding(true))
        .with_lease(NETWORK, holder, address);
    // What a dry run asks: the same refusal, and nothing changed or even attempted.
    let asked = super::static_address_leased_elsewhere(&guest.on(&fake))
        .unwrap()
        .expect("the running holder is named");
    assert_eq!(asked.holder_domain, "other.example.test");
    assert_eq!(fake.calls(), Vec::<String>::new());
    let failure = guest.run(&fake).unwrap_err();
    assert_eq!(failure.status, ExitStatus::Conflict);
    let said = failure.chain().join(": ");
    assert!(
        said.contains(&format!(
            "{address} is leased by network {NETWORK}'s DHCP to other.example.test ({holder}), \
             which is running, until 2027-01-15 09:00:00 UTC"
        )),
        "{said}"
    );
    let hint = failure.hint.clone().unwrap_or_default();
    assert!(
        hint.contains("shut other.example.test off first")
            && hint.contains("outside network default's DHCP pool")
            && hint.contains("nothing was changed"),
        "{hint}"
    );
    assert_eq!(fake.reservations(NETWORK), []);
    assert!(fake.volumes(POOL).is_empty());
    assert!(fake.domain(GUEST).is_none());
    assert!(fake.filters().is_empty());

    // The holder shut off: its lease is left over, and the address is the guest's.
    let fake = hypervisor()
        .with_domain("other.example.test", holding(false))
        .with_lease(NETWORK, holder, address);
    assert_eq!(
        super::static_address_leased_elsewhere(&guest.on(&fake)).unwrap(),
        None
    );
    guest.run(&fake).unwrap();
    assert_eq!(fake.reservations(NETWORK), [(guest.mac(), address)]);

    // Its own lease (a rebuilt guest of the same MAC) is no obstacle.
    let fake = hypervisor().with_lease(NETWORK, &guest.mac().to_uppercase(), address);
    guest.run(&fake).unwrap();
    assert_eq!(fake.reservations(NETWORK), [(guest.mac(), address)]);

    // Reserved for the guest already (its earlier run made the reservation): a later lease of
    // another running domain is not asked about, as the reservation is not made again.
    let fake = hypervisor()
        .with_reservation(NETWORK, &guest.mac(), address)
        .with_domain("other.example.test", holding(true))
        .with_lease(NETWORK, holder, address);
    assert_eq!(
        super::static_address_leased_elsewhere(&guest.on(&fake)).unwrap(),
        None
    );
}

/// A baked image on a hypervisor reached over SSH: the plan uploads the cache's image file under
/// the baked image's own volume (its digest's name, verified against its digest) and makes the
/// root disk over it; the steps leave the copy in the pool with the root disk layered over it,
/// and the plan of a guest made over the same image afterwards uploads nothing.
#[test]
fn a_baked_image_is_uploaded_to_a_remote_pool_under_its_digest_and_the_root_disk_made_over_it() {
    let mut guest = static_address();
    guest.hypervisor = HypervisorConfig::with_defaults(
        HypervisorName::parse("hv1").unwrap(),
        LibvirtUri::parse("qemu+ssh://trog@hv1.example/system").unwrap(),
    );
    let cache = guest.root.path().join("cache");
    let record = crate::images::baked::BakedRecord {
        key: "7".repeat(64),
        built_at: 0,
        distro: "debian".into(),
        release: "bookworm".into(),
        mirror: "http://deb.debian.org/debian".into(),
        security_mirror: "http://deb.debian.org/debian-security".into(),
        packages: vec!["nginx".into()],
        versions: Default::default(),
        builder: "b".into(),
        image_sha256: "8".repeat(64),
    };
    let baked_volume = crate::plan::resource_names::base_image_volume(&record.image_sha256);
    let fake = hypervisor();
    let on = guest.on(&fake);
    let mut prepared = prepare(&on, Resolution::default(), Some(&record), &cache).unwrap();
    let uploads: Vec<&Action> = prepared
        .plan
        .actions
        .iter()
        .filter(|action| matches!(action, Action::UploadBaseImage { .. }))
        .collect();
    assert!(
        matches!(uploads.as_slice(), [Action::UploadBaseImage { volume, source, digest }]
            if *volume == baked_volume
                && *source == format!("file://{}", record.image_path(&cache).display())
                && *digest == record.image_sha256),
        "{:?}",
        prepared.plan.actions
    );
    assert!(
        prepared.plan.actions.iter().any(|action| matches!(action,
            Action::CreateRootVolume { backing_volume, .. } if *backing_volume == baked_volume)),
        "{:?}",
        prepared.plan.actions
    );
    ready_to_execute(&on, &mut prepared, &cache).unwrap();
    assert_eq!(prepared.base_image, Some(record.image_path(&cache)));

    guest.run_prepared(&fake, &prepared).unwrap();
    assert_eq!(
        fake.volume_use(POOL, &baked_volume).unwrap(),
        crate::hypervisor::VolumeUse::Used {
            by: vec![format!(
                "volume {}",
                crate::plan::resource_names::root_volume(&DomainName::parse(GUEST).unwrap())
            )]
        }
    );
    let again = prepare(&on, Resolution::default(), Some(&record), &cache).unwrap();
    assert!(
        !again
            .plan
            .actions
            .iter()
            .any(|action| matches!(action, Action::UploadBaseImage { .. })),
        "{:?}",
        again.plan.actions
    );
}

/// A first boot started from the image's kernel masks cloud-init's final stage only when the
/// seed it reads installs no packages and is the one uploaded now: one kept from before may hold
/// `runcmd` or packages for that stage.
#[test]
fn the_first_boot_leaves_the_final_stage_for_after_only_with_a_new_seed_that_installs_nothing() {
    let boot = crate::model::direct_boot::DirectBoot {
        kernel: "/pool/base.kernel".into(),
        initrd: "/pool/base.initrd".into(),
        cmdline: "root=LABEL=r ro".into(),
        cloud_init_network_unit: Some("cloud-init.service".into()),
        final_stage_deferred: false,
    };
    let first_boots = |fake: &FakeHypervisor| -> Vec<String> {
        fake.calls()
            .into_iter()
            .filter(|call| call.starts_with("start_once_as"))
            .collect()
    };
    let masks_final = |call: &String| call.contains("systemd.mask=cloud-final.service");

    let plain = leased();
    let fake = hypervisor().with_direct_boot(boot.clone());
    plain.run(&fake).unwrap();
    let started = first_boots(&fake);
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(started[0].contains("systemd.mask=cloud-config.service"));
    assert!(!masks_final(&started[0]), "{started:?}");

    let baked = installation("    bake_packages: true\n");
    let fake = hypervisor().with_direct_boot(boot);
    baked.run(&fake).unwrap();
    let started = first_boots(&fake);
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(masks_final(&started[0]), "{started:?}");

    // The root disk gone behind trog's back before the seed was retired, and the domain's
    // shape no longer the declared one: the domain is defined again over a new root disk, with
    // the seed it keeps, which the next first boot reads.
    fake.force_off(GUEST).unwrap();
    fake.delete_volume(POOL, "www.example.test-root.qcow2")
        .unwrap();
    let mut domain = fake.domain(GUEST).unwrap();
    if let Some(tag) = domain.tag.as_mut() {
        tag.shape_fingerprint = "an earlier shape".into();
    }
    let fake = fake.with_domain(GUEST, domain);
    let prepared = baked.plan(&fake);
    assert!(
        !prepared
            .plan
            .actions
            .iter()
            .any(|action| matches!(action, Action::UploadSeed { .. })),
        "{:?}",
        labels(&prepared.plan.actions)
    );
    assert!(
        crate::provision::makes_root_disk(&prepared.plan),
        "{:?}",
        labels(&prepared.plan.actions)
    );
    baked.run_prepared(&fake, &prepared).unwrap();
    let started = first_boots(&fake);
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(!masks_final(&started[1]), "{started:?}");
}
