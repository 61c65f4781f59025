//! Properties of the placement function over generated fleets (pure: no libvirt).

use proptest::prelude::*;
use std::path::PathBuf;
use trog::config::hypervisors_conf::FleetSource;
use trog::model::hypervisor::{HypervisorConfig, LibvirtUri};
use trog::model::names::{DomainName, HypervisorName};
use trog::model::units::{Bytes, MiB};
use trog::placement::{
    place_guest, place_guests, ChoiceReason, DefinedGuest, FleetObservation, GuestDemand,
    HypervisorCapacity, Observation, ObservedHypervisor, PlacementError, PoolState,
};

const GIB: u64 = 1 << 30;

fn arbitrary_hypervisor(index: usize) -> impl Strategy<Value = ObservedHypervisor> {
    let config = (
        0u64..8,
        0u64..40,
        prop::option::of(0u32..12),
        prop::sample::select(vec![1.0, 1.5, 2.0, 4.0]),
    );
    let guests = prop::collection::vec((1u64..16, 1u32..8), 0..10);
    let pool = prop_oneof![
        4 => (10u64..2000, 0u64..100).prop_map(|(capacity_gib, used_percent)| {
            let capacity = capacity_gib * GIB;
            let allocation = capacity / 100 * used_percent;
            PoolState::Active { capacity: Bytes(capacity), allocation: Bytes(allocation), available: Bytes(capacity - allocation) }
        }),
        1 => Just(PoolState::Absent),
        1 => Just(PoolState::Inactive),
    ];
    let observed = prop_oneof![
        8 => (1u64..128, 1u32..64, guests, pool).prop_map(move |(memory_gib, cpus, guests, pool)| {
            Observation::Answered(HypervisorCapacity {
                physical_memory: MiB(memory_gib * 1024),
                physical_cpus: cpus,
                guests: guests
                    .into_iter()
                    .enumerate()
                    .map(|(n, (memory_gib, vcpus))| DefinedGuest {
                        name: format!("g{n}.hv{index}.test"),
                        max_memory: MiB(memory_gib * 1024),
                        max_vcpus: vcpus,
                        running: n % 2 == 0,
                    })
                    .collect(),
                pool,
            })
        }),
        1 => Just(Observation::Unreachable { reason: "did not answer within 20s".to_string() }),
    ];
    (config, observed).prop_map(
        move |((reserve_gib, reserve_disk_gib, max_guests, overcommit), observation)| {
            let mut config = HypervisorConfig::with_defaults(
                HypervisorName::parse(&format!("hv{index}")).unwrap(),
                LibvirtUri::parse("test:///default").unwrap(),
            );
            config.reserve_memory = MiB(reserve_gib * 1024);
            config.reserve_disk = Bytes(reserve_disk_gib * GIB);
            config.max_guests = max_guests;
            config.cpu_overcommit = overcommit;
            ObservedHypervisor {
                config,
                observation,
            }
        },
    )
}

fn arbitrary_fleet() -> impl Strategy<Value = FleetObservation> {
    (1usize..8)
        .prop_flat_map(|count| (0..count).map(arbitrary_hypervisor).collect::<Vec<_>>())
        .prop_map(|hypervisors| FleetObservation {
            source: FleetSource::File {
                path: PathBuf::from("/etc/trog-provisioner/hypervisors.conf"),
            },
            hypervisors,
        })
}

fn arbitrary_demand(name: &'static str) -> impl Strategy<Value = GuestDemand> {
    (1u64..64, 1u32..32, 1u64..500).prop_map(move |(memory_gib, vcpus, disk_gib)| GuestDemand {
        domain: DomainName::parse(name).unwrap(),
        memory: MiB(memory_gib * 1024),
        vcpus,
        disk: Bytes(disk_gib * GIB),
        pinned_to: None,
    })
}

/// Whether the guest fits on the hypervisor, worked out here independently of the engine,
/// in integers wherever the engine's inputs are integers.
fn fits(hypervisor: &ObservedHypervisor, demand: &GuestDemand) -> bool {
    let Observation::Answered(capacity) = &hypervisor.observation else {
        return false;
    };
    let config = &hypervisor.config;
    let committed_memory: u64 = capacity.guests.iter().map(|g| g.max_memory.0).sum();
    let committed_vcpus: u64 = capacity.guests.iter().map(|g| u64::from(g.max_vcpus)).sum();
    let memory =
        committed_memory + demand.memory.0 + config.reserve_memory.0 <= capacity.physical_memory.0;
    let cpus = (committed_vcpus + u64::from(demand.vcpus)) as f64
        <= config.cpu_overcommit * f64::from(capacity.physical_cpus);
    let disk = match capacity.pool {
        PoolState::Active { available, .. } => demand.disk.0 + config.reserve_disk.0 <= available.0,
        _ => true,
    };
    let guests = config
        .max_guests
        .is_none_or(|max| (capacity.guests.len() as u64) < u64::from(max));
    memory && cpus && disk && guests
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn never_overcommits_and_refuses_only_when_nothing_fits(
        fleet in arbitrary_fleet(),
        demand in arbitrary_demand("new.test"),
    ) {
        let anywhere = fleet.hypervisors.iter().any(|h| fits(h, &demand));
        match place_guest(&demand, &fleet, None) {
            Ok(decision) => {
                let chosen = fleet.hypervisors.iter().find(|h| h.config.name == decision.chosen).unwrap();
                prop_assert!(fits(chosen, &demand), "chose {} where the guest does not fit", decision.chosen);
            }
            Err(PlacementError::Nowhere(refusal)) => {
                prop_assert!(!anywhere, "refused although a hypervisor fits: {:?}", refusal);
                prop_assert_eq!(refusal.hypervisors.len(), fleet.hypervisors.len());
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
        }
    }

    #[test]
    fn is_deterministic_and_independent_of_the_order_of_the_file(
        fleet in arbitrary_fleet(),
        demand in arbitrary_demand("new.test"),
    ) {
        let first = place_guest(&demand, &fleet, None);
        prop_assert_eq!(&first, &place_guest(&demand, &fleet, None));
        let mut reversed = fleet.clone();
        reversed.hypervisors.reverse();
        let again = place_guest(&demand, &reversed, None);
        prop_assert_eq!(first.map(|d| d.chosen).ok(), again.map(|d| d.chosen).ok());
    }

    #[test]
    fn a_pinned_guest_goes_only_where_pinned(
        fleet in arbitrary_fleet(),
        demand in arbitrary_demand("new.test"),
        pick in any::<prop::sample::Index>(),
    ) {
        let pin = fleet.hypervisors[pick.index(fleet.hypervisors.len())].clone();
        let demand = GuestDemand { pinned_to: Some(pin.config.name.clone()), ..demand };
        match place_guest(&demand, &fleet, None) {
            Ok(decision) => {
                prop_assert_eq!(&decision.chosen, &pin.config.name);
                prop_assert_eq!(decision.reason(), &ChoiceReason::Pinned);
                prop_assert!(fits(&pin, &demand));
            }
            Err(PlacementError::Nowhere(refusal)) => {
                prop_assert!(!fits(&pin, &demand));
                prop_assert_eq!(refusal.hypervisors.len(), 1);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
        }
    }

    #[test]
    fn a_guest_already_defined_stays_where_it_is(
        fleet in arbitrary_fleet(),
        demand in arbitrary_demand("g0.hv0.test"),
    ) {
        let holder = &fleet.hypervisors[0];
        let held = holder.capacity().is_some_and(|c| c.holds("g0.hv0.test"));
        if let Ok(decision) = place_guest(&demand, &fleet, None) {
            if held {
                prop_assert_eq!(decision.chosen.as_str(), "hv0");
                prop_assert_eq!(decision.reason(), &ChoiceReason::AlreadyThere);
            }
        } else {
            prop_assert!(!held, "a guest that is already defined is never refused");
        }
    }

    #[test]
    fn guests_placed_together_never_overcommit_between_them(
        fleet in arbitrary_fleet(),
        demands in prop::collection::vec(arbitrary_demand("x.test"), 1..6),
    ) {
        let demands: Vec<GuestDemand> = demands
            .into_iter()
            .enumerate()
            .map(|(n, d)| GuestDemand { domain: DomainName::parse(&format!("new{n}.test")).unwrap(), ..d })
            .collect();
        let outcomes = place_guests(&demands, &fleet, None);
        // Replay: promise each placed guest by hand and check it fitted at its turn.
        let mut promised = fleet.clone();
        for (demand, outcome) in demands.iter().zip(&outcomes) {
            let Ok(decision) = outcome else { continue };
            let chosen = promised.hypervisors.iter_mut().find(|h| h.config.name == decision.chosen).unwrap();
            prop_assert!(fits(chosen, demand), "{} placed on {} beyond what was left", demand.domain, decision.chosen);
            if let Observation::Answered(capacity) = &mut chosen.observation {
                capacity.guests.push(DefinedGuest {
                    name: demand.domain.to_string(),
                    max_memory: demand.memory,
                    max_vcpus: demand.vcpus,
                    running: false,
                });
                if let PoolState::Active { available, .. } = &mut capacity.pool {
                    *available = available.saturating_sub(demand.disk);
                }
            }
        }
    }
}
