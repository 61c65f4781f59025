//! The machine a built guest runs on, changed: `disk_bus: scsi` and `machine_type: pc` in its
//! file redefine and restart it (no new root disk), the running domain's XML and the guest's own
//! view (`/sys`, `lsblk`) agree that it is so, and its data volume, its extra disk and the files
//! on them are intact.

use super::support::*;
use super::{on_guest, Installation};

/// The disks of the running domain, as `(volume, bus)`, and its machine type.
fn running_definition(domain: &str) -> (Vec<(String, String)>, String) {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let xml = connection
        .lookup_domain_by_name(domain)
        .unwrap()
        .xml_desc(0)
        .unwrap();
    let document = roxmltree::Document::parse(&xml).unwrap();
    let disks = document
        .descendants()
        .filter(|node| node.has_tag_name("disk") && node.attribute("device") == Some("disk"))
        .filter_map(|disk| {
            let volume = disk
                .children()
                .find(|node| node.has_tag_name("source"))?
                .attribute("volume")?;
            let bus = disk
                .children()
                .find(|node| node.has_tag_name("target"))?
                .attribute("bus")?;
            Some((volume.to_string(), bus.to_string()))
        })
        .collect();
    let machine = document
        .descendants()
        .find(|node| node.has_tag_name("type") && node.parent().unwrap().has_tag_name("os"))
        .and_then(|node| node.attribute("machine"))
        .unwrap()
        .to_string();
    (disks, machine)
}

/// Changes the running guest's disk bus and machine type, and checks what libvirt and the guest
/// say; `files_kept` are files on its disks, with what they hold. The guest's address after the
/// restart.
pub fn bus_and_machine_changed(
    installation: &Installation,
    address: &str,
    files_kept: &[(&str, &str)],
) -> String {
    let config = installation.dir.path();
    let domain = installation.domain.as_str();
    let guest_file = config.join("recipes.d").join(format!("{domain}.yaml"));
    let declared = std::fs::read_to_string(&guest_file).unwrap();
    let changed = declared.replace(
        "    data_volume_size: 1G\n",
        "    data_volume_size: 1G\n    disk_bus: scsi\n    machine_type: pc\n",
    );
    assert_ne!(
        declared, changed,
        "the guest's file has no data_volume_size line"
    );
    std::fs::write(&guest_file, changed).unwrap();
    let (_, machine_before) = running_definition(domain);
    assert!(machine_before.contains("q35"), "{machine_before}");

    let provision = run_verb("provision", config, &[domain]);
    let stdout = text(&provision.stdout);
    let said = format!("{stdout}\n{}", text(&provision.stderr));
    assert!(provision.status.success(), "{said}");
    for step in ["stop the guest", "redefine the domain", "start the guest"] {
        assert!(said.contains(step), "{step}:\n{said}");
    }
    assert!(
        !said.contains("create root disk"),
        "no new root disk:\n{said}"
    );
    let address = stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{domain} is on local at ")))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or(address)
        .to_string();

    // libvirt runs it so: an i440FX machine, every disk on SCSI.
    let (disks, machine) = running_definition(domain);
    assert!(machine.starts_with("pc-i440fx"), "{machine}");
    assert!(disks.len() >= 3, "{disks:?}");
    for (volume, bus) in &disks {
        assert_eq!(bus, "scsi", "{volume}");
    }
    // And the guest sees it so.
    let product = on_guest(installation, &address, "cat /sys/class/dmi/id/product_name");
    assert!(product.contains("i440FX"), "{product}");
    let blocks = on_guest(installation, &address, "ls /sys/block");
    assert!(
        !blocks
            .split_whitespace()
            .any(|block| block.starts_with("vd")),
        "a virtio disk is left: {blocks}"
    );
    let extra = on_guest(
        installation,
        &address,
        "lsblk -n -o NAME,MOUNTPOINT $(ls /dev/disk/by-id/*trog-disk-extra)",
    );
    let columns: Vec<&str> = extra.split_whitespace().collect();
    assert!(
        columns.len() == 2 && columns[0].starts_with("sd") && columns[1] == "/srv/extra",
        "{extra}"
    );
    // Nothing on the disks was lost.
    for (path, contents) in files_kept {
        assert_eq!(
            on_guest(installation, &address, &format!("cat {path}")).trim(),
            *contents,
            "{path}"
        );
    }
    for mount in ["/srv/data", "/srv/extra"] {
        assert_eq!(
            on_guest(
                installation,
                &address,
                &format!("findmnt -n -o FSTYPE {mount}")
            )
            .trim(),
            "ext4",
            "{mount}"
        );
    }

    // Converged: the next run has nothing to do.
    let again = run_verb("provision", config, &[domain]);
    assert!(
        text(&again.stdout).contains(&format!("{domain}: converged, nothing to do")),
        "{}\n{}",
        text(&again.stdout),
        text(&again.stderr)
    );
    address
}
