//! Every exit status trog can end with, in one place. README's table is written from this enum,
//! and a test checks that the two agree.

/// How a run of trog ended. The numbers are part of trog's interface: scripts and the web
/// application's "reprovision" button branch on them, so a number is never reused for another
/// meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// The command did what it was asked (or, for `preflight`, a run is worth starting).
    Success,
    /// A failure of no more specific kind; also `preflight` finding a run not worth starting.
    Failure,
    /// The command line itself was wrong (unknown flag, missing argument).
    Usage,
    /// The installation's configuration or a recipe is invalid, incomplete or still has `CHANGEME`.
    Configuration,
    /// A credential was needed and could not be had: not handed in and no terminal to ask at,
    /// or the secret store refused the passphrase.
    Credentials,
    /// No hypervisor can hold the guest, or a pinned one cannot.
    NoPlacement,
    /// A hypervisor could not be reached or libvirt refused an operation.
    Hypervisor,
    /// Something of the same name exists that trog did not create, or converging would destroy
    /// data; a flag named in the message resolves it.
    Conflict,
    /// The guest did not come up, could not be reached, or its finishing failed.
    Guest,
    /// A destroy finished but left something behind, which it names.
    PartialDestroy,
    /// Another run holds what this one needs (the guest, the secret store, a base image being
    /// uploaded) and did not let go within the wait; the message names the holder.
    Busy,
    /// The secret store or ips.db is damaged: not a database of its kind, truncated, unreadable,
    /// or written by a newer trog.
    DamagedStore,
    /// Something answered at a guest's address with an SSH host key that is not the one trog gave
    /// the guest: nothing was sent to it.
    UntrustedGuest,
}

impl ExitStatus {
    /// Every status, in the order of their codes.
    pub const ALL: [ExitStatus; 13] = [
        ExitStatus::Success,
        ExitStatus::Failure,
        ExitStatus::Usage,
        ExitStatus::Configuration,
        ExitStatus::Credentials,
        ExitStatus::NoPlacement,
        ExitStatus::Hypervisor,
        ExitStatus::Conflict,
        ExitStatus::Guest,
        ExitStatus::PartialDestroy,
        ExitStatus::Busy,
        ExitStatus::DamagedStore,
        ExitStatus::UntrustedGuest,
    ];

    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Configuration => 3,
            ExitStatus::Credentials => 4,
            ExitStatus::NoPlacement => 5,
            ExitStatus::Hypervisor => 6,
            ExitStatus::Conflict => 7,
            ExitStatus::Guest => 8,
            ExitStatus::PartialDestroy => 9,
            ExitStatus::Busy => 10,
            ExitStatus::DamagedStore => 11,
            ExitStatus::UntrustedGuest => 12,
        }
    }

    /// The status's name in JSON output (`exit_status.name` of an `error` event): stable, like the
    /// number, so a program may branch on either.
    pub fn name(self) -> &'static str {
        match self {
            ExitStatus::Success => "success",
            ExitStatus::Failure => "failure",
            ExitStatus::Usage => "usage",
            ExitStatus::Configuration => "configuration",
            ExitStatus::Credentials => "credentials",
            ExitStatus::NoPlacement => "no_placement",
            ExitStatus::Hypervisor => "hypervisor",
            ExitStatus::Conflict => "conflict",
            ExitStatus::Guest => "guest",
            ExitStatus::PartialDestroy => "partial_destroy",
            ExitStatus::Busy => "busy",
            ExitStatus::DamagedStore => "damaged_store",
            ExitStatus::UntrustedGuest => "untrusted_guest",
        }
    }

    /// The one-line meaning printed in README's table.
    pub fn meaning(self) -> &'static str {
        match self {
            ExitStatus::Success => "done; for `preflight`, a run is worth starting",
            ExitStatus::Failure => "failed; for `preflight`, a run is not worth starting",
            ExitStatus::Usage => "the command line is wrong",
            ExitStatus::Configuration => {
                "configuration or recipe invalid, incomplete, or CHANGEME left"
            }
            ExitStatus::Credentials => {
                "a credential is missing and there is no terminal to ask, or it was refused"
            }
            ExitStatus::NoPlacement => {
                "no hypervisor can hold the guest (or the pinned one cannot)"
            }
            ExitStatus::Hypervisor => "a hypervisor could not be reached or libvirt refused",
            ExitStatus::Conflict => {
                "a same-named resource trog did not create, data would be lost, a static address a running domain holds a lease on, or a verb about a guest trog built named a domain that has none (a dependent, an existing host)"
            }
            ExitStatus::Guest => "the guest did not boot, answer, or finish",
            ExitStatus::PartialDestroy => "destroy finished but left something behind",
            ExitStatus::Busy => {
                "another run holds the guest, the secret store, ips.db or a base image (here or on the hypervisor), and did not let go in time"
            }
            ExitStatus::DamagedStore => "the secret store or ips.db is damaged, or is not a database of its kind",
            ExitStatus::UntrustedGuest => "something answered at a guest's address with a host key that is not the guest's; nothing was sent",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_in_order() {
        for (index, status) in ExitStatus::ALL.iter().enumerate() {
            assert_eq!(status.code(), index as i32);
        }
    }

    #[test]
    fn readme_documents_every_status() {
        let readme = include_str!("../README.md");
        for status in ExitStatus::ALL {
            let row = format!("| {} | {} |", status.code(), status.meaning());
            assert!(readme.contains(&row), "README lacks the row `{row}`");
        }
    }

    #[test]
    fn docs_json_names_every_status() {
        let doc = include_str!("../docs/JSON.md");
        for status in ExitStatus::ALL {
            let row = format!("| {} | `{}` |", status.code(), status.name());
            assert!(doc.contains(&row), "docs/JSON.md lacks the row `{row}`");
        }
    }
}
