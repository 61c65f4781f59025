//! The machine settings a guest's domain definition is made of, read once from the `vm` recipe's
//! effective arguments and `_global`: the domain XML is rendered from them and the provision
//! fingerprint covers them, so what converges and what is defined cannot drift apart.

use crate::render::domain_xml::{DiskBus, DiskCache, Firmware, NetworkAttachment};
use crate::render::shared_folders::{self, SharedFolder, SharedFolderError};
use serde_json::Value;

/// The machine type when the `vm` recipe names none.
const DEFAULT_MACHINE_TYPE: &str = "q35";

/// How the guest's machine is defined, apart from its size (memory, vCPUs, CPU mode), which the
/// fingerprint has covered from the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineDefinition {
    pub machine_type: String,
    pub firmware: Firmware,
    pub disk_bus: DiskBus,
    /// `None`: libvirt's default (a `vm` recipe without a `disk_cache` default).
    pub disk_cache: Option<DiskCache>,
    /// Whether the guest's TRIM reaches the pool.
    pub disk_discard_unmap: bool,
    pub network: NetworkAttachment,
    /// Folders of the hypervisor the guest mounts through virtiofs.
    pub shared_folders: Vec<SharedFolder>,
}

impl MachineDefinition {
    /// The definition from the `vm` recipe's effective arguments (`machine`, which the cookbook
    /// fills from `_global`) and `_global`'s `bridge` and `network`. A bridge wins over a
    /// network; `network` is both a global setting and a `vm` argument, and the argument's
    /// effective value is the one used (the global one only when there is no `vm` argument).
    pub fn from_declaration(
        machine: &Value,
        bridge: Option<&str>,
        network: &str,
    ) -> Result<MachineDefinition, SharedFolderError> {
        let word = |key: &str| machine.get(key).and_then(Value::as_str);
        Ok(MachineDefinition {
            machine_type: word("machine_type")
                .unwrap_or(DEFAULT_MACHINE_TYPE)
                .to_string(),
            firmware: match word("firmware") {
                Some("uefi") => Firmware::Uefi,
                _ => Firmware::Bios,
            },
            disk_bus: match word("disk_bus") {
                Some("scsi") => DiskBus::Scsi,
                _ => DiskBus::Virtio,
            },
            disk_cache: match word("disk_cache") {
                Some("none") => Some(DiskCache::None),
                Some("writeback") => Some(DiskCache::Writeback),
                Some("writethrough") => Some(DiskCache::Writethrough),
                Some("directsync") => Some(DiskCache::Directsync),
                Some("unsafe") => Some(DiskCache::Unsafe),
                _ => None,
            },
            disk_discard_unmap: word("disk_discard") != Some("ignore"),
            network: match bridge {
                Some(bridge) => NetworkAttachment::Bridge(bridge.to_string()),
                None => NetworkAttachment::Network(word("network").unwrap_or(network).to_string()),
            },
            shared_folders: shared_folders::shared_folders(machine)?,
        })
    }

    /// The fingerprint fields of what differs from the definition every guest had before these
    /// settings were fingerprinted (the `vm` recipe's defaults), as `(name, value)`: a setting at
    /// its default adds nothing, so a guest built with the defaults keeps the fingerprint it was
    /// recorded with.
    pub fn fingerprint_fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = Vec::new();
        if self.machine_type != DEFAULT_MACHINE_TYPE {
            fields.push(("machine_type", self.machine_type.clone()));
        }
        if self.firmware == Firmware::Uefi {
            fields.push(("firmware", "uefi".to_string()));
        }
        if self.disk_bus == DiskBus::Scsi {
            fields.push(("disk_bus", "scsi".to_string()));
        }
        if self.disk_cache != Some(DiskCache::None) {
            let cache = self.disk_cache.map_or("libvirt-default", DiskCache::as_str);
            fields.push(("disk_cache", cache.to_string()));
        }
        if !self.disk_discard_unmap {
            fields.push(("disk_discard", "ignore".to_string()));
        }
        match &self.network {
            NetworkAttachment::Network(name) if name == "default" => {}
            NetworkAttachment::Network(name) => fields.push(("network", name.clone())),
            NetworkAttachment::Bridge(name) => fields.push(("bridge", name.clone())),
        }
        if !self.shared_folders.is_empty() {
            fields.push((
                "shared_folders",
                shared_folders::fingerprint_value(&self.shared_folders),
            ));
        }
        fields
    }
}

impl Default for MachineDefinition {
    /// What the shipped `vm` recipe's defaults give.
    fn default() -> MachineDefinition {
        MachineDefinition::from_declaration(
            &serde_json::json!({"disk_cache": "none"}),
            None,
            "default",
        )
        .expect("no shared folders to refuse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_shipped_defaults_add_no_field() {
        let defaults = json!({
            "cpu_mode": "host-passthrough", "machine_type": "q35", "firmware": "bios",
            "disk_bus": "virtio", "disk_cache": "none", "disk_discard": "unmap",
            "network": "default", "data_volume_size": null, "data_mount": "/srv/data",
        });
        let definition = MachineDefinition::from_declaration(&defaults, None, "default").unwrap();
        assert_eq!(definition, MachineDefinition::default());
        assert!(definition.fingerprint_fields().is_empty());
    }

    #[test]
    fn each_setting_off_its_default_adds_its_field() {
        let cases = [
            (
                json!({"disk_cache": "none", "machine_type": "pc"}),
                "machine_type",
                "pc",
            ),
            (
                json!({"disk_cache": "none", "firmware": "uefi"}),
                "firmware",
                "uefi",
            ),
            (
                json!({"disk_cache": "none", "disk_bus": "scsi"}),
                "disk_bus",
                "scsi",
            ),
            (
                json!({"disk_cache": "writeback"}),
                "disk_cache",
                "writeback",
            ),
            (json!({}), "disk_cache", "libvirt-default"),
            (
                json!({"disk_cache": "none", "disk_discard": "ignore"}),
                "disk_discard",
                "ignore",
            ),
            (
                json!({"disk_cache": "none", "network": "lab"}),
                "network",
                "lab",
            ),
            (
                json!({"disk_cache": "none", "shared_folders": [
                    {"name": "a", "source": "/s", "mount": "/m", "readonly": true}
                ]}),
                "shared_folders",
                "a=/s:/m:ro",
            ),
        ];
        for (machine, name, value) in cases {
            let definition =
                MachineDefinition::from_declaration(&machine, None, "default").unwrap();
            assert_eq!(
                definition.fingerprint_fields(),
                [(name, value.to_string())],
                "{machine}"
            );
        }
        let bridged =
            MachineDefinition::from_declaration(&json!({"disk_cache": "none"}), Some("br0"), "x")
                .unwrap();
        assert_eq!(
            bridged.fingerprint_fields(),
            [("bridge", "br0".to_string())]
        );
    }

    #[test]
    fn the_recipe_network_wins_over_globals_and_a_bridge_over_both() {
        let machine = json!({"network": "lab"});
        assert_eq!(
            MachineDefinition::from_declaration(&machine, None, "default")
                .unwrap()
                .network,
            NetworkAttachment::Network("lab".into())
        );
        assert_eq!(
            MachineDefinition::from_declaration(&json!({}), None, "office")
                .unwrap()
                .network,
            NetworkAttachment::Network("office".into())
        );
        assert_eq!(
            MachineDefinition::from_declaration(&machine, Some("br0"), "default")
                .unwrap()
                .network,
            NetworkAttachment::Bridge("br0".into())
        );
    }
}
