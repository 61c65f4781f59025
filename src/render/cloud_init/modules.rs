//! Which of cloud-init's modules a trog seed runs, and in which stage.
//!
//! An image's `cloud.cfg` lists some forty modules; each one costs a Python import and a call
//! on every first boot, seconds together under emulation, and most have nothing to do on a trog
//! guest (no snaps, no Puppet, no console banner of key fingerprints nobody reads). The seed
//! names its own lists instead: the modules the user data configures, plus the few that act on
//! every image (growing the root filesystem, the locale, GRUB's install device, an image's own
//! per-instance scripts).
//!
//! Where a module runs matters too. trog's seeds are in local mode (`dsmode: local`), so the
//! network stage's list (`cloud_init_modules`) runs in cloud-init's local stage, before the
//! network is brought up and before sshd starts: the name, the users and their keys, the host
//! keys, and the files (a guest of static addresses needs its network file before its network
//! starts: see `super::network`).
//!
//! The config stage's modules (growing the disk, the mirror's sources, the time zone, writing
//! the first-boot commands' script) run there too, after those ([`ConfigModules::InLocalStage`],
//! the current revision's placement). None of them needs the network or a service, and each
//! stage of cloud-init before 24.3 is a process of its own: the config stage's own process
//! spent about 6 s of an emulated processor starting Python and reading the configuration again
//! for 2.5 s of its modules' work (bench/README.md). With its list empty, trog masks that stage's
//! unit on a first boot it starts directly (`model::direct_boot`); a boot through GRUB runs it,
//! and it finds nothing to do. sshd starts those 2.5 s later; cloud-init ends sooner.
//!
//! The final stage keeps its modules: it runs after the boot's services have started, the
//! packages install there, and it is the stage whose end cloud-init records in `result.json`,
//! which trog's wait reads. The first-boot commands, which start services, are no longer its
//! `runcmd` at the current revision (`super::revision`): trog's wait runs them after it.

use serde_json::{Map, Value};

/// A cloud-init stage, by the key that lists its modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `cloud_init_modules`: before sshd; after the network is up, or before it is brought up
    /// when the seed is in local mode.
    Network,
    /// `cloud_config_modules`: beside sshd and the rest of the boot, in a process of its own.
    Config,
    /// `cloud_final_modules`: last; installs the packages.
    Final,
}

impl Stage {
    #[cfg(test)]
    pub const ALL: [Stage; 3] = [Stage::Network, Stage::Config, Stage::Final];

    pub fn key(self) -> &'static str {
        match self {
            Stage::Network => "cloud_init_modules",
            Stage::Config => "cloud_config_modules",
            Stage::Final => "cloud_final_modules",
        }
    }
}

struct Module {
    name: &'static str,
    stage: Stage,
    /// Runs whatever the user data says: it acts on the image itself.
    always: bool,
    /// The user-data keys it reads; it runs when one of them is present.
    keys: &'static [&'static str],
}

const fn module(
    name: &'static str,
    stage: Stage,
    always: bool,
    keys: &'static [&'static str],
) -> Module {
    Module {
        name,
        stage,
        always,
        keys,
    }
}

/// Every module a trog seed may run, in the order they run.
const MODULES: &[Module] = &[
    module(
        "set_hostname",
        Stage::Network,
        false,
        &["hostname", "fqdn", "prefer_fqdn_over_hostname"],
    ),
    module(
        "update_hostname",
        Stage::Network,
        false,
        &["hostname", "fqdn", "prefer_fqdn_over_hostname"],
    ),
    module(
        "update_etc_hosts",
        Stage::Network,
        false,
        &["manage_etc_hosts"],
    ),
    module("users_groups", Stage::Network, false, &["users"]),
    // The host keys are made here, and the admin's key authorized: sshd needs both.
    module(
        "ssh",
        Stage::Network,
        true,
        &[
            "disable_root",
            "ssh_keys",
            "ssh_deletekeys",
            "ssh_genkeytypes",
        ],
    ),
    // Before the network, in local mode: a guest of static addresses has its network
    // configuration among the files.
    module("write_files", Stage::Network, false, &["write_files"]),
    // The root filesystem grows to the disk trog made, before the packages need the room.
    module("growpart", Stage::Config, true, &[]),
    module("resizefs", Stage::Config, true, &[]),
    // Before apt_configure: the image's own sources go before the mirror's are written.
    module("bootcmd", Stage::Config, false, &["bootcmd"]),
    module("locale", Stage::Config, true, &[]),
    // Tells the grub-pc package which disk to install to, so a later upgrade does not stop. The
    // images trog builds have no grub-pc and turn the module off in their own configuration.
    module("grub_dpkg", Stage::Config, true, &[]),
    module("apt_configure", Stage::Config, false, &["apt"]),
    module("timezone", Stage::Config, false, &["timezone"]),
    module("runcmd", Stage::Config, false, &["runcmd"]),
    module(
        "package_update_upgrade_install",
        Stage::Final,
        false,
        &["package_update", "packages"],
    ),
    // An image may carry scripts of its own for these; they cost a directory listing each.
    module("scripts_per_once", Stage::Final, true, &[]),
    module("scripts_per_boot", Stage::Final, true, &[]),
    module("scripts_per_instance", Stage::Final, true, &[]),
    module("scripts_user", Stage::Final, false, &["runcmd"]),
    // The console's "finished" line, and /var/lib/cloud/instance/boot-finished.
    module("final_message", Stage::Final, true, &[]),
];

/// Where the modules of the config stage run (the seed's revision says: `super::revision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigModules {
    /// After the network stage's, in the same process, before sshd.
    InLocalStage,
    /// In the config stage's own process.
    InConfigStage,
}

/// The modules of `stage` that `user_data` needs, in order.
pub fn modules_for(user_data: &Map<String, Value>, stage: Stage) -> Vec<&'static str> {
    MODULES
        .iter()
        .filter(|module| module.stage == stage)
        .filter(|module| {
            module.always || module.keys.iter().any(|key| user_data.contains_key(*key))
        })
        .map(|module| module.name)
        .collect()
}

/// The three module lists `user_data` needs, by stage, with the config stage's modules placed
/// as `config` says.
pub fn module_lists(
    user_data: &Map<String, Value>,
    config: ConfigModules,
) -> [(Stage, Vec<&'static str>); 3] {
    let mut network = modules_for(user_data, Stage::Network);
    let mut config_stage = modules_for(user_data, Stage::Config);
    if config == ConfigModules::InLocalStage {
        network.append(&mut config_stage);
    }
    [
        (Stage::Network, network),
        (Stage::Config, config_stage),
        (Stage::Final, modules_for(user_data, Stage::Final)),
    ]
}

/// Adds the three module lists to `user_data`, which must already hold everything else.
pub fn add_module_lists(user_data: &mut Map<String, Value>, config: ConfigModules) {
    for (stage, names) in module_lists(user_data, config) {
        user_data.insert(stage.key().into(), Value::from(names));
    }
}

/// User-data keys that no listed module would read: a key added to the seed without its module
/// would be silently ignored on the guest.
#[cfg(test)]
pub fn unread_keys(user_data: &Map<String, Value>) -> Vec<String> {
    user_data
        .keys()
        .filter(|key| !Stage::ALL.iter().any(|stage| stage.key() == key.as_str()))
        .filter(|key| {
            !MODULES.iter().any(|module| {
                module.keys.contains(&key.as_str())
                    && modules_for(user_data, module.stage).contains(&module.name)
            })
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn only_what_the_login_and_a_static_network_need_runs_before_sshd() {
        let user_data = document(json!({
            "hostname": "www", "users": [], "disable_root": true, "write_files": [], "apt": {},
        }));
        assert_eq!(
            modules_for(&user_data, Stage::Network),
            [
                "set_hostname",
                "update_hostname",
                "users_groups",
                "ssh",
                "write_files"
            ]
        );
    }

    #[test]
    fn a_module_runs_only_when_its_key_is_there() {
        let bare = document(json!({ "hostname": "www" }));
        assert_eq!(
            modules_for(&bare, Stage::Config),
            ["growpart", "resizefs", "locale", "grub_dpkg"]
        );
        assert_eq!(
            modules_for(&bare, Stage::Final),
            [
                "scripts_per_once",
                "scripts_per_boot",
                "scripts_per_instance",
                "final_message"
            ]
        );
        let with_commands = document(json!({ "runcmd": ["true"], "packages": ["make"] }));
        assert_eq!(
            modules_for(&with_commands, Stage::Final),
            [
                "package_update_upgrade_install",
                "scripts_per_once",
                "scripts_per_boot",
                "scripts_per_instance",
                "scripts_user",
                "final_message"
            ]
        );
    }

    #[test]
    fn a_key_no_module_reads_is_found() {
        let mut user_data = document(json!({ "hostname": "www", "ntp": { "enabled": true } }));
        add_module_lists(&mut user_data, ConfigModules::InLocalStage);
        assert_eq!(unread_keys(&user_data), ["ntp"]);
    }

    #[test]
    fn the_config_stage_runs_in_the_local_stage_after_the_login_s_modules() {
        let user_data = document(json!({
            "hostname": "www", "users": [], "apt": {}, "timezone": "Etc/UTC", "runcmd": ["true"],
        }));
        let [(_, network), (_, config), (_, last)] =
            module_lists(&user_data, ConfigModules::InLocalStage);
        assert_eq!(
            network,
            [
                "set_hostname",
                "update_hostname",
                "users_groups",
                "ssh",
                "growpart",
                "resizefs",
                "locale",
                "grub_dpkg",
                "apt_configure",
                "timezone",
                "runcmd"
            ]
        );
        assert!(config.is_empty());
        assert_eq!(last, modules_for(&user_data, Stage::Final));

        let [(_, network), (_, config), _] = module_lists(&user_data, ConfigModules::InConfigStage);
        assert_eq!(network, modules_for(&user_data, Stage::Network));
        assert_eq!(config, modules_for(&user_data, Stage::Config));
    }

    #[test]
    fn every_module_runs_once_wherever_the_config_stage_s_run() {
        let user_data = document(json!({
            "hostname": "www", "users": [], "apt": {}, "bootcmd": [], "runcmd": ["true"],
            "packages": ["make"], "write_files": [],
        }));
        for placement in [ConfigModules::InLocalStage, ConfigModules::InConfigStage] {
            let mut all: Vec<&str> = module_lists(&user_data, placement)
                .into_iter()
                .flat_map(|(_, names)| names)
                .collect();
            let count = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), count, "{placement:?}");
            assert_eq!(
                count,
                Stage::ALL
                    .iter()
                    .map(|stage| modules_for(&user_data, *stage).len())
                    .sum::<usize>()
            );
        }
    }
}
