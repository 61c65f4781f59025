//! Which hypervisor of the fleet holds a guest: the one `--hypervisor` names, the only one there
//! is, or the one that answers "I have it" when every hypervisor is asked at once. And before
//! that, whether the domain has a guest of its own at all: a verb about a VM trog built
//! (`snapshot`, `restore`, `debug_boot`) refuses a dependent and an existing host, naming what to
//! do instead.

use crate::config::hypervisors_conf::{fleet_to_build_on, load_installation_fleet, BuildFleet};
use crate::config::paths::InstallationPaths;
use crate::config::settings::RunsOn;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::hypervisor::fleet::find_guest;
use crate::model::hypervisor::HypervisorConfig;
use crate::model::names::DomainName;
use crate::workflow::open::fleet_observer;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error("{domain} is on no hypervisor of {fleet}{}", unreachable_list(.unreachable))]
    NotFound {
        domain: String,
        fleet: String,
        /// Hypervisors that could not be asked, each with why.
        unreachable: Vec<String>,
    },
    #[error("{domain} is defined on several hypervisors: {}", holders.join(", "))]
    SeveralHolders {
        domain: String,
        holders: Vec<String>,
    },
}

fn unreachable_list(unreachable: &[String]) -> String {
    if unreachable.is_empty() {
        String::new()
    } else {
        format!(
            " that answered; these could not be asked:\n  {}",
            unreachable.join("\n  ")
        )
    }
}

impl Diagnose for LocateError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            // The guest may be on the hypervisor that could not be asked.
            LocateError::NotFound { unreachable, .. } if !unreachable.is_empty() => {
                ExitStatus::Hypervisor
            }
            LocateError::NotFound { .. } => ExitStatus::Failure,
            LocateError::SeveralHolders { .. } => ExitStatus::Conflict,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            LocateError::NotFound { .. } => {
                "check the name; `trog fleet` lists every hypervisor's guests".into()
            }
            LocateError::SeveralHolders { .. } => "name the one to act on with --hypervisor".into(),
        })
    }
}

/// The fleet a command about `domain` works with: `hypervisors.conf`, or without one this
/// machine (or the guest's own deprecated `libvirt_uri`). A warning to print comes with it.
pub fn fleet_for_guest(
    paths: &InstallationPaths,
    domain: &DomainName,
) -> Result<BuildFleet, Failure> {
    // Without a fleet file, a guest's own (deprecated) libvirt_uri still says where it lives; a
    // guest whose file cannot be read (already removed, say) is looked for on this machine.
    let guest_uri = crate::config::guest::load_guest(paths, domain)
        .ok()
        .and_then(|guest| guest.settings.libvirt_uri);
    Ok(fleet_to_build_on(
        &paths.hypervisors_conf,
        load_installation_fleet(paths)?,
        guest_uri.as_ref(),
    ))
}

/// The hypervisor that holds `domain`: the one `named` (an unknown name is an error listing the
/// known ones), the fleet's only one, or the one that says it has the guest when all are asked at
/// once, each within `answer_timeout`.
pub fn locate_guest<'f>(
    fleet: &'f BuildFleet,
    domain: &DomainName,
    named: Option<&str>,
    answer_timeout: Duration,
) -> Result<&'f HypervisorConfig, Failure> {
    if let Some(name) = named {
        return Ok(fleet.hypervisor_named(name)?);
    }
    if let [only] = fleet.fleet.hypervisors.as_slice() {
        return Ok(only);
    }
    let found = find_guest(fleet, domain, fleet_observer(), answer_timeout);
    match found.holders.as_slice() {
        [one] => Ok(fleet
            .fleet
            .hypervisors
            .iter()
            .find(|hypervisor| &hypervisor.name == one)
            .expect("a holder is in the fleet")),
        [] => Err(LocateError::NotFound {
            domain: domain.to_string(),
            fleet: fleet.source.describe(),
            unreachable: found
                .unreachable
                .iter()
                .map(|(name, why)| format!("{name}: {why}"))
                .collect(),
        }
        .into()),
        several => Err(LocateError::SeveralHolders {
            domain: domain.to_string(),
            holders: several.iter().map(ToString::to_string).collect(),
        }
        .into()),
    }
}

/// A verb about a VM trog built: it has nothing to act on for a domain without a guest of its
/// own (a dependent runs on another's machine, an existing host is not trog's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestVerb {
    Snapshot,
    Restore,
    DebugBoot,
}

impl GuestVerb {
    /// The verb as typed.
    pub fn name(self) -> &'static str {
        match self {
            GuestVerb::Snapshot => "snapshot",
            GuestVerb::Restore => "restore",
            GuestVerb::DebugBoot => "debug_boot",
        }
    }

    /// The command that does this verb on `machine`, the guest a dependent runs on, and what it
    /// covers.
    fn on_machine(self, machine: &DomainName) -> String {
        match self {
            GuestVerb::Snapshot => format!(
                "snapshot its machine instead: `trog snapshot {machine}`; the snapshot covers the whole guest, every site on it included"
            ),
            GuestVerb::Restore => format!(
                "restore its machine instead: `trog restore --latest {machine}` (or --oldest, --name NAME; `trog snapshot --list {machine}` lists them); it returns the whole guest, every site on it included"
            ),
            GuestVerb::DebugBoot => format!(
                "debug its machine's boot instead: `trog debug_boot --console {machine}` (or another of debug_boot's flags)"
            ),
        }
    }
}

impl std::fmt::Display for GuestVerb {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A verb about a VM trog built, named a domain that has none: refused before anything is
/// located, locked or asked.
#[derive(Debug, thiserror::Error)]
pub enum NoGuestOfItsOwn {
    #[error(
        "{domain} has no guest of its own to {verb}: it depends on {machine}, and runs on that machine beside its other sites"
    )]
    Dependent {
        verb: GuestVerb,
        domain: DomainName,
        machine: DomainName,
    },
    #[error(
        "{domain} is an existing host ({address}) that trog did not build: there is no guest of trog's to {verb}"
    )]
    ExistingHost {
        verb: GuestVerb,
        domain: DomainName,
        address: String,
    },
}

impl Diagnose for NoGuestOfItsOwn {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Conflict
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            NoGuestOfItsOwn::Dependent { verb, machine, .. } => verb.on_machine(machine),
            NoGuestOfItsOwn::ExistingHost { verb, domain, .. } => format!(
                "trog only finishes {domain} over SSH (`trog provision {domain}`, `trog status {domain}`{}); {} with whatever runs it",
                if *verb == GuestVerb::DebugBoot { "" } else { ", `trog backup` copies its files" },
                match verb {
                    GuestVerb::Snapshot => "snapshot it",
                    GuestVerb::Restore => "restore it",
                    GuestVerb::DebugBoot => "debug its boot",
                }
            ),
        })
    }
}

/// Where `domain` runs, as its file in recipes.d says: a dependent is named with the machine at
/// the end of its `depends_on` chain. A domain whose file cannot be read (removed, an orphan,
/// or invalid) is looked for as a guest of its own, as it was before it had a file.
pub fn where_domain_runs(paths: &InstallationPaths, domain: &DomainName) -> RunsOn {
    // The settings the distro and machine recipes take are accepted in `_global` as a guest's
    // configuration accepts them; without the cookbook, only the declared ones.
    let recipe_settings = crate::cookbook::load::recipes_dir()
        .ok()
        .and_then(|dir| crate::cookbook::load::load_cookbook(&dir).ok())
        .map(|cookbook| crate::generate::recipe_settings(&cookbook))
        .unwrap_or_default();
    let runs_on = |domain: &DomainName| {
        crate::config::guest::load_guest_with_recipe_settings(paths, domain, &recipe_settings)
            .ok()
            .map(|guest| guest.settings.runs_on())
    };
    match runs_on(domain) {
        None => RunsOn::OwnGuest,
        Some(RunsOn::DependsOn(first)) => {
            let mut machine = first;
            // A chain no longer than the site's files; a ring (refused by provision) ends here.
            for _ in 0..MOST_DEPENDENCY_LINKS {
                match runs_on(&machine) {
                    Some(RunsOn::DependsOn(next)) if next != *domain => machine = next,
                    _ => break,
                }
            }
            RunsOn::DependsOn(machine)
        }
        Some(other) => other,
    }
}

/// More links than a site's `depends_on` chain has; the graph's own check refuses a cycle.
const MOST_DEPENDENCY_LINKS: usize = 64;

/// Refuses `verb` for a domain that, as `runs_on` says ([`where_domain_runs`]), has no guest of
/// its own.
pub fn refuse_without_own_guest(
    verb: GuestVerb,
    domain: &DomainName,
    runs_on: RunsOn,
) -> Result<(), NoGuestOfItsOwn> {
    match runs_on {
        RunsOn::OwnGuest => Ok(()),
        RunsOn::DependsOn(machine) => Err(NoGuestOfItsOwn::Dependent {
            verb,
            domain: domain.clone(),
            machine,
        }),
        RunsOn::ExistingHost(address) => Err(NoGuestOfItsOwn::ExistingHost {
            verb,
            domain: domain.clone(),
            address,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(name: &str) -> DomainName {
        DomainName::parse(name).unwrap()
    }

    #[test]
    fn each_verb_about_a_guest_refuses_a_dependent_naming_its_machine() {
        let site = domain("blog.example.test");
        let machine = domain("web.example.test");
        assert!(refuse_without_own_guest(GuestVerb::Snapshot, &site, RunsOn::OwnGuest).is_ok());
        for (verb, command) in [
            (GuestVerb::Snapshot, "`trog snapshot web.example.test`"),
            (
                GuestVerb::Restore,
                "`trog restore --latest web.example.test`",
            ),
            (
                GuestVerb::DebugBoot,
                "`trog debug_boot --console web.example.test`",
            ),
        ] {
            let refused = refuse_without_own_guest(verb, &site, RunsOn::DependsOn(machine.clone()))
                .unwrap_err();
            assert_eq!(refused.exit_status(), ExitStatus::Conflict);
            assert!(
                refused.to_string().contains(&format!(
                    "blog.example.test has no guest of its own to {verb}: it depends on web.example.test"
                )),
                "{refused}"
            );
            assert!(
                refused.hint().unwrap().contains(command),
                "{:?}",
                refused.hint()
            );
        }
    }

    /// An installation whose `_base` sets what the distro recipe takes (`upgrade`), with a
    /// chain `blog` → `www` → `web`, an existing host `old`, and `web`'s own guest.
    #[test]
    fn where_a_domain_runs_is_read_from_its_file_to_the_end_of_its_chain() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
        let base = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        )
        .unwrap();
        std::fs::write(
            etc.join("recipes.yaml"),
            base.replace(
                "    release: bookworm\n",
                "    release: bookworm\n    upgrade: false\n",
            ),
        )
        .unwrap();
        for (name, global) in [
            ("web.example.test", "cpus: 1"),
            ("www.example.test", "depends_on: web.example.test"),
            ("blog.example.test", "depends_on: www.example.test"),
            ("old.example.test", "existing_host: 192.0.2.7"),
        ] {
            std::fs::write(
                etc.join(format!("recipes.d/{name}.yaml")),
                format!("{name}:\n  _global:\n    {global}\n  nginx: {{}}\n"),
            )
            .unwrap();
        }
        let paths = InstallationPaths::resolve(etc.to_str(), None, None);
        let runs = |name: &str| where_domain_runs(&paths, &domain(name));
        assert_eq!(
            runs("blog.example.test"),
            RunsOn::DependsOn(domain("web.example.test"))
        );
        assert_eq!(
            runs("old.example.test"),
            RunsOn::ExistingHost("192.0.2.7".into())
        );
        assert_eq!(runs("web.example.test"), RunsOn::OwnGuest);
        // No file (an orphan): looked for as a guest of its own.
        assert_eq!(runs("gone.example.test"), RunsOn::OwnGuest);
    }

    #[test]
    fn each_verb_about_a_guest_refuses_an_existing_host_as_not_trogs() {
        let host = domain("old.example.test");
        for verb in [
            GuestVerb::Snapshot,
            GuestVerb::Restore,
            GuestVerb::DebugBoot,
        ] {
            let refused =
                refuse_without_own_guest(verb, &host, RunsOn::ExistingHost("192.0.2.7".into()))
                    .unwrap_err();
            assert_eq!(refused.exit_status(), ExitStatus::Conflict);
            assert!(
                refused.to_string().contains(
                    "old.example.test is an existing host (192.0.2.7) that trog did not build"
                ),
                "{refused}"
            );
            let hint = refused.hint().unwrap();
            assert!(hint.contains("`trog provision old.example.test`"), "{hint}");
        }
    }
}
