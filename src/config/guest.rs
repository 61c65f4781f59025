//! One guest's configuration: `_base` merged with the domain's file, settings typed and
//! checked, recipe arguments merged (their schemas are the cookbook's to check).
//!
//! [`resolve_guest`] is pure; [`load_guest`] (in `load.rs`) reads the two files and calls it.

use crate::config::error::GuestConfigError;
use crate::config::merge::{merge_entries, merge_nodes, Origins};
use crate::config::recipes_file::{DomainFile, RecipesYaml, GLOBAL_KEY};
use crate::config::settings::{
    settings_from_global, DeprecatedSetting, GuestSettings, SettingProblem,
};
use crate::config::yaml::{LocatedEntry, LocatedNode, Node};
use crate::model::names::{DomainName, RecipeName};
use indexmap::IndexMap;
use std::path::PathBuf;

pub use crate::config::load::{
    list_domains, load_domain_file, load_guest, load_guest_with_recipe_settings, load_recipes_yaml,
};

/// Everything the installation says about one guest.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestConfig {
    pub domain: DomainName,
    /// `_global`, merged, typed, defaults applied.
    pub settings: GuestSettings,
    /// The recipes the guest runs, `_base`'s first, each with its merged arguments as written.
    pub recipes: IndexMap<RecipeName, serde_json::Value>,
    /// The merged `_global` as written, before typing (the CHANGEME scan reads it).
    pub global_as_written: serde_json::Map<String, serde_json::Value>,
    /// Where every key of `_global` and of each recipe's arguments was written.
    pub origins: Origins,
    /// Deprecated settings that are set, for callers to warn about.
    pub deprecations: Vec<DeprecatedSetting>,
    pub recipes_yaml: PathBuf,
    pub domain_file: PathBuf,
}

/// Merges `_base` and the domain's section and checks the settings. `recipe_settings` are the
/// extra `_global` keys the distro and machine recipes declare (see
/// [`settings_from_global`]); pass `&[]` when no cookbook is at hand.
pub fn resolve_guest(
    recipes_yaml: &RecipesYaml,
    domain_file: &DomainFile,
    recipe_settings: &[String],
) -> Result<GuestConfig, GuestConfigError> {
    resolve_guest_on_machine(recipes_yaml, domain_file, None, recipe_settings)
}

/// [`resolve_guest`] for a domain whose recipes run on another domain's machine: `machine_file`
/// is the file of the domain at the end of its `depends_on` chain, whose distribution settings
/// ([`DISTRO_SETTINGS`] and the distro and machine recipes' own) the domain takes, merged over
/// `_base` as that domain's are. The domain's Makefile writes the machine's package sources: with
/// `_base`'s, a dependent would point its machine at a mirror or release the machine does not use.
pub fn resolve_guest_on_machine(
    recipes_yaml: &RecipesYaml,
    domain_file: &DomainFile,
    machine_file: Option<&DomainFile>,
    recipe_settings: &[String],
) -> Result<GuestConfig, GuestConfigError> {
    let base = &recipes_yaml.base;
    let own = &domain_file.section;

    let mut global = merge_entries(&base.global, &own.global);
    if let Some(machine) = machine_file {
        let machines = merge_entries(&base.global, &machine.section.global);
        let distro_keys = DISTRO_SETTINGS
            .iter()
            .copied()
            .chain(recipe_settings.iter().map(String::as_str));
        for key in distro_keys {
            match machines.get(key) {
                Some(entry) => global.insert(key.to_string(), entry.clone()),
                None => global.shift_remove(key),
            };
        }
    }

    let mut recipe_entries: IndexMap<RecipeName, LocatedEntry> = base.recipes.clone();
    for (name, own_entry) in &own.recipes {
        let merged = match base.recipes.get(name) {
            Some(base_entry) => LocatedEntry {
                key_origin: own_entry.key_origin.clone(),
                value: merge_nodes(&base_entry.value, &own_entry.value),
            },
            None => own_entry.clone(),
        };
        recipe_entries.insert(name.clone(), merged);
    }

    let origins = Origins::record(&top_level(&global, base, own, &recipe_entries));

    let settings_error = |problems| GuestConfigError::Settings {
        domain: domain_file.domain.clone(),
        recipes_yaml: recipes_yaml.file.clone(),
        domain_file: domain_file.file.clone(),
        problems,
    };
    let mut problems = host_setting_problems(base, own, recipe_settings);
    let settings = settings_from_global(&global, recipe_settings);
    let (settings, deprecations) = match settings {
        Ok(settings) if problems.is_empty() => settings,
        Ok(_) => return Err(settings_error(problems)),
        Err(mut more) => {
            more.append(&mut problems);
            return Err(settings_error(more));
        }
    };

    let global_as_written = match Node::Mapping(global).to_json() {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a mapping becomes an object"),
    };
    let recipes = recipe_entries
        .into_iter()
        .map(|(name, entry)| (name, entry.value.value.to_json()))
        .collect();

    Ok(GuestConfig {
        domain: domain_file.domain.clone(),
        settings,
        recipes,
        global_as_written,
        origins,
        deprecations,
        recipes_yaml: recipes_yaml.file.clone(),
        domain_file: domain_file.file.clone(),
    })
}

/// The settings of a machine, which a domain without a guest of its own (`depends_on`,
/// `existing_host`) cannot have: its memory, disks, addresses, network and placement are its
/// machine's, and so are what only its first boot or its image reads (the time zone, a baked
/// image). Refused when written in the domain's own file; inherited from `_base`, where they are
/// the installation's, they are not read for it. Every argument of the machine recipe is one
/// (tests/cookbook checks).
pub const MACHINE_SETTINGS: &[&str] = &[
    "timezone",
    "bake_packages",
    "baked_image_max_age_days",
    "memory",
    "cpus",
    "size",
    "image",
    "ips",
    "hypervisor",
    "cpu_mode",
    "network",
    "bridge",
    "tenant",
    "gateway",
    "address_range",
    "resolvers",
    "search_domains",
    "libvirt_uri",
    "machine_type",
    "firmware",
    "disk_bus",
    "disk_cache",
    "disk_discard",
    "data_volume_size",
    "data_mount",
    "disks",
    "shared_folders",
];

/// The settings of a machine's distribution: which one, and where its packages come from. A
/// dependent (`depends_on`) takes its machine's ([`resolve_guest_on_machine`]), with the distro
/// and machine recipes' own settings (`upgrade`), and cannot write them in its own file.
pub const DISTRO_SETTINGS: &[&str] = &[
    "distro",
    "release",
    "mirror",
    "security_mirror",
    "fallback_mirrors",
    "fallback_security_mirrors",
];

/// What a domain's own `_global` says that its `depends_on` or `existing_host` rules out, and
/// either of them written in `_base` (every guest of the installation would lose its own).
fn host_setting_problems(
    base: &crate::config::recipes_file::GuestSection,
    own: &crate::config::recipes_file::GuestSection,
    recipe_settings: &[String],
) -> Vec<SettingProblem> {
    use crate::config::settings::SettingProblemKind;
    let set = |key: &str| {
        own.global
            .get(key)
            .filter(|entry| entry.value.value != Node::Null)
    };
    let mut problems = Vec::new();
    for key in ["depends_on", "existing_host"] {
        if let Some(entry) = base.global.get(key) {
            problems.push(SettingProblem {
                origin: Some(entry.key_origin.clone()),
                key_path: format!("_global.{key}"),
                kind: SettingProblemKind::Invalid {
                    why: "belongs to one domain, in its own file under recipes.d: in `_base` it would take every guest's machine away".into(),
                },
            });
        }
    }
    let key = match (set("depends_on"), set("existing_host")) {
        (Some(_), Some(host)) => {
            problems.push(SettingProblem {
                origin: Some(host.key_origin.clone()),
                key_path: "_global.existing_host".into(),
                kind: SettingProblemKind::Invalid {
                    why: "is set beside `depends_on`: a domain runs on another domain's machine or on an existing host, not both".into(),
                },
            });
            return problems;
        }
        (Some(_), None) => "depends_on",
        (None, Some(_)) => "existing_host",
        (None, None) => return problems,
    };
    let mut refused: Vec<&str> = MACHINE_SETTINGS.to_vec();
    let mut distro: Vec<&str> = Vec::new();
    if key == "depends_on" {
        // A dependent logs in as its machine's admin, with its machine's key.
        refused.push("admin_user");
        distro.extend(DISTRO_SETTINGS);
        distro.extend(recipe_settings.iter().map(String::as_str));
    }
    for (name, entry) in &own.global {
        if entry.value.value == Node::Null {
            continue;
        }
        let name = name.as_str();
        if refused.contains(&name) || distro.contains(&name) {
            let why = match key {
                "depends_on" if distro.contains(&name) && !refused.contains(&name) => format!(
                    "is a setting of a machine's distribution, and this domain's recipes run on its machine's (`depends_on`): its machine's `{name}` holds; remove it here"
                ),
                "depends_on" => format!(
                    "is a setting of a machine, and this domain has none of its own (`depends_on`): its machine's `{name}` holds; remove it here"
                ),
                _ => "is a setting of a guest trog builds, and this domain describes an existing host (`existing_host`): remove it here".to_string(),
            };
            problems.push(SettingProblem {
                origin: Some(entry.key_origin.clone()),
                key_path: format!("_global.{name}"),
                kind: SettingProblemKind::Invalid { why },
            });
        }
    }
    problems
}

/// The merged guest as one mapping (`_global` and recipes), for recording origins.
fn top_level(
    global: &IndexMap<String, LocatedEntry>,
    base: &crate::config::recipes_file::GuestSection,
    own: &crate::config::recipes_file::GuestSection,
    recipes: &IndexMap<RecipeName, LocatedEntry>,
) -> IndexMap<String, LocatedEntry> {
    let mut top = IndexMap::new();
    if let Some(global_origin) = own.global_origin.as_ref().or(base.global_origin.as_ref()) {
        top.insert(
            GLOBAL_KEY.to_string(),
            LocatedEntry {
                key_origin: global_origin.clone(),
                value: LocatedNode {
                    value: Node::Mapping(global.clone()),
                    origin: global_origin.clone(),
                },
            },
        );
    }
    for (name, entry) in recipes {
        top.insert(name.as_str().to_string(), entry.clone());
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::recipes_file::{parse_domain_file, parse_recipes_yaml};
    use std::path::Path;

    pub(crate) fn resolve(base: &str, own: &str) -> Result<GuestConfig, GuestConfigError> {
        let domain = DomainName::parse("www.example.test").unwrap();
        let recipes_yaml = parse_recipes_yaml(Path::new("recipes.yaml"), base)?;
        let domain_file = parse_domain_file(Path::new("www.example.test.yaml"), &domain, own)?;
        resolve_guest(&recipes_yaml, &domain_file, &[])
    }

    const BASE: &str = "\
_base:
  _global:
    admin_user: someadmin
    contact_email: ops@example.test
    distro: debian
    memory: 512
  adminconfig: {shell: bash, keys: [a, b]}
  ufw: {allow: [22/tcp]}
";

    #[test]
    fn the_domain_overrides_base_settings_and_args() {
        let own = "\
www.example.test:
  _global:
    memory: 2048
    cpus: 2
  ufw: {allow: [80/tcp]}
  nginx: {server_name: www.example.test}
";
        let guest = resolve(BASE, own).unwrap();
        assert_eq!(guest.settings.memory.0, 2048);
        assert_eq!(guest.settings.cpus, 2);
        assert_eq!(guest.settings.admin_user, "someadmin");
        assert_eq!(guest.settings.distro.as_str(), "debian");
        let names: Vec<_> = guest.recipes.keys().map(RecipeName::as_str).collect();
        assert_eq!(names, ["adminconfig", "ufw", "nginx"]);
        assert_eq!(guest.recipes[1].to_string(), r#"{"allow":["80/tcp"]}"#);
        assert_eq!(
            guest.recipes[0].to_string(),
            r#"{"shell":"bash","keys":["a","b"]}"#
        );
    }

    #[test]
    fn origins_name_the_file_that_gave_each_value() {
        let own = "www.example.test:\n  _global:\n    memory: 2048\n  adminconfig: {shell: zsh}\n";
        let guest = resolve(BASE, own).unwrap();
        assert_eq!(
            guest.origins.locate_setting("memory").unwrap().to_string(),
            "www.example.test.yaml:3:5"
        );
        assert_eq!(
            guest
                .origins
                .locate_setting("admin_user")
                .unwrap()
                .to_string(),
            "recipes.yaml:3:5"
        );
        let shell = guest
            .origins
            .locate_recipe_arg("adminconfig", "/shell")
            .unwrap();
        assert_eq!(shell.to_string(), "www.example.test.yaml:4:17");
        let keys = guest
            .origins
            .locate_recipe_arg("adminconfig", "/keys/1")
            .unwrap();
        assert_eq!(keys.file.as_ref(), Path::new("recipes.yaml"));
    }

    #[test]
    fn settings_problems_from_both_files_come_together() {
        let base = "_base:\n  _global:\n    contact_email: nobody\n";
        let own = "www.example.test:\n  _global:\n    cpus: 0\n    memroy: 1G\n";
        let error = resolve(base, own).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("recipes.yaml:3:20: `_global.contact_email`"),
            "{text}"
        );
        assert!(
            text.contains("www.example.test.yaml:3:11: `_global.cpus`"),
            "{text}"
        );
        assert!(text.contains("did you mean `memory`"), "{text}");
        assert!(text.contains("`_global.admin_user` (the login created on every guest for its administrators, with passwordless sudo; an `existing_host` is finished as it"), "{text}");
    }

    #[test]
    fn settings_of_a_machine_are_refused_beside_depends_on_at_their_line_but_not_from_base() {
        let own = "www.example.test:\n  _global:\n    depends_on: web.example.test\n    memory: 2048\n    admin_user: ops\n    ips: [192.0.2.9/24]\n";
        let text = resolve(BASE, own).unwrap_err().to_string();
        for (line, key) in [(4, "memory"), (5, "admin_user"), (6, "ips")] {
            assert!(
                text.contains(&format!(
                    "www.example.test.yaml:{line}:5: `_global.{key}`: is a setting of a machine"
                )),
                "{text}"
            );
        }
        // `_base`'s memory is the installation's: not read for a dependent, not refused.
        let guest = resolve(
            BASE,
            "www.example.test:\n  _global:\n    depends_on: web.example.test\n",
        )
        .unwrap();
        assert_eq!(
            guest.settings.depends_on.as_ref().map(DomainName::as_str),
            Some("web.example.test")
        );
    }

    /// `www` resolved as a dependent of `machine_own` (the machine's file), over `base`.
    fn resolve_on_machine(
        base: &str,
        own: &str,
        machine_own: &str,
        recipe_settings: &[String],
    ) -> Result<GuestConfig, GuestConfigError> {
        let recipes_yaml = parse_recipes_yaml(Path::new("recipes.yaml"), base)?;
        let domain = DomainName::parse("www.example.test").unwrap();
        let domain_file = parse_domain_file(Path::new("www.example.test.yaml"), &domain, own)?;
        let machine = DomainName::parse("web.example.test").unwrap();
        let machine_file =
            parse_domain_file(Path::new("web.example.test.yaml"), &machine, machine_own)?;
        resolve_guest_on_machine(
            &recipes_yaml,
            &domain_file,
            Some(&machine_file),
            recipe_settings,
        )
    }

    #[test]
    fn a_dependent_runs_on_its_machines_distribution_and_package_sources() {
        let base = BASE.replace(
            "    memory: 512\n",
            "    memory: 512\n    release: bookworm\n    mirror: http://base.example.test/debian\n    fallback_mirrors: [http://deb.debian.org/debian]\n    upgrade: true\n",
        );
        let machine = "web.example.test:\n  _global:\n    mirror: http://hub.example.test/debian\n    fallback_mirrors: ~\n    upgrade: false\n";
        let own = "www.example.test:\n  _global:\n    depends_on: web.example.test\n    packages: [htop]\n";
        let guest = resolve_on_machine(&base, own, machine, &["upgrade".to_string()]).unwrap();
        // The machine's own file, then `_base` where the machine says nothing.
        assert_eq!(
            guest.settings.mirror.as_deref(),
            Some("http://hub.example.test/debian")
        );
        assert!(guest.settings.fallback_mirrors.is_empty());
        assert_eq!(guest.settings.release.as_deref(), Some("bookworm"));
        // What the templates read says the same, and where it was written is the machine's file.
        assert_eq!(
            guest.global_as_written["mirror"],
            "http://hub.example.test/debian"
        );
        assert_eq!(guest.global_as_written["upgrade"], false);
        assert_eq!(
            guest.origins.locate_setting("mirror").unwrap().to_string(),
            "web.example.test.yaml:3:5"
        );
        // The rest is the dependent's own.
        assert_eq!(guest.settings.packages, ["htop"]);
        assert_eq!(guest.settings.admin_user, "someadmin");

        // A domain with a machine of its own is not changed by being given one.
        let alone = resolve_guest(
            &parse_recipes_yaml(Path::new("recipes.yaml"), &base).unwrap(),
            &parse_domain_file(
                Path::new("www.example.test.yaml"),
                &DomainName::parse("www.example.test").unwrap(),
                "www.example.test:\n",
            )
            .unwrap(),
            &["upgrade".to_string()],
        )
        .unwrap();
        assert_eq!(
            alone.settings.mirror.as_deref(),
            Some("http://base.example.test/debian")
        );
    }

    #[test]
    fn a_dependent_writing_its_distribution_is_refused_at_each_line() {
        let own = "www.example.test:\n  _global:\n    depends_on: web.example.test\n    mirror: http://other.example.test/debian\n    release: trixie\n    upgrade: false\n    distro: ~\n";
        let text = resolve_on_machine(BASE, own, "web.example.test:\n", &["upgrade".to_string()])
            .unwrap_err()
            .to_string();
        for (line, key) in [(4, "mirror"), (5, "release"), (6, "upgrade")] {
            assert!(
                text.contains(&format!(
                    "www.example.test.yaml:{line}:5: `_global.{key}`: is a setting of a machine's distribution"
                )),
                "{text}"
            );
        }
        // Unset (`~`), it says nothing, and is refused nowhere.
        assert!(!text.contains("`_global.distro`"), "{text}");
        // The same keys are a guest's own when it has a machine of its own.
        let own = "www.example.test:\n  _global:\n    mirror: http://other.example.test/debian\n    release: trixie\n";
        resolve(BASE, own).unwrap();
    }

    #[test]
    fn an_existing_host_refuses_a_guests_settings_and_depends_on_beside_it() {
        let own = "www.example.test:\n  _global:\n    existing_host: 192.0.2.7\n    cpus: 2\n";
        let text = resolve(BASE, own).unwrap_err().to_string();
        assert!(
            text.contains(
                "www.example.test.yaml:4:5: `_global.cpus`: is a setting of a guest trog builds"
            ),
            "{text}"
        );
        // What only a guest's first boot or its image reads, and the machine recipe's disks and
        // folders, would do nothing there.
        for line in [
            "timezone: Europe/Paris",
            "bake_packages: true",
            "disks: [{name: pg, size: 2G, mount: /srv/pg}]",
            "shared_folders: [{name: media, source: /srv/media, mount: /srv/media}]",
        ] {
            let own = format!(
                "www.example.test:\n  _global:\n    existing_host: 192.0.2.7\n    {line}\n"
            );
            let key = line.split(':').next().unwrap();
            let text = resolve(BASE, &own).unwrap_err().to_string();
            assert!(
                text.contains(&format!(
                    "www.example.test.yaml:4:5: `_global.{key}`: is a setting of a guest trog builds"
                )),
                "{text}"
            );
            let own = own.replace("existing_host: 192.0.2.7", "depends_on: web.example.test");
            let text = resolve(BASE, &own).unwrap_err().to_string();
            assert!(
                text.contains(&format!(
                    "www.example.test.yaml:4:5: `_global.{key}`: is a setting of a machine"
                )),
                "{text}"
            );
        }
        let both = "www.example.test:\n  _global:\n    existing_host: 192.0.2.7\n    depends_on: web.example.test\n";
        let text = resolve(BASE, both).unwrap_err().to_string();
        assert!(
            text.contains(
                "www.example.test.yaml:3:5: `_global.existing_host`: is set beside `depends_on`"
            ),
            "{text}"
        );
        let in_base = BASE.replace(
            "    memory: 512\n",
            "    memory: 512\n    depends_on: web.example.test\n",
        );
        let text = resolve(&in_base, "www.example.test:\n")
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("recipes.yaml:7:5: `_global.depends_on`: belongs to one domain"),
            "{text}"
        );
    }

    #[test]
    fn a_guest_without_recipes_or_global_of_its_own_gets_base() {
        let guest = resolve(BASE, "www.example.test:\n").unwrap();
        assert_eq!(guest.recipes.len(), 2);
        assert_eq!(guest.settings.memory.0, 512);
        assert_eq!(guest.global_as_written["distro"], "debian");
    }

    #[test]
    fn the_deprecated_libvirt_uri_is_flagged() {
        let own = "www.example.test:\n  _global:\n    libvirt_uri: \"test:///default\"\n";
        let guest = resolve(BASE, own).unwrap();
        assert!(guest.settings.uses_deprecated_libvirt_uri());
        assert_eq!(
            guest.deprecations[0].origin.to_string(),
            "www.example.test.yaml:3:5"
        );
    }
}
