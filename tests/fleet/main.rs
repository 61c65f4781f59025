//! Observing fleets: libvirt test-driver hypervisors read through the real backend, the real
//! local libvirtd, the concurrency and deadline of asking, and the `trog fleet` command.

#[path = "../support/root_warning.rs"]
mod root_warning;

#[path = "../placement/fixtures.rs"]
mod fixtures;

use fixtures::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use trog::config::hypervisors_conf::{fleet_to_build_on, parse_fleet};
use trog::hypervisor::fleet::{find_guest, observe_fleet};
use trog::hypervisor::observer::FakeObserver;
use trog::libvirt::LibvirtObserver;
use trog::model::names::DomainName;
use trog::model::units::{Bytes, MiB};
use trog::placement::{DefinedGuest, HypervisorCapacity, Observation, PoolState};

#[test]
fn the_backend_reads_memory_cpus_every_defined_guest_and_the_pool() {
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(16384, 6)
                .with([guest("up.test", 2048, 2), stopped("down.test", 4096, 3)])
                .pool_used(25),
            "",
        )
        .hypervisor("hv2", node(8192, 2).without_pool(), "")
        .unreachable("hv3");
    let observation = fleet.observe();
    let Observation::Answered(hv1) = &observation.hypervisors[0].observation else {
        panic!("hv1 answered")
    };
    assert_eq!(hv1.physical_memory, MiB(16384));
    assert_eq!(hv1.physical_cpus, 6);
    let mut guests = hv1.guests.clone();
    guests.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        guests,
        vec![
            DefinedGuest {
                name: "down.test".into(),
                max_memory: MiB(4096),
                max_vcpus: 3,
                running: false
            },
            DefinedGuest {
                name: "up.test".into(),
                max_memory: MiB(2048),
                max_vcpus: 2,
                running: true
            },
        ]
    );
    assert_eq!(
        hv1.pool,
        PoolState::Active {
            capacity: Bytes::from_gib(100),
            allocation: Bytes::from_gib(25),
            available: Bytes::from_gib(75)
        }
    );
    let Observation::Answered(hv2) = &observation.hypervisors[1].observation else {
        panic!("hv2 answered")
    };
    assert_eq!(hv2.pool, PoolState::Absent);
    let Observation::Unreachable { reason } = &observation.hypervisors[2].observation else {
        panic!("hv3 is unreachable")
    };
    assert!(reason.starts_with("cannot connect to test://"), "{reason}");
}

#[test]
fn finding_a_guest_asks_every_hypervisor() {
    let fleet = TestFleet::new()
        .hypervisor("hv1", node(8192, 2).with([guest("a.test", 512, 1)]), "")
        .hypervisor("hv2", node(8192, 2).with([stopped("b.test", 512, 1)]), "")
        .unreachable("hv3");
    let build = fleet.build();
    let timeout = Duration::from_secs(20);
    let whereabouts = find_guest(
        &build,
        &DomainName::parse("b.test").unwrap(),
        Arc::new(LibvirtObserver),
        timeout,
    );
    assert_eq!(whereabouts.holders, vec![name("hv2")]);
    assert_eq!(whereabouts.unreachable.len(), 1);
    assert_eq!(whereabouts.unreachable[0].0, name("hv3"));
    let nowhere = find_guest(
        &build,
        &DomainName::parse("c.test").unwrap(),
        Arc::new(LibvirtObserver),
        timeout,
    );
    assert!(nowhere.holders.is_empty());
}

fn fake_fleet(
    count: usize,
    delay: Duration,
) -> (trog::config::hypervisors_conf::BuildFleet, FakeObserver) {
    let mut conf = String::new();
    let mut answers = HashMap::new();
    for n in 0..count {
        conf.push_str(&format!("[hv{n}]\nlibvirt_uri = test:///default\n"));
        answers.insert(
            format!("hv{n}"),
            HypervisorCapacity {
                physical_memory: MiB(8192),
                physical_cpus: 4,
                guests: vec![],
                pool: PoolState::Absent,
            },
        );
    }
    let path = Path::new("/fake/hypervisors.conf");
    let fleet = fleet_to_build_on(path, Some(parse_fleet(&conf, path).unwrap()), None);
    (fleet, FakeObserver { answers, delay })
}

#[test]
fn hypervisors_are_asked_at_once_not_in_turn() {
    let delay = Duration::from_millis(300);
    let (fleet, observer) = fake_fleet(10, delay);
    let started = Instant::now();
    let observation = observe_fleet(&fleet, Arc::new(observer), Duration::from_secs(20));
    let elapsed = started.elapsed();
    assert!(observation
        .hypervisors
        .iter()
        .all(|h| h.capacity().is_some()));
    // In turn would take ten delays (3 s); at once takes about one.
    assert!(elapsed < delay * 5, "took {elapsed:?}");
}

#[test]
fn a_hypervisor_that_answers_too_late_is_reported_and_not_waited_for() {
    let (fleet, mut observer) = fake_fleet(3, Duration::from_secs(10));
    observer.answers.clear();
    let started = Instant::now();
    let observation = observe_fleet(&fleet, Arc::new(observer), Duration::from_millis(200));
    assert!(started.elapsed() < Duration::from_secs(5));
    for hypervisor in &observation.hypervisors {
        assert_eq!(
            hypervisor.observation,
            Observation::Unreachable {
                reason: "did not answer within 0.2s".into()
            }
        );
    }
}

#[test]
fn the_local_libvirtd_reports_this_machines_memory_and_cpus() {
    let build = fleet_to_build_on(Path::new("/nonexistent/hypervisors.conf"), None, None);
    assert_eq!(build.fleet.hypervisors[0].libvirt_uri.uri, "qemu:///system");
    let observation = observe_fleet(&build, Arc::new(LibvirtObserver), Duration::from_secs(20));
    let capacity = match &observation.hypervisors[0].observation {
        Observation::Answered(capacity) => capacity.clone(),
        Observation::Unreachable { reason } => {
            panic!("the local libvirtd did not answer: {reason}")
        }
    };
    // libvirt counts the memory of the NUMA nodes (sysfs), which on a machine with memory
    // outside any node (as on this project's test machines) is less than /proc/meminfo's total:
    // it must match the nodes, and never exceed the total.
    let total_mib = kib_after(
        "MemTotal:",
        &std::fs::read_to_string("/proc/meminfo").unwrap(),
    ) / 1024;
    let nodes_mib = numa_nodes_mib();
    assert!(
        capacity.physical_memory.0 <= total_mib,
        "{capacity:?} vs {total_mib}MiB in /proc/meminfo"
    );
    assert!(
        capacity.physical_memory.0.abs_diff(nodes_mib) <= nodes_mib / 100 + 1,
        "{capacity:?} vs {nodes_mib}MiB in the NUMA nodes"
    );
    let online = std::thread::available_parallelism().unwrap().get() as u32;
    assert!(
        capacity.physical_cpus >= online,
        "{} CPUs vs {online} available",
        capacity.physical_cpus
    );
}

fn kib_after(label: &str, text: &str) -> u64 {
    text.lines()
        .find_map(|line| line.split_once(label).map(|(_, rest)| rest))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{label} in {text}"))
}

fn numa_nodes_mib() -> u64 {
    let nodes = std::fs::read_dir("/sys/devices/system/node").expect("sysfs lists the NUMA nodes");
    nodes
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("node"))
        .map(|entry| {
            kib_after(
                "MemTotal:",
                &std::fs::read_to_string(entry.path().join("meminfo")).unwrap(),
            )
        })
        .sum::<u64>()
        / 1024
}

fn trog(fleet: &TestFleet, arguments: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .env("TROG_PROVISIONER_CONFIG", fleet.dir.path())
        .args(arguments)
        .output()
        .expect("trog runs");
    let output = root_warning::output_without_root_warning(output);
    (
        output.status.code().unwrap_or(-1),
        fleet.redact(&String::from_utf8_lossy(&output.stdout)),
        fleet.redact(&String::from_utf8_lossy(&output.stderr)),
    )
}

#[test]
fn the_fleet_command_shows_every_hypervisor_and_why_one_is_missing() {
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(65536, 16)
                .with([
                    guest("web.example.test", 4096, 2),
                    stopped("db.example.test", 8192, 4),
                ])
                .pool_used(30),
            "max_guests = 20\nreserve_memory = 4096",
        )
        .hypervisor("hv2", node(32768, 8).without_pool(), "cpu_overcommit = 2")
        .unreachable("hv3");
    fleet.build();
    let (status, stdout, stderr) = trog(&fleet, &["fleet"]);
    assert_eq!((status, stderr.as_str()), (0, ""));
    insta::assert_snapshot!("fleet_table", stdout);

    let (status, stdout, _) = trog(&fleet, &["fleet", "--json"]);
    assert_eq!(status, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(
        json["hypervisors"][0]["memory"]["free"],
        65536 - 4096 - 12288
    );
    assert_eq!(
        json["hypervisors"][0]["guests"][0]["name"],
        "db.example.test"
    );
    assert_eq!(json["hypervisors"][2]["answer"], "unreachable");
}

#[test]
fn the_fleet_command_fails_when_nothing_answers_or_the_file_is_wrong() {
    let fleet = TestFleet::new().unreachable("hv1");
    fleet.build();
    let (status, _, _) = trog(&fleet, &["fleet"]);
    assert_eq!(status, 6, "no hypervisor answered");

    std::fs::write(
        fleet.conf_path(),
        "[hv1]\nlibvirt_uri = qemu+tcp://hv1/system\n",
    )
    .unwrap();
    let (status, _, stderr) = trog(&fleet, &["fleet"]);
    assert_eq!(status, 3);
    insta::assert_snapshot!("fleet_bad_conf", stderr);
}
