//! Every JSON event trog prints with `--json`, in one enum: the whole vocabulary a program (cron's
//! wrapper, a web application's "reprovision" button) has to understand, documented in
//! docs/JSON.md.
//!
//! Each event is one line on stdout: `{"schema":1,"event":"<name>",…}`. `schema` is
//! [`SCHEMA_VERSION`]; it changes only when an existing event loses a field or a field changes
//! meaning, so a reader can refuse a version it does not know instead of misreading it. A new
//! event or a new field is not a new version: readers ignore what they do not know.
//!
//! To add an event: add a variant here (its fields are its JSON fields), document it in
//! docs/JSON.md, and print it with [`emit`].

pub use crate::diagnose::ErrorEvent;
use crate::placement::fleet_table::FleetSummary;
use crate::placement::Decision;
use crate::plan::Plan;
use crate::preflight::PreflightReport;
pub use crate::provision::run::GuestKey;
use crate::provision::site_summary::SiteSummary;
use crate::provision::ConvergeReport;
use crate::workflow::addresses::{AddressListing, AssignedAddresses};
use crate::workflow::backup::{SweepReport, TakenBackup};
use crate::workflow::debug_boot::DebugReport;
use crate::workflow::destroy::DestroyReport;
use crate::workflow::restore::RestoreReport;
use crate::workflow::site::SiteInventory;
use crate::workflow::site_status::Drift;
use crate::workflow::snapshot::{SnapshotListing, TakenSnapshot};
use crate::workflow::status::GuestStatus;
use serde::Serialize;

/// The version of the event vocabulary every event carries as `schema`.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event<'a> {
    /// A run ended with a failure: the last line of a failed run.
    Error(ErrorEvent),
    /// A line meant for people, e.g. a warning about the fleet file.
    Message { text: &'a str },
    /// `provision`: where a guest goes and what will be done to it (the whole of a dry run).
    Plan {
        guest: &'a str,
        guest_key: GuestKey,
        placement: &'a Decision,
        plan: &'a Plan,
        /// `bake_packages`: which image the guest's new root disk is made over, and why.
        #[serde(skip_serializing_if = "Option::is_none")]
        base_image: Option<&'a str>,
    },
    /// `provision`: a domain without a guest of its own (`depends_on`, `existing_host`), and what
    /// is done on the machine it runs on (empty: converged).
    PlanOnMachine {
        guest: &'a str,
        machine: &'a str,
        state_dir: &'a str,
        steps: &'a [String],
    },
    /// `provision`: a step of the plan began.
    StepStarted {
        guest: &'a str,
        step: usize,
        steps: usize,
        label: &'a str,
    },
    /// `provision`: a step ended, well or not.
    StepFinished {
        guest: &'a str,
        label: &'a str,
        succeeded: bool,
        seconds: f64,
    },
    /// `provision`: output of the guest's finishing (its Makefile's log), as it comes.
    GuestOutput { text: &'a str },
    /// `provision`: a guest is converged.
    Done { report: &'a ConvergeReport },
    /// `destroy`: what was removed, kept and left behind.
    Destroyed(&'a DestroyReport),
    /// `debug_boot`: a line of the guest's console (`--console`, as it comes; `--fetch`).
    ConsoleLine { text: &'a str },
    /// `debug_boot`: what the action did.
    DebugBoot(&'a DebugReport),
    /// `status`: one guest's place and whether it is converged.
    Status(&'a GuestStatus),
    /// `snapshot`: a snapshot was taken (and `--keep` deleted older ones).
    SnapshotTaken(&'a TakenSnapshot),
    /// `snapshot --list`: the guest's snapshots, oldest first.
    Snapshots(&'a SnapshotListing),
    /// `snapshot --delete`: a snapshot was deleted.
    SnapshotDeleted {
        guest: &'a str,
        hypervisor: &'a str,
        name: &'a str,
    },
    /// `backup`: a backup was taken: the archive, its sha256 and what it holds.
    BackupTaken(&'a TakenBackup),
    /// `backup --sweep`: the files of the backups past their retention that were deleted, and
    /// those that could not be.
    BackupsSwept(&'a SweepReport),
    /// `restore`: the guest is back at a snapshot; what `status` says now.
    Restored(&'a RestoreReport),
    /// `preflight`: every check, and whether a run is worth starting.
    Preflight {
        #[serde(flatten)]
        report: &'a PreflightReport,
        worth_starting: bool,
    },
    /// `fleet`: every hypervisor's capacity, commitments and guests.
    Fleet(&'a FleetSummary),
    /// `recipes`: the guest recipes.
    Recipes { recipes: Vec<RecipeListing<'a>> },
    /// `new_guest`: the guest's file was written.
    GuestFileWritten {
        file: String,
        domain: &'a str,
        recipes: &'a [&'a str],
        to_fill: &'a [String],
    },
    /// `new_config`: everything a guest needs was generated into a directory.
    ConfigGenerated(&'a GeneratedSummary),
    /// `assign_ip`: the addresses a guest holds now.
    AddressAssigned(&'a AssignedAddresses),
    /// `addresses`: every range, its holders and what is free.
    Addresses(&'a AddressListing),
    /// `image build`: the image is in the image cache, and the `image` setting that names it.
    ImageBuilt(&'a BuiltImageSummary),
    /// `inventory`: the site's machines, and the hypervisors that could not be asked.
    Inventory(&'a SiteInventory),
    /// `status --all`, after every guest's `status`: what the hypervisors hold that recipes.d
    /// does not say.
    Drift(&'a Drift),
    /// `provision --all`, last: what became of every guest of recipes.d.
    SiteProvisioned(&'a SiteSummary),
}

/// One guest recipe in the `recipes` event.
#[derive(Debug, Serialize)]
pub struct RecipeListing<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub requires: Vec<&'a str>,
}

/// What `new_config` generated.
#[derive(Debug, Serialize)]
pub struct GeneratedSummary {
    pub domain: String,
    pub directory: String,
    pub recipes: Vec<String>,
    pub packages: Vec<String>,
    pub image: GeneratedImage,
    pub seed_iso_sha256: String,
    pub payload_sha256: String,
    pub boot_fingerprint: String,
    pub shape_fingerprint: String,
    pub public_key: String,
}

#[derive(Debug, Serialize)]
pub struct GeneratedImage {
    pub url: String,
    pub digest: String,
}

/// What `image build` built and where it is.
#[derive(Debug, Serialize)]
pub struct BuiltImageSummary {
    pub distro: String,
    pub release: String,
    pub mirror: String,
    /// The image in the image cache.
    pub path: std::path::PathBuf,
    pub sha256: String,
    /// The file listing every package in the image with its version.
    pub packages: std::path::PathBuf,
    pub size_bytes: u64,
    /// The `image` setting that names it, as a guest or `_global` writes it.
    pub image: ImageSetting,
}

/// A guest's `image` setting: where the image is and its digest.
#[derive(Debug, Serialize)]
pub struct ImageSetting {
    pub url: String,
    pub sha256: String,
}

/// The event as its line: `schema` first, then `event`, then the event's own fields.
pub fn to_line(event: &Event) -> String {
    let value = serde_json::to_value(event).expect("every event serialises");
    let serde_json::Value::Object(fields) = value else {
        unreachable!("an internally tagged enum serialises as an object")
    };
    let mut line = serde_json::Map::new();
    line.insert("schema".into(), SCHEMA_VERSION.into());
    line.extend(fields);
    serde_json::Value::Object(line).to_string()
}

/// Prints the event as one line on stdout, flushed at once so a reader sees it as it happens. A
/// reader that went away is not an error worth a report (`output::print`).
pub fn emit(event: &Event) {
    let mut line = to_line(event);
    line.push('\n');
    crate::output::print::write_stdout_bytes(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Failure;
    use crate::exit_status::ExitStatus;

    #[test]
    fn a_line_starts_with_the_schema_and_the_event_name() {
        assert_eq!(
            to_line(&Event::Message { text: "hello" }),
            r#"{"schema":1,"event":"message","text":"hello"}"#
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the secret store /x/secrets.kdbx")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_carries_the_status_the_chain_and_the_hint() {
        let failure = Failure::new(
            Outer(std::io::Error::other("refused")),
            ExitStatus::Credentials,
            Some("hand the passphrase in with --credentials".into()),
        );
        assert_eq!(
            to_line(&Event::Error(ErrorEvent::of(&failure))),
            r#"{"schema":1,"event":"error","exit_status":{"code":4,"name":"credentials"},"message":"cannot open the secret store /x/secrets.kdbx","causes":["refused"],"hint":"hand the passphrase in with --credentials"}"#
        );
    }

    #[test]
    fn a_built_image_names_its_file_its_packages_and_its_image_setting() {
        let summary = BuiltImageSummary {
            distro: "debian".into(),
            release: "bookworm".into(),
            mirror: "http://mirror.example.test/debian".into(),
            path: "/c/trog/images/sha256-ab.img".into(),
            sha256: "ab".into(),
            packages: "/c/trog/images/sha256-ab.packages".into(),
            size_bytes: 1024,
            image: ImageSetting {
                url: "file:///c/trog/images/sha256-ab.img".into(),
                sha256: "ab".into(),
            },
        };
        assert_eq!(
            to_line(&Event::ImageBuilt(&summary)),
            r#"{"schema":1,"event":"image_built","distro":"debian","release":"bookworm","mirror":"http://mirror.example.test/debian","path":"/c/trog/images/sha256-ab.img","sha256":"ab","packages":"/c/trog/images/sha256-ab.packages","size_bytes":1024,"image":{"url":"file:///c/trog/images/sha256-ab.img","sha256":"ab"}}"#
        );
    }

    #[test]
    fn a_debug_boot_report_is_one_event_naming_its_action() {
        use crate::debug_boot::console::ConsoleEnd;
        use crate::workflow::debug_boot::DebugOutcome;
        let report = DebugReport {
            guest: "g.test".into(),
            hypervisor: "local".into(),
            outcome: DebugOutcome::Console {
                capture: "/c.log".into(),
                end: ConsoleEnd::LoginPrompt,
            },
            tunnel: None,
        };
        assert_eq!(
            to_line(&Event::DebugBoot(&report)),
            r#"{"schema":1,"event":"debug_boot","guest":"g.test","hypervisor":"local","action":"console","capture":"/c.log","end":{"reason":"login_prompt"}}"#
        );
    }
}
