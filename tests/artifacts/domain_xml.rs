use crate::oracle::{arg, run};
use trog::model::direct_boot::DirectBoot;
use trog::model::hypervisor::DomainType;
use trog::model::names::DomainName;
use trog::model::units::MiB;
use trog::plan::GuestTag;
use trog::render::domain_xml::{
    extra_disk_xml, mac_address_for, metadata::parse_tag, render_domain_xml, CpuMode, DiskBus,
    DiskCache, DiskSpec, DomainSpec, ExtraDiskSpec, Firmware, NetworkAttachment,
    DEFAULT_DOMAIN_TEMPLATE,
};
use trog::render::shared_folders::SharedFolder;

fn representative_guest() -> DomainSpec {
    let name = DomainName::parse("web.example.test").unwrap();
    DomainSpec {
        network_filter: trog::render::network_filter::interface_filter(
            None,
            mac_address_for(&name, 0),
            &["192.0.2.10".parse().unwrap()],
            &["2001:db8::10".parse().unwrap()],
        ),
        mac_address: mac_address_for(&name, 0),
        name,
        uuid: uuid::Uuid::parse_str("6f1b0c1e-8d2a-4a44-9c55-0a4b1d2e3f40").unwrap(),
        memory: MiB(2048),
        vcpus: 2,
        domain_type: DomainType::Kvm,
        cpu_mode: CpuMode::HostPassthrough,
        firmware: Firmware::Bios,
        machine_type: "q35".to_string(),
        disk_bus: DiskBus::Virtio,
        root_disk: DiskSpec::qcow2("trog", "web.example.test-root.qcow2"),
        data_disk: Some(DiskSpec::qcow2("trog", "web.example.test-data.qcow2")),
        extra_disks: vec![
            ExtraDiskSpec {
                disk: DiskSpec::qcow2("trog", "web.example.test-disk-db.qcow2"),
                bus: DiskBus::Virtio,
                target_dev: "vdc".to_string(),
                serial: "trog-disk-db".to_string(),
            },
            ExtraDiskSpec {
                disk: DiskSpec::qcow2("trog", "web.example.test-disk-logs.qcow2"),
                bus: DiskBus::Scsi,
                target_dev: "sdb".to_string(),
                serial: "trog-disk-logs".to_string(),
            },
        ],
        seed_volume: Some("web.example.test-seed.iso".to_string()),
        network: NetworkAttachment::Network("default".to_string()),
        serial_log_path: "/var/log/libvirt/qemu/web.example.test-serial.log".to_string(),
        tpm: false,
        shared_folders: Vec::new(),
        virtiofsd: None,
        partition: None,
        tag: GuestTag {
            boot_fingerprint: "2".repeat(64),
            shape_fingerprint: "1".repeat(64),
            payload_digest: None,
        },
        installation: Some("0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10".into()),
        direct_boot: None,
    }
}

/// Fails the test unless libvirt's schema accepts `xml` as a domain.
fn assert_valid_domain(xml: &str) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("domain.xml");
    std::fs::write(&path, xml).unwrap();
    run("virt-xml-validate", &[arg(&path), "domain"]);
}

/// The value of `xpath` in `xml`, as an XML parser reads it (entities resolved).
fn xpath_value(xml: &str, xpath: &str) -> String {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("domain.xml");
    std::fs::write(&path, xml).unwrap();
    let value = run(
        "xmllint",
        &["--xpath", &format!("string({xpath})"), arg(&path)],
    );
    value
        .strip_suffix('\n')
        .map(str::to_string)
        .unwrap_or(value)
}

#[test]
fn a_representative_guest_renders_as_expected() {
    let xml = render_domain_xml(&representative_guest(), DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert!(xml.ends_with("</domain>\n"), "the final newline is kept");
    insta::assert_snapshot!(xml);
}

#[test]
fn libvirt_accepts_every_variant() {
    let mut variants = Vec::new();
    for firmware in [Firmware::Bios, Firmware::Uefi] {
        for tpm in [false, true] {
            for data_disk in [false, true] {
                for bridge in [false, true] {
                    for domain_type in [DomainType::Kvm, DomainType::Qemu] {
                        let mut spec = representative_guest();
                        spec.firmware = firmware;
                        spec.tpm = tpm;
                        spec.domain_type = domain_type;
                        if !data_disk {
                            spec.data_disk = None;
                        }
                        if bridge {
                            spec.network = NetworkAttachment::Bridge("br0".to_string());
                        }
                        variants.push(spec);
                    }
                }
            }
        }
    }
    let mut knobs = representative_guest();
    knobs.cpu_mode = CpuMode::Named("Skylake-Client".to_string());
    knobs.partition = Some("/machine/runner".to_string());
    knobs.root_disk.cache = Some(DiskCache::None);
    knobs.root_disk.discard_unmap = false;
    variants.push(knobs);
    let mut host_model = representative_guest();
    host_model.cpu_mode = CpuMode::HostModel;
    variants.push(host_model);
    let mut scsi_pc = representative_guest();
    scsi_pc.machine_type = "pc".to_string();
    scsi_pc.disk_bus = DiskBus::Scsi;
    variants.push(scsi_pc);
    let mut first_boot = representative_guest();
    first_boot.direct_boot = Some(direct_boot());
    variants.push(first_boot);

    for spec in &variants {
        let xml = render_domain_xml(spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
        assert_valid_domain(&xml);
    }
}

#[test]
fn machine_type_and_disk_bus_are_what_the_vm_recipe_says() {
    let mut spec = representative_guest();
    spec.machine_type = "pc".to_string();
    spec.disk_bus = DiskBus::Scsi;
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&xml, "/domain/os/type/@machine"), "pc");
    for (volume, dev) in [("root", "sdb"), ("data", "sdc")] {
        let disk =
            format!("/domain/devices/disk[source/@volume='web.example.test-{volume}.qcow2']");
        assert_eq!(xpath_value(&xml, &format!("{disk}/target/@bus")), "scsi");
        assert_eq!(xpath_value(&xml, &format!("{disk}/target/@dev")), dev);
    }
    assert_eq!(
        xpath_value(&xml, "/domain/devices/disk[@device='cdrom']/target/@dev"),
        "sda"
    );
}

#[test]
fn shared_folders_get_virtiofs_and_the_shared_memory_it_needs() {
    let plain = render_domain_xml(&representative_guest(), DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&plain, "count(/domain/memoryBacking)"), "0");
    assert_eq!(
        xpath_value(&plain, "count(/domain/devices/filesystem)"),
        "0"
    );

    let mut spec = representative_guest();
    spec.shared_folders = vec![
        SharedFolder {
            name: "site".into(),
            source: "/srv/share/site".into(),
            mount: "/srv/site".into(),
            readonly: false,
        },
        SharedFolder {
            name: "media".into(),
            source: "/srv/media & more".into(),
            mount: "/srv/media".into(),
            readonly: true,
        },
    ];
    spec.virtiofsd = Some("/usr/local/bin/virtiofsd".into());
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_valid_domain(&xml);
    assert_eq!(
        xpath_value(&xml, "/domain/memoryBacking/source/@type"),
        "memfd"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/memoryBacking/access/@mode"),
        "shared"
    );
    let folder = "/domain/devices/filesystem[target/@dir='media']";
    assert_eq!(
        xpath_value(&xml, &format!("{folder}/driver/@type")),
        "virtiofs"
    );
    assert_eq!(
        xpath_value(&xml, &format!("{folder}/source/@dir")),
        "/srv/media & more"
    );
    assert_eq!(
        xpath_value(&xml, &format!("{folder}/binary/@path")),
        "/usr/local/bin/virtiofsd"
    );
    assert_eq!(xpath_value(&xml, &format!("count({folder}/readonly)")), "1");
    assert_eq!(
        xpath_value(
            &xml,
            "count(/domain/devices/filesystem[target/@dir='site']/readonly)"
        ),
        "0"
    );
    // Without a known virtiofsd (the test driver), libvirt chooses one itself.
    spec.virtiofsd = None;
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_valid_domain(&xml);
    assert_eq!(
        xpath_value(&xml, "count(/domain/devices/filesystem/binary)"),
        "0"
    );
}

#[test]
fn extra_disks_sit_on_their_bus_under_their_serial_as_a_hot_plug_writes_them() {
    let spec = representative_guest();
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    for extra in &spec.extra_disks {
        let disk = format!(
            "/domain/devices/disk[source/@volume='{}']",
            extra.disk.volume
        );
        assert_eq!(
            xpath_value(&xml, &format!("{disk}/target/@bus")),
            extra.bus.as_str()
        );
        assert_eq!(
            xpath_value(&xml, &format!("{disk}/target/@dev")),
            extra.target_dev
        );
        assert_eq!(xpath_value(&xml, &format!("{disk}/serial")), extra.serial);
        // The element a hot plug sends is the definition's, attribute for attribute.
        let element = extra_disk_xml(extra).unwrap();
        let wrapped = format!("<domain><devices>{element}</devices></domain>");
        for part in [
            "target/@bus",
            "target/@dev",
            "serial",
            "source/@pool",
            "driver/@type",
            "driver/@discard",
        ] {
            assert_eq!(
                xpath_value(&wrapped, &format!("{disk}/{part}")),
                xpath_value(&xml, &format!("{disk}/{part}")),
                "{part}"
            );
        }
    }
    // q35 has root ports for its devices and four more, for disks plugged into a running
    // guest (tests/libvirt checks they are free once libvirt placed the devices); pc needs none.
    let ports = "count(/domain/devices/controller[@model='pcie-root-port'])";
    assert_eq!(
        xpath_value(&xml, ports),
        "14",
        "7 devices, 3 virtio disks, 4 spare"
    );
    let mut pc = representative_guest();
    pc.machine_type = "pc".to_string();
    let xml = render_domain_xml(&pc, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&xml, ports), "0");
}

#[test]
fn variants_say_what_they_ask_for() {
    let mut spec = representative_guest();
    spec.firmware = Firmware::Uefi;
    spec.tpm = true;
    spec.domain_type = DomainType::Qemu;
    spec.data_disk = None;
    spec.extra_disks.clear();
    spec.network = NetworkAttachment::Bridge("br0".to_string());
    spec.partition = Some("/machine/runner".to_string());
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&xml, "/domain/@type"), "qemu");
    assert_eq!(xpath_value(&xml, "/domain/os/@firmware"), "efi");
    assert_eq!(
        xpath_value(&xml, "/domain/cpu/@mode"),
        "custom",
        "TCG gets no host CPU"
    );
    assert_eq!(xpath_value(&xml, "/domain/cpu/model"), "qemu64");
    assert_eq!(
        xpath_value(&xml, "/domain/cpu/feature[@name='svm']/@policy"),
        "disable",
        "no nested virtualization for the guest's kernel to set up under emulation"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/tpm/backend/@type"),
        "emulator"
    );
    assert_eq!(
        xpath_value(&xml, "count(/domain/devices/disk[@device='disk'])"),
        "1"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/interface/source/@bridge"),
        "br0"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/resource/partition"),
        "/machine/runner"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/disk[@device='cdrom']/target/@bus"),
        "scsi"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/controller[@type='scsi']/@model"),
        "virtio-scsi"
    );
}

fn direct_boot() -> DirectBoot {
    DirectBoot {
        kernel: "/pool/trog-base-1.qcow2.kernel".to_string(),
        initrd: "/pool/trog-base-1.qcow2.initrd".to_string(),
        cmdline: "root=LABEL=r ro console=ttyS0,115200n8 x=<&'\">".to_string(),
        cloud_init_network_unit: None,
        final_stage_deferred: false,
    }
}

#[test]
fn a_first_boot_starts_the_images_kernel_with_its_command_line_unless_uefi() {
    let mut spec = representative_guest();
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&xml, "count(/domain/os/kernel)"), "0");
    spec.direct_boot = Some(direct_boot());
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(
        xpath_value(&xml, "/domain/os/kernel"),
        "/pool/trog-base-1.qcow2.kernel"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/os/initrd"),
        "/pool/trog-base-1.qcow2.initrd"
    );
    assert_eq!(
        xpath_value(&xml, "/domain/os/cmdline"),
        direct_boot().cmdline,
        "read back unchanged"
    );
    // An image whose cloud-init runs its network stage as a service: left out of this boot.
    spec.direct_boot = Some(DirectBoot {
        cloud_init_network_unit: Some("cloud-init.service".to_string()),
        ..direct_boot()
    });
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(
        xpath_value(&xml, "/domain/os/cmdline"),
        format!(
            "{} systemd.mask=cloud-init.service systemd.mask=cloud-config.service",
            direct_boot().cmdline
        )
    );
    // A seed that installs nothing leaves the final stage for after the finish too.
    spec.direct_boot = Some(DirectBoot {
        cloud_init_network_unit: Some("cloud-init.service".to_string()),
        final_stage_deferred: true,
        ..direct_boot()
    });
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(
        xpath_value(&xml, "/domain/os/cmdline"),
        format!(
            "{} systemd.mask=cloud-init.service systemd.mask=cloud-config.service \
             systemd.mask=cloud-final.service",
            direct_boot().cmdline
        )
    );
    // Under TCG, without the early timer check that a busy host can make fail.
    spec.domain_type = DomainType::Qemu;
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert!(xpath_value(&xml, "/domain/os/cmdline").ends_with(" no_timer_check"));
    spec.domain_type = DomainType::Kvm;
    spec.firmware = Firmware::Uefi;
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(xpath_value(&xml, "count(/domain/os/kernel)"), "0");
}

#[test]
fn the_metadata_is_in_trogs_namespace() {
    let xml = render_domain_xml(&representative_guest(), DEFAULT_DOMAIN_TEMPLATE).unwrap();
    let guest = "/domain/metadata/*[local-name()='guest' and namespace-uri()='urn:x-trog:guest:1']";
    assert_eq!(xpath_value(&xml, &format!("{guest}/@owner")), "trog");
    assert_eq!(
        xpath_value(&xml, &format!("{guest}/@domain")),
        "web.example.test"
    );
    assert_eq!(xpath_value(&xml, &format!("{guest}/@boot")), "2".repeat(64));
    assert_eq!(
        xpath_value(&xml, &format!("{guest}/@shape")),
        "1".repeat(64)
    );
    assert_eq!(
        xpath_value(&xml, &format!("{guest}/@installation")),
        "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10"
    );
    // trog reads back what it wrote, and which installation wrote it.
    let start = xml.find("<trog:guest").unwrap();
    let end = start + xml[start..].find("/>").unwrap() + 2;
    assert_eq!(
        parse_tag(&xml[start..end]),
        Some(representative_guest().tag)
    );
    assert_eq!(
        trog::render::domain_xml::metadata::maker_of(Some(&xml[start..end])),
        trog::render::domain_xml::metadata::Maker::Trog {
            installation: "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10".into()
        }
    );
}

#[test]
fn hostile_values_are_escaped_and_read_back_unchanged() {
    let hostile_volume = "it's & \"odd\" <x>root.qcow2";
    let hostile_network = "net'/><interface type='ethernet'/><x a='";
    let hostile_partition = "/machine/a&b</partition><evil/>";
    let mut spec = representative_guest();
    spec.root_disk.volume = hostile_volume.to_string();
    spec.network = NetworkAttachment::Network(hostile_network.to_string());
    spec.partition = Some(hostile_partition.to_string());
    spec.serial_log_path = "/var/log/a\tb\nc.log".to_string();
    // libvirt's schema refuses such a network name, but the document must still be the one
    // intended: well-formed, one interface, every value read back as given.
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_eq!(
        xpath_value(&xml, "/domain/devices/disk[1]/source/@volume"),
        hostile_volume
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/interface/source/@network"),
        hostile_network
    );
    assert_eq!(
        xpath_value(&xml, "/domain/resource/partition"),
        hostile_partition
    );
    assert_eq!(
        xpath_value(&xml, "/domain/devices/serial/log/@file"),
        "/var/log/a\tb\nc.log"
    );
    assert_eq!(xpath_value(&xml, "count(/domain/devices/interface)"), "1");
    assert_eq!(xpath_value(&xml, "count(//evil)"), "0");

    // Paths with quotes and ampersands are legitimate, and libvirt's schema takes them (but
    // no line break in a path).
    spec.serial_log_path = "/var/log/it's & <that>.log".to_string();
    spec.network = NetworkAttachment::Network("default".to_string());
    spec.partition = Some("/machine/runner".to_string());
    assert_valid_domain(&render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap());
}

#[test]
fn control_characters_fail_the_render() {
    let mut spec = representative_guest();
    spec.seed_volume = Some("seed\u{1b}[31m.iso".to_string());
    let error = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap_err();
    assert!(matches!(
        error,
        trog::render::domain_xml::DomainXmlError::Template { .. }
    ));
}

#[test]
fn a_template_naming_an_unknown_value_or_printing_a_missing_one_fails() {
    let spec = representative_guest();
    assert!(render_domain_xml(&spec, "<domain>{{ no_such_value }}</domain>\n").is_err());
    let mut without_partition = spec.clone();
    without_partition.partition = None;
    assert!(render_domain_xml(&without_partition, "<domain>{{ partition }}</domain>\n").is_err());
}

#[test]
fn the_interface_carries_trogs_network_filter_with_the_guests_address() {
    let xml = render_domain_xml(&representative_guest(), DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_valid_domain(&xml);
    assert_eq!(
        xpath_value(&xml, "/domain/devices/interface/filterref/@filter"),
        "trog-guest"
    );
    let parameter = |name: &str| {
        xpath_value(
            &xml,
            &format!("/domain/devices/interface/filterref/parameter[@name='{name}']/@value"),
        )
    };
    assert_eq!(parameter("IP"), "192.0.2.10");
    assert_eq!(parameter("CTRL_IP_LEARNING"), "none");
    assert_eq!(
        xpath_value(
            &xml,
            "count(/domain/devices/interface/filterref/parameter[@name='TROG_IPV6'])"
        ),
        "2"
    );
    assert_eq!(
        parameter("TROG_IPV6"),
        "fe80::5054:ff:fe59:e0e9",
        "its link-local address first, from its MAC"
    );
}

#[test]
fn a_leased_guests_filter_names_its_pinned_lease_and_learns_nothing_from_the_guest() {
    let mut spec = representative_guest();
    spec.network_filter =
        trog::render::network_filter::interface_filter(None, spec.mac_address, &[], &[]);
    // Not pinned (a bridge, or a network without a DHCP range): learnt from DHCP answers only.
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_valid_domain(&xml);
    let parameter = |xml: &str, name: &str| {
        xpath_value(
            xml,
            &format!("/domain/devices/interface/filterref/parameter[@name='{name}']/@value"),
        )
    };
    assert_eq!(parameter(&xml, "IP"), "");
    assert_eq!(parameter(&xml, "CTRL_IP_LEARNING"), "dhcp");
    // Pinned: that address and no other, nothing learnt.
    spec.network_filter = spec
        .network_filter
        .with_pinned_lease("192.168.122.57".parse().unwrap());
    let xml = render_domain_xml(&spec, DEFAULT_DOMAIN_TEMPLATE).unwrap();
    assert_valid_domain(&xml);
    assert_eq!(parameter(&xml, "IP"), "192.168.122.57");
    assert_eq!(parameter(&xml, "CTRL_IP_LEARNING"), "none");
}

#[test]
fn trogs_network_filters_are_valid_for_libvirt() {
    use trog::render::network_filter::{guest_filter, ipv6_filter, isolated_filter, tenant_filter};
    let directory = tempfile::tempdir().unwrap();
    for filter in [
        isolated_filter(),
        ipv6_filter(),
        guest_filter(),
        tenant_filter("shop", &[]),
        tenant_filter(
            "shop",
            &["192.0.2.11".parse().unwrap(), "192.0.2.12".parse().unwrap()],
        ),
    ] {
        let path = directory.path().join(format!("{}.xml", filter.name));
        std::fs::write(&path, &filter.xml).unwrap();
        run("virt-xml-validate", &[arg(&path), "nwfilter"]);
    }
}
