//! Which plans restore the guest's newest backup: those that finish a root disk that is new,
//! made in this plan or made by an earlier run that never finished it. A guest that was finished
//! before keeps its files (its own are newer than any backup), and so does its data volume,
//! which a backup never holds.
//!
//! A finished guest whose root disk a plan replaces while it runs is backed up first, in the
//! same run, and that backup is what comes back: restoring an older one would lose every file
//! written since, without a word. A guest that does not run cannot be read: its plan restores
//! the newest backup there is, and says which.

use crate::plan::action::{Action, Plan};
use crate::plan::observed::ObservedGuest;

/// `plan` with the restore of a backup just before its finish, when the root disk it finishes is
/// new: a fresh one taken first when the plan replaces a finished, running guest's root disk and
/// the guest has paths to back up (`backs_up`), else `newest_backup` (an archive's path, when the
/// guest has one).
pub fn with_backup_restore(
    mut plan: Plan,
    observed: &ObservedGuest,
    newest_backup: Option<&str>,
    backs_up: bool,
) -> Plan {
    let root_made_here = plan
        .actions
        .iter()
        .any(|action| matches!(action, Action::CreateRootVolume { .. }));
    let finished_and_running = observed.domain.as_ref().is_some_and(|domain| {
        domain.running
            && domain
                .tag
                .as_ref()
                .is_some_and(|tag| tag.payload_digest.is_some())
    });
    if backs_up && root_made_here && observed.root_volume.is_some() && finished_and_running {
        if let Some(finish) = plan
            .actions
            .iter()
            .position(|action| matches!(action, Action::Finish { .. }))
        {
            plan.actions.insert(finish, Action::RestoreFreshBackup);
            plan.actions.insert(0, Action::BackUpBeforeRebuild);
            return plan;
        }
    }
    let Some(archive) = newest_backup else {
        return plan;
    };
    // Made by an earlier run that stopped before the finish: the tag records no payload. A
    // domain trog did not make (no tag) was never trog's to restore into.
    let never_finished = observed
        .domain
        .as_ref()
        .and_then(|domain| domain.tag.as_ref())
        .is_some_and(|tag| tag.payload_digest.is_none());
    if !(root_made_here || never_finished) {
        return plan;
    }
    if let Some(finish) = plan
        .actions
        .iter()
        .position(|action| matches!(action, Action::Finish { .. }))
    {
        plan.actions.insert(
            finish,
            Action::RestoreBackup {
                archive: archive.to_string(),
            },
        );
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::desired::GuestTag;
    use crate::plan::observed::{ObservedDomain, PoolState};

    const ARCHIVE: &str = "/etc/trog-provisioner/backups/www.example.test/20261201T010203Z.tar.gz";

    fn plan_of(actions: Vec<Action>) -> Plan {
        Plan {
            domain: "www.example.test".into(),
            actions,
        }
    }

    fn finish() -> Action {
        Action::Finish {
            payload_digest: "p".into(),
        }
    }

    fn observed_with(payload_digest: Option<&str>, tagged: bool) -> ObservedGuest {
        ObservedGuest {
            pool: PoolState::Active,
            domain: Some(ObservedDomain {
                tag: tagged.then(|| GuestTag {
                    boot_fingerprint: "b".into(),
                    shape_fingerprint: "s".into(),
                    payload_digest: payload_digest.map(str::to_string),
                }),
                running: true,
                autostart: true,
                snapshots: Vec::new(),
                seed_attached: false,
                shares_folders: false,
                disk_pools: Vec::new(),
                domain_type: None,
            }),
            ..ObservedGuest::nothing()
        }
    }

    fn restores(plan: &Plan) -> Vec<usize> {
        plan.actions
            .iter()
            .enumerate()
            .filter(|(_, action)| matches!(action, Action::RestoreBackup { .. }))
            .map(|(index, _)| index)
            .collect()
    }

    #[test]
    fn a_new_root_disk_gets_the_backup_just_before_its_finish() {
        let built = plan_of(vec![
            Action::CreateRootVolume {
                volume: "r".into(),
                backing_volume: "b".into(),
                capacity: crate::model::units::Bytes(1),
            },
            Action::StartDomain,
            Action::WaitForSsh,
            finish(),
        ]);
        let planned = with_backup_restore(
            built.clone(),
            &ObservedGuest::nothing(),
            Some(ARCHIVE),
            true,
        );
        assert_eq!(restores(&planned), [3]);
        assert_eq!(
            planned.actions[3].to_string(),
            format!("restore the newest backup {ARCHIVE} (the root disk is new)")
        );
        // No backup: nothing to restore.
        assert_eq!(
            with_backup_restore(built, &ObservedGuest::nothing(), None, true)
                .actions
                .len(),
            4
        );
    }

    #[test]
    fn a_finished_guest_keeps_its_files_and_an_interrupted_build_gets_the_backup() {
        let refinish = plan_of(vec![Action::WaitForSsh, finish()]);
        let finished_before = observed_with(Some("old"), true);
        assert!(restores(&with_backup_restore(
            refinish.clone(),
            &finished_before,
            Some(ARCHIVE),
            true
        ))
        .is_empty());
        let interrupted = observed_with(None, true);
        assert_eq!(
            restores(&with_backup_restore(
                refinish.clone(),
                &interrupted,
                Some(ARCHIVE),
                true
            )),
            [1]
        );
        // A domain trog did not make is not restored into.
        let adopted = observed_with(None, false);
        assert!(restores(&with_backup_restore(
            refinish,
            &adopted,
            Some(ARCHIVE),
            true
        ))
        .is_empty());
        // Converged: no finish, no restore.
        assert!(restores(&with_backup_restore(
            plan_of(Vec::new()),
            &interrupted,
            Some(ARCHIVE),
            true
        ))
        .is_empty());
    }

    /// A running, finished guest's root disk replaced: stop, delete, make, start, finish.
    fn rebuild() -> Plan {
        plan_of(vec![
            Action::StopDomain,
            Action::DeleteVolume {
                volume: "r".into(),
                why: "the boot inputs changed".into(),
            },
            Action::CreateRootVolume {
                volume: "r".into(),
                backing_volume: "b".into(),
                capacity: crate::model::units::Bytes(1),
            },
            Action::StartDomain,
            Action::WaitForSsh,
            finish(),
        ])
    }

    fn rebuilt_guest(running: bool) -> ObservedGuest {
        let mut observed = observed_with(Some("old"), true);
        observed.domain.as_mut().unwrap().running = running;
        observed.root_volume = Some(crate::plan::observed::ObservedVolume {
            capacity: crate::model::units::Bytes(1),
            sha256: None,
        });
        observed
    }

    #[test]
    fn a_running_guests_new_root_disk_gets_a_backup_taken_first_not_an_older_one() {
        let planned = with_backup_restore(rebuild(), &rebuilt_guest(true), Some(ARCHIVE), true);
        let steps: Vec<String> = planned.actions.iter().map(ToString::to_string).collect();
        assert_eq!(
            steps[0],
            "back up the guest's files over SSH (its root disk is replaced below)"
        );
        assert_eq!(
            steps[steps.len() - 2],
            "restore the backup taken above onto the new root disk"
        );
        assert!(restores(&planned).is_empty(), "{steps:?}");
        // Nothing to back up: the older backup, as before.
        let nothing = with_backup_restore(rebuild(), &rebuilt_guest(true), Some(ARCHIVE), false);
        assert_eq!(restores(&nothing).len(), 1);
        assert!(!nothing.actions.contains(&Action::BackUpBeforeRebuild));
    }

    #[test]
    fn a_stopped_guests_new_root_disk_gets_the_newest_backup_named_in_the_plan() {
        let planned = with_backup_restore(rebuild(), &rebuilt_guest(false), Some(ARCHIVE), true);
        assert!(!planned.actions.contains(&Action::BackUpBeforeRebuild));
        assert_eq!(restores(&planned).len(), 1);
        assert!(planned
            .actions
            .iter()
            .any(|action| action.to_string().contains(ARCHIVE)));
    }
}
