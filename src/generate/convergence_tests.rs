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
        "timezone" => "Europe/Berlin",
        "network" => "lab",
        "bridge" => "br0",
        "gateway" => "192.0.2.254",
        "address_range" => "192.0.2.100-192.0.2.199/24",
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
            Convergence::BuildTime | Convergence::Trog => !shape && !payload,
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
        }),
        root_volume: volume(desired.root_volume.capacity),
        seed_volume: None,
        data_volume: desired
            .data_volume
            .as_ref()
            .and_then(|data| volume(data.capacity)),
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
    let observed = built_as(&desired_guest(&domain, &before, &settings, &hypervisor));
    for key in every_global_key(&cookbook)
        .into_iter()
        .filter(|key| convergence(key) == Some(Convergence::Definition))
    {
        let own = format!("{key}: {}", changed_value(&key).unwrap());
        let after = generated(&cookbook, &own);
        let settings = config(&cookbook, &own).settings;
        let desired = desired_guest(&domain, &after, &settings, &hypervisor);
        let steps = plan(&desired, &observed, Resolution::default()).unwrap();
        let kinds: Vec<&str> = steps
            .actions
            .iter()
            .map(|action| match action {
                Action::StopDomain => "stop",
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
        field(
            "seed_iso_sha256",
            &generated.seed_iso_without_host_key_sha256
        ),
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
    let desired = desired_guest(&domain, &generated, &settings, &hypervisor);
    let (value, root_disk) = fingerprint_before_machine_settings(&generated, &settings);
    let mut observed = built_as(&desired);
    let tag = observed.domain.as_mut().unwrap().tag.as_mut().unwrap();
    tag.shape_fingerprint = value;
    tag.boot_fingerprint = root_disk;
    let steps = plan(&desired, &observed, Resolution::default()).unwrap();
    assert!(steps.is_converged(), "{steps}");
}
