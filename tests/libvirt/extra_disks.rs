//! Extra disks against the real libvirtd: made in the pool, put into a stopped guest's
//! definition, hot-plugged into a running one (the same QEMU process goes on), taken out of the
//! definition when no longer declared with the volume kept, each observed back and planned again
//! until the plan is empty.

use super::TestGuest;
use trog::libvirt::guest_resources::BuiltArtifacts;
use trog::model::units::Bytes;
use trog::plan::{self, resource_names, Action, DesiredDisk, DesiredGuest, Resolution};
use trog::render::domain_xml::{DiskBus, DiskSpec, ExtraDiskSpec};

fn disk(guest: &TestGuest, name: &str, bus: DiskBus) -> (DesiredDisk, ExtraDiskSpec) {
    let volume = resource_names::extra_disk_volume(&guest.desired.domain, name);
    let target_dev = match bus {
        DiskBus::Virtio => format!("vd{}", if name == "db" { 'c' } else { 'd' }),
        DiskBus::Scsi => "sdb".to_string(),
    };
    (
        DesiredDisk {
            name: name.to_string(),
            volume: volume.clone(),
            capacity: Bytes(16 * 1024 * 1024),
            bus: bus.as_str().to_string(),
            declared_at: None,
        },
        ExtraDiskSpec {
            disk: DiskSpec::qcow2(&guest.desired.pool_name, volume),
            bus,
            target_dev,
            serial: format!("trog-disk-{name}"),
        },
    )
}

/// The steps that need the guest's own system, which this guest has none of (it boots nothing):
/// the wait for SSH, the seed's retirement after the first boot, the finish. They are left out.
fn guest_side(action: &Action) -> bool {
    matches!(
        action,
        Action::WaitForSsh | Action::RetireSeed { .. } | Action::Finish { .. }
    )
}

/// Observes, plans (checked), runs every libvirt step, and returns what was planned.
fn converge(
    guest: &TestGuest,
    connection: &virt::connect::Connect,
    desired: &DesiredGuest,
    specs: &[ExtraDiskSpec],
) -> Vec<String> {
    let resources = trog::libvirt::guest_resources::GuestResources {
        desired,
        ..guest.resources(connection)
    };
    let observed = resources.observe().unwrap();
    let steps = plan::plan(desired, &observed, Resolution::default()).unwrap();
    plan::check_plan(&steps, desired, &observed, Resolution::default()).unwrap();
    let artifacts = BuiltArtifacts {
        domain_xml: &guest.xml,
        seed_iso: &guest.seed_iso,
        base_image_file: &guest.base,
        extra_disks: specs,
    };
    for action in &steps.actions {
        if !guest_side(action) {
            resources
                .execute(action, &artifacts)
                .unwrap_or_else(|error| panic!("{action}: {error:?}"));
        }
    }
    let again = plan::plan(
        desired,
        &resources.observe().unwrap(),
        Resolution::default(),
    )
    .unwrap();
    let left: Vec<&Action> = again
        .actions
        .iter()
        .filter(|action| !guest_side(action))
        .collect();
    assert!(left.is_empty(), "after\n{steps}\nstill\n{again}");
    steps
        .actions
        .iter()
        .filter(|action| !guest_side(action))
        .map(ToString::to_string)
        .collect()
}

/// The serials of the extra disks in the guest's running XML or its definition (`inactive`).
fn serials(domain: &virt::domain::Domain, inactive: bool) -> Vec<String> {
    let flags = if inactive {
        virt::sys::VIR_DOMAIN_XML_INACTIVE
    } else {
        0
    };
    let xml = domain.xml_desc(flags).unwrap();
    let document = roxmltree::Document::parse(&xml).unwrap();
    let mut serials: Vec<String> = document
        .descendants()
        .filter(|node| node.has_tag_name("serial") && node.parent().unwrap().has_tag_name("disk"))
        .filter_map(|node| node.text().map(str::to_string))
        .collect();
    serials.sort();
    serials
}

#[test]
fn extra_disks_are_made_attached_hot_plugged_and_detached_with_their_volumes_kept() {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let guest = TestGuest::new("disks", false);
    guest.build_without_starting(&connection);
    let domain = connection
        .lookup_domain_by_name(guest.desired.domain.as_str())
        .unwrap();

    // A disk declared for a stopped guest: made, and put into its definition before the guest
    // starts.
    let (db, db_spec) = disk(&guest, "db", DiskBus::Virtio);
    let with_db = DesiredGuest {
        extra_disks: vec![db.clone()],
        ..guest.desired.clone()
    };
    let said = converge(
        &guest,
        &connection,
        &with_db,
        std::slice::from_ref(&db_spec),
    );
    assert_eq!(
        said[..2],
        [
            format!("create disk db: volume {} of 16MB", db.volume),
            format!("attach disk db ({}) to the guest's definition", db.volume),
        ],
        "{said:?}"
    );
    assert_eq!(said[2], "start the guest", "{said:?}");
    assert_eq!(serials(&domain, true), ["trog-disk-db"]);
    assert_eq!(serials(&domain, false), ["trog-disk-db"]);

    // A disk added while the guest runs: hot-plugged into the same QEMU process, and into the
    // definition it starts with next.
    // A domain's id is read when it is looked up.
    let running_id = || {
        connection
            .lookup_domain_by_name(guest.desired.domain.as_str())
            .unwrap()
            .id()
            .expect("the guest runs")
    };
    let process = running_id();
    let (logs, logs_spec) = disk(&guest, "logs", DiskBus::Scsi);
    let with_both = DesiredGuest {
        extra_disks: vec![db.clone(), logs.clone()],
        ..guest.desired.clone()
    };
    let specs = [db_spec.clone(), logs_spec];
    let said = converge(&guest, &connection, &with_both, &specs);
    assert_eq!(
        said,
        [
            format!("create disk logs: volume {} of 16MB", logs.volume),
            format!(
                "attach disk logs ({}) to the running guest and its definition",
                logs.volume
            ),
        ]
    );
    assert_eq!(running_id(), process, "not restarted");
    assert_eq!(serials(&domain, false), ["trog-disk-db", "trog-disk-logs"]);
    assert_eq!(serials(&domain, true), ["trog-disk-db", "trog-disk-logs"]);

    // A disk no longer declared: out of the definition, still in the running guest until it is
    // next started, and its volume kept.
    let said = converge(&guest, &connection, &with_db, &[db_spec]);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(&format!(
            "detach volume {} from the guest's definition",
            logs.volume
        )),
        "{said:?}"
    );
    assert_eq!(serials(&domain, true), ["trog-disk-db"]);
    assert_eq!(serials(&domain, false), ["trog-disk-db", "trog-disk-logs"]);
    let pool = connection
        .lookup_storage_pool_by_name(&guest.desired.pool_name)
        .unwrap();
    assert!(pool.lookup_storage_vol_by_name(&logs.volume).is_ok());
}

/// The domain trog renders for a q35 guest with extra disks, as libvirtd defines it: its spare
/// PCI Express root ports are accepted (libvirt's schema alone does not say whether they fit the
/// machine), and the disks sit on their buses under their serials.
#[test]
fn a_rendered_q35_guest_with_extra_disks_is_defined_with_spare_root_ports() {
    use trog::model::hypervisor::DomainType;
    use trog::model::names::DomainName;
    use trog::model::units::MiB;
    use trog::plan::GuestTag;
    use trog::render::domain_xml::{
        mac_address_for, render_domain_xml, CpuMode, DomainSpec, Firmware, NetworkAttachment,
        DEFAULT_DOMAIN_TEMPLATE,
    };
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let name = DomainName::parse(&format!("q35-disks-{}.test", std::process::id())).unwrap();
    let extra = |disk: &str, bus: DiskBus, target_dev: &str| ExtraDiskSpec {
        disk: DiskSpec::qcow2("trog", format!("{name}-disk-{disk}.qcow2")),
        bus,
        target_dev: target_dev.to_string(),
        serial: format!("trog-disk-{disk}"),
    };
    let spec = DomainSpec {
        network_filter: trog::render::network_filter::interface_filter(
            None,
            mac_address_for(&name, 0),
            &[],
            &[],
        ),
        mac_address: mac_address_for(&name, 0),
        uuid: uuid::Uuid::new_v4(),
        memory: MiB(256),
        vcpus: 1,
        domain_type: DomainType::Qemu,
        cpu_mode: CpuMode::HostPassthrough,
        firmware: Firmware::Bios,
        machine_type: "q35".to_string(),
        disk_bus: DiskBus::Virtio,
        root_disk: DiskSpec::qcow2("trog", format!("{name}-root.qcow2")),
        data_disk: None,
        extra_disks: vec![
            extra("db", DiskBus::Virtio, "vdc"),
            extra("logs", DiskBus::Scsi, "sdb"),
        ],
        seed_volume: Some(format!("{name}-seed.iso")),
        shared_folders: Vec::new(),
        virtiofsd: None,
        network: NetworkAttachment::Network("default".to_string()),
        serial_log_path: format!("/var/log/libvirt/qemu/{name}-serial.log"),
        tpm: false,
        partition: None,
        tag: GuestTag {
            boot_fingerprint: "b".into(),
            shape_fingerprint: "s".into(),
            payload_digest: None,
        },
        installation: None,
        direct_boot: None,
        name: name.clone(),
    };
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    // The interface's filter is trog's own and may not be defined on this libvirtd: the
    // definition is checked without it.
    let without_filter = {
        let start = xml.find("<filterref").unwrap();
        let end = xml.find("</filterref>").unwrap() + "</filterref>".len();
        format!("{}{}", &xml[..start], &xml[end..])
    };
    let domain = connection
        .define_domain_xml(&without_filter)
        .unwrap_or_else(|error| panic!("{error}\n{without_filter}"));
    let defined = domain.xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE).unwrap();
    domain.undefine().unwrap();
    let document = roxmltree::Document::parse(&defined).unwrap();
    let root_ports = document
        .descendants()
        .filter(|node| {
            node.has_tag_name("controller") && node.attribute("model") == Some("pcie-root-port")
        })
        .count();
    // Ports no device sits on once libvirt placed them all: room for four hot-plugged disks.
    let buses_used: Vec<u32> = document
        .descendants()
        .filter(|node| node.has_tag_name("address") && node.attribute("type") == Some("pci"))
        .filter_map(|address| address.attribute("bus"))
        .filter_map(|bus| u32::from_str_radix(bus.trim_start_matches("0x"), 16).ok())
        .collect();
    let free_ports = document
        .descendants()
        .filter(|node| {
            node.has_tag_name("controller") && node.attribute("model") == Some("pcie-root-port")
        })
        .filter_map(|port| port.attribute("index")?.parse::<u32>().ok())
        .filter(|index| !buses_used.contains(index))
        .count();
    assert!(root_ports >= 4, "{defined}");
    assert!(free_ports >= 4, "{free_ports} free root ports:\n{defined}");
    assert!(
        defined.contains("<serial>trog-disk-db</serial>"),
        "{defined}"
    );
    assert!(
        defined.contains("<target dev='sdb' bus='scsi'/>"),
        "{defined}"
    );
}
