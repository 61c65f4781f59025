//! Placement over fleets of libvirt test-driver hypervisors: every placement rule, observed
//! through the real libvirt backend, with the dry-run table and the refusal as snapshots.

mod fixtures;
mod properties;

use fixtures::*;
use trog::diagnose::{Diagnose, Failure};
use trog::exit_status::ExitStatus;
use trog::placement::{
    place_guest, place_guests, render_decision, ChoiceReason, Decision, PlacementError, TieBreak,
    Verdict,
};

fn placed(fleet: &TestFleet, guest: trog::placement::GuestDemand) -> Decision {
    let observation = fleet.observe();
    place_guest(&guest, &observation, None).unwrap_or_else(|error| panic!("{error}"))
}

fn refused(fleet: &TestFleet, guest: trog::placement::GuestDemand) -> PlacementError {
    place_guest(&guest, &fleet.observe(), None).expect_err("the guest should be refused")
}

#[test]
fn the_roomiest_hypervisor_wins_and_the_table_says_why_including_an_unreachable_one() {
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(16384, 4).with([guest("a.test", 8192, 2), stopped("b.test", 4096, 2)]),
            "",
        )
        .hypervisor(
            "hv2",
            node(32768, 8)
                .with([guest("c.test", 4096, 4)])
                .pool_used(30),
            "max_guests = 10",
        )
        .hypervisor("hv3", node(8192, 2), "reserve_memory = 1024")
        .unreachable("hv4");
    let decision = placed(&fleet, demand("shop.example.test", 4096, 2, 20));
    assert_eq!(decision.chosen.as_str(), "hv2");
    assert_eq!(decision.reason(), &ChoiceReason::Roomiest);
    insta::assert_snapshot!("dry_run_table", fleet.redact(&render_decision(&decision)));
    let json = serde_json::to_value(&decision).unwrap();
    assert_eq!(json["chosen"], "hv2");
    assert_eq!(json["rows"][3]["verdict"]["verdict"], "unreachable");
}

#[test]
fn refusal_names_every_resource_that_does_not_fit_with_its_figures() {
    let twenty: Vec<Guest> = (0..20)
        .map(|n| stopped(&format!("g{n}.test"), 1024, 1))
        .collect();
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(65536, 32).with([guest("big.test", 32768, 8), stopped("idle.test", 4096, 2)]),
            "reserve_memory = 4096",
        )
        .hypervisor(
            "hv2",
            node(262144, 64).with(twenty).pool_used(40),
            "max_guests = 20",
        )
        .hypervisor("hv3", node(131072, 2), "cpu_overcommit = 2")
        .unreachable("hv4");
    let error = refused(&fleet, demand("hungry.test", 65536, 16, 80));
    assert_eq!(error.exit_status(), ExitStatus::NoPlacement);
    let failure = Failure::from(error);
    insta::assert_snapshot!("refusal", fleet.redact(&failure.render()));
}

#[test]
fn memory_is_counted_as_committed_including_stopped_guests() {
    // 8192 physical − 2048 reserved − 4096 committed by a guest that is not even running.
    let fleet = TestFleet::new().hypervisor(
        "hv1",
        node(8192, 8).with([stopped("idle.test", 4096, 1)]),
        "",
    );
    let error = refused(&fleet, demand("new.test", 2049, 1, 1));
    assert!(error.to_string().contains(
        "hv1: needs 2049MB of memory, 2048MB free (8192MB physical, 4096MB committed, 2048MB reserved)"
    ), "{error}");
    assert_eq!(
        placed(&fleet, demand("new.test", 2048, 1, 1))
            .chosen
            .as_str(),
        "hv1"
    );
}

#[test]
fn cpus_are_measured_against_overcommit_times_physical() {
    let fleet = TestFleet::new().hypervisor(
        "hv1",
        node(65536, 2).with([guest("a.test", 1024, 2)]),
        "cpu_overcommit = 1.5",
    );
    let error = refused(&fleet, demand("new.test", 1024, 2, 1));
    assert!(
        error
            .to_string()
            .contains("hv1: needs 2 CPUs, 1 free (2 physical × 1.5 overcommit, 2 committed)"),
        "{error}"
    );
    assert_eq!(
        placed(&fleet, demand("new.test", 1024, 1, 1))
            .chosen
            .as_str(),
        "hv1"
    );
}

#[test]
fn disk_is_measured_against_pool_free_space_minus_the_reserve() {
    // The test driver's pool holds 100 GiB; 60 are used and 15 reserved, leaving 25.
    let fleet =
        TestFleet::new().hypervisor("hv1", node(65536, 8).pool_used(60), "reserve_disk = 15");
    let error = refused(&fleet, demand("new.test", 1024, 1, 26));
    assert!(
        error
            .to_string()
            .contains("hv1: needs 26GB of disk, 25GB free in the pool after a 15GB reserve"),
        "{error}"
    );
    assert_eq!(
        placed(&fleet, demand("new.test", 1024, 1, 25))
            .chosen
            .as_str(),
        "hv1"
    );
}

#[test]
fn an_absent_pool_is_not_counted_against_the_guest() {
    let fleet = TestFleet::new().hypervisor("hv1", node(65536, 8).without_pool(), "");
    let decision = placed(&fleet, demand("new.test", 1024, 1, 500));
    assert!(render_decision(&decision).contains("pool trog not yet created, not checked"));
}

#[test]
fn the_guest_count_is_measured_against_max_guests() {
    let fleet = TestFleet::new().hypervisor(
        "hv1",
        node(65536, 8).with([guest("a.test", 512, 1), guest("b.test", 512, 1)]),
        "max_guests = 2",
    );
    let error = refused(&fleet, demand("new.test", 512, 1, 1));
    assert!(
        error
            .to_string()
            .contains("hv1: already has 2 guests, and max_guests is 2"),
        "{error}"
    );
}

#[test]
fn a_guest_a_hypervisor_already_has_stays_there() {
    // hv1 is full and hv2 roomy, but hv1 has the guest.
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(4096, 1).with([guest("shop.example.test", 2048, 1)]),
            "max_guests = 1",
        )
        .hypervisor("hv2", node(65536, 16), "");
    let decision = placed(&fleet, demand("shop.example.test", 2048, 1, 10));
    assert_eq!(decision.chosen.as_str(), "hv1");
    assert_eq!(decision.reason(), &ChoiceReason::AlreadyThere);
    assert_eq!(decision.rows[1].verdict, Verdict::NotConsidered);
    // It is one of hv1's guests already: staying adds none.
    let table = render_decision(&decision);
    assert!(table.contains("1 → 1 of 1"), "{table}");
    assert!(!table.contains("1 → 2"), "{table}");
}

#[test]
fn ties_break_on_mean_headroom_then_fewer_guests_then_name() {
    // Same tightest resource (memory, 50% left after); hv-b has more CPUs to spare.
    let fleet = TestFleet::new()
        .hypervisor("hv-a", node(10240, 4), "")
        .hypervisor("hv-b", node(10240, 8), "");
    let decision = placed(&fleet, demand("new.test", 4096, 1, 1));
    assert_eq!(decision.chosen.as_str(), "hv-b");
    assert_eq!(
        decision.reason(),
        &ChoiceReason::TieBroken {
            by: TieBreak::MeanHeadroom
        }
    );

    // Identical but for the name.
    let fleet = TestFleet::new()
        .hypervisor("hv-b", node(10240, 4), "")
        .hypervisor("hv-a", node(10240, 4), "");
    let decision = placed(&fleet, demand("new.test", 4096, 1, 1));
    assert_eq!(decision.chosen.as_str(), "hv-a");
    assert_eq!(
        decision.reason(),
        &ChoiceReason::TieBroken { by: TieBreak::Name }
    );
}

#[test]
fn ties_on_every_share_go_to_the_hypervisor_with_fewer_guests() {
    // Guests with no memory or CPU weight would be odd; instead both are equally loaded by
    // share, and hv-b has one big guest where hv-a has two halves.
    let fleet = TestFleet::new()
        .hypervisor(
            "hv-a",
            node(10240, 4).with([guest("a1.test", 1024, 1), guest("a2.test", 1024, 1)]),
            "",
        )
        .hypervisor("hv-b", node(10240, 4).with([guest("b1.test", 2048, 2)]), "");
    let decision = placed(&fleet, demand("new.test", 1024, 1, 1));
    assert_eq!(decision.chosen.as_str(), "hv-b");
    assert_eq!(
        decision.reason(),
        &ChoiceReason::TieBroken {
            by: TieBreak::FewerGuests
        }
    );
}

#[test]
fn several_guests_are_placed_against_what_the_earlier_ones_were_promised() {
    let fleet = TestFleet::new()
        .hypervisor("hv1", node(10240, 8), "")
        .hypervisor("hv2", node(9216, 8), "");
    let observation = fleet.observe();
    let guests = [
        demand("one.test", 6144, 1, 1),
        demand("two.test", 6144, 1, 1),
        demand("three.test", 6144, 1, 1),
    ];
    let outcomes = place_guests(&guests, &observation, None);
    assert_eq!(outcomes[0].as_ref().unwrap().chosen.as_str(), "hv1");
    // hv1 has only 2048MB left after the first; hv2 still has 7168MB.
    assert_eq!(outcomes[1].as_ref().unwrap().chosen.as_str(), "hv2");
    let third = outcomes[2].as_ref().unwrap_err().to_string();
    assert!(third.contains("hv1: needs 6144MB of memory, 2048MB free (10240MB physical, 6144MB committed, 2048MB reserved)"), "{third}");
}

#[test]
fn a_pinned_guest_goes_to_its_pin_even_when_another_has_more_room() {
    let fleet = TestFleet::new()
        .hypervisor("hv1", node(8192, 2), "")
        .hypervisor("hv2", node(65536, 16), "");
    let decision = placed(&fleet, pinned(demand("new.test", 2048, 1, 1), "hv1"));
    assert_eq!(decision.chosen.as_str(), "hv1");
    assert_eq!(decision.reason(), &ChoiceReason::Pinned);
}

#[test]
fn a_pin_to_a_hypervisor_without_room_is_an_error_not_a_reassignment() {
    let fleet = TestFleet::new()
        .hypervisor("hv1", node(8192, 2), "")
        .hypervisor("hv2", node(65536, 16), "");
    let error = refused(&fleet, pinned(demand("new.test", 16384, 1, 1), "hv1"));
    assert_eq!(error.exit_status(), ExitStatus::NoPlacement);
    assert_eq!(
        error.to_string(),
        "Nowhere to put new.test: it wants 16384MB of memory, 1 CPU and 1GB of disk,\n\
         and hv1, where its hypervisor= setting pins it, cannot spare that.\n  \
         hv1: needs 16384MB of memory, 6144MB free (8192MB physical, 0MB committed, 2048MB reserved)"
    );
    let unknown = refused(&fleet, pinned(demand("new.test", 1024, 1, 1), "hv9"));
    assert_eq!(unknown.exit_status(), ExitStatus::Configuration);
    assert_eq!(unknown.hint().unwrap(), "the names it has are: hv1, hv2");
}

#[test]
fn the_command_line_hypervisor_skips_every_check_and_unknown_names_are_listed() {
    let fleet = TestFleet::new()
        .hypervisor("hv1", node(4096, 1), "max_guests = 0")
        .hypervisor("hv2", node(65536, 16), "");
    let observation = fleet.observe();
    let huge = demand("huge.test", 1 << 20, 64, 5000);
    let decision = place_guest(&huge, &observation, Some(&name("hv1"))).unwrap();
    assert_eq!(decision.chosen.as_str(), "hv1");
    assert_eq!(decision.reason(), &ChoiceReason::CommandLine);
    let error = place_guest(&huge, &observation, Some(&name("hv7"))).unwrap_err();
    assert_eq!(error.exit_status(), ExitStatus::Usage);
    assert!(
        error
            .to_string()
            .starts_with("there is no hypervisor named `hv7` in "),
        "{error}"
    );
    assert_eq!(error.hint().unwrap(), "the names it has are: hv1, hv2");
}

#[test]
fn an_unreachable_hypervisor_does_not_stop_placement_on_the_others() {
    let fleet = TestFleet::new()
        .unreachable("hv0")
        .hypervisor("hv1", node(8192, 2), "");
    let decision = placed(&fleet, demand("new.test", 1024, 1, 1));
    assert_eq!(decision.chosen.as_str(), "hv1");
    assert!(
        matches!(&decision.rows[0].verdict, Verdict::Unreachable { reason } if reason.contains("hv0-missing.xml"))
    );

    let nobody = TestFleet::new().unreachable("hv0");
    let error = refused(&nobody, demand("new.test", 1024, 1, 1));
    assert_eq!(
        error.exit_status(),
        ExitStatus::Hypervisor,
        "only unreachable: a reachability problem"
    );
}

#[test]
fn a_guest_defined_on_two_hypervisors_or_away_from_its_pin_is_a_conflict() {
    let fleet = TestFleet::new()
        .hypervisor(
            "hv1",
            node(8192, 2).with([stopped("twin.test", 1024, 1)]),
            "",
        )
        .hypervisor(
            "hv2",
            node(8192, 2).with([stopped("twin.test", 1024, 1)]),
            "",
        );
    let error = refused(&fleet, demand("twin.test", 1024, 1, 1));
    assert_eq!(error.exit_status(), ExitStatus::Conflict);
    assert_eq!(
        error.to_string(),
        "twin.test is defined on more than one hypervisor: hv1, hv2"
    );

    let fleet = TestFleet::new()
        .hypervisor("hv1", node(8192, 2), "")
        .hypervisor(
            "hv2",
            node(8192, 2).with([stopped("moved.test", 1024, 1)]),
            "",
        );
    let error = refused(&fleet, pinned(demand("moved.test", 1024, 1, 1), "hv1"));
    assert_eq!(error.exit_status(), ExitStatus::Conflict);
    assert_eq!(
        error.hint().unwrap(),
        "a guest stays where it is: set hypervisor=hv2, or move the guest by hand first"
    );
}
