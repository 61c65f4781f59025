//! The libvirt domain XML of a guest, rendered from `templates/domain.xml.j2`.
//!
//! [`DomainSpec`] holds every decision in typed values; [`domain_context`] turns it into the
//! flat values the template prints, so the template holds layout and no policy. Every printed
//! value is XML-escaped by the environment's formatter (even one a template marks `safe`), and
//! a value no XML 1.0 document can carry (a control character) fails the render.
//!
//! The shape of every guest, and why:
//! - machine `q35` unless the vm recipe's `machine_type` names another, so BIOS and UEFI guests
//!   share one device layout;
//! - the root and data disks on the vm recipe's `disk_bus`: virtio (`vda`, `vdb`) or the
//!   virtio-scsi controller (`sdb`, `sdc`), which passes discard through;
//! - the seed ISO is a read-only cdrom on a virtio-scsi controller, because cloud kernels ship
//!   virtio drivers but no AHCI;
//! - serial port 0 is a pty (for `virsh console`) whose output libvirt also appends to a log
//!   file (`<log append='on'>`): the log survives restarts and snapshot reverts, and a timeout
//!   can quote the guest's last lines;
//! - a qemu guest agent channel (addresses without a lease), a virtio RNG (entropy for the SSH
//!   host keys at first boot), and VNC on the hypervisor's loopback only, for screenshots,
//!   behind a password that expired in 1970 (`debug_boot --vnc` gives it a new one for a while);
//! - for a BIOS guest's first boot only, the base image's kernel, initramfs and GRUB command line
//!   (`<kernel>`, `<initrd>`, `<cmdline>`), which QEMU loads itself: no firmware disk reads, no
//!   GRUB (docs/CONVERGE.md "A guest's first boot").

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::direct_boot::DirectBoot;
use crate::model::hypervisor::DomainType;
use crate::model::names::DomainName;
use crate::model::units::MiB;
use crate::plan::GuestTag;
use crate::render::xml_text::escape_xml;
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fmt;

/// The template trog ships; an installation may pass its own text instead.
pub const DEFAULT_DOMAIN_TEMPLATE: &str = include_str!("../../templates/domain.xml.j2");

pub mod defined;
pub mod metadata;
use metadata::{OWNER, TAG_NAMESPACE, TAG_PREFIX};

/// The CPU a guest is given, as `cpu_mode` declares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum CpuMode {
    /// The hypervisor's own CPU, every feature included (the default: software that probes for
    /// vector extensions finds them).
    #[default]
    HostPassthrough,
    /// A named model close to the host's, so the guest can move to a similar hypervisor.
    HostModel,
    /// libvirt's `maximum`: every feature the hypervisor can give, emulated ones included
    /// (`-cpu max`); under TCG, more features than `qemu64` and slower.
    Maximum,
    /// A qemu CPU model by name (`Skylake-Client`, `EPYC`, `qemu64`).
    Named(String),
}

impl CpuMode {
    pub fn parse(text: &str) -> Result<CpuMode, DomainXmlError> {
        match text {
            "host-passthrough" => Ok(CpuMode::HostPassthrough),
            "host-model" => Ok(CpuMode::HostModel),
            "maximum" => Ok(CpuMode::Maximum),
            model
                if !model.is_empty()
                    && model
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte)) =>
            {
                Ok(CpuMode::Named(model.to_string()))
            }
            other => Err(DomainXmlError::CpuMode {
                value: other.to_string(),
            }),
        }
    }

    /// The spelling `cpu_mode` uses.
    pub fn as_declared(&self) -> &str {
        match self {
            CpuMode::HostPassthrough => "host-passthrough",
            CpuMode::HostModel => "host-model",
            CpuMode::Maximum => "maximum",
            CpuMode::Named(model) => model,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Firmware {
    /// SeaBIOS booting GRUB from the disk's MBR, as cloud images expect by default.
    #[default]
    Bios,
    /// OVMF chosen by libvirt's firmware auto-selection, without secure boot. Its NVRAM file
    /// must be removed with the domain (`undefine` with the NVRAM flag).
    Uefi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFormat {
    Qcow2,
    Raw,
}

impl DiskFormat {
    fn as_str(self) -> &'static str {
        match self {
            DiskFormat::Qcow2 => "qcow2",
            DiskFormat::Raw => "raw",
        }
    }
}

/// qemu's host page cache use for a disk; `None` in [`DiskSpec::cache`] keeps libvirt's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskCache {
    /// O_DIRECT: no double caching; needs a filesystem that supports it (not tmpfs).
    None,
    Writeback,
    Writethrough,
    Directsync,
    /// Ignores flushes; for throwaway guests only.
    Unsafe,
}

impl DiskCache {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiskCache::None => "none",
            DiskCache::Writeback => "writeback",
            DiskCache::Writethrough => "writethrough",
            DiskCache::Directsync => "directsync",
            DiskCache::Unsafe => "unsafe",
        }
    }
}

/// The bus the root and data disks sit on. (SATA is not offered: cloud kernels have no AHCI.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskBus {
    Virtio,
    /// The virtio-scsi controller the seed cdrom is on too.
    Scsi,
}

impl DiskBus {
    /// The bus as libvirt's `<target bus>` and the `vm` recipe write it.
    pub fn as_str(self) -> &'static str {
        self.layout().0
    }

    /// The bus and the device names of the root and data disks (on SCSI, `sda` is the seed).
    fn layout(self) -> (&'static str, &'static str, &'static str) {
        match self {
            DiskBus::Virtio => ("virtio", "vda", "vdb"),
            DiskBus::Scsi => ("scsi", "sdb", "sdc"),
        }
    }
}

/// A disk backed by a volume of a storage pool. Disks name their volume, not
/// a path: libvirt resolves it when the guest starts, so the XML is right whatever directory
/// the pool actually has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSpec {
    pub pool: String,
    pub volume: String,
    pub format: DiskFormat,
    pub cache: Option<DiskCache>,
    /// Pass the guest's TRIM through, so a qcow2 volume shrinks back when files are deleted.
    pub discard_unmap: bool,
}

impl DiskSpec {
    /// A qcow2 volume with trog's usual knobs: libvirt's default cache, discard passed through.
    pub fn qcow2(pool: impl Into<String>, volume: impl Into<String>) -> DiskSpec {
        DiskSpec {
            pool: pool.into(),
            volume: volume.into(),
            format: DiskFormat::Qcow2,
            cache: None,
            discard_unmap: true,
        }
    }
}

/// An extra disk as the domain attaches it: its volume, the bus and device name it sits at,
/// and the serial the guest finds it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraDiskSpec {
    pub disk: DiskSpec,
    pub bus: DiskBus,
    /// `vdc`, `sdd`: see `render::extra_disks::target_devices`.
    pub target_dev: String,
    pub serial: String,
}

#[derive(Debug, Serialize)]
struct ExtraDiskContext {
    #[serde(flatten)]
    disk: DiskContext,
    bus: &'static str,
    target_dev: String,
    serial: String,
}

fn extra_disk_context(extra: &ExtraDiskSpec) -> ExtraDiskContext {
    ExtraDiskContext {
        disk: disk_context(&extra.disk),
        bus: extra.bus.as_str(),
        target_dev: extra.target_dev.clone(),
        serial: extra.serial.clone(),
    }
}

/// The `<disk>` element of one extra disk, as the domain template writes it: what is attached
/// to a running guest and added to its definition when the disk is new. Every value is escaped.
pub fn extra_disk_xml(extra: &ExtraDiskSpec) -> Result<String, DomainXmlError> {
    let environment = domain_environment();
    let template = environment
        .template_from_named_str("extra_disk.xml.j2", EXTRA_DISK_TEMPLATE)
        .map_err(|source| DomainXmlError::Template { source })?;
    template
        .render(minijinja::context! { extra => minijinja::value::Serde(extra_disk_context(extra)) })
        .map_err(|source| DomainXmlError::Template { source })
}

/// One extra disk's element; `templates/domain.xml.j2` writes the same for each disk it defines
/// (a test holds them together).
const EXTRA_DISK_TEMPLATE: &str = "<disk type='volume' device='disk'>\
<driver name='qemu' type='{{ extra.format }}'{% if extra.cache %} cache='{{ extra.cache }}'{% endif %}{% if extra.discard %} discard='{{ extra.discard }}'{% endif %}/>\
<source pool='{{ extra.pool }}' volume='{{ extra.volume }}'/>\
<target dev='{{ extra.target_dev }}' bus='{{ extra.bus }}'/>\
<serial>{{ extra.serial }}</serial>\
</disk>";

/// What the guest's one network interface is plugged into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkAttachment {
    /// A libvirt network by name (`default`: NAT, leases visible to libvirt).
    Network(String),
    /// A bridge device of the hypervisor (`br0`): the guest sits on the host's LAN.
    Bridge(String),
}

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddress(pub [u8; 6]);

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// qemu's locally administered unicast prefix, which libvirt also uses for the MACs it makes up.
const MAC_PREFIX: [u8; 3] = [0x52, 0x54, 0x00];

/// The MAC address of `domain`, derived from its name: the same guest gets the same address on
/// every run and every hypervisor, so its DHCP lease and any firewall rule keyed on it survive a
/// rebuild, and two guests get different addresses unless their names collide in 24 bits.
///
/// Collisions: with 24 bits, two of 100 guests on one network share an address with a chance of
/// about 3 in 10,000, and a guest whose MAC libvirt made up can collide too. So the planner, which
/// sees the MACs of the hypervisor's other domains, asks for `attempt` 0 first and on a clash
/// takes the next attempt until the address is free. An existing trog domain keeps the MAC it
/// was defined with (the planner reads it back rather than recomputing it), so a later newcomer
/// never moves an older guest's address.
pub fn mac_address_for(domain: &DomainName, attempt: u32) -> MacAddress {
    let mut hasher = Sha256::new();
    hasher.update(b"trog-mac-v1\0");
    hasher.update(domain.as_str().as_bytes());
    if attempt > 0 {
        hasher.update(format!("\0{attempt}").as_bytes());
    }
    let digest = hasher.finalize();
    let [a, b, c] = MAC_PREFIX;
    MacAddress([a, b, c, digest[0], digest[1], digest[2]])
}

/// Everything the domain XML says about a guest.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainSpec {
    /// The libvirt domain name: the guest's fqdn.
    pub name: DomainName,
    pub uuid: uuid::Uuid,
    pub memory: MiB,
    pub vcpus: u32,
    /// From the hypervisor block: `kvm`, or `qemu` (TCG) where KVM does not work.
    pub domain_type: DomainType,
    pub cpu_mode: CpuMode,
    pub firmware: Firmware,
    /// The qemu machine type (`q35`, `pc`, `pc-q35-8.2`).
    pub machine_type: String,
    /// The bus of the root and data disks.
    pub disk_bus: DiskBus,
    /// The root disk, a qcow2 overlay on the base image.
    pub root_disk: DiskSpec,
    /// A data volume that outlives the root disk.
    pub data_disk: Option<DiskSpec>,
    /// The extra disks, which outlive the root disk too.
    pub extra_disks: Vec<ExtraDiskSpec>,
    /// The seed ISO volume (in the root disk's pool), attached read-only as a SCSI cdrom; none
    /// once the guest's first boot is over and its seed retired.
    pub seed_volume: Option<String>,
    pub mac_address: MacAddress,
    pub network: NetworkAttachment,
    /// The network filter the interface carries (`render::network_filter`).
    pub network_filter: crate::render::network_filter::InterfaceFilter,
    /// The file on the hypervisor the serial console is copied to (appended, never truncated).
    pub serial_log_path: String,
    /// An emulated TPM 2.0 (swtpm); only when the hypervisor has a real TPM to protect its state.
    pub tpm: bool,
    /// The cgroup partition (`/machine/NAME`) from the hypervisor block.
    pub partition: Option<String>,
    /// Folders of the hypervisor the guest mounts through virtiofs; the guest's memory is then
    /// shared (a memfd), as vhost-user needs.
    pub shared_folders: Vec<crate::render::shared_folders::SharedFolder>,
    /// The hypervisor's virtiofsd, which libvirt starts for each shared folder; `None` leaves
    /// the choice to libvirt (its vhost-user descriptors), as on the test driver.
    pub virtiofsd: Option<String>,
    /// trog's tag, recorded in the domain's `<metadata>`.
    pub tag: GuestTag,
    /// The installation defining it, named in the tag (`config::installation_id`); `None` where
    /// the run has none (a verb that changes nothing, before the installation's first change).
    pub installation: Option<String>,
    /// The kernel QEMU starts itself, for a BIOS guest's first boot only: the definition it
    /// keeps boots from its disk, as GRUB says (see `provision::execute`).
    pub direct_boot: Option<DirectBoot>,
}

#[derive(Debug, thiserror::Error)]
pub enum DomainXmlError {
    #[error(
        "`{value}` is not a cpu_mode: use host-passthrough, host-model, maximum or a qemu CPU model name"
    )]
    CpuMode { value: String },
    #[error("could not render the domain XML template")]
    Template {
        #[source]
        source: minijinja::Error,
    },
}

impl Diagnose for DomainXmlError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            DomainXmlError::CpuMode { .. } => "`virsh cpu-models x86_64` lists the model names".to_string(),
            DomainXmlError::Template { .. } => {
                "check templates/domain.xml.j2 and the value named above (control characters cannot be written into XML)"
                    .to_string()
            }
        })
    }
}

/// The CPU model a TCG guest gets when its `cpu_mode` names the host's.
const TCG_CPU_MODEL: &str = "qemu64";

/// What `qemu64` offers that a TCG guest of trog's is better without: `svm` (AMD's
/// virtualization) makes the guest's kernel load and set up `kvm` and `kvm_amd` on every boot,
/// about 0.65 s of the one emulated processor while cloud-init starts beside it, for a nested
/// hypervisor nobody runs inside an emulated guest. A model the recipe names keeps all of its
/// features.
const TCG_CPU_FEATURES_OFF: &[&str] = &["svm"];

/// The `<cpu>` element: its mode, its model, and the model's features turned off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuContext {
    mode: &'static str,
    model: Option<String>,
    features_off: &'static [&'static str],
}

/// The `<cpu>` element's mode and model.
///
/// Under TCG (`domain_type` qemu) there is no host CPU to pass through: qemu refuses
/// `-cpu host` without KVM, and a host model may name features TCG cannot emulate. The guest
/// gets `qemu64` instead, the model TCG runs fastest: with QEMU 10, guests installing real
/// packages finished about a tenth sooner on it than on libvirt's `maximum` (`-cpu max`, every
/// feature TCG emulates) and sooner still than on `Nehalem`, with one vCPU and with two
/// (bench/README.md). It lacks what images built for x86-64-v2 need (Debian and Ubuntu are
/// built for the baseline): such a guest asks for `maximum` or names a model (`Nehalem`), and
/// either is honoured under both types.
fn cpu_context(domain_type: DomainType, cpu_mode: &CpuMode) -> CpuContext {
    let context = |mode, model: Option<&str>, features_off| CpuContext {
        mode,
        model: model.map(str::to_string),
        features_off,
    };
    match (domain_type, cpu_mode) {
        (_, CpuMode::Named(model)) => context("custom", Some(model), &[]),
        (DomainType::Kvm, CpuMode::HostPassthrough) => context("host-passthrough", None, &[]),
        (DomainType::Kvm, CpuMode::HostModel) => context("host-model", None, &[]),
        (_, CpuMode::Maximum) => context("maximum", None, &[]),
        (DomainType::Qemu, CpuMode::HostPassthrough | CpuMode::HostModel) => {
            context("custom", Some(TCG_CPU_MODEL), TCG_CPU_FEATURES_OFF)
        }
    }
}

#[derive(Debug, Serialize)]
struct DiskContext {
    pool: String,
    volume: String,
    format: &'static str,
    cache: Option<&'static str>,
    discard: Option<&'static str>,
}

fn disk_context(disk: &DiskSpec) -> DiskContext {
    DiskContext {
        pool: disk.pool.clone(),
        volume: disk.volume.clone(),
        format: disk.format.as_str(),
        cache: disk.cache.map(DiskCache::as_str),
        discard: disk.discard_unmap.then_some("unmap"),
    }
}

/// A first boot's kernel, initramfs and the command line it starts with.
#[derive(Debug, Serialize)]
struct DirectBootContext {
    kernel: String,
    initrd: String,
    cmdline: String,
}

/// A `<parameter>` of the interface's filter reference.
#[derive(Debug, Serialize)]
struct FilterParameter {
    name: &'static str,
    value: String,
}

/// A `<filesystem>` shared through virtiofs.
#[derive(Debug, Serialize)]
struct SharedFolderContext {
    tag: String,
    source: String,
    readonly: bool,
}

/// The values the template prints: strings and numbers, every decision already taken.
#[derive(Debug, Serialize)]
pub struct DomainContext {
    domain_type: &'static str,
    name: String,
    uuid: String,
    memory_mib: u64,
    vcpus: u32,
    cpu: CpuContext,
    uefi: bool,
    machine_type: String,
    disk_bus: &'static str,
    root_dev: &'static str,
    data_dev: &'static str,
    partition: Option<String>,
    direct_boot: Option<DirectBootContext>,
    root_disk: DiskContext,
    data_disk: Option<DiskContext>,
    extra_disks: Vec<ExtraDiskContext>,
    /// q35 plugs each PCI Express device into a root port of its own, and libvirt fills the
    /// ports it is given before it adds any: as many as the domain's devices take, and a few
    /// spare, let a virtio disk be hot-plugged. None on other machine types.
    root_ports: u32,
    seed_pool: String,
    seed_volume: Option<String>,
    mac_address: String,
    network_kind: &'static str,
    network_source: String,
    network_filter: String,
    network_filter_parameters: Vec<FilterParameter>,
    serial_log_path: String,
    tpm: bool,
    shared_folders: Vec<SharedFolderContext>,
    virtiofsd: Option<String>,
    metadata_namespace: &'static str,
    metadata_prefix: &'static str,
    owner: &'static str,
    boot_fingerprint: String,
    shape_fingerprint: String,
    payload_digest: String,
    installation: Option<String>,
}

pub fn domain_context(spec: &DomainSpec) -> DomainContext {
    let (network_kind, network_source) = match &spec.network {
        NetworkAttachment::Network(name) => ("network", name.clone()),
        NetworkAttachment::Bridge(bridge) => ("bridge", bridge.clone()),
    };
    let (disk_bus, root_dev, data_dev) = spec.disk_bus.layout();
    DomainContext {
        machine_type: spec.machine_type.clone(),
        disk_bus,
        root_dev,
        data_dev,
        domain_type: spec.domain_type.as_str(),
        name: spec.name.as_str().to_string(),
        uuid: spec.uuid.hyphenated().to_string(),
        memory_mib: spec.memory.0,
        vcpus: spec.vcpus,
        cpu: cpu_context(spec.domain_type, &spec.cpu_mode),
        uefi: spec.firmware == Firmware::Uefi,
        partition: spec.partition.clone(),
        // UEFI guests boot through their firmware always (it holds their boot entries).
        direct_boot: spec
            .direct_boot
            .as_ref()
            .filter(|_| spec.firmware == Firmware::Bios)
            .map(|boot| DirectBootContext {
                kernel: boot.kernel.clone(),
                initrd: boot.initrd.clone(),
                cmdline: boot.first_boot_cmdline(spec.domain_type),
            }),
        root_disk: disk_context(&spec.root_disk),
        data_disk: spec.data_disk.as_ref().map(disk_context),
        extra_disks: spec.extra_disks.iter().map(extra_disk_context).collect(),
        root_ports: if spec.machine_type.contains("q35") {
            pcie_devices(spec) + SPARE_ROOT_PORTS
        } else {
            0
        },
        seed_pool: spec.root_disk.pool.clone(),
        seed_volume: spec.seed_volume.clone(),
        mac_address: spec.mac_address.to_string(),
        network_kind,
        network_source,
        network_filter: spec.network_filter.name.clone(),
        network_filter_parameters: spec
            .network_filter
            .parameters()
            .into_iter()
            .map(|(name, value)| FilterParameter { name, value })
            .collect(),
        serial_log_path: spec.serial_log_path.clone(),
        tpm: spec.tpm,
        shared_folders: spec
            .shared_folders
            .iter()
            .map(|folder| SharedFolderContext {
                tag: folder.name.clone(),
                source: folder.source.clone(),
                readonly: folder.readonly,
            })
            .collect(),
        virtiofsd: spec.virtiofsd.clone(),
        metadata_namespace: TAG_NAMESPACE,
        metadata_prefix: TAG_PREFIX,
        owner: OWNER,
        boot_fingerprint: spec.tag.boot_fingerprint.clone(),
        shape_fingerprint: spec.tag.shape_fingerprint.clone(),
        payload_digest: spec.tag.payload_digest.clone().unwrap_or_default(),
        installation: spec.installation.clone(),
    }
}

/// Spare PCI Express root ports of a q35 guest: room for four virtio disks added to it while it
/// runs (each hot-plugged device needs an empty port; more are attached at the next definition
/// of the guest, when libvirt adds ports for them). Four costs nothing a guest notices.
const SPARE_ROOT_PORTS: u32 = 4;

/// The devices of `spec`'s domain that take a PCI Express root port of a q35 machine: its virtio
/// disks, and the others the template always has (the virtio-scsi controller, the interface, the
/// video, the balloon, the random number generator) or libvirt adds (the virtio-serial
/// controller of the agent's channel, the USB controller). Counting one too many only leaves
/// another port spare.
fn pcie_devices(spec: &DomainSpec) -> u32 {
    const ALWAYS: u32 = 7;
    let own_disks = if spec.disk_bus == DiskBus::Virtio {
        1 + u32::from(spec.data_disk.is_some())
    } else {
        0
    };
    let extra = spec
        .extra_disks
        .iter()
        .filter(|extra| extra.bus == DiskBus::Virtio)
        .count() as u32;
    ALWAYS + own_disks + extra
}

/// The environment the domain template renders in: undefined names are errors, the final
/// newline is kept, and every printed value goes through [`escape_xml`]. A `none` printed is a
/// template mistake (an optional value used outside its `{% if %}`), so it is an error too.
fn domain_environment() -> Environment<'static> {
    let mut environment = Environment::new();
    environment.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .expect("the default delimiters are valid");
    environment.set_syntax(syntax);
    environment.set_formatter(|output, _state, value| {
        if value.is_none() || value.is_undefined() {
            return Err(minijinja::Error::new(
                minijinja::ErrorKind::UndefinedError,
                "the template printed a missing value; wrap it in `{% if %}`",
            ));
        }
        let escaped = escape_xml(&value.to_string()).map_err(|refused| {
            minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, refused.to_string())
        })?;
        output.write_str(&escaped).map_err(|_| {
            minijinja::Error::new(
                minijinja::ErrorKind::WriteFailure,
                "could not write the domain XML",
            )
        })
    });
    environment
}

/// Renders `spec` with the template `template_text` (usually [`DEFAULT_DOMAIN_TEMPLATE`]).
pub fn render_domain_xml(spec: &DomainSpec, template_text: &str) -> Result<String, DomainXmlError> {
    let environment = domain_environment();
    let template = environment
        .template_from_named_str("domain.xml.j2", template_text)
        .map_err(|source| DomainXmlError::Template { source })?;
    template
        .render(minijinja::value::Serde(domain_context(spec)))
        .map_err(|source| DomainXmlError::Template { source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_modes_parse_and_spell_back() {
        for text in [
            "host-passthrough",
            "host-model",
            "maximum",
            "Skylake-Client",
            "qemu64",
        ] {
            assert_eq!(CpuMode::parse(text).unwrap().as_declared(), text);
        }
        for text in ["", "host passthrough", "<model>", "Skylake'"] {
            assert!(CpuMode::parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn tcg_never_gets_a_host_cpu() {
        let custom = |model: &str, features_off| CpuContext {
            mode: "custom",
            model: Some(model.to_string()),
            features_off,
        };
        for mode in [CpuMode::HostPassthrough, CpuMode::HostModel] {
            assert_eq!(
                cpu_context(DomainType::Qemu, &mode),
                custom("qemu64", &["svm"])
            );
        }
        assert_eq!(
            cpu_context(DomainType::Kvm, &CpuMode::HostPassthrough),
            CpuContext {
                mode: "host-passthrough",
                model: None,
                features_off: &[]
            }
        );
        // A model the recipe names is taken whole, `svm` included.
        assert_eq!(
            cpu_context(DomainType::Qemu, &CpuMode::Named("qemu64".into())),
            custom("qemu64", &[])
        );
        for domain_type in [DomainType::Qemu, DomainType::Kvm] {
            assert_eq!(
                cpu_context(domain_type, &CpuMode::Maximum),
                CpuContext {
                    mode: "maximum",
                    model: None,
                    features_off: &[]
                }
            );
        }
    }

    #[test]
    fn mac_addresses_are_stable_local_and_differ_per_name_and_attempt() {
        let web = DomainName::parse("web.example.test").unwrap();
        let db = DomainName::parse("db.example.test").unwrap();
        assert_eq!(mac_address_for(&web, 0), mac_address_for(&web, 0));
        assert_ne!(mac_address_for(&web, 0), mac_address_for(&db, 0));
        assert_ne!(mac_address_for(&web, 0), mac_address_for(&web, 1));
        assert!(mac_address_for(&web, 0)
            .to_string()
            .starts_with("52:54:00:"));
        // Pinned: a change would move every guest's address and lease.
        insta::assert_snapshot!(mac_address_for(&web, 0).to_string(), @"52:54:00:59:e0:e9");
    }
}
