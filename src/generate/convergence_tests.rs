//! For every setting `_global` accepts (the schema's and the shipped distro and machine recipes'
//! arguments), a guest is generated before and after a change of it, and the digests the planner
//! compares must move as `config::convergence` says: the class a setting is documented with is
//! the plan a change of it gets.

use super::*;
use crate::config::convergence::{convergence, Convergence};
use crate::config::global_schema::GLOBAL_SETTINGS;
use crate::config::guest::{resolve_guest, GuestConfig};
use crate::config::recipes_file::{parse_domain_file, parse_recipes_yaml};
use crate::config::settings::GuestSettings;
use crate::cookbook::load::{load_cookbook, Cookbook};
use crate::credentials::Secret;
use crate::generate::desired::desired_guest;
use crate::model::hypervisor::{HypervisorConfig, LibvirtUri};
use crate::model::names::{DomainName, HypervisorName};
use crate::plan::{plan, GuestTag, ObservedDomain, ObservedGuest, ObservedVolume, PoolState};
use crate::plan::{Action, Resolution};
use std::path::Path;

const GUEST: &str = "www.example.test";

/// Static addresses, mirrors and a data volume, so the settings that only matter with them
/// (resolvers, search domains, gateway, the fallback mirrors, the data volume's mount point) are
/// used; the guest's nginx serves its aliases.
const BASE: &str = "_base:
  _global:
    admin_user: someadmin
    contact_email: ops@example.test
    distro: debian
    mirror: http://deb.example.test/debian
    security_mirror: http://deb.example.test/debian-security
    data_volume_size: 10G
    ips: [192.0.2.10/24]
    gateway: 192.0.2.1
    resolvers: [192.0.2.53]
    search_domains: [lan]
";

/// A value other than the base configuration's for every key, as YAML.
fn changed_value(key: &str) -> Option<&'static str> {
    Some(match key {
        "admin_user" => "otheradmin",
        "contact_email" => "other@example.test",
        "distro" => "ubuntu",
        "release" => "trixie",
        "mirror" => "http://mirror.example.test/debian",
        "security_mirror" => "http://mirror.example.test/debian-security",
        "fallback_mirrors" => "['http://fallback.example.test/debian']",
        "fallback_security_mirrors" => "['http://fallback.example.test/debian-security']",
        "cache" => "http://cache.example.test:3128",
        "keepass_key_file" => "other.key",
        "backup_dir" => "elsewhere",
        "backup_retention_days" => "7",
        "bake_packages" => "true",
        "baked_image_max_age_days" => "30",
        "timezone" => "Europe/Berlin",
        "network" => "lab",
        "bridge" => "br0",
        "gateway" => "192.0.2.254",
        "address_range" => "192.0.2.100-192.0.2.199/24",
        "disks" => "[{name: db, size: 2G, mount: /srv/db}]",
        "tenant" => "shop",
        "resolvers" => "[192.0.2.54]",
        "search_domains" => "[corp]",
        "ips" => "[192.0.2.11/24]",
        "size" => "20G",
        "memory" => "2048",
        "cpus" => "2",
        "image" => "{url: 'file:///images/other.qcow2', sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        "packages" => "[htop]",
        "hypervisor" => "other",
        "cpu_mode" => "host-model",
        "aliases" => "[alias.example.test]",
        "libvirt_uri" => "'qemu:///system'",
        "machine_type" => "pc",
        "firmware" => "uefi",
        "disk_bus" => "scsi",
        "disk_cache" => "writeback",
        "disk_discard" => "ignore",
        "data_volume_size" => "20G",
        "shared_folders" => "[{name: site, source: /srv/share/site, mount: /srv/site}]",
        "data_mount" => "/srv/other",
        "upgrade" => "false",
        "depends_on" => "web.example.test",
        "existing_host" => "192.0.2.7",
        _ => return None,
    })
}

struct NoSecrets;

impl SecretLookup for NoSecrets {
    fn resolve(
        &mut self,
        reference: &SecretReference,
    ) -> Result<Secret, Box<dyn std::error::Error + Send + Sync>> {
        panic!("no secret is referenced here, yet {reference:?} was asked for")
    }
}

/// The shipped recipes, with a second Debian release (a copy of the default one) so that a
/// change of `release` can be made at all.
fn shipped_cookbook() -> Cookbook {
    let shipped = load_cookbook(&Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes"))
        .expect("the shipped recipes load");
    let recipes = shipped.names().into_iter().map(|name| {
        let mut recipe = shipped.get_str(name).unwrap().clone();
        if let Some(distro) = recipe.manifest.distro.as_mut() {
            let default = distro.releases[&distro.default_release].clone();
            distro.releases.insert("trixie".to_string(), default);
        }
        recipe
    });
    Cookbook::from_recipes(recipes.collect::<Vec<_>>()).unwrap()
}

/// The guest's own file, with one setting of its `_global` (the base configuration's unchanged:
/// one vCPU is the default).
const UNCHANGED: &str = "cpus: 1";

fn config(cookbook: &Cookbook, own: &str) -> GuestConfig {
    let domain = DomainName::parse(GUEST).unwrap();
    resolve_guest(
        &parse_recipes_yaml(Path::new("recipes.yaml"), BASE).unwrap(),
        &parse_domain_file(
            Path::new("www.example.test.yaml"),
            &domain,
            &format!("www.example.test:\n  _global:\n    {own}\n  nginx: {{}}\n"),
        )
        .unwrap(),
        &recipe_settings(cookbook),
    )
    .unwrap_or_else(|error| panic!("{own}: {error}"))
}

fn generated(cookbook: &Cookbook, own: &str) -> GeneratedGuest {
    let config = config(cookbook, own);
    generate(
        &config,
        cookbook,
        &SiteFiles::default(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH4 test",
        None,
        &mut NoSecrets,
    )
    .unwrap_or_else(|error| panic!("{own}: {error}"))
}

fn every_global_key(cookbook: &Cookbook) -> Vec<String> {
    let mut keys: Vec<String> = GLOBAL_SETTINGS
        .iter()
        .map(|setting| setting.key.to_string())
        .chain(recipe_settings(cookbook))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn every_setting_global_accepts_is_classified() {
    let unclassified: Vec<String> = every_global_key(&shipped_cookbook())
        .into_iter()
        .filter(|key| convergence(key).is_none())
        .collect();
    assert!(
        unclassified.is_empty(),
        "say in config/convergence.rs how a change of these reaches a built guest: {unclassified:?}"
    );
}

#[test]
fn a_change_of_every_setting_moves_what_its_class_says() {
    let cookbook = shipped_cookbook();
    let before = generated(&cookbook, UNCHANGED);
    let mut wrong = Vec::new();
    for key in every_global_key(&cookbook) {
        let class = convergence(&key)
            .unwrap_or_else(|| panic!("`{key}` has no class in config/convergence.rs"));
        let value = changed_value(&key)
            .unwrap_or_else(|| panic!("give `{key}` a changed value in this test"));
        let after = generated(&cookbook, &format!("{key}: {value}"));
        let root_disk = before.fingerprint.root_disk != after.fingerprint.root_disk;
        let shape = before.fingerprint.value != after.fingerprint.value;
        let payload = before.payload.sha256_hex != after.payload.sha256_hex;
        let data_volume = before.machine["data_volume_size"] != after.machine["data_volume_size"];
        let as_documented = match class {
            Convergence::RootDisk => root_disk,
            Convergence::Definition => shape && !root_disk,
            Convergence::Finish => payload && !shape,
            Convergence::DataVolume => data_volume && !shape,
            Convergence::ExtraDisks => payload && !shape && !root_disk,
            Convergence::BuildTime
            | Convergence::Pin
            | Convergence::GuestUri
            | Convergence::NextRootDisk
            | Convergence::Trog => !shape && !payload,
            // Off its own VM, the guest runs no `vm` recipe: its payload is another.
            Convergence::WhereItRuns => payload,
        };
        if !as_documented {
            wrong.push(format!(
                "{key} ({class:?}): root disk {root_disk}, shape {shape}, payload {payload}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// What a hypervisor holds of a guest built, finished and running as `desired` says.
fn built_as(desired: &crate::plan::DesiredGuest) -> ObservedGuest {
    let volume = |capacity| {
        Some(ObservedVolume {
            capacity,
            sha256: None,
        })
    };
    ObservedGuest {
        pool: PoolState::Active,
        base_image_present: true,
        partial_base_image_present: false,
        domain: Some(ObservedDomain {
            tag: Some(GuestTag {
                payload_digest: Some(desired.payload_digest.clone()),
                ..desired.tag_before_finish()
            }),
            running: true,
            autostart: true,
            snapshots: Vec::new(),
            // Past its first boot, its seed retired.
            seed_attached: false,
            shares_folders: false,
            disk_pools: Vec::new(),
            domain_type: None,
        }),
        root_volume: volume(desired.root_volume.capacity),
        seed_volume: None,
        data_volume: desired
            .data_volume
            .as_ref()
            .and_then(|data| volume(data.capacity)),
        extra_disks: crate::plan::ObservedExtraDisks {
            volumes: desired
                .extra_disks
                .iter()
                .map(|disk| (disk.volume.clone(), volume(disk.capacity).unwrap()))
                .collect(),
            defined: desired
                .extra_disks
                .iter()
                .map(|disk| (disk.volume.clone(), disk.bus.clone()))
                .collect(),
            running: desired
                .extra_disks
                .iter()
                .map(|disk| disk.volume.clone())
                .collect(),
        },
    }
}

#[test]
fn the_plan_for_a_changed_definition_setting_redefines_and_restarts_without_a_new_disk() {
    let cookbook = shipped_cookbook();
    let hypervisor = HypervisorConfig::with_defaults(
        HypervisorName::parse("here").unwrap(),
        LibvirtUri::parse("test:///default").unwrap(),
    );
    let domain = DomainName::parse(GUEST).unwrap();
    let before = generated(&cookbook, UNCHANGED);
    let settings = config(&cookbook, UNCHANGED).settings;
    let observed = built_as(&desired_guest(
        &domain,
        &before,
        &settings,
        &hypervisor,
        None,
    ));
    for key in every_global_key(&cookbook)
        .into_iter()
        .filter(|key| convergence(key) == Some(Convergence::Definition))
    {
        let own = format!("{key}: {}", changed_value(&key).unwrap());
        let after = generated(&cookbook, &own);
        let settings = config(&cookbook, &own).settings;
        let desired = desired_guest(&domain, &after, &settings, &hypervisor, None);
        let steps = plan(&desired, &observed, Resolution::default()).unwrap();
        let kinds: Vec<&str> = steps
            .actions
            .iter()
            .map(|action| match action {
                Action::StopDomain | Action::PowerOffDomain => "stop",
                Action::DefineDomain { .. } => "define",
                Action::StartDomain => "start",
                Action::WaitForSsh => "wait",
                Action::Finish { .. } => "finish",
                _ => "other",
            })
            .collect();
        let expected: &[&str] = if desired.payload_digest == before.payload.sha256_hex {
            &["stop", "define", "start", "wait"]
        } else {
            &["stop", "define", "start", "wait", "finish"]
        };
        assert_eq!(kinds, expected, "{key}:\n{steps}");
    }
}

/// The provision fingerprint as trog recorded it before the machine's definition was part of it
/// (`render::fingerprint`'s encoding, written out by hand).
fn fingerprint_before_machine_settings(
    generated: &GeneratedGuest,
    settings: &GuestSettings,
) -> (String, String) {
    use sha2::{Digest, Sha256};
    let field = |name: &str, value: &str| format!("{name}:{}:{value}\n", value.len());
    let root_disk = format!(
        "trog-provision-fingerprint-v1\n{}{}{}{}{}",
        field(
            &format!("image_{}", generated.image_digest.algorithm.name()),
            &generated.image_digest.hex
        ),
        field("distro", settings.distro.as_str()),
        field("release", &generated.resolved.release),
        field("seed_iso_sha256", &generated.seed_identity_sha256),
        field("disk_size_bytes", &settings.size.0.to_string()),
    );
    let shape = format!(
        "{}{}{}",
        field("memory_mib", &settings.memory.0.to_string()),
        field("vcpus", &settings.cpus.to_string()),
        field("cpu_mode", generated.cpu_mode.as_declared()),
    );
    (
        hex::encode(Sha256::digest(format!("{root_disk}{shape}").as_bytes())),
        hex::encode(Sha256::digest(root_disk.as_bytes())),
    )
}

#[test]
fn a_guest_recorded_before_the_machine_settings_were_fingerprinted_is_still_converged() {
    let cookbook = shipped_cookbook();
    let hypervisor = HypervisorConfig::with_defaults(
        HypervisorName::parse("here").unwrap(),
        LibvirtUri::parse("test:///default").unwrap(),
    );
    let domain = DomainName::parse(GUEST).unwrap();
    let generated = generated(&cookbook, UNCHANGED);
    let settings = config(&cookbook, UNCHANGED).settings;
    let desired = desired_guest(&domain, &generated, &settings, &hypervisor, None);
    let (value, root_disk) = fingerprint_before_machine_settings(&generated, &settings);
    let mut observed = built_as(&desired);
    let tag = observed.domain.as_mut().unwrap().tag.as_mut().unwrap();
    tag.shape_fingerprint = value;
    tag.boot_fingerprint = root_disk;
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert!(steps.is_converged(), "{steps}");
}

/// The kinds of a plan's actions, for comparing plans by their steps.
fn step_kinds(steps: &crate::plan::Plan) -> Vec<&'static str> {
    steps
        .actions
        .iter()
        .map(|action| match action {
            Action::StopDomain | Action::PowerOffDomain => "stop",
            Action::DefineDomain { .. } => "define",
            Action::StartDomain => "start",
            Action::WaitForSsh => "wait",
            Action::Finish { .. } => "finish",
            Action::CreateExtraDisk { .. } => "create disk",
            Action::AttachExtraDisk { .. } => "attach disk",
            Action::DetachExtraDisk { .. } => "detach disk",
            Action::DeleteVolume { .. } => "delete volume",
            Action::CreateRootVolume { .. } => "create root",
            _ => "other",
        })
        .collect()
}

fn here() -> HypervisorConfig {
    HypervisorConfig::with_defaults(
        HypervisorName::parse("here").unwrap(),
        LibvirtUri::parse("test:///default").unwrap(),
    )
}

fn desired_for(cookbook: &Cookbook, own: &str) -> crate::plan::DesiredGuest {
    let domain = DomainName::parse(GUEST).unwrap();
    desired_guest(
        &domain,
        &generated(cookbook, own),
        &config(cookbook, own).settings,
        &here(),
        None,
    )
}

const TWO_DISKS: &str = "disks: [{name: db, size: 2G, mount: /srv/db}, {name: logs, size: 1G, mount: /srv/logs, bus: scsi}]";

#[test]
fn a_disk_added_to_a_running_guest_is_made_attached_and_finished_without_a_restart() {
    let cookbook = shipped_cookbook();
    let observed = built_as(&desired_for(&cookbook, UNCHANGED));
    let desired = desired_for(&cookbook, TWO_DISKS);
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert_eq!(
        step_kinds(&steps),
        [
            "create disk",
            "create disk",
            "attach disk",
            "attach disk",
            "wait",
            "finish"
        ],
        "{steps}"
    );
    let text = steps.to_string();
    assert!(
        text.contains("create disk db: volume www.example.test-disk-db.qcow2 of 2GB"),
        "{text}"
    );
    assert!(
        text.contains("attach disk logs (www.example.test-disk-logs.qcow2) to the running guest and its definition"),
        "{text}"
    );
    // Once made and attached, the guest is converged.
    let steps = plan(&desired, &built_as(&desired), Resolution::default()).unwrap();
    assert!(steps.is_converged(), "{steps}");
}

#[test]
fn a_disk_added_to_a_stopped_guest_goes_into_its_definition_before_it_starts() {
    let cookbook = shipped_cookbook();
    let mut observed = built_as(&desired_for(&cookbook, UNCHANGED));
    observed.domain.as_mut().unwrap().running = false;
    let desired = desired_for(&cookbook, "disks: [{name: db, size: 2G, mount: /srv/db}]");
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert_eq!(
        step_kinds(&steps),
        ["create disk", "attach disk", "start", "wait", "finish"],
        "{steps}"
    );
    assert!(
        steps.to_string().contains("to the guest's definition"),
        "{steps}"
    );
}

#[test]
fn a_root_disk_rebuild_keeps_the_disks() {
    let cookbook = shipped_cookbook();
    let before = desired_for(&cookbook, TWO_DISKS);
    let observed = built_as(&before);
    let desired = desired_for(
        &cookbook,
        &format!("{TWO_DISKS}\n    timezone: Europe/Berlin"),
    );
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    let kinds = step_kinds(&steps);
    assert!(kinds.contains(&"create root"), "{steps}");
    assert!(
        !kinds.iter().any(|kind| kind.contains("disk")),
        "the disks are neither made again nor attached: the new definition has them\n{steps}"
    );
    for action in &steps.actions {
        if let Action::DeleteVolume { volume, .. } = action {
            assert!(!volume.contains("-disk-"), "{steps}");
        }
    }
}

#[test]
fn a_disk_no_longer_listed_is_detached_from_the_definition_and_kept() {
    let cookbook = shipped_cookbook();
    let observed = built_as(&desired_for(&cookbook, TWO_DISKS));
    let desired = desired_for(&cookbook, "disks: [{name: db, size: 2G, mount: /srv/db}]");
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert_eq!(
        step_kinds(&steps),
        ["detach disk", "wait", "finish"],
        "{steps}"
    );
    let text = steps.to_string();
    assert!(
        text.contains("detach volume www.example.test-disk-logs.qcow2 from the guest's definition"),
        "{text}"
    );
    assert!(
        text.contains("`trog destroy --purge` deletes it with the guest"),
        "{text}"
    );
    assert!(
        text.contains("virsh vol-delete --pool trog www.example.test-disk-logs.qcow2"),
        "{text}"
    );
}

#[test]
fn a_disk_of_another_size_is_refused_with_where_it_is_declared() {
    let cookbook = shipped_cookbook();
    let observed = built_as(&desired_for(&cookbook, TWO_DISKS));
    for (size, says) in [
        ("1G", "never shrunk"),
        ("4G", "growing a disk is not supported"),
    ] {
        let desired = desired_for(
            &cookbook,
            &format!("disks: [{{name: db, size: {size}, mount: /srv/db}}, {{name: logs, size: 1G, mount: /srv/logs, bus: scsi}}]"),
        );
        let refused = plan(
            &desired,
            &observed,
            Resolution {
                destroy_data: true,
                force: true,
                ..Resolution::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(refused.contains(&format!("disk db (www.example.test-disk-db.qcow2) holds 2GB but {size}B is declared at www.example.test.yaml:3:")), "{refused}");
        assert!(refused.contains(says), "{refused}");
        assert!(refused.contains("declare 2GB"), "{refused}");
    }
}

#[test]
fn a_disk_moved_to_another_bus_redefines_and_restarts() {
    let cookbook = shipped_cookbook();
    let observed = built_as(&desired_for(&cookbook, TWO_DISKS));
    let desired = desired_for(
        &cookbook,
        "disks: [{name: db, size: 2G, mount: /srv/db, bus: scsi}, {name: logs, size: 1G, mount: /srv/logs, bus: scsi}]",
    );
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert_eq!(
        step_kinds(&steps),
        ["stop", "define", "start", "wait"],
        "{steps}"
    );
}

#[test]
fn the_disks_reach_the_makefile_and_the_domain() {
    let cookbook = shipped_cookbook();
    let guest = generated(&cookbook, TWO_DISKS);
    assert!(
        guest.makefile.contains("ls /dev/disk/by-id/*trog-disk-db "),
        "{}",
        guest.makefile
    );
    assert!(
        guest.makefile.contains("mkfs.ext4 -q"),
        "{}",
        guest.makefile
    );
    assert!(
        guest.makefile.contains("defaults,nofail"),
        "{}",
        guest.makefile
    );
    let desired = desired_for(&cookbook, TWO_DISKS);
    let specs = crate::generate::desired::extra_disk_specs(&desired, &guest);
    let devices: Vec<(&str, &str, String)> = specs
        .iter()
        .map(|spec| {
            (
                spec.target_dev.as_str(),
                spec.bus.as_str(),
                spec.serial.clone(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            ("vdc", "virtio", "trog-disk-db".to_string()),
            ("sdb", "scsi", "trog-disk-logs".to_string())
        ]
    );
}

#[test]
fn every_disk_problem_names_its_file_line_and_path_together() {
    let cookbook = shipped_cookbook();
    let own = "disks: [{name: db, size: 2G, mount: /srv/db}, {name: db, size: 0, mount: /}]";
    let error = resolve_guest_recipes(&config(&cookbook, own), &cookbook).unwrap_err();
    let text = error.to_string();
    for expected in [
        "www.example.test.yaml:3:52: `_global.disks[1].name`: disk db is declared twice (the first is disks[0])",
        "www.example.test.yaml:3:62: `_global.disks[1].size`: 0GB is smaller",
        "www.example.test.yaml:3:71: `_global.disks[1].mount`: / is the guest's own system",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    assert_eq!(
        crate::diagnose::Diagnose::exit_status(&error),
        crate::exit_status::ExitStatus::Configuration
    );
}

#[test]
fn a_data_mount_over_the_guests_system_is_refused_where_it_is_written() {
    let cookbook = shipped_cookbook();
    for (own, says) in [
        (
            "data_volume_size: 2G\n    data_mount: /etc",
            "www.example.test.yaml:4:5: `_global.data_mount`: /etc is the guest's own system",
        ),
        (
            "data_mount: /usr/",
            "www.example.test.yaml:3:5: `_global.data_mount`: /usr is the guest's own system",
        ),
        ("data_mount: /", "/ is the guest's own system"),
        ("data_mount: /srv/../var", "`..`"),
        ("data_mount: \"/srv/my data\"", "not a plain path"),
    ] {
        let error = resolve_guest_recipes(&config(&cookbook, own), &cookbook).unwrap_err();
        assert!(error.to_string().contains(says), "{own}: {error}");
        assert!(matches!(error, GenerateError::DataMount { .. }), "{own}");
        assert_eq!(
            crate::diagnose::Diagnose::exit_status(&error),
            crate::exit_status::ExitStatus::Configuration
        );
    }
    for fine in ["data_mount: /srv/data", "data_mount: /var/lib/site"] {
        assert!(
            resolve_guest_recipes(&config(&cookbook, fine), &cookbook).is_ok(),
            "{fine}"
        );
    }
}

/// Over a baked image cloud-init has nothing to install, so such a guest's seed leaves out its
/// package pass; turning `bake_packages` on or off still makes no new root disk, and a guest
/// whose seed stays attached (under snapshots) keeps the one it was built from.
#[test]
fn turning_bake_packages_on_or_off_keeps_the_root_disk_and_the_attached_seed() {
    let cookbook = shipped_cookbook();
    let hypervisor = HypervisorConfig::with_defaults(
        HypervisorName::parse("here").unwrap(),
        LibvirtUri::parse("test:///default").unwrap(),
    );
    let domain = DomainName::parse(GUEST).unwrap();
    let plain = generated(&cookbook, UNCHANGED);
    let baked = generated(&cookbook, "bake_packages: true");
    assert!(plain.seed.user_data.contains("package_update"));
    assert!(!baked.seed.user_data.contains("package_update"));
    assert_ne!(plain.seed_iso.sha256_hex, baked.seed_iso.sha256_hex);
    assert_eq!(plain.seed_identity_sha256, baked.seed_identity_sha256);
    assert_eq!(plain.fingerprint.root_disk, baked.fingerprint.root_disk);

    for (built, now, own) in [
        (&plain, &baked, "bake_packages: true"),
        (&baked, &plain, UNCHANGED),
    ] {
        assert!(now
            .equivalent_seed_sha256s
            .contains(&built.seed_iso.sha256_hex));
        let settings = config(&cookbook, own).settings;
        let desired = desired_guest(&domain, now, &settings, &hypervisor, None);
        let mut observed = built_as(&desired);
        let attached = observed.domain.as_mut().unwrap();
        attached.seed_attached = true;
        attached.snapshots = vec!["before-upgrade".into()];
        observed.seed_volume = Some(ObservedVolume {
            capacity: crate::model::units::Bytes(4096),
            sha256: Some(built.seed_iso.sha256_hex.clone()),
        });
        let steps = plan(&desired, &observed, Resolution::default()).unwrap();
        assert!(steps.actions.is_empty(), "{own}: {:?}", steps.actions);
    }
}

/// A seed of an earlier revision ran the config stage's modules in a stage of their own and left
/// networkd the lease's host name: neither changes what the root disk holds that matters. A
/// guest built from such a seed keeps its disk (the identity is taken at the first revision) and,
/// while its seed is still attached, keeps that seed too.
#[test]
fn a_seed_of_an_earlier_revision_makes_no_new_root_disk() {
    // A DHCP guest: its networkd file differs between the revisions too.
    let input = SeedInput {
        addresses: Vec::new(),
        gateway: None,
        ..crate::render::cloud_init::example_seed_input()
    };
    let earlier_input = SeedInput {
        revision: SeedRevision::SeparateConfigStage,
        ..input.clone()
    };
    let seed = render_seed(&input).unwrap();
    let earlier = render_seed(&earlier_input).unwrap();
    assert_ne!(seed.user_data, earlier.user_data);
    let digest = |seed: &SeedFiles| seed_iso_of(seed, &seed.user_data).unwrap().sha256_hex;

    let (identity, equivalent) = seed_identities(&input, &digest(&seed)).unwrap();
    let (earlier_identity, earlier_equivalent) =
        seed_identities(&earlier_input, &digest(&earlier)).unwrap();
    assert_eq!(identity, earlier_identity);
    assert!(equivalent.contains(&digest(&earlier)));
    assert!(earlier_equivalent.contains(&digest(&seed)));
    assert!(!equivalent.contains(&digest(&seed)));
}
