//! The verbs of the command line (clap's subcommands) and the dispatch from each to its
//! command's `run`.

use crate::cli::GlobalArgs;
use crate::commands;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "trog",
    version,
    about = "Provision guests onto one or a few libvirt hypervisors from recipes"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a new guest's configuration from a list of recipes.
    #[command(name = "new_guest")]
    NewGuest(commands::new_guest::NewGuestArgs),
    /// List the recipes, or show what one takes.
    Recipes(commands::recipes::RecipesArgs),
    /// Place, build, boot and finish guests; `--dry-run` prints the plan and changes nothing.
    Provision(commands::provision::ProvisionArgs),
    /// Remove a guest: its domain, root disk and seed (its data volume too with --purge).
    Destroy(commands::destroy::DestroyArgs),
    /// Take a snapshot of a guest (running or shut off); `--list` and `--delete` manage them.
    Snapshot(commands::snapshot::SnapshotArgs),
    /// Return a guest to one of its snapshots: disks, definition, and memory when it has one.
    Restore(commands::restore::RestoreArgs),
    /// Copy a guest's backed-up paths into an archive on this machine; `--sweep` deletes the
    /// backups past their retention.
    Backup(commands::backup::BackupArgs),
    /// Read a guest that will not boot: its console from the firmware on, its screen, its boot
    /// menu and keyboard.
    #[command(name = "debug_boot")]
    DebugBoot(commands::debug_boot::DebugBootArgs),
    /// Where each guest is and whether it is converged; exits 1 when one is not.
    Status(commands::status::StatusArgs),
    /// Generate everything a guest needs (cloud-init seed, Makefile, payload) into a directory.
    #[command(name = "new_config")]
    NewConfig(commands::new_config::NewConfigArgs),
    /// Show every hypervisor's capacity, commitments, free space and guests.
    Fleet(commands::fleet::FleetArgs),
    /// Check whether a run is worth starting: each hypervisor, its sudo, libvirt, pool, TPM, and
    /// the configuration. Exits 0 when it is, 1 when it is not.
    Preflight(commands::preflight::PreflightArgs),
    /// Build a base image from a package mirror into the image cache (`image build`).
    Image(commands::image::ImageArgs),
    /// Give a guest the lowest free address of its network's range, recorded in ips.db.
    #[command(name = "assign_ip")]
    AssignIp(commands::assign_ip::AssignIpArgs),
    /// List the address ranges, who holds which address, and what is free.
    Addresses(commands::addresses::AddressesArgs),
    /// Print the sudoers lines that let an account run trog's root programs on a hypervisor, or
    /// the script that installs those programs there.
    #[command(name = "root-programs")]
    RootPrograms(commands::root_programs::RootProgramsArgs),
    /// Print the site's machines for other tools: ssh_config blocks, or an Ansible inventory.
    Inventory(commands::inventory::InventoryArgs),
    /// Print the public key trog logs into a domain's machine with (made and kept in the secret
    /// store when it has none), for an existing host's authorized_keys.
    #[command(name = "authorized-key")]
    AuthorizedKey(commands::authorized_key::AuthorizedKeyArgs),
    /// Print a shell's completion script (bash, zsh, fish, elvish, powershell) on stdout.
    #[command(hide = true)]
    Completions(commands::shell_docs::CompletionsArgs),
    /// Write the man pages (trog.1, trog-VERB.1) into a folder.
    #[command(hide = true)]
    Manpages(commands::shell_docs::ManpagesArgs),
}

impl Command {
    /// Whether the verb is one of the installer's, run as root by design: building an image
    /// (mmdebstrap needs root, or an account's user namespace), printing the root programs'
    /// sudoers lines or install script, shell completions and man pages. They touch no guest and
    /// no hypervisor, so a run of them as root is no reason for the root warning. (`image prune`
    /// removes volumes from the hypervisors' pools: it is a verb like any other.)
    pub fn is_installer_verb(&self) -> bool {
        matches!(
            self,
            Command::Image(commands::image::ImageArgs {
                action: commands::image::ImageAction::Build(_)
            }) | Command::RootPrograms(_)
                | Command::Completions(_)
                | Command::Manpages(_)
        )
    }
}

/// Runs the verb the command line names.
pub fn run(cli: Cli) -> Result<ExitStatus, Failure> {
    match cli.command {
        Command::NewGuest(args) => commands::new_guest::run(&cli.global, args),
        Command::Recipes(args) => commands::recipes::run(&cli.global, args),
        Command::NewConfig(args) => commands::new_config::run(&cli.global, args),
        Command::Provision(args) => commands::provision::run(&cli.global, args),
        Command::Destroy(args) => commands::destroy::run(&cli.global, args),
        Command::Snapshot(args) => commands::snapshot::run(&cli.global, args),
        Command::Restore(args) => commands::restore::run(&cli.global, args),
        Command::Backup(args) => commands::backup::run(&cli.global, args),
        Command::DebugBoot(args) => commands::debug_boot::run(&cli.global, args),
        Command::Status(args) => commands::status::run(&cli.global, args),
        Command::Fleet(args) => commands::fleet::run(&cli.global, args),
        Command::Preflight(args) => commands::preflight::run(&cli.global, args),
        Command::Image(args) => commands::image::run(&cli.global, args),
        Command::AssignIp(args) => commands::assign_ip::run(&cli.global, args),
        Command::Addresses(args) => commands::addresses::run(&cli.global, args),
        Command::RootPrograms(args) => commands::root_programs::run(args),
        Command::Inventory(args) => commands::inventory::run(&cli.global, args),
        Command::AuthorizedKey(args) => commands::authorized_key::run(&cli.global, args),
        Command::Completions(args) => commands::shell_docs::completions(args),
        Command::Manpages(args) => commands::shell_docs::manpages(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Diagnose;
    use crate::guest::wait::WaitError;
    use std::time::Duration;

    /// The command a hint names between backquotes, as words.
    fn hinted_command(hint: &str) -> Vec<String> {
        let command = hint
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("no command in {hint:?}"));
        command.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn only_the_verbs_that_touch_no_guest_and_no_hypervisor_are_the_installers() {
        let installer = |words: &[&str]| {
            let words: Vec<&str> = std::iter::once("trog")
                .chain(words.iter().copied())
                .collect();
            Cli::try_parse_from(&words)
                .unwrap_or_else(|e| panic!("{words:?}: {e}"))
                .command
                .is_installer_verb()
        };
        assert!(installer(&["image", "build", "--release", "bookworm"]));
        assert!(installer(&["root-programs", "sudoers", "--user", "trog"]));
        assert!(installer(&["completions", "bash"]));
        // A prune removes volumes from the hypervisors' pools.
        assert!(!installer(&["image", "prune"]));
        assert!(!installer(&["provision", "www.example.test"]));
        assert!(!installer(&["preflight"]));
    }

    #[test]
    fn the_hints_of_a_guest_that_never_answered_name_commands_that_exist() {
        let errors = [
            WaitError::Stopped {
                guest: "www.example.test".into(),
                state: "shut off".into(),
                waited: Duration::from_secs(30),
                restarts: 0,
                hypervisor_log: None,
                console: None,
            },
            WaitError::NoAddress {
                guest: "www.example.test".into(),
                mac: "52:54:00:00:00:01".into(),
                waited: Duration::from_secs(300),
                gave_up: crate::guest::wait::GaveUp::QuietFor(300),
                console: None,
            },
            WaitError::NoSsh {
                guest: "www.example.test".into(),
                addresses: "192.0.2.7".into(),
                waited: Duration::from_secs(300),
                gave_up: crate::guest::wait::GaveUp::Limit,
                last_error: "refused".into(),
                console: None,
            },
        ];
        for error in errors {
            let words = hinted_command(&error.hint().unwrap());
            assert_eq!(words[0], "trog");
            let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{words:?}: {e}"));
            let Command::DebugBoot(args) = cli.command else {
                panic!("{words:?} is not debug_boot")
            };
            assert_eq!(args.target.guest.domain.as_str(), "www.example.test");
            assert!(args.console);
        }
    }

    /// README says every verb is also `bin/VERB` from a checkout: each verb `trog --help` lists
    /// has its entry there (a link to `bin/trog-verb`, which runs the verb it is named after).
    #[test]
    fn every_listed_verb_has_its_checkout_entry() {
        use clap::CommandFactory;
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bin");
        let command = Cli::command();
        let verbs: Vec<&str> = command
            .get_subcommands()
            .filter(|verb| !verb.is_hide_set())
            .map(|verb| verb.get_name())
            .collect();
        assert!(verbs.contains(&"root-programs"), "{verbs:?}");
        for verb in verbs {
            let entry = bin.join(verb);
            assert!(entry.is_file(), "no {} for `trog {verb}`", entry.display());
            // A copy would miss what trog-verb learns later (running as the account, not root).
            assert_eq!(
                std::fs::read_link(&entry).ok(),
                Some(std::path::PathBuf::from("trog-verb")),
                "{} is not a link to trog-verb",
                entry.display()
            );
        }
    }
}
