//! How long placement takes as the fleet grows, and what asking every hypervisor at once saves
//! over asking them in turn. Run with `cargo bench --bench placement`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use trog::config::hypervisors_conf::{fleet_to_build_on, parse_fleet, FleetSource};
use trog::hypervisor::fleet::observe_fleet;
use trog::hypervisor::observer::{FakeObserver, HypervisorObserver};
use trog::model::hypervisor::{HypervisorConfig, LibvirtUri};
use trog::model::names::{DomainName, HypervisorName};
use trog::model::units::{Bytes, MiB};
use trog::placement::{
    place_guest, DefinedGuest, FleetObservation, GuestDemand, HypervisorCapacity, Observation,
    ObservedHypervisor, PoolState,
};

const GUESTS_PER_HYPERVISOR: usize = 50;
const GIB: u64 = 1 << 30;

/// A fleet of `count` hypervisors of slightly different sizes, each with 50 guests.
fn fleet_of(count: usize) -> FleetObservation {
    let hypervisors = (0..count)
        .map(|n| {
            let mut config = HypervisorConfig::with_defaults(
                HypervisorName::parse(&format!("hv{n}")).unwrap(),
                LibvirtUri::parse("test:///default").unwrap(),
            );
            config.max_guests = Some(80);
            let guests = (0..GUESTS_PER_HYPERVISOR)
                .map(|g| DefinedGuest {
                    name: format!("g{g}.hv{n}.test"),
                    max_memory: MiB(1024 + (g as u64 % 4) * 512),
                    max_vcpus: 1 + (g as u32 % 3),
                    running: g % 2 == 0,
                })
                .collect();
            let capacity = 4000 * GIB;
            let used = (1000 + (n as u64 * 37) % 2000) * GIB;
            let observation = Observation::Answered(HypervisorCapacity {
                physical_memory: MiB(262_144 + (n as u64 % 7) * 16_384),
                physical_cpus: 64,
                guests,
                pool: PoolState::Active {
                    capacity: Bytes(capacity),
                    allocation: Bytes(used),
                    available: Bytes(capacity - used),
                },
            });
            ObservedHypervisor {
                config,
                observation,
            }
        })
        .collect();
    FleetObservation {
        source: FleetSource::File {
            path: PathBuf::from("/bench/hypervisors.conf"),
        },
        hypervisors,
    }
}

fn placement(c: &mut Criterion) {
    let guest = GuestDemand {
        domain: DomainName::parse("new.example.test").unwrap(),
        memory: MiB(4096),
        vcpus: 2,
        disk: Bytes(20 * GIB),
        pinned_to: None,
    };
    let mut group = c.benchmark_group("placement decision (50 guests per hypervisor)");
    for count in [10, 100, 1000] {
        let fleet = fleet_of(count);
        group.bench_with_input(BenchmarkId::from_parameter(count), &fleet, |b, fleet| {
            b.iter(|| place_guest(&guest, fleet, None).unwrap())
        });
    }
    group.finish();
}

/// Twenty fake hypervisors that each take `DELAY` to answer.
const HYPERVISORS: usize = 20;
const DELAY: Duration = Duration::from_millis(20);

fn fake_fleet() -> (trog::config::hypervisors_conf::BuildFleet, FakeObserver) {
    let mut conf = String::new();
    let mut answers = HashMap::new();
    for n in 0..HYPERVISORS {
        conf.push_str(&format!("[hv{n}]\nlibvirt_uri = test:///default\n"));
        let capacity = fleet_of(1).hypervisors[0].capacity().unwrap().clone();
        answers.insert(format!("hv{n}"), capacity);
    }
    let path = Path::new("/bench/hypervisors.conf");
    let fleet = fleet_to_build_on(path, Some(parse_fleet(&conf, path).unwrap()), None);
    (
        fleet,
        FakeObserver {
            answers,
            delay: DELAY,
        },
    )
}

fn observation(c: &mut Criterion) {
    let (fleet, observer) = fake_fleet();
    let shared: Arc<dyn HypervisorObserver> = Arc::new(observer.clone());
    let mut group = c.benchmark_group("observing 20 hypervisors answering after 20ms");
    group.sample_size(10);
    group.bench_function("all at once", |b| {
        b.iter(|| observe_fleet(&fleet, Arc::clone(&shared), Duration::from_secs(20)))
    });
    group.bench_function("in turn", |b| {
        b.iter(|| {
            fleet
                .fleet
                .hypervisors
                .iter()
                .map(|hypervisor| observer.capacity(hypervisor).unwrap())
                .collect::<Vec<_>>()
        })
    });
    group.finish();

    // The ratio, measured once more outside criterion so it can be printed as one figure.
    let rounds = 5;
    let started = Instant::now();
    for _ in 0..rounds {
        observe_fleet(&fleet, Arc::clone(&shared), Duration::from_secs(20));
    }
    let at_once = started.elapsed() / rounds;
    let started = Instant::now();
    for _ in 0..rounds {
        for hypervisor in &fleet.fleet.hypervisors {
            observer.capacity(hypervisor).unwrap();
        }
    }
    let in_turn = started.elapsed() / rounds;
    println!(
        "observing {HYPERVISORS} hypervisors of {DELAY:?} each: at once {at_once:?}, in turn {in_turn:?}, \
         {:.1}x faster at once",
        in_turn.as_secs_f64() / at_once.as_secs_f64()
    );
}

criterion_group!(benches, placement, observation);
criterion_main!(benches);
