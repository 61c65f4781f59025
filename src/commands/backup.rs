//! `backup DOMAIN`: copies what the guest's recipes list under `backup:` (and the data recipe's
//! site directory) from the running guest into an archive on this machine; `--sweep` deletes the
//! backups past their retention instead.

use crate::cli::target::FleetSearch;
use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::model::names::DomainName;
use crate::output::events::{emit, Event};
use crate::workflow::backup::{back_up, sweep};
use crate::workflow::snapshot::GuestAddress;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The guest, fully qualified.
    #[arg(value_name = "DOMAIN", required_unless_present = "sweep", value_parser = values::domain)]
    pub domain: Option<DomainName>,
    /// Delete every backup older than its retention (`backup_retention_days`) instead, naming
    /// each file.
    #[arg(long, conflicts_with_all = ["domain", "hypervisor"])]
    pub sweep: bool,
    #[command(flatten)]
    pub search: FleetSearch,
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

pub fn run(global: &GlobalArgs, args: BackupArgs) -> Result<ExitStatus, Failure> {
    let paths = global.installation_paths();
    if args.sweep {
        let report = sweep(&paths, now_unix())?;
        if global.json {
            emit(&Event::BackupsSwept(&report));
        } else {
            if report.deleted.is_empty() && report.left.is_empty() {
                crate::outln!("no backup is past its retention");
            }
            for file in &report.deleted {
                crate::outln!("deleted  {}", file.display());
            }
            for (file, why) in &report.left {
                crate::outln!("LEFT     {}: {why}", file.display());
            }
        }
        return Ok(if report.left.is_empty() {
            ExitStatus::Success
        } else {
            ExitStatus::Failure
        });
    }
    let Some(domain) = &args.domain else {
        return Err(Failure::new(
            "backup names no guest",
            ExitStatus::Usage,
            Some("name the guest (`trog backup www.example.test`), or sweep with --sweep".into()),
        ));
    };
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let taken = back_up(
        &paths,
        &GuestAddress {
            domain,
            hypervisor: args.search.hypervisor_name(),
            answer_timeout: args.search.answer_timeout(),
        },
        now_unix(),
        &mut credentials,
        &global.locks("backup"),
        &crate::commands::StderrReporter,
    )?;
    if global.json {
        emit(&Event::BackupTaken(&taken));
    } else {
        for skipped in &taken.skipped {
            crate::errln!("note: {skipped} is not on the root disk (the data volume keeps its own data): left out");
        }
        let held: Vec<&str> = taken.paths.iter().map(|path| path.path.as_str()).collect();
        crate::outln!(
            "{domain}: backed up {} from {} into {} ({} bytes, sha256 {})",
            if held.is_empty() {
                "nothing".to_string()
            } else {
                held.join(", ")
            },
            taken.hypervisor,
            taken.archive.display(),
            taken.bytes,
            taken.sha256
        );
    }
    Ok(ExitStatus::Success)
}
