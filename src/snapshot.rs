//! Snapshots as data: their names, which one `--latest`, `--oldest` or `--name` means, and which
//! ones `--keep N` deletes. Pure: the time a default name is made from is passed in, and what a
//! hypervisor holds arrives as a list of [`SnapshotRecord`]s.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::names::{NameError, SnapshotName};
use crate::plan::GuestTag;

/// The longest snapshot name accepted (`SnapshotName` holds the rules).
pub const MAX_NAME_LENGTH: usize = SnapshotName::LONGEST;

/// How a snapshot captured the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capture {
    /// The guest was running: its disks together with its memory, so the filesystems are
    /// consistent without the guest's help and a restore resumes it where it was.
    WithMemory,
    /// The guest was shut off: its disks only.
    Offline,
}

impl std::fmt::Display for Capture {
    fn fmt(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str(match self {
            Capture::WithMemory => "with memory",
            Capture::Offline => "offline",
        })
    }
}

/// One snapshot of a guest, as the hypervisor holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotRecord {
    pub name: String,
    /// Seconds since the Unix epoch, as libvirt records the snapshot's creation.
    pub created_unix: i64,
    /// Whether the guest was running when it was taken (a restore leaves it running).
    pub running: bool,
    pub capture: Capture,
    /// trog's tag in the domain definition the snapshot holds.
    #[serde(skip)]
    pub tag: Option<GuestTag>,
}

/// Which snapshot a restore goes back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    Latest,
    Oldest,
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotChoiceError {
    #[error("{domain} has no snapshots")]
    NoSnapshots { domain: String },
    #[error("{domain} has no snapshot named {name}; it has: {}", .known.join(", "))]
    UnknownName {
        domain: String,
        name: String,
        known: Vec<String>,
    },
    #[error("{domain} already has a snapshot named {name}")]
    NameTaken { domain: String, name: String },
    #[error(transparent)]
    BadName(#[from] NameError),
}

impl Diagnose for SnapshotChoiceError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            SnapshotChoiceError::NoSnapshots { .. } | SnapshotChoiceError::UnknownName { .. } => {
                ExitStatus::Failure
            }
            SnapshotChoiceError::NameTaken { .. } => ExitStatus::Conflict,
            SnapshotChoiceError::BadName(_) => ExitStatus::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            SnapshotChoiceError::NoSnapshots { domain } => {
                format!("take one with `trog snapshot {domain}`")
            }
            SnapshotChoiceError::UnknownName { domain, .. } => {
                format!("`trog snapshot --list {domain}` shows each one with when it was taken")
            }
            SnapshotChoiceError::NameTaken { domain, .. } => format!(
                "choose another --name, or delete the old one with `trog snapshot --delete NAME {domain}`"
            ),
            SnapshotChoiceError::BadName(_) => format!(
                "use letters, digits, '.', '_' and '-', at most {MAX_NAME_LENGTH} characters, not starting with '-' or '.'"
            ),
        })
    }
}

/// The name a snapshot gets when none is given: its UTC time, so names sort by time
/// (`20261130T212233Z`).
pub fn default_name(unix_seconds: i64) -> String {
    utc_compact(unix_seconds)
}

/// `20261130T212233Z` for a Unix time: the form of snapshot names and backup archives.
pub fn utc_compact(unix_seconds: i64) -> String {
    utc(unix_seconds).format(UTC_COMPACT).to_string()
}

/// The format of [`utc_compact`], for chrono.
pub(crate) const UTC_COMPACT: &str = "%Y%m%dT%H%M%SZ";

/// The UTC time of a Unix time; one beyond chrono's range (hundreds of thousands of years away)
/// reads as the epoch.
pub(crate) fn utc(unix_seconds: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(unix_seconds, 0).unwrap_or_default()
}

/// Checks a name given with `--name` (the command line has checked it already; a caller of the
/// library may not have).
pub fn check_name(name: &str) -> Result<(), SnapshotChoiceError> {
    SnapshotName::parse(name)?;
    Ok(())
}

/// The snapshots oldest first (by creation time, then name, so equal times order the same way
/// every time).
pub fn by_age(snapshots: &[SnapshotRecord]) -> Vec<&SnapshotRecord> {
    let mut sorted: Vec<&SnapshotRecord> = snapshots.iter().collect();
    sorted.sort_by(|a, b| {
        a.created_unix
            .cmp(&b.created_unix)
            .then_with(|| a.name.cmp(&b.name))
    });
    sorted
}

/// The snapshot `which` means among `snapshots` of `domain`.
pub fn choose<'s>(
    domain: &str,
    snapshots: &'s [SnapshotRecord],
    which: &Which,
) -> Result<&'s SnapshotRecord, SnapshotChoiceError> {
    let sorted = by_age(snapshots);
    let found = match which {
        Which::Latest => sorted.last().copied(),
        Which::Oldest => sorted.first().copied(),
        Which::Named(name) => {
            return snapshots
                .iter()
                .find(|snapshot| &snapshot.name == name)
                .ok_or_else(|| {
                    if snapshots.is_empty() {
                        SnapshotChoiceError::NoSnapshots {
                            domain: domain.to_string(),
                        }
                    } else {
                        SnapshotChoiceError::UnknownName {
                            domain: domain.to_string(),
                            name: name.clone(),
                            known: sorted.iter().map(|s| s.name.clone()).collect(),
                        }
                    }
                })
        }
    };
    found.ok_or_else(|| SnapshotChoiceError::NoSnapshots {
        domain: domain.to_string(),
    })
}

/// The name a new snapshot takes: the one asked for, or the default from `now_unix`; refused if
/// the guest already has a snapshot of that name.
pub fn name_for_new(
    domain: &str,
    existing: &[SnapshotRecord],
    asked: Option<&str>,
    now_unix: i64,
) -> Result<String, SnapshotChoiceError> {
    let name = match asked {
        Some(name) => {
            check_name(name)?;
            name.to_string()
        }
        None => default_name(now_unix),
    };
    if existing.iter().any(|snapshot| snapshot.name == name) {
        return Err(SnapshotChoiceError::NameTaken {
            domain: domain.to_string(),
            name,
        });
    }
    Ok(name)
}

/// What `--keep N` deletes: every snapshot but the newest `keep`, oldest first.
pub fn beyond_newest(snapshots: &[SnapshotRecord], keep: usize) -> Vec<String> {
    let sorted = by_age(snapshots);
    let surplus = sorted.len().saturating_sub(keep);
    sorted[..surplus].iter().map(|s| s.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, created_unix: i64) -> SnapshotRecord {
        SnapshotRecord {
            name: name.into(),
            created_unix,
            running: true,
            capture: Capture::WithMemory,
            tag: None,
        }
    }

    #[test]
    fn default_names_are_utc_and_sort_by_time() {
        assert_eq!(default_name(0), "19700101T000000Z");
        assert_eq!(default_name(1_796_073_753), "20261130T212233Z");
        // A leap day, and the turn of a century that is a leap year.
        assert_eq!(default_name(951_782_400), "20000229T000000Z");
        let earlier = default_name(1_796_073_753);
        let later = default_name(1_796_073_753 + 86_400 * 40);
        assert!(earlier < later);
    }

    #[test]
    fn latest_and_oldest_follow_creation_time_not_listing_order() {
        let snapshots = [record("b", 20), record("a", 30), record("c", 10)];
        assert_eq!(choose("g", &snapshots, &Which::Latest).unwrap().name, "a");
        assert_eq!(choose("g", &snapshots, &Which::Oldest).unwrap().name, "c");
        assert_eq!(
            choose("g", &snapshots, &Which::Named("b".into()))
                .unwrap()
                .name,
            "b"
        );
    }

    #[test]
    fn an_unknown_name_lists_the_snapshots_there_are_oldest_first() {
        let snapshots = [record("new", 20), record("old", 10)];
        let error = choose("g.test", &snapshots, &Which::Named("nope".into())).unwrap_err();
        assert_eq!(
            error.to_string(),
            "g.test has no snapshot named nope; it has: old, new"
        );
    }

    #[test]
    fn no_snapshots_is_an_error_with_a_hint_naming_the_verb() {
        let error = choose("g.test", &[], &Which::Latest).unwrap_err();
        assert_eq!(error.to_string(), "g.test has no snapshots");
        assert_eq!(
            error.hint().unwrap(),
            "take one with `trog snapshot g.test`"
        );
        assert!(choose("g.test", &[], &Which::Named("x".into())).is_err());
    }

    #[test]
    fn a_taken_or_malformed_name_is_refused() {
        let existing = [record("before-upgrade", 10)];
        assert!(matches!(
            name_for_new("g", &existing, Some("before-upgrade"), 0),
            Err(SnapshotChoiceError::NameTaken { .. })
        ));
        for bad in ["", "-x", ".x", "a b", "a/b", "ä", &"x".repeat(65)] {
            assert!(
                matches!(
                    name_for_new("g", &[], Some(bad), 0),
                    Err(SnapshotChoiceError::BadName(_))
                ),
                "{bad:?}"
            );
        }
        assert_eq!(
            name_for_new("g", &existing, None, 0).unwrap(),
            "19700101T000000Z"
        );
        assert_eq!(
            name_for_new("g", &existing, Some("v2.1_pre-upgrade"), 0).unwrap(),
            "v2.1_pre-upgrade"
        );
    }

    #[test]
    fn keep_deletes_all_but_the_newest() {
        let snapshots = [record("c", 30), record("a", 10), record("b", 20)];
        assert_eq!(beyond_newest(&snapshots, 1), ["a", "b"]);
        assert_eq!(beyond_newest(&snapshots, 3), Vec::<String>::new());
        assert_eq!(beyond_newest(&snapshots, 0), ["a", "b", "c"]);
    }
}
