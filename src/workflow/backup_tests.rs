//! `backup` against the fake hypervisor: what it asks before it reaches the guest over SSH, and
//! how each refusal ends it; a dependent and an existing host backed up on the machine they run
//! on, no hypervisor asked, what their recipes list read there into their own folder. (Reading
//! a real guest's paths needs a guest: tests/e2e.)

use super::*;
use crate::credentials::HandedInCredentials;
use crate::hypervisor::fake::{FakeDomain, FakeHypervisor, Operation};
use crate::model::names::DomainName;
use crate::workflow::fake_fleet::{FakeFleet, RecordedReport};

fn domain() -> DomainName {
    DomainName::parse("g.example.test").unwrap()
}

fn guest(trogs: bool, running: bool) -> FakeHypervisor {
    FakeHypervisor::new("hv1").with_domain(
        domain().as_str(),
        FakeDomain {
            trogs,
            running,
            ..FakeDomain::default()
        },
    )
}

fn back_up_on(fleet: &FakeFleet) -> Result<TakenBackup, Failure> {
    let installation = tempfile::tempdir().unwrap();
    let paths = InstallationPaths::resolve(installation.path().to_str(), None, None);
    let domain = domain();
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    back_up_in(
        fleet,
        &paths,
        &GuestAddress {
            domain: &domain,
            hypervisor: None,
            answer_timeout: Duration::from_secs(1),
        },
        0,
        &mut credentials,
        &RecordedReport::default(),
        &mut |runs_on, _| panic!("a guest of its own is not backed up as {runs_on:?}"),
    )
}

fn error_of(result: Result<TakenBackup, Failure>) -> (ExitStatus, String) {
    let failure = result.expect_err("the backup is refused");
    (failure.status, failure.chain()[0].clone())
}

#[test]
fn a_guest_on_libvirts_test_driver_is_refused_before_its_hypervisor_is_asked() {
    let fake = guest(true, true);
    let (status, message) = error_of(back_up_on(&FakeFleet::of(&fake)));
    assert_eq!(status, ExitStatus::Guest);
    assert!(message.contains("test driver"), "{message}");
    let g = domain();
    assert_eq!(
        fake.calls(),
        [
            format!("locate {g}"),
            format!("lock {g}"),
            "open hv1".to_string(),
            format!("unlock {g}"),
        ]
    );
}

/// (the guest, what fails, the exit status, the start of the message)
#[test]
fn each_refusal_before_the_guest_is_reached_ends_the_backup_with_its_status() {
    let g = domain();
    let cases = [
        (
            guest(true, true),
            Some(Operation::Locate),
            ExitStatus::Failure,
            format!("{g} is on no hypervisor"),
        ),
        (
            guest(true, true),
            Some(Operation::LockGuest),
            ExitStatus::Busy,
            format!("the guest {g} is busy"),
        ),
        (
            guest(true, true),
            Some(Operation::Open),
            ExitStatus::Hypervisor,
            "cannot connect".to_string(),
        ),
        (
            guest(false, true),
            None,
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            FakeHypervisor::new("hv1"),
            None,
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            guest(true, true),
            Some(Operation::Presence),
            ExitStatus::Guest,
            format!("{g} has no domain that trog made"),
        ),
        (
            guest(true, false),
            None,
            ExitStatus::Guest,
            format!("{g} is not running (shut off (shutdown))"),
        ),
    ];
    for (fake, failing, status, message) in cases {
        let fake = match failing {
            Some(operation) => fake.failing(operation),
            None => fake,
        };
        let (got_status, got_message) = error_of(back_up_on(&FakeFleet::of(&fake).remote()));
        assert_eq!(got_status, status, "{failing:?}: {got_message}");
        assert!(got_message.starts_with(&message), "{got_message}");
        let calls = fake.calls();
        if calls.contains(&format!("lock {g}")) && failing != Some(Operation::LockGuest) {
            assert_eq!(calls.last().unwrap(), &format!("unlock {g}"), "{failing:?}");
        }
    }
}

#[test]
fn a_running_guest_is_asked_for_no_more_before_its_configuration_is_read() {
    let fake = guest(true, true);
    let (status, _) = error_of(back_up_on(&FakeFleet::of(&fake).remote()));
    // The installation of the test has no configuration of the guest.
    assert_eq!(status, ExitStatus::Configuration);
    let g = domain();
    assert_eq!(
        fake.calls()[3..],
        [
            format!("presence {g}"),
            format!("stopped_state {g}"),
            format!("unlock {g}"),
        ]
    );
}

/// A machine a domain without a guest of its own runs on, logged into: its tar streams
/// `archive`, and it records each command it was asked.
struct TarringMachine {
    asked: std::cell::RefCell<Vec<String>>,
    archive: Vec<u8>,
}

impl Machine for TarringMachine {
    fn describe(&self) -> String {
        "web.example.test".into()
    }

    fn run_watched(
        &self,
        command: &MachineCommand,
        _watch: crate::machine::Watch,
    ) -> Result<crate::machine::CommandOutput, MachineError> {
        self.asked.borrow_mut().push(command.to_shell_line());
        Ok(crate::machine::CommandOutput {
            command_line: command.to_shell_line(),
            host: self.describe(),
            status: Some(0),
            stdout: Vec::new(),
            stderr: Vec::new(),
        })
    }

    fn start(
        &self,
        command: &MachineCommand,
    ) -> Result<crate::machine::held::HeldCommand, MachineError> {
        Err(MachineError::Spawn {
            program: command.to_shell_line(),
            source: std::io::Error::other("nothing is kept running here"),
        })
    }

    fn run_streamed(
        &self,
        command: &MachineCommand,
        sink: &mut dyn std::io::Write,
    ) -> Result<crate::machine::held::StreamedOutput, MachineError> {
        self.asked.borrow_mut().push(command.to_shell_line());
        sink.write_all(&self.archive).unwrap();
        Ok(crate::machine::held::StreamedOutput {
            status: Some(0),
            stderr: String::new(),
        })
    }
}

/// An uncompressed tar holding `srv/blog.example.test/index.html`.
fn site_archive() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(5);
    header.set_mode(0o644);
    header.set_cksum();
    builder
        .append_data(
            &mut header,
            "srv/blog.example.test/index.html",
            &b"hello"[..],
        )
        .unwrap();
    builder.into_inner().unwrap()
}

/// An installation whose `blog.example.test` runs as `runs_on` says (`depends_on: …` or
/// `existing_host: …`), its site in `/srv/blog.example.test`; and its inputs, read as a backup
/// reads them.
fn site_inputs(runs_on: &str) -> (tempfile::TempDir, GuestInputs) {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        etc.join("recipes.yaml"),
    )
    .unwrap();
    std::fs::write(
        etc.join("recipes.d/web.example.test.yaml"),
        "web.example.test:\n  _global:\n    cpus: 1\n  nginx: {}\n",
    )
    .unwrap();
    std::fs::write(
        etc.join("recipes.d/blog.example.test.yaml"),
        format!(
            "blog.example.test:\n  _global:\n    {runs_on}\n  nginx:\n    root: /srv/blog.example.test/www\n  data:\n    site_dir: /srv/blog.example.test\n"
        ),
    )
    .unwrap();
    let paths = InstallationPaths::resolve(etc.to_str(), None, None);
    let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
    let inputs = load_guest_inputs(
        &paths,
        &DomainName::parse("blog.example.test").unwrap(),
        &mut credentials,
        StoreUse::ReadOnly,
        AddressPolicy::ReadOnly,
        &RecordedReport::default(),
    )
    .unwrap();
    (root, inputs)
}

#[test]
fn a_dependent_or_an_existing_host_is_backed_up_on_its_machine_and_no_hypervisor_is_asked() {
    use crate::config::settings::RunsOn;
    let web = DomainName::parse("web.example.test").unwrap();
    for runs_on in [
        RunsOn::DependsOn(web.clone()),
        RunsOn::ExistingHost("192.0.2.7".into()),
    ] {
        let fake = guest(true, true);
        let fleet = FakeFleet::of(&fake).running_on(runs_on.clone());
        let installation = tempfile::tempdir().unwrap();
        let paths = InstallationPaths::resolve(installation.path().to_str(), None, None);
        let mut credentials = CredentialSource::new(HandedInCredentials::none(), TerminalPrompter);
        let mut asked = Vec::new();
        let refused = back_up_in(
            &fleet,
            &paths,
            &GuestAddress {
                domain: &domain(),
                hypervisor: None,
                answer_timeout: Duration::from_secs(1),
            },
            0,
            &mut credentials,
            &RecordedReport::default(),
            &mut |runs_on, _| {
                asked.push(runs_on);
                Err(Failure::new(
                    "the machine is not reached here",
                    ExitStatus::Guest,
                    None,
                ))
            },
        );
        assert_eq!(refused.err().unwrap().status, ExitStatus::Guest);
        assert_eq!(asked, [runs_on]);
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    }
}

#[test]
fn a_dependents_paths_are_read_on_its_machine_into_its_own_folder() {
    let (root, inputs) = site_inputs("depends_on: web.example.test");
    let machine = TarringMachine {
        asked: Default::default(),
        archive: site_archive(),
    };
    let taken = back_up_on_machine(
        &machine,
        &inputs,
        "web.example.test's machine",
        Filesystems::RootDisk,
        1_800_000_000,
    )
    .unwrap();
    assert_eq!(taken.guest, "blog.example.test");
    assert_eq!(taken.hypervisor, "web.example.test's machine");
    let listed: Vec<&str> = taken.paths.iter().map(|path| path.path.as_str()).collect();
    assert!(listed.contains(&"/srv/blog.example.test"), "{listed:?}");
    assert!(
        taken.archive.starts_with(
            root.path()
                .join("etc")
                .join("backups")
                .join("blog.example.test")
        ) || taken
            .archive
            .parent()
            .unwrap()
            .ends_with("blog.example.test"),
        "{}",
        taken.archive.display()
    );
    assert_eq!(
        std::fs::read(&taken.archive)
            .map(|bytes| bytes.len() as u64)
            .unwrap(),
        taken.bytes
    );
    let asked = machine.asked.borrow();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("srv/blog.example.test") && asked[0].contains("--one-file-system"),
        "{}",
        asked[0]
    );
}

#[test]
fn an_existing_hosts_paths_are_read_whatever_filesystem_they_are_on() {
    let (_root, inputs) = site_inputs("existing_host: 192.0.2.7");
    let machine = TarringMachine {
        asked: Default::default(),
        archive: site_archive(),
    };
    let taken = back_up_on_machine(
        &machine,
        &inputs,
        "the existing host 192.0.2.7",
        Filesystems::Every,
        1_800_000_000,
    )
    .unwrap();
    assert_eq!(taken.hypervisor, "the existing host 192.0.2.7");
    let asked = machine.asked.borrow();
    assert!(
        asked[0].contains("srv/blog.example.test") && !asked[0].contains("--one-file-system"),
        "{}",
        asked[0]
    );
}
