//! Which guest of `provision --all` is converged next: a domain after the one whose machine it
//! runs on, and only once that one converged (a dependent of a failed or skipped domain is
//! skipped, naming it); one convergence at a time on a machine (two Makefiles installing
//! packages side by side would fight over the package manager's lock); otherwise the first
//! waiting in the order given. Pure: the workers ask it under a lock, and tell it how each
//! convergence ended.

use crate::model::names::DomainName;

/// One domain to converge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    pub domain: DomainName,
    /// The domain whose machine it runs on directly, if any.
    pub depends_on: Option<DomainName>,
    /// The machine it is converged on: its own, or the end of its `depends_on` chain.
    pub machine: DomainName,
}

/// Where a domain is in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Waiting,
    Running,
    Converged,
    Failed,
    /// Not converged: the domain it depends on failed or was skipped.
    Skipped {
        because: DomainName,
    },
}

/// What a worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Converge the domain at this index.
    Run(usize),
    /// Nothing can start until a running convergence ends.
    Wait,
    /// Nothing is left to start.
    Finished,
}

/// The run's domains and where each is.
#[derive(Debug, Clone)]
pub struct Schedule {
    items: Vec<Scheduled>,
    progress: Vec<Progress>,
    /// Domains that failed before any convergence (their configuration, their inputs): not in
    /// `items`, but their dependents are skipped.
    failed_before: Vec<DomainName>,
}

impl Schedule {
    pub fn new(items: Vec<Scheduled>, failed_before: Vec<DomainName>) -> Schedule {
        let progress = vec![Progress::Waiting; items.len()];
        Schedule {
            items,
            progress,
            failed_before,
        }
    }

    /// The machine `domain` is converged on (itself when it is not scheduled).
    pub fn machine_of(&self, domain: &DomainName) -> DomainName {
        self.items
            .iter()
            .find(|item| &item.domain == domain)
            .map_or_else(|| domain.clone(), |item| item.machine.clone())
    }

    /// Where the domain at `index` is.
    pub fn progress(&self, index: usize) -> &Progress {
        &self.progress[index]
    }

    /// Whether `domain` did not converge in this run: failed, skipped, or failed before.
    fn did_not_converge(&self, domain: &DomainName) -> Option<bool> {
        if self.failed_before.contains(domain) {
            return Some(true);
        }
        let index = self.items.iter().position(|item| &item.domain == domain)?;
        match self.progress[index] {
            Progress::Failed | Progress::Skipped { .. } => Some(true),
            Progress::Converged => Some(false),
            Progress::Waiting | Progress::Running => None,
        }
    }

    /// The next domain to converge (marked running), skipping what cannot converge.
    pub fn next_to_run(&mut self) -> Next {
        for index in 0..self.items.len() {
            if self.progress[index] != Progress::Waiting {
                continue;
            }
            let item = &self.items[index];
            if let Some(wanted) = &item.depends_on {
                match self.did_not_converge(wanted) {
                    Some(true) => {
                        let because = wanted.clone();
                        self.progress[index] = Progress::Skipped { because };
                        // Its own dependents, earlier in the order or later, are looked at again.
                        return self.next_to_run();
                    }
                    Some(false) => {}
                    None if self.items.iter().any(|other| &other.domain == wanted) => continue,
                    // Not converged by this run, and not failed: it is there already.
                    None => {}
                }
            }
            let machine_busy =
                self.items.iter().zip(&self.progress).any(|(other, state)| {
                    *state == Progress::Running && other.machine == item.machine
                });
            if machine_busy {
                continue;
            }
            self.progress[index] = Progress::Running;
            return Next::Run(index);
        }
        if self.progress.contains(&Progress::Running) {
            Next::Wait
        } else {
            Next::Finished
        }
    }

    /// The convergence of the domain at `index` ended.
    pub fn ended(&mut self, index: usize, converged: bool) {
        self.progress[index] = if converged {
            Progress::Converged
        } else {
            Progress::Failed
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> DomainName {
        DomainName::parse(text).unwrap()
    }

    fn item(domain: &str, depends_on: Option<&str>, machine: &str) -> Scheduled {
        Scheduled {
            domain: name(domain),
            depends_on: depends_on.map(name),
            machine: name(machine),
        }
    }

    /// web, db, and blog and wiki on web's machine.
    fn site() -> Schedule {
        Schedule::new(
            vec![
                item("web.test", None, "web.test"),
                item("db.test", None, "db.test"),
                item("blog.test", Some("web.test"), "web.test"),
                item("wiki.test", Some("web.test"), "web.test"),
            ],
            Vec::new(),
        )
    }

    #[test]
    fn independent_machines_start_at_once_and_a_dependent_waits_for_its_machine() {
        let mut schedule = site();
        assert_eq!(schedule.next_to_run(), Next::Run(0));
        assert_eq!(schedule.next_to_run(), Next::Run(1));
        // blog and wiki wait for web.
        assert_eq!(schedule.next_to_run(), Next::Wait);
        schedule.ended(0, true);
        assert_eq!(schedule.next_to_run(), Next::Run(2));
        // One convergence at a time on web's machine.
        assert_eq!(schedule.next_to_run(), Next::Wait);
        schedule.ended(2, true);
        assert_eq!(schedule.next_to_run(), Next::Run(3));
        schedule.ended(1, true);
        schedule.ended(3, true);
        assert_eq!(schedule.next_to_run(), Next::Finished);
    }

    #[test]
    fn the_dependents_of_a_failed_machine_are_skipped_naming_it_and_the_others_go_on() {
        let mut schedule = site();
        assert_eq!(schedule.next_to_run(), Next::Run(0));
        assert_eq!(schedule.next_to_run(), Next::Run(1));
        schedule.ended(0, false);
        assert_eq!(schedule.next_to_run(), Next::Wait);
        assert_eq!(
            schedule.progress(2),
            &Progress::Skipped {
                because: name("web.test")
            }
        );
        assert_eq!(schedule.progress(3), schedule.progress(2));
        schedule.ended(1, true);
        assert_eq!(schedule.next_to_run(), Next::Finished);
        assert_eq!(schedule.progress(1), &Progress::Converged);
    }

    #[test]
    fn a_chain_is_skipped_link_by_link_and_a_domain_that_failed_before_counts_as_failed() {
        let mut schedule = Schedule::new(
            vec![
                item("blog.test", Some("web.test"), "web.test"),
                item("shop.test", Some("blog.test"), "web.test"),
                item("db.test", None, "db.test"),
            ],
            vec![name("web.test")],
        );
        assert_eq!(schedule.next_to_run(), Next::Run(2));
        assert_eq!(
            schedule.progress(0),
            &Progress::Skipped {
                because: name("web.test")
            }
        );
        assert_eq!(
            schedule.progress(1),
            &Progress::Skipped {
                because: name("blog.test")
            }
        );
    }

    #[test]
    fn a_machine_this_run_does_not_converge_is_taken_as_there() {
        let mut schedule = Schedule::new(
            vec![item("blog.test", Some("old.test"), "old.test")],
            Vec::new(),
        );
        assert_eq!(schedule.next_to_run(), Next::Run(0));
    }
}
