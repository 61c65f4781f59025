//! The global schema: every setting `_global` may hold, declared once, as data.
//!
//! The validator (`settings.rs`), the reference table in docs/CONFIGURATION.md and the
//! "did you mean" hints are all read from [`GLOBAL_SETTINGS`], so a setting added here is
//! checked, documented and suggested without another list to keep in step.

/// What kind of value a setting holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingType {
    /// Any non-empty text.
    Text,
    /// A login name on the guest.
    UserName,
    /// `someone@example.test`.
    Email,
    /// An `http://` or `https://` address.
    Url,
    /// A distribution package's name, as Debian policy allows it: it reaches the package
    /// manager's command line in the guest's Makefile.
    PackageName,
    /// One of a fixed set of words.
    OneOf(&'static [&'static str]),
    /// A fully qualified domain name in its one spelling.
    DomainName,
    /// The name of a block of `hypervisors.conf`.
    HypervisorName,
    /// A tenant: lower-case letters, digits and `-`.
    TenantName,
    /// A libvirt connection URI (local, ssh or test).
    LibvirtUri,
    /// Memory: a bare number is MiB, or a number with K/M/G/T.
    Memory,
    /// Disk: a bare number is GiB, or a number with K/M/G/T.
    DiskSize,
    /// A whole number of at least `min`.
    Count { min: u32, max: u32 },
    /// `true` or `false`, written as YAML's booleans.
    Boolean,
    /// An IPv4 or IPv6 address without a prefix length.
    IpAddress,
    /// A machine's address as SSH takes it: an IP address or a DNS name.
    HostAddress,
    /// An address with its prefix length, `192.0.2.10/24` or `2001:db8::10/64`.
    CidrAddress,
    /// A DNS name that need not be fully qualified (a search domain such as `lan`).
    DnsName,
    /// A zone of the tz database, `Europe/Berlin` or `Etc/UTC`.
    Timezone,
    /// A mapping `{url, sha256}` naming a base image by its digest.
    Image,
    /// The IPv4 addresses trog may hand out on a network, `first-last/prefix`.
    AddressRange,
    /// A list whose items are all of one type.
    ListOf(&'static SettingType),
}

impl SettingType {
    /// How the type is written in the reference table.
    pub fn describe(self) -> String {
        match self {
            SettingType::Text => "text".to_string(),
            SettingType::UserName => "user name".to_string(),
            SettingType::Email => "email address".to_string(),
            SettingType::Url => "URL (http, https)".to_string(),
            SettingType::PackageName => "package name".to_string(),
            SettingType::OneOf(words) => words
                .iter()
                .map(|word| format!("`{word}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            SettingType::DomainName => "fully qualified domain name".to_string(),
            SettingType::HypervisorName => "hypervisor name".to_string(),
            SettingType::TenantName => "tenant name".to_string(),
            SettingType::LibvirtUri => "libvirt URI".to_string(),
            SettingType::Memory => "memory size (bare number: MiB)".to_string(),
            SettingType::DiskSize => "disk size (bare number: GiB)".to_string(),
            SettingType::Count { min, max } => format!("whole number from {min} to {max}"),
            SettingType::Boolean => "`true` or `false`".to_string(),
            SettingType::IpAddress => "IP address".to_string(),
            SettingType::HostAddress => "IP address or DNS name".to_string(),
            SettingType::CidrAddress => "address/prefix".to_string(),
            SettingType::DnsName => "DNS name".to_string(),
            SettingType::Timezone => "tz zone name".to_string(),
            SettingType::Image => "`{url, sha256}`".to_string(),
            SettingType::AddressRange => "`first-last/prefix` (IPv4)".to_string(),
            SettingType::ListOf(item) => format!("list of {}", item.describe_plural()),
        }
    }

    /// The type of a list's items, as "a list of …" reads.
    fn describe_plural(self) -> String {
        match self {
            SettingType::Text => "texts".to_string(),
            SettingType::PackageName => "package names".to_string(),
            SettingType::IpAddress => "IP addresses".to_string(),
            SettingType::CidrAddress => "addresses/prefixes".to_string(),
            SettingType::DnsName => "DNS names".to_string(),
            SettingType::Url => "URLs (http, https)".to_string(),
            SettingType::DomainName => "fully qualified domain names".to_string(),
            other => format!("{} values", other.describe()),
        }
    }
}

/// Whether a setting must be given, and what it is when it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// No guest can be built without it; missing ones are reported together.
    Required,
    /// Absent means "not used" (an empty list for lists).
    Optional,
    /// Absent means this value, written as it would be in the file.
    Default(&'static str),
    /// Required of a guest trog builds (reported with the other missing ones); a domain that
    /// runs on an existing host takes `existing_host` (the specification's default), and one
    /// that depends on another machine takes that machine's.
    RequiredToBuild { existing_host: &'static str },
}

/// Where a setting is usually written. Both places accept every setting; this only guides
/// the documentation and the hint for a missing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The same for the whole installation: `_global` of `_base` in recipes.yaml.
    Installation,
    /// Particular to one guest: `_global` of the domain in recipes.d/<fqdn>.yaml.
    Guest,
}

/// One setting of `_global`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingDeclaration {
    pub key: &'static str,
    pub setting_type: SettingType,
    pub presence: Presence,
    pub scope: Scope,
    /// One line, for the reference table.
    pub description: &'static str,
    /// Why it should no longer be used and what replaces it; callers warn when it is set.
    pub deprecated: Option<&'static str>,
}

const fn setting(
    key: &'static str,
    setting_type: SettingType,
    presence: Presence,
    scope: Scope,
    description: &'static str,
) -> SettingDeclaration {
    SettingDeclaration {
        key,
        setting_type,
        presence,
        scope,
        description,
        deprecated: None,
    }
}

/// A guest's distribution. Only these have a distro recipe.
pub const DISTROS: &[&str] = &["debian", "ubuntu"];

/// Every `_global` setting. Order is the order of the reference table.
pub const GLOBAL_SETTINGS: &[SettingDeclaration] = &[
    // Installation settings.
    setting(
        "admin_user",
        SettingType::UserName,
        Presence::RequiredToBuild {
            existing_host: "root",
        },
        Scope::Installation,
        "The login created on every guest for its administrators, with passwordless sudo; an `existing_host` is finished as it, and must give it passwordless sudo.",
    ),
    setting(
        "contact_email",
        SettingType::Email,
        Presence::Required,
        Scope::Installation,
        "Where root's mail on the guest goes.",
    ),
    setting(
        "distro",
        SettingType::OneOf(DISTROS),
        // The specification's default: installations written for it expect Ubuntu guests.
        Presence::Default("ubuntu"),
        Scope::Installation,
        "The guest's distribution; picks the base image, the packager and package names.",
    ),
    setting(
        "release",
        SettingType::Text,
        Presence::Optional,
        Scope::Installation,
        "The distribution's release (`bookworm`, `noble`); unset, the distro recipe picks it.",
    ),
    setting(
        "mirror",
        SettingType::Url,
        Presence::Optional,
        Scope::Installation,
        "A package mirror or caching apt proxy (an `aptmirror` guest: `http://host:3142/deb.debian.org/debian`) the guests install from, first boot included.",
    ),
    setting(
        "security_mirror",
        SettingType::Url,
        Presence::Optional,
        Scope::Installation,
        "Where Debian guests get security updates, when `mirror` does not serve them (Debian keeps them in a separate archive, `…/debian-security`); unset, `mirror` serves them too. Needs `mirror`. Ubuntu guests take every suite, security included, from `mirror`, and do not read this.",
    ),
    setting(
        "fallback_mirrors",
        SettingType::ListOf(&SettingType::Url),
        Presence::Optional,
        Scope::Installation,
        "Mirrors apt turns to, in this order, when `mirror` fails a request (does not answer, answers an error, or serves a file that does not verify): the distribution's archive behind a hub's proxy, say. They serve the suites `mirror` serves, and need `mirror`.",
    ),
    setting(
        "fallback_security_mirrors",
        SettingType::ListOf(&SettingType::Url),
        Presence::Optional,
        Scope::Installation,
        "The same for `security_mirror`: tried in this order when it fails a request; needs `security_mirror` (Debian guests only).",
    ),
    setting(
        "cache",
        SettingType::Url,
        Presence::Optional,
        Scope::Installation,
        "A caching HTTP proxy (a `fetchcache` guest: `http://host:3128`) that every download of the guest's Makefile goes through (curl, wget, a site's own Makefile); the mirrors stay direct.",
    ),
    setting(
        "keepass_key_file",
        SettingType::Text,
        Presence::Optional,
        Scope::Installation,
        "A KeePassXC key file (a regular file, mode 0600, at most 64 KiB) that unlocks secrets.kdbx instead of the passphrase, or with it; relative to the configuration directory.",
    ),
    setting(
        "backup_dir",
        SettingType::Text,
        Presence::Default("backups"),
        Scope::Installation,
        "Where `trog backup` keeps the guests' backups (`<dir>/<fqdn>/<UTC time>.tar.gz`); relative to the configuration directory. Backups hold site data: the folders are 0700 and the files 0600.",
    ),
    setting(
        "backup_retention_days",
        SettingType::Count { min: 0, max: 36500 },
        Presence::Default("30"),
        Scope::Installation,
        "How many days a backup is kept before `trog backup --sweep` deletes it (counted from the time in its name); destroy and purge never delete backups.",
    ),
    setting(
        "timezone",
        SettingType::Timezone,
        Presence::Default("Etc/UTC"),
        Scope::Installation,
        "The guest's time zone.",
    ),
    setting(
        "network",
        SettingType::Text,
        Presence::Default("default"),
        Scope::Installation,
        "The libvirt network the guest's interface joins.",
    ),
    setting(
        "bridge",
        SettingType::Text,
        Presence::Optional,
        Scope::Installation,
        "A bridge on the hypervisor to attach to instead of a libvirt network.",
    ),
    setting(
        "gateway",
        SettingType::IpAddress,
        Presence::Optional,
        Scope::Installation,
        "The default route for static addresses (`ips`, or those `address_range` hands out): on the subnet of one of them, and not one of the guest's own.",
    ),
    setting(
        "address_range",
        SettingType::AddressRange,
        Presence::Optional,
        Scope::Installation,
        "The addresses trog hands out on the guest's network or bridge (ips.db); needs `gateway`.",
    ),
    setting(
        "tenant",
        SettingType::TenantName,
        Presence::Optional,
        Scope::Guest,
        "The group the guest belongs to: guests of other tenants on its network cannot reach it (docs/NETWORK.md).",
    ),
    setting(
        "resolvers",
        SettingType::ListOf(&SettingType::IpAddress),
        Presence::Optional,
        Scope::Installation,
        "DNS servers for guests with static addresses.",
    ),
    setting(
        "search_domains",
        SettingType::ListOf(&SettingType::DnsName),
        Presence::Optional,
        Scope::Installation,
        "DNS search domains for guests with static addresses.",
    ),
    // Per-guest settings.
    setting(
        "ips",
        SettingType::ListOf(&SettingType::CidrAddress),
        Presence::Optional,
        Scope::Guest,
        "Static addresses by hand, each once, none its subnet's own or broadcast address; unset, the guest is given one from `address_range`, or takes a lease.",
    ),
    setting(
        "size",
        SettingType::DiskSize,
        Presence::Default("10G"),
        Scope::Guest,
        "The root disk's size.",
    ),
    setting(
        "memory",
        SettingType::Memory,
        Presence::Default("1024"),
        Scope::Guest,
        "The guest's memory, committed in full on its hypervisor.",
    ),
    setting(
        "cpus",
        SettingType::Count {
            min: 1,
            max: crate::model::units::GUEST_MAX_CPUS,
        },
        Presence::Default("1"),
        Scope::Guest,
        "Virtual CPUs.",
    ),
    setting(
        "image",
        SettingType::Image,
        Presence::Optional,
        Scope::Guest,
        "A base image other than the distro recipe's, pinned by its sha256 digest.",
    ),
    setting(
        "bake_packages",
        SettingType::Boolean,
        Presence::Default("false"),
        Scope::Guest,
        "`true`: the guest's root disk is made over a baked image, built on this machine by the `trog image build` builder from `release` and `mirror` with every package its recipes install already in it, shared by the guests with the same package set and the same versions of those packages on the mirror (a new version of one makes a new image); the finish still runs apt and the recipes' tests (docs/IMAGES.md). Refused on Debian beside `image`: a baked image is never built over a pinned one.",
    ),
    setting(
        "baked_image_max_age_days",
        SettingType::Count { min: 1, max: 3650 },
        Presence::Default("7"),
        Scope::Installation,
        "How many days a baked image is used; the next provision that makes a root disk after that builds a new one, and its plan says so. `trog image prune` removes those no guest uses.",
    ),
    setting(
        "packages",
        SettingType::ListOf(&SettingType::PackageName),
        Presence::Optional,
        Scope::Guest,
        "Packages to install beyond those the recipes ask for.",
    ),
    setting(
        "hypervisor",
        SettingType::HypervisorName,
        Presence::Optional,
        Scope::Guest,
        "Pins the guest to a block of hypervisors.conf; it must still fit there.",
    ),
    setting(
        "cpu_mode",
        SettingType::Text,
        Presence::Default("host-passthrough"),
        Scope::Guest,
        "libvirt's `<cpu mode>`; `host-model` or a named model eases migration. Under `domain_type = qemu` (TCG, no KVM) there is no host CPU: `host-passthrough` and `host-model` give `qemu64`, the model TCG runs fastest (guests installing packages finished about a tenth sooner than on `max`, more than that against `Nehalem`, bench/README.md), without its `svm` (AMD's virtualization, which only makes the guest's kernel load KVM on every boot); `maximum` gives libvirt's `maximum` mode (`-cpu max`, every feature TCG emulates); an image built for x86-64-v2 needs `maximum` or a named model such as `Nehalem`, which is used as named.",
    ),
    setting(
        "aliases",
        SettingType::ListOf(&SettingType::DomainName),
        Presence::Optional,
        Scope::Guest,
        "Other fully qualified names the guest answers to (the nginx recipe serves the site under them too).",
    ),
    setting(
        "depends_on",
        SettingType::DomainName,
        Presence::Optional,
        Scope::Guest,
        "Another domain of recipes.d whose machine this one is provisioned onto: no VM of its own; its payload, Makefile and tests run there beside the machine's own, in a state directory of its own (docs/SITES.md). Settings of a machine are refused beside it.",
    ),
    setting(
        "existing_host",
        SettingType::HostAddress,
        Presence::Optional,
        Scope::Guest,
        "A machine trog did not build, reached over SSH at this address as `admin_user` with the domain's own key; provision finishes it and never touches libvirt for it (docs/SITES.md). Settings of a machine trog builds are refused beside it.",
    ),
    SettingDeclaration {
        key: "libvirt_uri",
        setting_type: SettingType::LibvirtUri,
        presence: Presence::Optional,
        scope: Scope::Guest,
        description: "Where to build when there is no hypervisors.conf (deprecated).",
        deprecated: Some(
            "where a guest runs is the fleet's business: describe the machine in hypervisors.conf, \
             and pin with `hypervisor` if you must",
        ),
    },
];

/// The declaration of `key`, if it is a setting.
pub fn declaration(key: &str) -> Option<&'static SettingDeclaration> {
    GLOBAL_SETTINGS.iter().find(|setting| setting.key == key)
}

/// The candidate nearest to `word`, if it is within a third of its length (at least one edit).
pub fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let allowed = (word.chars().count() / 3).max(1);
    crate::did_you_mean::nearest(word, candidates, |_| allowed)
}

/// The reference table of every setting, in Markdown, as docs/CONFIGURATION.md carries it, with
/// what a change of each costs a built guest ([`crate::config::convergence`]).
pub fn reference_table() -> String {
    let mut table = String::from(
        "| Setting | Type | Default | Meaning | When changed |\n|---|---|---|---|---|\n",
    );
    for setting in GLOBAL_SETTINGS {
        let default = match setting.presence {
            Presence::Required => "**required**".to_string(),
            Presence::RequiredToBuild { existing_host } => {
                format!("**required** (an existing host: `{existing_host}`)")
            }
            Presence::Optional => "—".to_string(),
            Presence::Default(value) => format!("`{value}`"),
        };
        let mut meaning = setting.description.to_string();
        if setting.deprecated.is_some() {
            meaning.push_str(" Ignored, with a warning, once hypervisors.conf exists.");
        }
        let when_changed = crate::config::convergence::convergence(setting.key)
            .map_or("**unclassified**", |class| class.describe());
        table.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            setting.key,
            setting.setting_type.describe(),
            default,
            meaning,
            when_changed
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<_> = GLOBAL_SETTINGS.iter().map(|setting| setting.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), GLOBAL_SETTINGS.len());
    }

    #[test]
    fn suggestions_catch_small_slips_only() {
        let suggest = |key| closest(key, GLOBAL_SETTINGS.iter().map(|setting| setting.key));
        assert_eq!(suggest("memroy"), Some("memory"));
        assert_eq!(suggest("contact_mail"), Some("contact_email"));
        assert_eq!(suggest("cpu"), Some("cpus"));
        assert_eq!(suggest("adminuser"), Some("admin_user"));
        assert_eq!(suggest("flavour"), None);
    }

    #[test]
    fn the_documentation_carries_the_current_table() {
        let documentation = include_str!("../../docs/CONFIGURATION.md");
        assert!(
            documentation.contains(&reference_table()),
            "docs/CONFIGURATION.md's settings table differs from the schema; paste this:\n{}",
            reference_table()
        );
    }
}
