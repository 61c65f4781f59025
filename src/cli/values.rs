//! The typed values of the command line: each argument is checked here, while clap parses, so a
//! run that would be refused for what it was given is refused before it reads the installation,
//! takes a lock or asks a hypervisor anything. A refusal is an [`ArgumentError`], which
//! [`argument_failure`] turns into the run's usage failure with its hint.

use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::model::names::shown;
use crate::model::names::{DomainName, HypervisorName, NameError, SnapshotName};
use std::fmt;
use std::time::Duration;

/// The longest a bound in seconds given on the command line may be: a day is past any wait trog
/// does, and the bound keeps every deadline computed from it far from overflowing.
pub const LONGEST_SECONDS: u64 = 24 * 60 * 60;

/// A number of seconds given on the command line, within the bounds its argument allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub u64);

impl Seconds {
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.0)
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why an argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("`{}` is not a whole number of seconds", shown(text))]
    NotSeconds { text: String },
    #[error("{seconds} seconds is out of range: from {least} to {most} are allowed")]
    SecondsOutOfRange { seconds: u64, least: u64, most: u64 },
    #[error("`{}` is not a whole number", shown(text))]
    NotCount { text: String },
    #[error("keeping 0 snapshots would delete every one, the one just taken too")]
    KeepNone,
    #[error("{count} guests at once is out of range: from 1 to {most} are allowed")]
    ParallelOutOfRange { count: usize, most: usize },
    #[error("the snapshot name is empty")]
    EmptySnapshotName,
    #[error(
        "`{}` holds a control character, which no snapshot name has",
        shown(name)
    )]
    ControlInSnapshotName { name: String },
    #[error("`{}` is not an absolute path in the guest: {why}", shown(path))]
    GuestPath { path: String, why: &'static str },
    #[error("`{}` is not a network: {why}", shown(network))]
    Network { network: String, why: &'static str },
    #[error("`{}` is not an account name", shown(name))]
    Account { name: String },
}

impl Diagnose for ArgumentError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Usage
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ArgumentError::Name(NameError::Domain { .. }) => {
                "name the guest in full, as its file in recipes.d is named (`www.example.test`)"
                    .into()
            }
            ArgumentError::Name(NameError::Hypervisor { .. }) => {
                "name a [block] of hypervisors.conf; `trog fleet` lists them".into()
            }
            ArgumentError::Name(NameError::Snapshot { .. }) => format!(
                "use letters, digits, `.`, `_` and `-`, at most {} characters, not starting with `-` or `.`",
                SnapshotName::LONGEST
            ),
            ArgumentError::Name(NameError::Recipe { .. } | NameError::Tenant { .. }) => {
                return None
            }
            ArgumentError::NotSeconds { .. } => "give a whole number of seconds, e.g. 30".into(),
            ArgumentError::SecondsOutOfRange { least, most, .. } => {
                format!("give a whole number of seconds from {least} to {most}")
            }
            ArgumentError::NotCount { .. } => "give a whole number, 1 or more".into(),
            ArgumentError::ParallelOutOfRange { most, .. } => {
                format!("give --parallel from 1 (one guest after another) to {most}")
            }
            ArgumentError::KeepNone => {
                "give --keep 1 or more; `trog snapshot --delete NAME DOMAIN` deletes one".into()
            }
            ArgumentError::EmptySnapshotName | ArgumentError::ControlInSnapshotName { .. } => {
                "`trog snapshot --list DOMAIN` shows the guest's snapshots by name".into()
            }
            ArgumentError::GuestPath { .. } => {
                "give the path from the guest's root, e.g. --cat /etc/fstab".into()
            }
            ArgumentError::Account { .. } => {
                "give the login name trog runs as there, e.g. --user trog (letters, digits, `_`, `.` and `-`, starting with a letter or `_`)".into()
            }
            ArgumentError::Network { .. } => {
                "name a libvirt network (`default`) or a bridge (`bridge:br0`), as a guest's `network` or `bridge` setting does"
                    .into()
            }
        })
    }
}

/// A guest's fully qualified domain name.
pub fn domain(text: &str) -> Result<DomainName, ArgumentError> {
    Ok(DomainName::parse(text)?)
}

/// A `[block]` of hypervisors.conf, by the name's shape (whether the file has it is told by the
/// verb, which reads the file).
pub fn hypervisor(text: &str) -> Result<HypervisorName, ArgumentError> {
    Ok(HypervisorName::parse(text)?)
}

/// The name a new snapshot takes (`snapshot --name`).
pub fn new_snapshot_name(text: &str) -> Result<SnapshotName, ArgumentError> {
    Ok(SnapshotName::parse(text)?)
}

/// The name of a snapshot the guest has (`snapshot --delete`, `restore --name`): it may have been
/// taken outside trog, so only what no snapshot name holds is refused here; whether the guest has
/// it is told by the hypervisor.
pub fn existing_snapshot_name(text: &str) -> Result<String, ArgumentError> {
    if text.is_empty() {
        return Err(ArgumentError::EmptySnapshotName);
    }
    if text.chars().any(char::is_control) {
        return Err(ArgumentError::ControlInSnapshotName {
            name: text.to_string(),
        });
    }
    Ok(text.to_string())
}

/// `snapshot --keep N`: how many snapshots to keep, the one just taken among them, so at least 1.
pub fn keep_count(text: &str) -> Result<usize, ArgumentError> {
    let count: usize = text.parse().map_err(|_| ArgumentError::NotCount {
        text: text.to_string(),
    })?;
    if count == 0 {
        return Err(ArgumentError::KeepNone);
    }
    Ok(count)
}

/// The most guests `provision --all --parallel N` converges at once: a bound on a typing
/// mistake (each guest holds an SSH connection and a thread), not a policy.
pub const MOST_AT_ONCE: usize = 32;

/// `provision --all --parallel N`: how many guests are converged at once, 1 to [`MOST_AT_ONCE`].
pub fn parallel_count(text: &str) -> Result<usize, ArgumentError> {
    let count: usize = text.parse().map_err(|_| ArgumentError::NotCount {
        text: text.to_string(),
    })?;
    if !(1..=MOST_AT_ONCE).contains(&count) {
        return Err(ArgumentError::ParallelOutOfRange {
            count,
            most: MOST_AT_ONCE,
        });
    }
    Ok(count)
}

/// A path in a guest's disks (`debug_boot --cat`, `--ls`): absolute, and one plain word of the
/// libguestfs command it is read by.
pub fn guest_path(text: &str) -> Result<String, ArgumentError> {
    let refuse = |why| {
        Err(ArgumentError::GuestPath {
            path: text.to_string(),
            why,
        })
    };
    if !text.starts_with('/') {
        return refuse("it does not start with `/`");
    }
    if text.chars().any(char::is_control) {
        return refuse("it holds a control character");
    }
    match crate::debug_boot::guest_disk::guest_path(text) {
        Ok(path) => Ok(path),
        Err(_) => refuse("libguestfs cannot take it"),
    }
}

/// `root-programs --user`: an account's login name as sudoers and a shell script take it whole
/// (POSIX's portable user names: letters, digits, `_`, `.`, `-`; not starting with `-` or `.`).
pub fn account(text: &str) -> Result<String, ArgumentError> {
    let mut chars = text.chars();
    let first_fits = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_fits = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_fits && rest_fits && text.len() <= 32 {
        Ok(text.to_string())
    } else {
        Err(ArgumentError::Account {
            name: text.to_string(),
        })
    }
}

/// `assign_ip --network`: a libvirt network's name or `bridge:NAME`, as the `network` and
/// `bridge` settings give them (text of at most a path's length, without control characters).
pub fn network(text: &str) -> Result<String, ArgumentError> {
    let refuse = |why| {
        Err(ArgumentError::Network {
            network: text.to_string(),
            why,
        })
    };
    if text.trim().is_empty()
        || text
            .strip_prefix("bridge:")
            .is_some_and(|b| b.trim().is_empty())
    {
        return refuse("it names nothing");
    }
    if text.len() > 4096 {
        return refuse("it is longer than 4096 bytes");
    }
    if text.chars().any(char::is_control) {
        return refuse("it holds a control character");
    }
    Ok(text.to_string())
}

/// A number of seconds from `least` to `most` (at most [`LONGEST_SECONDS`]).
pub fn seconds(
    least: u64,
    most: u64,
) -> impl Fn(&str) -> Result<Seconds, ArgumentError> + Clone + Send + Sync + 'static {
    let most = most.min(LONGEST_SECONDS);
    move |text: &str| {
        let seconds: u64 = text.trim().parse().map_err(|_| ArgumentError::NotSeconds {
            text: text.to_string(),
        })?;
        if seconds < least || seconds > most {
            return Err(ArgumentError::SecondsOutOfRange {
                seconds,
                least,
                most,
            });
        }
        Ok(Seconds(seconds))
    }
}

/// The usage failure for a command line clap refused because one of the parsers above refused a
/// value: the argument, why, and the parser's hint. `None` for every other refusal, which clap
/// reports itself.
pub fn argument_failure(error: &clap::Error) -> Option<Failure> {
    use clap::error::{ContextKind, ContextValue};
    let refusal = std::error::Error::source(error)?.downcast_ref::<ArgumentError>()?;
    let message = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(argument)) => format!("invalid value for {argument}: {refusal}"),
        _ => refusal.to_string(),
    };
    Some(Failure::new(message, refusal.exit_status(), refusal.hint()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_whole_and_within_their_bounds() {
        let timeout = seconds(1, 3600);
        assert_eq!(timeout("30"), Ok(Seconds(30)));
        assert_eq!(timeout("1"), Ok(Seconds(1)));
        for bad in ["0", "3601", "18446744073709551615"] {
            assert!(
                matches!(timeout(bad), Err(ArgumentError::SecondsOutOfRange { .. })),
                "{bad}"
            );
        }
        for bad in ["", "soon", "-1", "1.5", "99999999999999999999999"] {
            assert_eq!(
                timeout(bad),
                Err(ArgumentError::NotSeconds { text: bad.into() }),
                "{bad}"
            );
        }
        // No bound past a day, whatever the argument asks for.
        assert!(seconds(0, u64::MAX)("86401").is_err());
        assert_eq!(seconds(0, u64::MAX)("0"), Ok(Seconds(0)));
    }

    #[test]
    fn parallel_takes_one_to_the_most_at_once() {
        assert_eq!(parallel_count("1"), Ok(1));
        assert_eq!(parallel_count("32"), Ok(32));
        assert_eq!(
            parallel_count("0"),
            Err(ArgumentError::ParallelOutOfRange { count: 0, most: 32 })
        );
        assert_eq!(
            parallel_count("33"),
            Err(ArgumentError::ParallelOutOfRange {
                count: 33,
                most: 32
            })
        );
        assert!(matches!(
            parallel_count("many"),
            Err(ArgumentError::NotCount { .. })
        ));
    }

    #[test]
    fn keep_takes_one_or_more() {
        assert_eq!(keep_count("3"), Ok(3));
        assert_eq!(keep_count("0"), Err(ArgumentError::KeepNone));
        assert!(matches!(
            keep_count("-1"),
            Err(ArgumentError::NotCount { .. })
        ));
        assert!(matches!(
            keep_count("all"),
            Err(ArgumentError::NotCount { .. })
        ));
    }

    #[test]
    fn guest_paths_are_absolute_and_plain() {
        assert_eq!(guest_path("/etc/fstab"), Ok("/etc/fstab".into()));
        for bad in ["relative/path", "etc", "", "/etc\nrm", "/a\tb", "~/x"] {
            let error = guest_path(bad).unwrap_err();
            assert!(!error.to_string().contains('\n'), "{error}");
            assert!(error.hint().unwrap().contains("--cat /etc/fstab"));
        }
    }

    #[test]
    fn a_network_names_something() {
        assert_eq!(network("default"), Ok("default".into()));
        assert_eq!(network("bridge:br0"), Ok("bridge:br0".into()));
        for bad in ["", " ", "bridge:", "a\nb"] {
            assert!(network(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names_of_existing_snapshots_refuse_only_what_no_name_holds() {
        assert_eq!(
            existing_snapshot_name("taken by virsh"),
            Ok("taken by virsh".into())
        );
        assert_eq!(
            existing_snapshot_name(""),
            Err(ArgumentError::EmptySnapshotName)
        );
        assert!(existing_snapshot_name("a\nb").is_err());
        assert!(new_snapshot_name("taken by virsh").is_err());
        assert!(new_snapshot_name("../x").is_err());
    }

    #[test]
    fn every_refusal_is_a_usage_error_and_names_and_numbers_have_hints() {
        let refusals = [
            domain("a;b").unwrap_err(),
            hypervisor("h;v").unwrap_err(),
            new_snapshot_name("../x").unwrap_err(),
            keep_count("0").unwrap_err(),
            seconds(1, 10)("0").unwrap_err(),
            guest_path("x").unwrap_err(),
        ];
        for refusal in refusals {
            assert_eq!(refusal.exit_status(), ExitStatus::Usage, "{refusal}");
            assert!(refusal.hint().is_some(), "{refusal}");
        }
    }
}
