//! Fleets of libvirt test-driver hypervisors, written to a temporary folder: one node XML per
//! hypervisor (memory, CPUs, guests, pool volumes) and a `hypervisors.conf` naming them.

#![allow(dead_code)] // each test binary uses its own part of the fixtures

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use tempfile::TempDir;
use trog::config::hypervisors_conf::{fleet_to_build_on, parse_fleet, BuildFleet};
use trog::hypervisor::fleet::observe_fleet;
use trog::libvirt::LibvirtObserver;
use trog::model::names::{DomainName, HypervisorName};
use trog::model::units::{Bytes, MiB};
use trog::placement::{FleetObservation, GuestDemand};

pub struct Guest {
    pub name: String,
    pub memory_mib: u64,
    pub vcpus: u32,
    pub running: bool,
}

pub fn guest(name: &str, memory_mib: u64, vcpus: u32) -> Guest {
    Guest {
        name: name.to_string(),
        memory_mib,
        vcpus,
        running: true,
    }
}

pub fn stopped(name: &str, memory_mib: u64, vcpus: u32) -> Guest {
    Guest {
        running: false,
        ..guest(name, memory_mib, vcpus)
    }
}

/// One test-driver hypervisor. Its pool (when there is one) reports 100 GiB whatever the file
/// says, so disk use is modelled by a volume of `pool_used_gib`.
pub struct Node {
    pub memory_mib: u64,
    pub cpus: u32,
    pub guests: Vec<Guest>,
    pub pool: Option<&'static str>,
    pub pool_used_gib: u64,
}

pub fn node(memory_mib: u64, cpus: u32) -> Node {
    Node {
        memory_mib,
        cpus,
        guests: Vec::new(),
        pool: Some("trog"),
        pool_used_gib: 0,
    }
}

impl Node {
    pub fn with(mut self, guests: impl IntoIterator<Item = Guest>) -> Node {
        self.guests.extend(guests);
        self
    }

    pub fn pool_used(mut self, gib: u64) -> Node {
        self.pool_used_gib = gib;
        self
    }

    pub fn without_pool(mut self) -> Node {
        self.pool = None;
        self
    }

    pub fn xml(&self) -> String {
        let mut xml = String::from("<node>\n");
        let _ = writeln!(
            xml,
            "  <cpu><nodes>1</nodes><sockets>1</sockets><cores>{0}</cores><threads>1</threads>\
             <active>{0}</active><mhz>2000</mhz><model>x86_64</model></cpu>",
            self.cpus
        );
        let _ = writeln!(xml, "  <memory>{}</memory>", self.memory_mib * 1024);
        for guest in &self.guests {
            let _ =
                writeln!(
                xml,
                "  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>\
                 <name>{}</name><memory unit='MiB'>{}</memory><vcpu>{}</vcpu>\
                 <os><type>hvm</type></os>{}</domain>",
                guest.name,
                guest.memory_mib,
                guest.vcpus,
                if guest.running { "" } else { "<test:runstate>5</test:runstate>" }
            );
        }
        if let Some(pool) = self.pool {
            let _ = writeln!(
                xml,
                "  <pool type='dir'><name>{pool}</name><target><path>/vms</path></target>"
            );
            if self.pool_used_gib > 0 {
                let _ = writeln!(
                    xml,
                    "    <volume type='file'><name>used.qcow2</name>\
                     <capacity unit='G'>{0}</capacity><allocation unit='G'>{0}</allocation>\
                     <target><path>/vms/used.qcow2</path></target></volume>",
                    self.pool_used_gib
                );
            }
            xml.push_str("  </pool>\n");
        }
        xml.push_str("</node>\n");
        xml
    }
}

/// A fleet being written: blocks of `hypervisors.conf` and their node files.
pub struct TestFleet {
    pub dir: TempDir,
    conf: String,
}

impl TestFleet {
    pub fn new() -> TestFleet {
        TestFleet {
            dir: tempfile::tempdir().expect("a temporary folder"),
            conf: String::new(),
        }
    }

    /// Adds a hypervisor; `settings` are extra `key = value` lines of its block.
    pub fn hypervisor(mut self, name: &str, node: Node, settings: &str) -> TestFleet {
        let path = self.dir.path().join(format!("{name}.xml"));
        std::fs::write(&path, node.xml()).expect("the node file is written");
        let _ = writeln!(
            self.conf,
            "[{name}]\nlibvirt_uri = test://{}\n{settings}\n",
            path.display()
        );
        self
    }

    /// Adds a hypervisor whose node file does not exist, so connecting to it fails.
    pub fn unreachable(mut self, name: &str) -> TestFleet {
        let path = self.dir.path().join(format!("{name}-missing.xml"));
        let _ = writeln!(
            self.conf,
            "[{name}]\nlibvirt_uri = test://{}\n",
            path.display()
        );
        self
    }

    /// Adds a hypervisor reached over SSH whose transport never answers: its "ssh" is a script
    /// that swallows what it is sent without a word, as a link to a host that drops every packet
    /// would (and ends when trog does). Asking it costs the whole answer timeout.
    pub fn hanging(mut self, name: &str) -> TestFleet {
        let transport = self.dir.path().join(format!("{name}-ssh"));
        std::fs::write(&transport, "#!/bin/sh\nexec cat >/dev/null\n")
            .expect("the script is written");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&transport, std::fs::Permissions::from_mode(0o755))
            .expect("the script is executable");
        let _ = writeln!(
            self.conf,
            "[{name}]\nlibvirt_uri = qemu+ssh://nobody@{name}.invalid/system?command={}\n",
            transport.display()
        );
        self
    }

    pub fn conf_path(&self) -> PathBuf {
        self.dir.path().join("hypervisors.conf")
    }

    pub fn build(&self) -> BuildFleet {
        std::fs::write(self.conf_path(), &self.conf).expect("the fleet file is written");
        let fleet = parse_fleet(&self.conf, &self.conf_path()).expect("the fleet file parses");
        fleet_to_build_on(&self.conf_path(), Some(fleet), None)
    }

    pub fn observe(&self) -> FleetObservation {
        observe_fleet(
            &self.build(),
            Arc::new(LibvirtObserver),
            std::time::Duration::from_secs(20),
        )
    }

    /// Replaces the temporary folder in text with `[TMP]`, for snapshots.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.dir.path().display().to_string(), "[TMP]")
    }
}

pub fn demand(domain: &str, memory_mib: u64, vcpus: u32, disk_gib: u64) -> GuestDemand {
    GuestDemand {
        domain: DomainName::parse(domain).expect("a valid domain"),
        memory: MiB(memory_mib),
        vcpus,
        disk: Bytes::from_gib(disk_gib),
        pinned_to: None,
    }
}

pub fn pinned(mut demand: GuestDemand, hypervisor: &str) -> GuestDemand {
    demand.pinned_to = Some(name(hypervisor));
    demand
}

pub fn name(hypervisor: &str) -> HypervisorName {
    HypervisorName::parse(hypervisor).expect("a valid hypervisor name")
}
