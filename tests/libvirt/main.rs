//! The libvirt guest-resource steps against this machine's real libvirtd (`qemu:///system`):
//! a pool in a temporary directory, a real qcow2 base image written into it through the
//! hypervisor's own system (as trog does on a real libvirtd, never a stream), an overlay, a seed, a tagged domain — observed back and planned again. Nothing is started.

mod extra_disks;
mod hypervisor_lock;
mod leased_address;
mod network_filters_lock;
mod pinned_host_keys;
mod prune_pool_copies;
#[path = "../support/remote_host.rs"]
mod remote_host;
mod restart_later;
#[path = "../support/root_warning.rs"]
mod root_warning;
mod shared_master;
mod snapshot_failure;
mod sweep_leftovers;

use sha2::{Digest, Sha256};
use std::process::Command;
use trog::libvirt::guest_resources::{BuiltArtifacts, GuestResources};
use trog::machine::hypervisor_ops::HypervisorMachine;
use trog::model::names::DomainName;
use trog::model::units::Bytes;
use trog::plan::{
    self, resource_names, Action, DesiredGuest, DesiredVolume, PoolState, Resolution,
};
use trog::render::domain_xml::metadata::{render_tag, Maker, TAG_NAMESPACE, TAG_PREFIX};

/// The installation the test guests are defined by, named in their tags.
const INSTALLATION: &str = "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10";

struct Cleanup {
    connection: virt::connect::Connect,
    domain: String,
    pool: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(domain) = self.connection.lookup_domain_by_name(&self.domain) {
            let _ = domain.destroy();
            let _ = domain.undefine_flags(virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA);
        }
        if let Ok(pool) = self.connection.lookup_storage_pool_by_name(&self.pool) {
            if let Ok(volumes) = pool.list_all_volumes(0) {
                for volume in volumes {
                    let _ = volume.delete(0);
                }
            }
            let _ = pool.destroy();
            let _ = pool.undefine();
        }
    }
}

fn minimal_domain_xml(name: &str, pool: &str, root: &str, seed: &str) -> String {
    format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>\
         <os><type arch='x86_64'>hvm</type></os><devices>\
         <disk type='volume' device='disk'><driver name='qemu' type='qcow2'/><source pool='{pool}' volume='{root}'/><target dev='vda' bus='virtio'/></disk>\
         <disk type='volume' device='cdrom'><driver name='qemu' type='raw'/><source pool='{pool}' volume='{seed}'/><target dev='sda' bus='scsi'/><readonly/></disk>\
         <controller type='scsi' model='virtio-scsi'/></devices></domain>"
    )
}

/// A guest's declaration and built artifacts for the libvirt steps, with a real qcow2 base image
/// and a pool in a scratch directory; what libvirt holds of it is removed when it is dropped.
struct TestGuest {
    _cleanup: Cleanup,
    _scratch: tempfile::TempDir,
    base: std::path::PathBuf,
    seed_iso: Vec<u8>,
    desired: DesiredGuest,
    xml: String,
    machine: HypervisorMachine,
}

impl TestGuest {
    fn new(name_prefix: &str, data_volume: bool) -> TestGuest {
        let unique = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let domain = DomainName::parse(&format!("{name_prefix}-{unique}.test")).unwrap();
        let pool_name = format!("trog-{name_prefix}-{unique}");
        let cleanup = Cleanup {
            connection: virt::connect::Connect::open(Some("qemu:///system")).unwrap(),
            domain: domain.to_string(),
            pool: pool_name.clone(),
        };
        // In /var/tmp, whose filesystem takes `chattr +i`.
        let scratch = tempfile::Builder::new()
            .prefix("trog-libvirt-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let base = scratch.path().join("base.qcow2");
        let status = Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2"])
            .arg(&base)
            .arg("64M")
            .status()
            .unwrap();
        assert!(status.success());
        let base_digest = hex::encode(Sha256::digest(std::fs::read(&base).unwrap()));
        let seed_iso = b"not really an ISO, but bytes with a digest".to_vec();
        let desired = DesiredGuest {
            pool_name: pool_name.clone(),
            pool_path: scratch.path().join("pool").display().to_string(),
            base_image_volume: resource_names::base_image_volume(&base_digest),
            partial_base_image_volume: resource_names::partial_base_image_volume(
                &base_digest,
                "libvirt-test",
            ),
            base_image_digest: base_digest,
            base_image_source: format!("file://{}", base.display()),
            root_volume: DesiredVolume {
                name: resource_names::root_volume(&domain),
                capacity: Bytes(128 * 1024 * 1024),
                declared_at: None,
            },
            seed_volume: resource_names::seed_volume(&domain),
            seed_sha256: hex::encode(Sha256::digest(&seed_iso)),
            equivalent_seed_sha256s: vec![hex::encode(Sha256::digest(&seed_iso))],
            data_volume: data_volume.then(|| DesiredVolume {
                name: resource_names::data_volume(&domain),
                capacity: Bytes(32 * 1024 * 1024),
                declared_at: None,
            }),
            extra_disks: Vec::new(),
            boot_fingerprint: "boot-1".into(),
            shape_fingerprint: "shape-1".into(),
            domain_type: trog::model::hypervisor::DomainType::Qemu,
            payload_digest: "payload-1".into(),
            installation: Some(INSTALLATION.into()),
            domain: domain.clone(),
        };
        let xml = minimal_domain_xml(
            domain.as_str(),
            &pool_name,
            &desired.root_volume.name,
            &desired.seed_volume,
        );
        TestGuest {
            _cleanup: cleanup,
            _scratch: scratch,
            base,
            seed_iso,
            desired,
            xml,
            machine: HypervisorMachine::local().into_dyn(),
        }
    }

    fn resources<'a>(&'a self, connection: &'a virt::connect::Connect) -> GuestResources<'a> {
        GuestResources {
            connection,
            hypervisor: "localhost",
            desired: &self.desired,
            machine: Some(&self.machine),
        }
    }

    /// Runs the plan's libvirt steps, all but starting the guest.
    fn build_without_starting(&self, connection: &virt::connect::Connect) {
        let resources = self.resources(connection);
        let artifacts = BuiltArtifacts {
            domain_xml: &self.xml,
            seed_iso: &self.seed_iso,
            base_image_file: &self.base,
            extra_disks: &[],
        };
        let steps = plan::plan(
            &self.desired,
            &resources.observe().unwrap(),
            Resolution::default(),
        )
        .unwrap();
        for action in &steps.actions {
            if !matches!(
                action,
                Action::StartDomain
                    | Action::WaitForSsh
                    | Action::RetireSeed { .. }
                    | Action::Finish { .. }
            ) {
                resources
                    .execute(action, &artifacts)
                    .unwrap_or_else(|error| panic!("{action}: {error:?}"));
            }
        }
    }
}

#[test]
fn plan_steps_converge_against_real_libvirt() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system"))
        .expect("libvirtd runs (tests/services/start.sh)");
    let guest = TestGuest::new("steps", true);
    let (desired, pool_name) = (&guest.desired, &guest.desired.pool_name);
    let resources = guest.resources(&connection);
    assert_eq!(resources.observe().unwrap().pool, PoolState::Absent);
    guest.build_without_starting(&connection);

    let observed = resources.observe().unwrap();
    assert_eq!(observed.pool, PoolState::Active);
    assert!(observed.base_image_present);
    assert!(
        !observed.partial_base_image_present,
        "the partial upload is removed once copied"
    );
    assert_eq!(
        observed.seed_volume.as_ref().unwrap().sha256.as_deref(),
        Some(desired.seed_sha256.as_str())
    );
    assert_eq!(
        observed.root_volume.as_ref().unwrap().capacity,
        desired.root_volume.capacity
    );
    let domain_seen = observed.domain.as_ref().unwrap();
    assert_eq!(domain_seen.tag, Some(desired.tag_before_finish()));
    assert!(domain_seen.autostart);
    assert!(domain_seen.seed_attached);
    // libvirt's definition says the type it was defined with, as the planner compares it.
    assert_eq!(
        domain_seen.domain_type,
        Some(trog::model::hypervisor::DomainType::Qemu)
    );
    // The definition names the installation that made it, as status --all reads it.
    let made_by = |connection: &virt::connect::Connect| {
        trog::libvirt::trog_tag::read_maker(
            &connection
                .lookup_domain_by_name(desired.domain.as_str())
                .unwrap(),
        )
    };
    let by_this = Maker::Trog {
        installation: INSTALLATION.into(),
    };
    assert_eq!(made_by(&connection), by_this);
    let held = trog::libvirt::site::held_domains(
        &trog::model::hypervisor::LibvirtUri::parse("qemu:///system").unwrap(),
    )
    .unwrap();
    assert_eq!(
        held.iter()
            .find(|domain| domain.name == desired.domain.as_str())
            .unwrap()
            .maker,
        by_this
    );

    // The overlay really is a qcow2 over the uploaded base image.
    let root_path = connection
        .lookup_storage_pool_by_name(pool_name)
        .unwrap()
        .lookup_storage_vol_by_name(&desired.root_volume.name)
        .unwrap()
        .path()
        .unwrap();
    let info = Command::new("qemu-img")
        .args(["info", "--output=json", &root_path])
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["format"], "qcow2");
    assert!(
        info["backing-filename"]
            .as_str()
            .unwrap()
            .ends_with(&desired.base_image_volume),
        "{info}"
    );

    // What is left is what this test skipped: starting and finishing.
    let second = plan::plan(desired, &observed, Resolution::default()).unwrap();
    let left: Vec<String> = second.actions.iter().map(ToString::to_string).collect();
    assert_eq!(
        left,
        [
            "start the guest",
            "wait for the guest's address and SSH",
            &format!(
                "retire cloud-init seed {}: detach it and delete it, the first boot is over",
                desired.seed_volume
            ),
            "finish over SSH: payload payload-1, Makefile, tests"
        ]
    );

    // The seed detached through the Hypervisor trait: gone from the definition, observed so.
    let hypervisor = trog::libvirt::hypervisor::LibvirtHypervisor::over(
        &connection,
        &trog::model::hypervisor::HypervisorConfig::with_defaults(
            trog::model::names::HypervisorName::parse("localhost").unwrap(),
            trog::model::hypervisor::LibvirtUri::parse("qemu:///system").unwrap(),
        ),
    );
    use trog::hypervisor::Hypervisor;
    assert!(hypervisor
        .detach_seed(desired.domain.as_str(), &desired.seed_volume)
        .unwrap());
    assert!(!hypervisor
        .detach_seed(desired.domain.as_str(), &desired.seed_volume)
        .unwrap());
    let detached = resources.observe().unwrap();
    assert!(!detached.domain.as_ref().unwrap().seed_attached);
    let definition = connection
        .lookup_domain_by_name(desired.domain.as_str())
        .unwrap()
        .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)
        .unwrap();
    assert!(!definition.contains(&desired.seed_volume), "{definition}");

    // A payload recorded after a finish is read back as part of the tag.
    let finished = plan::GuestTag {
        payload_digest: Some("payload-1".into()),
        ..desired.tag_before_finish()
    };
    resources.record_tag(&finished).unwrap();
    assert_eq!(
        resources.observe().unwrap().domain.unwrap().tag,
        Some(finished.clone())
    );
    assert_eq!(made_by(&connection), by_this);

    // A domain tagged before tags named their installation is trog's by an unrecorded one; the
    // next finish's tag names the installation that finished it.
    connection
        .lookup_domain_by_name(desired.domain.as_str())
        .unwrap()
        .set_metadata(
            virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
            Some(&render_tag(desired.domain.as_str(), &finished, None).unwrap()),
            Some(TAG_PREFIX),
            Some(TAG_NAMESPACE),
            virt::sys::VIR_DOMAIN_AFFECT_CONFIG,
        )
        .unwrap();
    assert_eq!(made_by(&connection), Maker::TrogUnrecorded);
    assert_eq!(
        resources.observe().unwrap().domain.unwrap().tag,
        Some(finished.clone()),
        "the digests of an older tag are read as they were"
    );
    resources.record_tag(&finished).unwrap();
    assert_eq!(made_by(&connection), by_this);
}

/// A run killed after libvirt defined the pool but before its directory was made leaves a pool
/// that cannot start; the next run's plan only starts it, and starting makes the directory.
#[test]
fn a_pool_defined_by_a_killed_run_without_its_directory_starts() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system"))
        .expect("libvirtd runs (tests/services/start.sh)");
    let guest = TestGuest::new("nodir", false);
    let desired = &guest.desired;
    connection
        .define_storage_pool_xml(
            &format!(
                "<pool type='dir'><name>{}</name><target><path>{}</path></target></pool>",
                desired.pool_name, desired.pool_path
            ),
            0,
        )
        .unwrap();
    assert!(!std::path::Path::new(&desired.pool_path).exists());
    let resources = guest.resources(&connection);
    assert_eq!(resources.observe().unwrap().pool, PoolState::Inactive);

    guest.build_without_starting(&connection);

    assert_eq!(resources.observe().unwrap().pool, PoolState::Active);
    assert!(std::path::Path::new(&desired.pool_path).is_dir());
}

/// Runs started together on a fresh installation all plan to define the pool; the first defines
/// and starts it, and the others' steps find it made and go on (they used to fail on libvirt's
/// refusal to build an active pool).
#[test]
fn a_pool_another_run_made_since_this_one_looked_is_used() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system"))
        .expect("libvirtd runs (tests/services/start.sh)");
    let guest = TestGuest::new("poolrace", false);
    let resources = guest.resources(&connection);
    let artifacts = BuiltArtifacts {
        domain_xml: &guest.xml,
        seed_iso: &guest.seed_iso,
        base_image_file: &guest.base,
        extra_disks: &[],
    };
    let steps = plan::plan(
        &guest.desired,
        &resources.observe().unwrap(),
        Resolution::default(),
    )
    .unwrap();
    let pool_steps: Vec<&Action> = steps
        .actions
        .iter()
        .take_while(|action| matches!(action, Action::DefinePool { .. } | Action::StartPool { .. }))
        .collect();
    assert_eq!(pool_steps.len(), 2, "{steps:?}");

    // The other run, between this one's look and its steps.
    for action in &pool_steps {
        resources.execute(action, &artifacts).unwrap();
    }
    assert_eq!(resources.observe().unwrap().pool, PoolState::Active);

    for action in &pool_steps {
        resources
            .execute(action, &artifacts)
            .unwrap_or_else(|error| panic!("{action}: {error:?}"));
    }
    assert_eq!(resources.observe().unwrap().pool, PoolState::Active);
}

/// What a run killed while writing the base image into the pool leaves (a partial file, seen
/// by libvirt as a volume) is found, removed and written again; the image written is the very
/// file that was verified, and a seed changed since is replaced under its name.
#[test]
fn a_partial_base_image_left_by_a_killed_write_is_replaced() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system"))
        .expect("libvirtd runs (tests/services/start.sh)");
    let guest = TestGuest::new("killedwrite", false);
    let resources = guest.resources(&connection);
    let artifacts = BuiltArtifacts {
        domain_xml: &guest.xml,
        seed_iso: &guest.seed_iso,
        base_image_file: &guest.base,
        extra_disks: &[],
    };
    let first = plan::plan(
        &guest.desired,
        &resources.observe().unwrap(),
        Resolution::default(),
    )
    .unwrap();
    for action in first
        .actions
        .iter()
        .take_while(|action| matches!(action, Action::DefinePool { .. } | Action::StartPool { .. }))
    {
        resources.execute(action, &artifacts).unwrap();
    }
    let pool_dir = std::path::Path::new(&guest.desired.pool_path);
    let partial = pool_dir.join(&guest.desired.partial_base_image_volume);
    let base = std::fs::read(&guest.base).unwrap();
    std::fs::write(&partial, &base[..base.len() / 2]).unwrap();

    let observed = resources.observe().unwrap();
    assert!(observed.partial_base_image_present);
    assert!(!observed.base_image_present);
    let rerun = plan::plan(&guest.desired, &observed, Resolution::default()).unwrap();
    assert!(
        rerun
            .actions
            .iter()
            .any(|action| matches!(action, Action::RemovePartialBaseImage { .. })),
        "{:?}",
        rerun.actions
    );
    guest.build_without_starting(&connection);
    assert!(!partial.exists(), "the partial file is gone");
    let placed = pool_dir.join(&guest.desired.base_image_volume);
    assert_eq!(
        std::fs::read(&placed).unwrap(),
        base,
        "the verified file itself"
    );
    let observed = resources.observe().unwrap();
    assert!(observed.base_image_present && !observed.partial_base_image_present);

    // A seed whose contents changed is written again and replaces the old one under its name.
    let new_seed = b"a seed rebuilt with new contents".to_vec();
    let mut desired = guest.desired.clone();
    desired.seed_sha256 = hex::encode(Sha256::digest(&new_seed));
    desired.equivalent_seed_sha256s = vec![desired.seed_sha256.clone()];
    let resources = GuestResources {
        desired: &desired,
        ..guest.resources(&connection)
    };
    let steps = plan::plan(
        &desired,
        &resources.observe().unwrap(),
        Resolution::default(),
    )
    .unwrap();
    let upload = steps
        .actions
        .iter()
        .find(|action| matches!(action, Action::UploadSeed { .. }))
        .expect("the changed seed is uploaded again");
    resources
        .execute(
            upload,
            &BuiltArtifacts {
                seed_iso: &new_seed,
                ..artifacts
            },
        )
        .unwrap();
    assert_eq!(
        std::fs::read(pool_dir.join(&desired.seed_volume)).unwrap(),
        new_seed
    );
    assert_eq!(
        resources.observe().unwrap().seed_volume.unwrap().sha256,
        Some(desired.seed_sha256.clone())
    );
}

/// Under the hypervisor's upload lock, every partial copy of the base image in the pool is a
/// dead run's, whichever machine wrote it: all are removed, and nothing else.
#[test]
fn every_machines_partial_copy_of_the_base_image_is_removed() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = TestGuest::new("partials", false);
    guest.build_without_starting(&connection);
    let pool_dir = std::path::Path::new(&guest.desired.pool_path);
    let base_volume = &guest.desired.base_image_volume;
    let partials = [
        format!("{base_volume}.part-ws-a.example.test"),
        format!("{base_volume}.part-ws-b"),
    ];
    let unrelated = pool_dir.join("trog-base-ffffffffffffffff.qcow2.part-ws-a.example.test");
    for name in &partials {
        std::fs::write(pool_dir.join(name), b"half an image").unwrap();
    }
    std::fs::write(&unrelated, b"another image's").unwrap();

    guest
        .resources(&connection)
        .remove_partial_base_images()
        .unwrap();
    for name in &partials {
        assert!(!pool_dir.join(name).exists(), "{name} is removed");
    }
    assert!(unrelated.exists(), "another image's partial copy stays");
    assert!(pool_dir.join(base_volume).exists(), "the whole image stays");
}

/// `destroy` leaves alone a domain trog did not create, and says so with its own status.
#[test]
fn destroy_refuses_a_domain_trog_did_not_create() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let name = format!("foreign-{}.test", std::process::id());
    let pool = format!("trog-foreign-{}", std::process::id());
    let _cleanup = Cleanup {
        connection: virt::connect::Connect::open(Some("qemu:///system")).unwrap(),
        domain: name.clone(),
        pool: pool.clone(),
    };
    connection
        .define_domain_xml(&minimal_domain_xml(&name, &pool, "root.qcow2", "seed.iso"))
        .unwrap();

    let installation = tempfile::tempdir().unwrap();
    std::fs::write(
        installation.path().join("hypervisors.conf"),
        format!("[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool}\n"),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(["destroy", &name])
        .env("TROG_PROVISIONER_CONFIG", installation.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(7), "{stderr}");
    assert!(stderr.contains("was not created by trog"), "{stderr}");
    assert!(
        connection.lookup_domain_by_name(&name).is_ok(),
        "the foreign domain is still there"
    );
}

/// Makes a file immutable for as long as it lives, so even root cannot delete it: a real failure
/// for a destroy step.
struct Immutable(std::path::PathBuf);

impl Immutable {
    fn set(path: &str) -> Immutable {
        let status = Command::new("chattr").arg("+i").arg(path).status().unwrap();
        assert!(status.success(), "chattr +i {path}");
        Immutable(path.into())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

/// A destroy step that fails does not stop the others; the run names what it left behind and
/// exits with its own status.
#[test]
fn destroy_goes_on_past_a_failed_step_and_names_what_it_left() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = TestGuest::new("partial", false);
    let (desired, domain, pool_name) = (
        &guest.desired,
        &guest.desired.domain,
        &guest.desired.pool_name,
    );
    guest.build_without_starting(&connection);
    let pool = connection.lookup_storage_pool_by_name(pool_name).unwrap();
    let seed_path = pool
        .lookup_storage_vol_by_name(&desired.seed_volume)
        .unwrap()
        .path()
        .unwrap();
    let _stuck = Immutable::set(&seed_path);

    let installation = tempfile::tempdir().unwrap();
    std::fs::write(
        installation.path().join("hypervisors.conf"),
        format!(
            "[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool_name}\n"
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(["destroy", domain.as_str()])
        .env("TROG_PROVISIONER_CONFIG", installation.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(9),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("removed  domain {domain}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("removed  volume {}", desired.root_volume.name)),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("LEFT     volume {}", desired.seed_volume)),
        "{stdout}"
    );
    assert!(connection.lookup_domain_by_name(domain.as_str()).is_err());
}

/// The bulk statistics call and the guest-by-guest questions agree on every guest's size and
/// state, for real libvirt (running and shut-off guests) and for the test driver.
#[test]
fn one_bulk_call_observes_what_three_questions_per_guest_do() {
    use trog::libvirt::observe::{defined_guests, guest_by_guest};
    let sorted = |mut guests: Vec<trog::placement::observed::DefinedGuest>| {
        guests.sort_by(|a, b| a.name.cmp(&b.name));
        guests
    };
    let real = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let name = format!("trog-stats-{}", std::process::id());
    let xml = format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>384</memory>\
         <vcpu current='1'>3</vcpu><os><type arch='x86_64'>hvm</type></os></domain>"
    );
    let defined = real.define_domain_xml(&xml).unwrap();
    // The bulk call itself answers, completely (not the guest-by-guest fallback).
    let records = trog::libvirt::domain_stats::all_guest_stats(&real).unwrap();
    assert!(records.iter().any(|record| record.name == name));
    assert!(records
        .iter()
        .all(|record| record.defined_guest().is_some()));
    // Other tests' guests on this libvirtd come and go between the two listings: they are asked
    // again, a few times, until nothing changed in between.
    let mut tries = 0;
    let (bulk, one_by_one) = loop {
        tries += 1;
        let bulk = sorted(defined_guests(&real, "qemu:///system").unwrap());
        let one_by_one = sorted(guest_by_guest(&real, "qemu:///system").unwrap());
        if bulk == one_by_one || tries == 5 {
            break (bulk, one_by_one);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    let _ = defined.undefine();
    assert_eq!(bulk, one_by_one, "after {tries} tries");
    let ours = bulk.iter().find(|guest| guest.name == name).unwrap();
    assert_eq!(
        (ours.max_memory.0, ours.max_vcpus, ours.running),
        (384, 3, false)
    );

    let test_driver = virt::connect::Connect::open(Some("test:///default")).unwrap();
    assert_eq!(
        sorted(defined_guests(&test_driver, "test:///default").unwrap()),
        sorted(guest_by_guest(&test_driver, "test:///default").unwrap())
    );
}

/// Runs `trog ARGS` against an installation whose fleet is this machine with `pool`.
fn trog_on_pool(pool: &str, args: &[&str]) -> std::process::Output {
    let installation = tempfile::tempdir().unwrap();
    std::fs::write(
        installation.path().join("hypervisors.conf"),
        format!("[local]\nlibvirt_uri = qemu:///system\ndomain_type = qemu\npool_name = {pool}\n"),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", installation.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    root_warning::output_without_root_warning(output)
}

fn sha256_of(path: &str) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// A test guest whose definition also attaches its data volume (as `vdb`), so that snapshots
/// cover two disks.
fn guest_with_data_disk(name: &str) -> TestGuest {
    let mut guest = TestGuest::new(name, true);
    let data_volume = guest.desired.data_volume.clone().unwrap().name;
    guest.xml = guest.xml.replace(
        "<disk type='volume' device='cdrom'>",
        &format!(
            "<disk type='volume' device='disk'><driver name='qemu' type='qcow2'/><source pool='{}' volume='{data_volume}'/><target dev='vdb' bus='virtio'/></disk><disk type='volume' device='cdrom'>",
            guest.desired.pool_name
        ),
    );
    guest
}

/// Snapshots of a running and a shut-off guest (no OS: it sits in its firmware), named and by
/// time, listed, kept and deleted through `trog snapshot`, checked against libvirt; restored
/// through the backend; the shared base image never written; destroy removes them all and names
/// each.
#[test]
fn snapshots_running_and_shut_off_listed_kept_deleted_restored_and_destroyed() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = guest_with_data_disk("snap");
    let data_volume = guest.desired.data_volume.clone().unwrap().name;
    guest.build_without_starting(&connection);
    let (domain, pool_name) = (guest.desired.domain.as_str(), &guest.desired.pool_name);
    let pool = connection.lookup_storage_pool_by_name(pool_name).unwrap();
    let base_path = pool
        .lookup_storage_vol_by_name(&guest.desired.base_image_volume)
        .unwrap()
        .path()
        .unwrap();
    let base_digest = sha256_of(&base_path);
    let libvirt_domain = connection.lookup_domain_by_name(domain).unwrap();
    let snapshot_names = || {
        let mut names: Vec<String> = libvirt_domain
            .list_all_snapshots(0)
            .unwrap()
            .iter()
            .map(|snapshot| snapshot.name().unwrap())
            .collect();
        names.sort();
        names
    };
    let say = |output: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };

    // Running: taken with memory.
    libvirt_domain.create().unwrap();
    let first = trog_on_pool(pool_name, &["snapshot", "--name", "first", domain]);
    assert!(first.status.success(), "{}", say(&first));
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        format!("{domain}: snapshot first taken on local (with memory)\n")
    );
    assert!(libvirt_domain.is_active().unwrap(), "the guest runs on");
    // A name that exists is refused, and nothing is taken.
    let again = trog_on_pool(pool_name, &["snapshot", "--name", "first", domain]);
    assert_eq!(again.status.code(), Some(7), "{}", say(&again));
    assert!(say(&again).contains("already has a snapshot named first"));
    assert_eq!(snapshot_names(), ["first"]);

    // Shut off: taken offline.
    libvirt_domain.destroy().unwrap();
    let second = trog_on_pool(pool_name, &["snapshot", "--name", "second", domain]);
    assert!(second.status.success(), "{}", say(&second));
    assert!(say(&second).contains("(offline)"), "{}", say(&second));
    assert_eq!(sha256_of(&base_path), base_digest);

    // --list --json, oldest first, as libvirt has them.
    let listed = trog_on_pool(pool_name, &["--json", "snapshot", "--list", domain]);
    assert!(listed.status.success(), "{}", say(&listed));
    let listing: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let snapshots = listing["snapshots"].as_array().unwrap();
    let summary: Vec<(String, bool, String)> = snapshots
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["running"].as_bool().unwrap(),
                s["capture"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("first".to_string(), true, "with-memory".to_string()),
            ("second".to_string(), false, "offline".to_string())
        ]
    );
    // Sizes, against qemu-img reading the disks itself: each snapshot's memory (none for the
    // shut-off one), and the disks' space on the hypervisor.
    let disk_paths = [&guest.desired.root_volume.name, &data_volume].map(|name| {
        pool.lookup_storage_vol_by_name(name)
            .unwrap()
            .path()
            .unwrap()
    });
    let image_info = |path: &str| -> serde_json::Value {
        let output = Command::new("qemu-img")
            .args(["info", "--output=json", "-U", path])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let recorded_memory = |name: &str| -> u64 {
        disk_paths
            .iter()
            .map(|path| {
                image_info(path)["snapshots"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|snapshot| snapshot["name"] == name)
                    .map_or(0, |snapshot| snapshot["vm-state-size"].as_u64().unwrap())
            })
            .sum()
    };
    assert!(recorded_memory("first") > 0);
    assert_eq!(
        snapshots[0]["memory_bytes"].as_u64(),
        Some(recorded_memory("first"))
    );
    assert_eq!(snapshots[1]["memory_bytes"].as_u64(), Some(0));
    let allocated: u64 = disk_paths
        .iter()
        .map(|path| image_info(path)["actual-size"].as_u64().unwrap())
        .sum();
    assert_eq!(listing["disk_bytes"].as_u64(), Some(allocated), "{listing}");
    assert!(listing["sizes_unread"].is_null(), "{listing}");
    let listed_text = trog_on_pool(pool_name, &["snapshot", "--list", domain]);
    assert!(
        String::from_utf8_lossy(&listed_text.stdout).contains(&format!(
            "{domain}: its disks take {} on local",
            trog::snapshot_space::human_bytes(allocated)
        )),
        "{}",
        say(&listed_text)
    );

    // Restored to the running snapshot: the guest runs again; to the shut-off one: it stops.
    let backend =
        trog::libvirt::snapshot::GuestSnapshots::open(&connection, "local", domain).unwrap();
    backend.revert("first").unwrap();
    assert!(libvirt_domain.is_active().unwrap());
    backend.revert("second").unwrap();
    assert!(!libvirt_domain.is_active().unwrap());
    assert_eq!(sha256_of(&base_path), base_digest);

    // An unknown name lists the ones there are.
    let unknown = trog_on_pool(pool_name, &["snapshot", "--delete", "nope", domain]);
    assert_eq!(unknown.status.code(), Some(1), "{}", say(&unknown));
    assert!(
        say(&unknown).contains(&format!(
            "{domain} has no snapshot named nope; it has: first, second"
        )),
        "{}",
        say(&unknown)
    );

    // --keep 1 takes one (named by time) and deletes the two before it.
    let kept = trog_on_pool(pool_name, &["snapshot", "--keep", "1", domain]);
    assert!(kept.status.success(), "{}", say(&kept));
    let remaining = snapshot_names();
    assert_eq!(remaining.len(), 1);
    assert!(remaining[0].ends_with('Z'), "{remaining:?}");
    assert!(say(&kept).contains("deleted  snapshot first (--keep)"));
    assert!(say(&kept).contains("deleted  snapshot second (--keep)"));
    let deleted = trog_on_pool(pool_name, &["snapshot", "--delete", &remaining[0], domain]);
    assert!(deleted.status.success(), "{}", say(&deleted));
    assert!(snapshot_names().is_empty());

    // New boot inputs replace the root disk, which holds the snapshots: a plain plan refuses,
    // and with --force deletes them first.
    let doomed = trog_on_pool(pool_name, &["snapshot", "--name", "doomed", domain]);
    assert!(doomed.status.success(), "{}", say(&doomed));
    let resources = guest.resources(&connection);
    let observed = resources.observe().unwrap();
    assert_eq!(observed.domain.as_ref().unwrap().snapshots, ["doomed"]);
    let rebooted = DesiredGuest {
        boot_fingerprint: "boot-2".into(),
        ..guest.desired.clone()
    };
    let refused = plan::plan(&rebooted, &observed, Resolution::default()).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("snapshots (doomed) go with it; --force"),
        "{refused}"
    );
    let forced = Resolution {
        force: true,
        ..Resolution::default()
    };
    let steps = plan::plan(&rebooted, &observed, forced).unwrap();
    let first_step = &steps.actions[0];
    assert_eq!(
        first_step,
        &Action::DeleteSnapshots {
            names: vec!["doomed".into()]
        }
    );
    let artifacts = BuiltArtifacts {
        domain_xml: &guest.xml,
        seed_iso: &guest.seed_iso,
        base_image_file: &guest.base,
        extra_disks: &[],
    };
    resources.execute(first_step, &artifacts).unwrap();
    assert!(snapshot_names().is_empty());

    // A guest with snapshots is destroyed whole; each snapshot is named. (Shut off: a guest
    // without an OS ignores the ACPI shutdown, and destroy would wait out its grace.)
    let last = trog_on_pool(pool_name, &["snapshot", "--name", "last", domain]);
    assert!(last.status.success(), "{}", say(&last));
    let destroyed = trog_on_pool(pool_name, &["destroy", domain]);
    assert!(destroyed.status.success(), "{}", say(&destroyed));
    assert!(
        say(&destroyed).contains("removed  snapshot last"),
        "{}",
        say(&destroyed)
    );
    assert!(connection.lookup_domain_by_name(domain).is_err());
    // The kept data volume holds no snapshot state any more.
    let data_path = pool
        .lookup_storage_vol_by_name(&data_volume)
        .unwrap()
        .path()
        .unwrap();
    let info = Command::new("qemu-img")
        .args(["info", "--output=json", "-U", &data_path])
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert!(info.get("snapshots").is_none(), "{info}");
    assert_eq!(sha256_of(&base_path), base_digest);
}

/// The addresses `network`'s definition (live, or persistent with `VIR_NETWORK_XML_INACTIVE`)
/// reserves for `mac`.
fn reserved_for(network: &virt::network::Network, flags: u32, mac: &str) -> Vec<String> {
    trog::libvirt::reservation::dhcp_hosts(&network.xml_desc(flags).unwrap())
        .unwrap()
        .into_iter()
        .filter(|host| host.mac.as_deref() == Some(mac))
        .filter_map(|host| host.ip)
        .collect()
}

/// A DHCP reservation made through the network update API is in the default network's live and
/// persistent definitions, is not made twice, moves when the MAC's address changes, and is gone
/// once released.
#[test]
fn dhcp_reservations_are_made_live_and_persistent_and_released() {
    use trog::libvirt::reservation::{release_reservation, reserve_address};
    let uri = "qemu:///system";
    let connection = virt::connect::Connect::open(Some(uri)).unwrap();
    let network = connection.lookup_network_by_name("default").unwrap();
    // A MAC and addresses of this test's own, outside what the other tests use.
    let mac = "52:54:00:7e:57:01";
    let first: std::net::Ipv4Addr = "192.168.122.247".parse().unwrap();
    let second: std::net::Ipv4Addr = "192.168.122.248".parse().unwrap();
    let reserved = |flags: u32| reserved_for(&network, flags, mac);
    let persistent = virt::sys::VIR_NETWORK_XML_INACTIVE;
    let _ = release_reservation(&connection, uri, "default", first);
    let _ = release_reservation(&connection, uri, "default", second);

    assert!(reserve_address(&connection, uri, "default", mac, first).unwrap());
    assert!(!reserve_address(&connection, uri, "default", mac, first).unwrap());
    assert_eq!(reserved(0), ["192.168.122.247"]);
    assert_eq!(reserved(persistent), ["192.168.122.247"]);
    assert!(reserve_address(&connection, uri, "default", mac, second).unwrap());
    assert_eq!(reserved(0), ["192.168.122.248"]);
    assert_eq!(reserved(persistent), ["192.168.122.248"]);
    assert!(release_reservation(&connection, uri, "default", second).unwrap());
    assert!(!release_reservation(&connection, uri, "default", second).unwrap());
    assert!(reserved(0).is_empty() && reserved(persistent).is_empty());
}

/// Pinned leases on the default network, several runs at once (each its own libvirt client):
/// every MAC gets an address of its own inside the network's DHCP range and away from the range
/// kept for static addresses, live and persistent; pinning again changes nothing; releasing
/// removes the pins and keeps a reservation named to be kept.
#[test]
fn leases_pinned_at_once_get_addresses_of_their_own_and_go_when_released() {
    use trog::libvirt::lease_pin::{pin_lease, release_pins, KeptApart};
    use trog::libvirt::reservation::reserve_address;
    use trog::model::address_range::AddressRange;
    let uri = "qemu:///system";
    let macs: Vec<String> = (0..6)
        .map(|n| format!("52:54:00:7e:57:{:02x}", 0x10 + n))
        .collect();
    let kept = AddressRange::parse("192.168.122.100-192.168.122.249/24").unwrap();
    let kept_apart = KeptApart {
        ranges: vec![kept],
        held: Vec::new(),
    };
    let connection = virt::connect::Connect::open(Some(uri)).unwrap();
    for mac in &macs {
        release_pins(&connection, uri, "default", mac, &[]).unwrap();
    }
    let pinned: Vec<std::net::Ipv4Addr> = std::thread::scope(|scope| {
        let runs: Vec<_> = macs
            .iter()
            .map(|mac| {
                let kept_apart = kept_apart.clone();
                scope.spawn(move || {
                    let connection = virt::connect::Connect::open(Some(uri)).unwrap();
                    let pinned = pin_lease(&connection, uri, "default", mac, &kept_apart)
                        .unwrap()
                        .expect("the default network hands out leases");
                    assert!(pinned.made, "{mac}");
                    pinned.address
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let distinct: std::collections::BTreeSet<_> = pinned.iter().collect();
    assert_eq!(distinct.len(), macs.len(), "{pinned:?}");
    for address in &pinned {
        assert!(!kept.contains(*address), "{address}");
        assert!(address.octets()[..3] == [192, 168, 122] && address.octets()[3] >= 2);
    }
    let network = connection.lookup_network_by_name("default").unwrap();
    let reserved = |flags: u32, mac: &str| reserved_for(&network, flags, mac);
    for (mac, address) in macs.iter().zip(&pinned) {
        for flags in [0, virt::sys::VIR_NETWORK_XML_INACTIVE] {
            assert_eq!(reserved(flags, mac), [address.to_string()]);
        }
        let again = pin_lease(&connection, uri, "default", mac, &kept_apart)
            .unwrap()
            .unwrap();
        assert_eq!((again.address, again.made), (*address, false));
    }

    // The first MAC's static address (as `provision` reserves one) replaces its pin, and a
    // release that keeps it leaves it.
    let fixed: std::net::Ipv4Addr = "192.168.122.246".parse().unwrap();
    assert!(reserve_address(&connection, uri, "default", &macs[0], fixed).unwrap());
    assert!(
        release_pins(&connection, uri, "default", &macs[0], &[fixed])
            .unwrap()
            .is_empty()
    );
    assert_eq!(reserved(0, &macs[0]), [fixed.to_string()]);
    assert_eq!(
        release_pins(&connection, uri, "default", &macs[0], &[]).unwrap(),
        [fixed]
    );
    for (mac, address) in macs.iter().zip(&pinned).skip(1) {
        assert_eq!(
            release_pins(&connection, uri, "default", mac, &[]).unwrap(),
            [*address]
        );
        assert!(
            reserved(0, mac).is_empty()
                && reserved(virt::sys::VIR_NETWORK_XML_INACTIVE, mac).is_empty()
        );
    }
}
