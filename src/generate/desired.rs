//! From a generated guest and the hypervisor it goes to, what the planner and libvirt are given:
//! the [`DesiredGuest`] the plan converges to, and the [`DomainSpec`] its XML is rendered from.
//! Pure.

use crate::config::installation_id::InstallationId;
use crate::config::settings::GuestSettings;
use crate::generate::GeneratedGuest;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::model::units::Bytes;
use crate::plan::{resource_names, DesiredDisk, DesiredGuest, DesiredVolume, GuestTag};
use crate::render::domain_xml::{DiskSpec, DomainSpec, ExtraDiskSpec};
use crate::render::extra_disks::target_devices;
use crate::render::fingerprint::shape_on_hypervisor;
use crate::render::machine_definition::MachineDefinition;
use crate::render::network_filter::interface_filter;
use serde_json::Value;
use std::net::IpAddr;

/// Where the serial console of a guest is copied to on its hypervisor: read back when a guest
/// never answers, and by `debug_boot --fetch`.
pub fn serial_log_path(domain: &DomainName) -> String {
    format!("/var/log/libvirt/qemu/{domain}-serial.log")
}

/// A stable UUID for a guest name, so a domain redefined from new XML keeps the UUID libvirt
/// knows it by (libvirt refuses a redefinition that changes it).
pub fn domain_uuid(domain: &DomainName) -> uuid::Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("trog domain {domain}"));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// The data volume the `vm` recipe declares (`data_volume_size`), if any.
fn data_volume_size(machine: &Value) -> Option<Bytes> {
    machine
        .get("data_volume_size")
        .and_then(Value::as_str)
        .and_then(|text| Bytes::parse_disk(text).ok())
}

pub fn desired_guest(
    domain: &DomainName,
    generated: &GeneratedGuest,
    settings: &GuestSettings,
    hypervisor: &HypervisorConfig,
    installation: Option<&InstallationId>,
) -> DesiredGuest {
    DesiredGuest {
        domain: domain.clone(),
        pool_name: hypervisor.pool_name.clone(),
        pool_path: hypervisor.pool_path.display().to_string(),
        base_image_volume: resource_names::base_image_volume(&generated.image_digest.hex),
        base_image_digest: generated.image_digest.hex.clone(),
        partial_base_image_volume: resource_names::partial_base_image_volume(
            &generated.image_digest.hex,
            &crate::lock::host_name(),
        ),
        base_image_source: generated.image_url.clone(),
        root_volume: DesiredVolume {
            name: resource_names::root_volume(domain),
            capacity: settings.size,
            declared_at: None,
        },
        seed_volume: resource_names::seed_volume(domain),
        seed_sha256: generated.seed_iso.sha256_hex.clone(),
        equivalent_seed_sha256s: generated.equivalent_seed_sha256s.clone(),
        data_volume: data_volume_size(&generated.machine).map(|capacity| DesiredVolume {
            name: resource_names::data_volume(domain),
            capacity,
            declared_at: generated.data_volume_declared_at.clone(),
        }),
        extra_disks: generated
            .extra_disks
            .iter()
            .map(|disk| DesiredDisk {
                name: disk.name.clone(),
                volume: resource_names::extra_disk_volume(domain, &disk.name),
                capacity: disk.capacity,
                bus: disk.bus.as_str().to_string(),
                declared_at: disk.written_at.clone(),
            })
            .collect(),
        boot_fingerprint: generated.fingerprint.root_disk.clone(),
        shape_fingerprint: shape_on_hypervisor(
            &generated.fingerprint.value,
            hypervisor.partition.as_deref(),
        ),
        domain_type: hypervisor.domain_type,
        payload_digest: generated.payload.sha256_hex.clone(),
        installation: installation.map(|id| id.as_str().to_string()),
    }
}

fn disk(pool: &str, volume: &str, machine: &MachineDefinition) -> DiskSpec {
    let mut disk = DiskSpec::qcow2(pool, volume);
    disk.cache = machine.disk_cache;
    disk.discard_unmap = machine.disk_discard_unmap;
    disk
}

/// The extra disks as the domain attaches them, in their declared order.
pub fn extra_disk_specs(desired: &DesiredGuest, generated: &GeneratedGuest) -> Vec<ExtraDiskSpec> {
    let machine = &generated.machine_definition;
    let devices = target_devices(&generated.extra_disks, machine.disk_bus);
    generated
        .extra_disks
        .iter()
        .zip(devices)
        .map(|(declared, target_dev)| ExtraDiskSpec {
            disk: disk(
                &desired.pool_name,
                &resource_names::extra_disk_volume(&desired.domain, &declared.name),
                machine,
            ),
            bus: declared.bus,
            target_dev,
            serial: declared.serial(),
        })
        .collect()
}

/// What the guest's hypervisor has to offer it, from its own system.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HypervisorOffers {
    /// An emulated TPM: only where the hypervisor has a real TPM and swtpm.
    pub tpm: bool,
    /// The virtiofsd that serves the guest's shared folders, when it has any.
    pub virtiofsd: Option<String>,
}

/// The domain as libvirt will define it, with what the hypervisor offers it; `tag` is what the
/// plan records; `attaches_seed` is false for a guest whose seed is retired (its first boot is
/// over) and stays so.
pub fn domain_spec(
    desired: &DesiredGuest,
    generated: &GeneratedGuest,
    settings: &GuestSettings,
    hypervisor: &HypervisorConfig,
    offers: HypervisorOffers,
    tag: GuestTag,
    attaches_seed: bool,
) -> DomainSpec {
    let machine = &generated.machine_definition;
    DomainSpec {
        name: desired.domain.clone(),
        uuid: domain_uuid(&desired.domain),
        memory: settings.memory,
        vcpus: settings.cpus,
        domain_type: hypervisor.domain_type,
        cpu_mode: generated.cpu_mode.clone(),
        machine_type: machine.machine_type.clone(),
        disk_bus: machine.disk_bus,
        firmware: machine.firmware,
        root_disk: disk(&desired.pool_name, &desired.root_volume.name, machine),
        data_disk: desired
            .data_volume
            .as_ref()
            .map(|volume| disk(&desired.pool_name, &volume.name, machine)),
        extra_disks: extra_disk_specs(desired, generated),
        seed_volume: attaches_seed.then(|| desired.seed_volume.clone()),
        mac_address: generated.mac_address,
        network: machine.network.clone(),
        network_filter: interface_filter(
            settings.tenant.as_ref(),
            generated.mac_address,
            &settings
                .ips
                .iter()
                .filter_map(|cidr| match cidr.address {
                    IpAddr::V4(address) => Some(address),
                    IpAddr::V6(_) => None,
                })
                .collect::<Vec<_>>(),
            &settings
                .ips
                .iter()
                .filter_map(|cidr| match cidr.address {
                    IpAddr::V6(address) => Some(address),
                    IpAddr::V4(_) => None,
                })
                .collect::<Vec<_>>(),
        ),
        serial_log_path: serial_log_path(&desired.domain),
        tpm: offers.tpm,
        shared_folders: machine.shared_folders.clone(),
        virtiofsd: offers.virtiofsd,
        partition: hypervisor.partition.clone(),
        tag,
        installation: desired.installation.clone(),
        direct_boot: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uuid_is_stable_and_differs_between_guests() {
        let one = DomainName::parse("one.example.test").unwrap();
        let two = DomainName::parse("two.example.test").unwrap();
        assert_eq!(domain_uuid(&one), domain_uuid(&one));
        assert_ne!(domain_uuid(&one), domain_uuid(&two));
    }
}
