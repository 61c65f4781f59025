//! A guest's merged `_global`, checked against the global schema and turned into typed settings.
//!
//! Every problem is collected before anything is reported, so a person fixing a configuration
//! sees all of them at once: unknown keys (with the setting they probably meant), values of the
//! wrong type, and every required setting that is missing.

use crate::config::changeme::PLACEHOLDER;
use crate::config::global_schema::{self, Presence, SettingType, GLOBAL_SETTINGS};
use crate::config::static_addresses;
use crate::config::values::{check_value, ImageSource, IpCidr, TypedValue};
use crate::config::yaml::{LocatedEntry, LocatedNode, Node, Origin};
use crate::model::hypervisor::LibvirtUri;
use crate::model::names::{DomainName, HypervisorName};
use crate::model::units::{Bytes, MiB};
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// How long backups are kept when `backup_retention_days` is not set: a month covers a guest
/// destroyed by mistake and noticed at the next monthly check, and a nightly backup's month of
/// archives is what a site's "restore from last week" asks of it.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;
/// How many days a baked image is used when `baked_image_max_age_days` is not set.
pub const DEFAULT_BAKED_IMAGE_MAX_AGE_DAYS: u32 = 7;

/// A guest's distribution: which distro recipe builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distro {
    Debian,
    Ubuntu,
}

impl Distro {
    pub fn as_str(self) -> &'static str {
        match self {
            Distro::Debian => "debian",
            Distro::Ubuntu => "ubuntu",
        }
    }
}

impl fmt::Display for Distro {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every `_global` setting of one guest, typed, with defaults applied. Serialized, it is the
/// `global` of the template context (memory in MiB, size in bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestSettings {
    pub admin_user: String,
    pub contact_email: String,
    pub distro: Distro,
    /// `None`: the distro recipe's pinned release.
    pub release: Option<String>,
    pub mirror: Option<String>,
    /// `None`: `mirror` serves the security suite too.
    pub security_mirror: Option<String>,
    /// Tried in order after `mirror` when it fails a request.
    pub fallback_mirrors: Vec<String>,
    /// Tried in order after `security_mirror` when it fails a request.
    pub fallback_security_mirrors: Vec<String>,
    /// A caching HTTP proxy the payload's Makefile downloads through.
    pub cache: Option<String>,
    /// Where the secret store's key file is, as written (relative to the configuration
    /// directory); the store's business, not the guest's, so templates do not see it.
    #[serde(skip)]
    pub keepass_key_file: Option<String>,
    /// Where backups are kept, as written (relative to the configuration directory).
    pub backup_dir: String,
    /// How many days `backup --sweep` keeps a backup.
    pub backup_retention_days: u32,
    pub timezone: String,
    pub network: String,
    pub bridge: Option<String>,
    pub gateway: Option<IpAddr>,
    /// The addresses trog hands out on the guest's network or bridge.
    pub address_range: Option<crate::model::address_range::AddressRange>,
    /// The group the guest is kept in on its network; `None`: no group.
    pub tenant: Option<crate::model::names::TenantName>,
    pub resolvers: Vec<IpAddr>,
    pub search_domains: Vec<String>,
    /// Empty: the guest takes a lease.
    pub ips: Vec<IpCidr>,
    pub size: Bytes,
    pub memory: MiB,
    pub cpus: u32,
    pub image: Option<ImageSource>,
    /// The root disk is made over a baked image holding the recipes' packages.
    pub bake_packages: bool,
    /// How many days a baked image is used before a new one is built.
    pub baked_image_max_age_days: u32,
    pub packages: Vec<String>,
    pub hypervisor: Option<HypervisorName>,
    pub cpu_mode: String,
    pub aliases: Vec<DomainName>,
    /// Deprecated; see [`GuestSettings::uses_deprecated_libvirt_uri`].
    pub libvirt_uri: Option<LibvirtUri>,
    /// The domain whose machine this one is provisioned onto.
    pub depends_on: Option<DomainName>,
    /// The address of a machine trog did not build, which this domain describes.
    pub existing_host: Option<String>,
}

/// Where a domain's payload, Makefile and tests run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsOn {
    /// A guest trog builds for it.
    OwnGuest,
    /// Another domain's machine (`depends_on`).
    DependsOn(DomainName),
    /// A machine trog did not build, at this address (`existing_host`).
    ExistingHost(String),
}

impl GuestSettings {
    /// Where the domain runs: its own guest, another domain's machine, or an existing host.
    pub fn runs_on(&self) -> RunsOn {
        match (&self.depends_on, &self.existing_host) {
            (Some(other), _) => RunsOn::DependsOn(other.clone()),
            (None, Some(address)) => RunsOn::ExistingHost(address.clone()),
            (None, None) => RunsOn::OwnGuest,
        }
    }

    /// Whether the guest names a libvirt URI, which callers warn about (and ignore once a
    /// fleet exists).
    pub fn uses_deprecated_libvirt_uri(&self) -> bool {
        self.libvirt_uri.is_some()
    }
}

/// A deprecated setting that is set, for callers to warn about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprecatedSetting {
    pub key: &'static str,
    pub origin: Origin,
    /// Why, and what to use instead.
    pub advice: &'static str,
}

/// One thing wrong with a guest's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    /// Where, when it was written somewhere (a missing setting was not).
    pub origin: Option<Origin>,
    /// `_global.memory`, `_global.image.sha256`, `_global.ips[2]`.
    pub key_path: String,
    pub kind: SettingProblemKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingProblemKind {
    /// The key is not a setting.
    Unknown { suggestion: Option<String> },
    /// The value does not have the setting's type.
    Invalid { why: String },
    /// A required setting is set nowhere.
    Missing { description: &'static str },
}

impl fmt::Display for SettingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(origin) = &self.origin {
            write!(f, "{origin}: ")?;
        }
        match &self.kind {
            SettingProblemKind::Unknown {
                suggestion: Some(suggestion),
            } => {
                write!(
                    f,
                    "`{}` is not a setting (did you mean `{suggestion}`?)",
                    self.key_path
                )
            }
            SettingProblemKind::Unknown { suggestion: None } => {
                write!(f, "`{}` is not a setting", self.key_path)
            }
            SettingProblemKind::Invalid { why } => write!(f, "`{}`: {why}", self.key_path),
            SettingProblemKind::Missing { description } => {
                // The table's sentence, read as an aside: "(the login created on …)".
                let aside = description.trim_end_matches('.');
                let mut letters = aside.chars();
                let aside = match letters.next() {
                    Some(first) => first.to_lowercase().chain(letters).collect::<String>(),
                    None => String::new(),
                };
                write!(
                    f,
                    "`{}` ({aside}) is required and set nowhere",
                    self.key_path
                )
            }
        }
    }
}

/// Checks a merged `_global` mapping and builds the typed settings.
///
/// `recipe_settings` are further keys `_global` may hold because the distro or machine recipe
/// declares them in its argument schema (the `vm` recipe's disk knobs): they are accepted here
/// untyped, kept in the merged `_global`, and left to the cookbook to check.
pub fn settings_from_global(
    global: &IndexMap<String, LocatedEntry>,
    recipe_settings: &[String],
) -> Result<(GuestSettings, Vec<DeprecatedSetting>), Vec<SettingProblem>> {
    let mut problems = Vec::new();
    let mut values: HashMap<&'static str, TypedValue> = HashMap::new();
    let mut deprecations = Vec::new();

    for (key, entry) in global {
        let Some(declaration) = global_schema::declaration(key) else {
            if recipe_settings.contains(key) {
                continue;
            }
            let known = GLOBAL_SETTINGS
                .iter()
                .map(|setting| setting.key)
                .chain(recipe_settings.iter().map(String::as_str));
            problems.push(SettingProblem {
                origin: Some(entry.key_origin.clone()),
                key_path: format!("_global.{key}"),
                kind: SettingProblemKind::Unknown {
                    suggestion: global_schema::closest(key, known).map(str::to_string),
                },
            });
            continue;
        };
        // `~` unsets a setting, so a domain can drop what _base gave it.
        if entry.value.value == Node::Null {
            continue;
        }
        if is_placeholder(&entry.value) {
            // A placeholder is reported by the CHANGEME scan, not here: a guest written by
            // new_guest must load. A required setting keeps it as its text; any other falls
            // back to its default.
            if matches!(
                declaration.presence,
                Presence::Required | Presence::RequiredToBuild { .. }
            ) {
                values.insert(declaration.key, TypedValue::Text(PLACEHOLDER.to_string()));
            }
            continue;
        }
        match check_value(declaration.setting_type, &entry.value) {
            Ok(value) => {
                if let Some(advice) = declaration.deprecated {
                    deprecations.push(DeprecatedSetting {
                        key: declaration.key,
                        origin: entry.key_origin.clone(),
                        advice,
                    });
                }
                values.insert(declaration.key, value);
            }
            Err(problem) => problems.push(SettingProblem {
                origin: Some(problem.origin),
                key_path: format!("_global.{key}{}", problem.within),
                kind: SettingProblemKind::Invalid { why: problem.why },
            }),
        }
    }

    let set = |key: &str| global.contains_key(key) && !is_unset(global, key);
    let existing_host = set("existing_host");
    let dependent = set("depends_on");
    for declaration in GLOBAL_SETTINGS {
        if values.contains_key(declaration.key) {
            continue;
        }
        match declaration.presence {
            // A dependent logs in as its machine's admin: its own is not asked for.
            Presence::RequiredToBuild { .. } if dependent => {}
            Presence::RequiredToBuild {
                existing_host: default,
            } if existing_host => {
                values.insert(
                    declaration.key,
                    default_value(declaration.setting_type, default),
                );
            }
            Presence::RequiredToBuild { .. }
                if !global.contains_key(declaration.key) || is_unset(global, declaration.key) =>
            {
                problems.push(SettingProblem {
                    origin: None,
                    key_path: format!("_global.{}", declaration.key),
                    kind: SettingProblemKind::Missing {
                        description: declaration.description,
                    },
                });
            }
            Presence::Required
                if !global.contains_key(declaration.key) || is_unset(global, declaration.key) =>
            {
                problems.push(SettingProblem {
                    origin: None,
                    key_path: format!("_global.{}", declaration.key),
                    kind: SettingProblemKind::Missing {
                        description: declaration.description,
                    },
                });
            }
            Presence::Default(text) => {
                values.insert(
                    declaration.key,
                    default_value(declaration.setting_type, text),
                );
            }
            Presence::Required | Presence::RequiredToBuild { .. } | Presence::Optional => {}
        }
    }

    for (fallbacks, first) in [
        ("fallback_mirrors", "mirror"),
        ("fallback_security_mirrors", "security_mirror"),
    ] {
        if values.contains_key(fallbacks) && !values.contains_key(first) {
            problems.push(SettingProblem {
                origin: global.get(fallbacks).map(|entry| entry.key_origin.clone()),
                key_path: format!("_global.{fallbacks}"),
                kind: SettingProblemKind::Invalid {
                    why: format!(
                        "is tried after `{first}` fails, and `{first}` is set nowhere: set `{first}` (the mirror to ask first), or move these into it"
                    ),
                },
            });
        }
    }

    // The security suite comes from `security_mirror` only where the other suites come from a
    // mirror: without one, a guest keeps its image's own sources, the security archive included.
    if values.contains_key("security_mirror") && !values.contains_key("mirror") {
        problems.push(SettingProblem {
            origin: global
                .get("security_mirror")
                .map(|entry| entry.key_origin.clone()),
            key_path: "_global.security_mirror".to_string(),
            kind: SettingProblemKind::Invalid {
                why: "serves the security suite beside `mirror`, and `mirror` is set nowhere: set `mirror` too (the mirror of the other suites), or remove this line"
                    .to_string(),
            },
        });
    }

    // A baked image is built from `release` and `mirror` (the builder cannot add packages to an
    // image it did not build), so on Debian, where one is built, a pinned image would never be
    // the guest's disk.
    let baked = matches!(values.get("bake_packages"), Some(TypedValue::Flag(true)));
    let on_debian =
        matches!(values.get("distro"), Some(TypedValue::Text(distro)) if distro == "debian");
    if baked && on_debian && values.contains_key("image") {
        problems.push(SettingProblem {
            origin: global.get("image").map(|entry| entry.key_origin.clone()),
            key_path: "_global.image".to_string(),
            kind: SettingProblemKind::Invalid {
                why: "is not used with `bake_packages: true`: a baked image is built from `release` and `mirror`, not over a pinned image; remove `image`, or set `bake_packages: false` for this guest"
                    .to_string(),
            },
        });
    }

    if let (Some(TypedValue::List(items)), Some(entry)) = (values.get("ips"), global.get("ips")) {
        let mut found = static_addresses::ips_problems(items);
        if let (Some(TypedValue::Ip(gateway)), Some(gateway_entry)) =
            (values.get("gateway"), global.get("gateway"))
        {
            let written_at = gateway_entry.value.origin.to_string();
            found.extend(static_addresses::gateway_among_ips(
                *gateway,
                values.get("ips"),
                &written_at,
            ));
        }
        for (index, why) in found {
            problems.push(SettingProblem {
                origin: match &entry.value.value {
                    Node::Sequence(nodes) => nodes.get(index).map(|node| node.origin.clone()),
                    _ => None,
                }
                .or_else(|| Some(entry.value.origin.clone())),
                key_path: format!("_global.ips[{index}]"),
                kind: SettingProblemKind::Invalid { why },
            });
        }
    }

    if let Some(TypedValue::Ip(gateway)) = values.get("gateway") {
        if let Some(why) = static_addresses::gateway_problem(
            *gateway,
            values.get("ips"),
            values.get("address_range"),
        ) {
            problems.push(SettingProblem {
                origin: global
                    .get("gateway")
                    .map(|entry| entry.value.origin.clone()),
                key_path: "_global.gateway".into(),
                kind: SettingProblemKind::Invalid { why },
            });
        }
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    Ok((assemble(values), deprecations))
}

fn is_placeholder(node: &LocatedNode) -> bool {
    matches!(&node.value, Node::String(text) if text == PLACEHOLDER)
}

fn is_unset(global: &IndexMap<String, LocatedEntry>, key: &str) -> bool {
    global
        .get(key)
        .is_some_and(|entry| entry.value.value == Node::Null)
}

/// A declared default, checked like a written value (a test checks that every default passes).
fn default_value(setting_type: SettingType, text: &str) -> TypedValue {
    let node = crate::config::yaml::parse_located(std::path::Path::new("<default>"), text)
        .expect("declared defaults are valid YAML");
    check_value(setting_type, &node).expect("declared defaults pass their own check")
}

/// Moves checked values into the struct. Every required or defaulted key is present here.
fn assemble(mut values: HashMap<&'static str, TypedValue>) -> GuestSettings {
    let mut take = |key: &str| values.remove(key);
    let text = |value: Option<TypedValue>| match value {
        Some(TypedValue::Text(text)) => Some(text),
        _ => None,
    };
    let list = |value: Option<TypedValue>| match value {
        Some(TypedValue::List(items)) => items,
        _ => Vec::new(),
    };
    GuestSettings {
        admin_user: text(take("admin_user")).unwrap_or_default(),
        contact_email: text(take("contact_email")).unwrap_or_default(),
        distro: match text(take("distro")).as_deref() {
            Some("debian") => Distro::Debian,
            _ => Distro::Ubuntu,
        },
        release: text(take("release")),
        mirror: text(take("mirror")),
        security_mirror: text(take("security_mirror")),
        fallback_mirrors: list(take("fallback_mirrors"))
            .into_iter()
            .filter_map(|item| text(Some(item)))
            .collect(),
        fallback_security_mirrors: list(take("fallback_security_mirrors"))
            .into_iter()
            .filter_map(|item| text(Some(item)))
            .collect(),
        cache: text(take("cache")),
        keepass_key_file: text(take("keepass_key_file")),
        backup_dir: text(take("backup_dir")).unwrap_or_default(),
        backup_retention_days: match take("backup_retention_days") {
            Some(TypedValue::Count(days)) => days,
            _ => DEFAULT_RETENTION_DAYS,
        },
        timezone: text(take("timezone")).unwrap_or_default(),
        network: text(take("network")).unwrap_or_default(),
        bridge: text(take("bridge")),
        gateway: match take("gateway") {
            Some(TypedValue::Ip(address)) => Some(address),
            _ => None,
        },
        address_range: match take("address_range") {
            Some(TypedValue::Range(range)) => Some(range),
            _ => None,
        },
        tenant: match take("tenant") {
            Some(TypedValue::Tenant(tenant)) => Some(tenant),
            _ => None,
        },
        resolvers: list(take("resolvers"))
            .into_iter()
            .filter_map(|item| match item {
                TypedValue::Ip(address) => Some(address),
                _ => None,
            })
            .collect(),
        search_domains: list(take("search_domains"))
            .into_iter()
            .filter_map(|item| text(Some(item)))
            .collect(),
        ips: list(take("ips"))
            .into_iter()
            .filter_map(|item| match item {
                TypedValue::Cidr(cidr) => Some(cidr),
                _ => None,
            })
            .collect(),
        size: match take("size") {
            Some(TypedValue::Disk(bytes)) => bytes,
            _ => Bytes::default(),
        },
        memory: match take("memory") {
            Some(TypedValue::Memory(mib)) => mib,
            _ => MiB::default(),
        },
        cpus: match take("cpus") {
            Some(TypedValue::Count(count)) => count,
            _ => 1,
        },
        image: match take("image") {
            Some(TypedValue::Image(image)) => Some(image),
            _ => None,
        },
        bake_packages: matches!(take("bake_packages"), Some(TypedValue::Flag(true))),
        baked_image_max_age_days: match take("baked_image_max_age_days") {
            Some(TypedValue::Count(days)) => days,
            _ => DEFAULT_BAKED_IMAGE_MAX_AGE_DAYS,
        },
        packages: list(take("packages"))
            .into_iter()
            .filter_map(|item| text(Some(item)))
            .collect(),
        hypervisor: match take("hypervisor") {
            Some(TypedValue::Hypervisor(name)) => Some(name),
            _ => None,
        },
        cpu_mode: text(take("cpu_mode")).unwrap_or_default(),
        aliases: list(take("aliases"))
            .into_iter()
            .filter_map(|item| match item {
                TypedValue::Domain(domain) => Some(domain),
                _ => None,
            })
            .collect(),
        libvirt_uri: match take("libvirt_uri") {
            Some(TypedValue::Uri(uri)) => Some(uri),
            _ => None,
        },
        depends_on: match take("depends_on") {
            Some(TypedValue::Domain(domain)) => Some(domain),
            _ => None,
        },
        existing_host: text(take("existing_host")),
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
