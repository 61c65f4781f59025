//! `provision --all` over a real installation (recipes.d, the secret store, ips.db, a libvirt
//! test-driver node for the placement) with each guest's convergence faked: some guests converge
//! and one fails in the same run, at one and at several at once.

use super::*;
use crate::credentials::{parse_handed_in, Secret, TerminalPrompter};
use crate::exit_status::ExitStatus;
use crate::plan::Resolution;
use crate::provision::run::PlannedGuest;
use crate::provision::site_summary::{render, summarise};
use crate::secrets::{stored_keypair, SecretStore, StoreKdf};
use crate::workflow::progress::RecordedProgress;
use std::time::Duration;

const PASSPHRASE: &str = "site passphrase";
const GUESTS: [&str; 3] = ["a.site.test", "b.site.test", "c.site.test"];

/// An installation of [`GUESTS`] on one empty test-driver node `hv1`, its store made and empty.
fn installation() -> tempfile::TempDir {
    installation_of(
        &GUESTS
            .iter()
            .map(|guest| {
                (
                    *guest,
                    format!("{guest}:\n  _global:\n    cpus: 1\n  nginx: {{}}\n"),
                )
            })
            .collect::<Vec<_>>(),
    )
}

/// An installation of `guests` (each its name and its file) on one empty test-driver node
/// `hv1`, its store made and empty.
fn installation_of(guests: &[(&str, String)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::write(
        root.path().join("node.xml"),
        "<node>\n  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>\
         <active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>\n  \
         <memory>16777216</memory>\n</node>\n",
    )
    .unwrap();
    std::fs::write(
        etc.join("hypervisors.conf"),
        format!(
            "[hv1]\nlibvirt_uri = test://{}/node.xml\n",
            root.path().display()
        ),
    )
    .unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        etc.join("recipes.yaml"),
    )
    .unwrap();
    for (guest, file) in guests {
        std::fs::write(etc.join(format!("recipes.d/{guest}.yaml")), file).unwrap();
    }
    // Quick to unlock: the store's real parameters are the integration tests' concern.
    let kdf = StoreKdf {
        memory_mib: 1,
        iterations: 1,
        parallelism: 1,
    };
    SecretStore::create(&etc.join("secrets.kdbx"), &Secret::new(PASSPHRASE), kdf).unwrap();
    root
}

/// Each guest "converged" at once, but for `failing`, which fails after its first step (as a
/// finish that failed): its key stays. A domain without a guest of its own is "converged" on its
/// machine, recorded as the machine's name.
struct FakeConvergence {
    failing: &'static str,
    /// The guests asked for, in the order they were asked, with the hypervisor placed on.
    asked: Mutex<Vec<Asked>>,
}

impl ConvergeGuest for FakeConvergence {
    fn converge(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        decision: &Decision,
        _progress: &mut dyn Progress,
        _output: &mut dyn ProvisionOutput,
        key_kept: &mut bool,
    ) -> Result<GuestConverged, Failure> {
        assert!(!run.request.dry_run);
        let domain = guest.config.domain.to_string();
        self.asked
            .lock()
            .unwrap()
            .push((domain.clone(), decision.chosen.to_string()));
        *key_kept = true;
        if domain == self.failing {
            return Err(Failure::new(
                format!("{domain}: step 8 of 8 failed: finish over SSH\n`make test` failed"),
                ExitStatus::Guest,
                Some(format!(
                    "see the test's output above; `trog provision {domain}` again once fixed"
                )),
            ));
        }
        Ok(GuestConverged::Changed)
    }

    fn converge_on_machine(
        &self,
        run: &SiteRun<'_, '_>,
        guest: &GuestInputs,
        machine: &DomainName,
        _progress: &mut dyn Progress,
        _output: &mut dyn ProvisionOutput,
    ) -> Result<GuestConverged, Failure> {
        assert!(!run.request.dry_run);
        let domain = guest.config.domain.to_string();
        self.asked
            .lock()
            .unwrap()
            .push((domain.clone(), format!("on {machine}")));
        if domain == self.failing {
            return Err(Failure::new(
                format!("{domain}: `make test` failed on {machine}'s machine"),
                ExitStatus::Guest,
                None,
            ));
        }
        Ok(GuestConverged::Changed)
    }
}

/// A run's output, kept.
#[derive(Default)]
struct Recorded(Vec<String>);

impl ProvisionOutput for Recorded {
    fn warning(&mut self, _progress: &mut dyn Progress, text: &str) {
        self.0.push(format!("warning: {text}"));
    }
    fn planned(&mut self, planned: &PlannedGuest<'_>) {
        self.0.push(format!("planned {}", planned.guest));
    }
    fn confirm_data_loss(&mut self, _volume: &str) -> bool {
        false
    }
    fn converged(&mut self, report: &ConvergeReport) {
        self.0.push(format!("converged {}", report.guest));
    }
    fn planned_on_machine(&mut self, planned: &crate::provision::host::PlannedOnMachine<'_>) {
        self.0
            .push(format!("planned {} on {}", planned.guest, planned.machine));
    }
}

/// A run's outcomes, and the guests the fake was asked for.
type SiteRunResult = (Vec<(DomainName, SiteOutcome)>, Vec<Asked>);

/// A guest the fake was asked to converge, and the hypervisor it was placed on.
type Asked = (String, String);

/// `provision --all --parallel PARALLEL` of a new [`installation`] where `b` fails: the outcomes,
/// and the guests the fake was asked for.
fn run_site(parallel: usize) -> (Vec<(DomainName, SiteOutcome)>, Vec<Asked>) {
    let root = installation();
    let (outcomes, asked) = run_installation(&root, parallel, "b.site.test").unwrap();
    // Every guest's key was made and stays: the failed one's too (its first step ran).
    let etc = root.path().join("etc");
    let store = SecretStore::open(&etc.join("secrets.kdbx"), &Secret::new(PASSPHRASE)).unwrap();
    for guest in GUESTS {
        let domain = DomainName::parse(guest).unwrap();
        assert!(
            stored_keypair(&store, &domain).unwrap().is_some(),
            "{guest}"
        );
    }
    (outcomes, asked)
}

/// `provision --all --parallel PARALLEL` of the installation in `root`, where `failing` fails.
fn run_installation(
    root: &tempfile::TempDir,
    parallel: usize,
    failing: &'static str,
) -> Result<SiteRunResult, Failure> {
    let etc = root.path().join("etc");
    let paths = InstallationPaths::resolve(etc.to_str(), None, None);
    let locks = Locks::new(etc.join("locks"), Duration::from_secs(5), "provision");
    let mut credentials = CredentialSource::new(
        parse_handed_in(&format!("keepass: {PASSPHRASE}\n\n")).unwrap(),
        TerminalPrompter,
    );
    let request = ProvisionRequest {
        domains: Vec::new(),
        hypervisor: None,
        resolution: Resolution::default(),
        dry_run: false,
        answer_timeout: Duration::from_secs(10),
        image_cache: root.path().join("cache"),
        adopt_host_key: false,
        new_secret_store: false,
        package_versions: crate::images::package_versions::PackageVersions::default(),
    };
    let fake = FakeConvergence {
        failing,
        asked: Mutex::new(Vec::new()),
    };
    let mut output = Recorded::default();
    let outcomes = provision_site(
        &paths,
        &locks,
        &mut credentials,
        &request,
        &SiteConvergence {
            parallel,
            guest: &fake,
        },
        &mut RecordedProgress::default(),
        &mut output,
    )?;
    assert!(output.0.is_empty(), "{:?}", output.0);
    Ok((outcomes, fake.asked.into_inner().unwrap()))
}

/// The outcomes as the summary names them, with why a guest failed.
fn outcome_lines(outcomes: &[(DomainName, SiteOutcome)]) -> Vec<String> {
    outcomes
        .iter()
        .map(|(domain, outcome)| match outcome {
            SiteOutcome::Changed => format!("{domain}: changed"),
            SiteOutcome::Skipped { because } => {
                format!("{domain}: skipped, {because} did not converge")
            }
            SiteOutcome::Already => format!("{domain}: converged already"),
            SiteOutcome::Failed(failure) => {
                format!(
                    "{domain}: failed ({:?}): {}",
                    failure.status,
                    failure.chain()[0]
                )
            }
        })
        .collect()
}

#[test]
fn one_guest_failing_leaves_the_others_converged_and_its_failure_sets_the_status() {
    let (outcomes, asked) = run_site(1);
    assert_eq!(
        outcome_lines(&outcomes),
        [
            "a.site.test: changed".to_string(),
            "b.site.test: failed (Guest): b.site.test: step 8 of 8 failed: finish over SSH\n\
             `make test` failed"
                .to_string(),
            "c.site.test: changed".to_string(),
        ]
    );
    // One at a time, in recipes.d's order: the guest after the failed one is still converged.
    assert_eq!(
        asked
            .iter()
            .map(|(guest, _)| guest.as_str())
            .collect::<Vec<_>>(),
        GUESTS
    );
    assert!(
        asked.iter().all(|(_, hypervisor)| hypervisor == "hv1"),
        "{asked:?}"
    );

    let (summary, status) = summarise(&outcomes, false);
    assert_eq!(status, ExitStatus::Guest, "the failed guest's status");
    assert_eq!(
        render(&summary),
        "3 guests: 2 changed, 0 converged already, 1 failed\n\
         \x20 changed            a.site.test\n\
         \x20 FAILED             b.site.test: b.site.test: step 8 of 8 failed: finish over SSH\n\
         \x20                    `make test` failed\n\
         \x20                    hint: see the test's output above; \
         `trog provision b.site.test` again once fixed\n\
         \x20 changed            c.site.test\n"
    );
}

#[test]
fn three_at_once_give_the_same_outcomes_in_the_same_order_as_one_at_a_time() {
    let (one_at_a_time, _) = run_site(1);
    let (three_at_once, mut asked) = run_site(3);
    assert_eq!(outcome_lines(&three_at_once), outcome_lines(&one_at_a_time));
    // Each guest was converged once, whichever worker took it.
    asked.sort();
    assert_eq!(
        asked
            .iter()
            .map(|(guest, _)| guest.as_str())
            .collect::<Vec<_>>(),
        GUESTS
    );
    let (summary, status) = summarise(&three_at_once, false);
    assert_eq!(status, ExitStatus::Guest);
    assert_eq!(
        render(&summary),
        render(&summarise(&one_at_a_time, false).0)
    );
}

/// A site of a web guest, a database guest and two sites on the web guest's machine (one of
/// them written before it in recipes.d's order), one of them depending on the other.
fn three_machines_and_dependents() -> tempfile::TempDir {
    let built = |guest: &str| format!("{guest}:\n  _global:\n    cpus: 1\n  nginx: {{}}\n");
    let on = |guest: &str, machine: &str| {
        format!("{guest}:\n  _global:\n    depends_on: {machine}\n  nginx: {{}}\n")
    };
    installation_of(&[
        ("blog.site.test", on("blog.site.test", "web.site.test")),
        ("db.site.test", built("db.site.test")),
        ("shop.site.test", on("shop.site.test", "blog.site.test")),
        ("web.site.test", built("web.site.test")),
    ])
}

fn asked_in_order(asked: &[Asked]) -> Vec<String> {
    asked
        .iter()
        .map(|(guest, whereon)| format!("{guest} {whereon}"))
        .collect()
}

#[test]
fn a_machine_is_converged_before_the_sites_that_run_on_it_and_they_on_it_not_on_hypervisors() {
    let root = three_machines_and_dependents();
    let (outcomes, asked) = run_installation(&root, 1, "none.site.test").unwrap();
    assert_eq!(
        asked_in_order(&asked),
        [
            "db.site.test hv1",
            "web.site.test hv1",
            "blog.site.test on web.site.test",
            "shop.site.test on web.site.test",
        ]
    );
    let (summary, status) = summarise(&outcomes, false);
    assert_eq!(status, ExitStatus::Success);
    assert!(render(&summary).starts_with("4 guests: 4 changed, 0 converged already, 0 failed\n"));
    // A dependent has no key of its own: it logs in with its machine's.
    let store = SecretStore::open(
        &root.path().join("etc/secrets.kdbx"),
        &Secret::new(PASSPHRASE),
    )
    .unwrap();
    for (guest, has_key) in [("web.site.test", true), ("blog.site.test", false)] {
        let domain = DomainName::parse(guest).unwrap();
        assert_eq!(
            stored_keypair(&store, &domain).unwrap().is_some(),
            has_key,
            "{guest}"
        );
    }
}

#[test]
fn the_sites_of_a_failed_machine_are_skipped_naming_it_and_the_other_machine_converges() {
    for parallel in [1, 3] {
        let root = three_machines_and_dependents();
        let (outcomes, asked) = run_installation(&root, parallel, "web.site.test").unwrap();
        let mut asked = asked_in_order(&asked);
        asked.sort();
        assert_eq!(
            asked,
            ["db.site.test hv1", "web.site.test hv1"],
            "{parallel}"
        );
        let (summary, status) = summarise(&outcomes, false);
        assert_eq!(status, ExitStatus::Guest, "the failed machine's status");
        assert_eq!(
            render(&summary),
            "4 guests: 1 changed, 0 converged already, 1 failed, 2 skipped\n\
             \x20 SKIPPED            blog.site.test: runs on web.site.test's machine, and web.site.test did not converge in this run\n\
             \x20 changed            db.site.test\n\
             \x20 SKIPPED            shop.site.test: runs on blog.site.test's machine, and blog.site.test did not converge in this run\n\
             \x20 FAILED             web.site.test: web.site.test: step 8 of 8 failed: finish over SSH\n\
             \x20                    `make test` failed\n\
             \x20                    hint: see the test's output above; `trog provision web.site.test` again once fixed\n",
            "{parallel}"
        );
    }
}

#[test]
fn a_failed_dependent_leaves_its_machine_and_the_rest_converged() {
    let root = three_machines_and_dependents();
    let (outcomes, _) = run_installation(&root, 2, "blog.site.test").unwrap();
    assert_eq!(
        outcome_lines(&outcomes),
        [
            "blog.site.test: failed (Guest): blog.site.test: `make test` failed on web.site.test's machine",
            "db.site.test: changed",
            "shop.site.test: skipped, blog.site.test did not converge",
            "web.site.test: changed",
        ]
    );
}

#[test]
fn a_cycle_stops_the_run_before_any_machine_is_asked_naming_its_lines() {
    let on = |guest: &str, machine: &str| {
        format!("{guest}:\n  _global:\n    depends_on: {machine}\n  nginx: {{}}\n")
    };
    let root = installation_of(&[
        ("a.site.test", on("a.site.test", "b.site.test")),
        ("b.site.test", on("b.site.test", "a.site.test")),
        (
            "c.site.test",
            "c.site.test:\n  _global:\n    cpus: 1\n  nginx: {}\n".to_string(),
        ),
    ]);
    let failure = run_installation(&root, 1, "none.site.test").unwrap_err();
    assert_eq!(failure.status, ExitStatus::Configuration);
    let said = failure.chain().join("\n");
    assert!(
        said.contains("recipes.d/a.site.test.yaml:3:5: a cycle: a.site.test depends on b.site.test, which depends on a.site.test"),
        "{said}"
    );
    assert!(said.contains("b.site.test's depends_on is at "), "{said}");
}
