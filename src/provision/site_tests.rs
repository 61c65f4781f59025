//! `provision --all` over a real installation (recipes.d, the secret store, ips.db, a libvirt
//! test-driver node for the placement) with each guest's convergence faked: some guests converge
//! and one fails in the same run, at one and at several at once.

use super::*;
use crate::commands::provision_all::{render, summarise};
use crate::credentials::{parse_handed_in, Secret, TerminalPrompter};
use crate::exit_status::ExitStatus;
use crate::plan::Resolution;
use crate::provision::run::PlannedGuest;
use crate::secrets::{stored_keypair, SecretStore, StoreKdf};
use std::time::Duration;

const PASSPHRASE: &str = "site passphrase";
const GUESTS: [&str; 3] = ["a.site.test", "b.site.test", "c.site.test"];

/// An installation of [`GUESTS`] on one empty test-driver node `hv1`, its store made and empty.
fn installation() -> tempfile::TempDir {
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
    for guest in GUESTS {
        std::fs::write(
            etc.join(format!("recipes.d/{guest}.yaml")),
            format!("{guest}:\n  _global:\n    cpus: 1\n  nginx: {{}}\n"),
        )
        .unwrap();
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
/// finish that failed): its key stays.
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
        _progress: &mut Progress,
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
}

/// A run's output, kept.
#[derive(Default)]
struct Recorded(Vec<String>);

impl ProvisionOutput for Recorded {
    fn warning(&mut self, _progress: &mut Progress, text: &str) {
        self.0.push(format!("warning: {text}"));
    }
    fn planned(&mut self, _progress: &mut Progress, planned: &PlannedGuest<'_>) {
        self.0.push(format!("planned {}", planned.guest));
    }
    fn confirm_data_loss(&mut self, _volume: &str) -> bool {
        false
    }
    fn converged(&mut self, _progress: &mut Progress, report: &ConvergeReport) {
        self.0.push(format!("converged {}", report.guest));
    }
    fn planned_on_machine(
        &mut self,
        _progress: &mut Progress,
        planned: &crate::provision::host::PlannedOnMachine<'_>,
    ) {
        self.0
            .push(format!("planned {} on {}", planned.guest, planned.machine));
    }
}

/// A guest the fake was asked to converge, and the hypervisor it was placed on.
type Asked = (String, String);

/// `provision --all --parallel PARALLEL` of a new [`installation`] where `b` fails: the outcomes,
/// and the guests the fake was asked for.
fn run_site(parallel: usize) -> (Vec<(DomainName, SiteOutcome)>, Vec<Asked>) {
    let root = installation();
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
    };
    let fake = FakeConvergence {
        failing: "b.site.test",
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
        &mut Progress::new(ProgressMode::Plain),
        &mut output,
    )
    .unwrap();
    assert!(output.0.is_empty(), "{:?}", output.0);
    // Every guest's key was made and stays: the failed one's too (its first step ran).
    let store = SecretStore::open(&paths.secrets_kdbx, &Secret::new(PASSPHRASE)).unwrap();
    for guest in GUESTS {
        let domain = DomainName::parse(guest).unwrap();
        assert!(
            stored_keypair(&store, &domain).unwrap().is_some(),
            "{guest}"
        );
    }
    (outcomes, fake.asked.into_inner().unwrap())
}

/// The outcomes as the summary names them, with why a guest failed.
fn outcome_lines(outcomes: &[(DomainName, SiteOutcome)]) -> Vec<String> {
    outcomes
        .iter()
        .map(|(domain, outcome)| match outcome {
            SiteOutcome::Changed => format!("{domain}: changed"),
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
