//! Checking one `_global` value against its declared type, giving a typed value or a reason.
//!
//! Each check reads a located node so that a problem inside a value (the `sha256` of an
//! `image`, the third address of `ips`) is reported where that part was written.

use crate::config::global_schema::SettingType;
use crate::config::yaml::{LocatedNode, Node, Origin};
use crate::model::hypervisor::LibvirtUri;
use crate::model::names::{DomainName, HypervisorName, TenantName};
use crate::model::units::{guest_disk_problem, guest_memory_problem, Bytes, MiB};
use serde::Serialize;
use std::fmt;
use std::net::IpAddr;

/// An address with its prefix length, as a static address is written: `192.0.2.10/24`.
/// Serialized the same way, since templates write it into network configuration as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpCidr {
    pub address: IpAddr,
    pub prefix_len: u8,
}

impl IpCidr {
    pub fn parse(text: &str) -> Result<IpCidr, String> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` has no prefix length (write e.g. `192.0.2.10/24`)"))?;
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("`{address}` is not an IP address"))?;
        let limit = if address.is_ipv4() { 32 } else { 128 };
        let prefix_len: u8 = prefix
            .parse()
            .ok()
            .filter(|length| *length <= limit)
            .ok_or_else(|| format!("`{prefix}` is not a prefix length (0 to {limit})"))?;
        Ok(IpCidr {
            address,
            prefix_len,
        })
    }
}

impl Serialize for IpCidr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

/// A base image named by where to fetch it and the digest it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageSource {
    pub url: String,
    /// 64 lower-case hexadecimal digits.
    pub sha256: String,
}

/// A value that passed its type's check.
#[derive(Debug, Clone, PartialEq)]
pub enum TypedValue {
    Text(String),
    Memory(MiB),
    Disk(Bytes),
    Count(u32),
    Flag(bool),
    Ip(IpAddr),
    Cidr(IpCidr),
    Domain(DomainName),
    Hypervisor(HypervisorName),
    Tenant(TenantName),
    Uri(LibvirtUri),
    Image(ImageSource),
    Range(crate::model::address_range::AddressRange),
    List(Vec<TypedValue>),
}

/// Why a value was refused, and where: the value itself or a part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueProblem {
    pub origin: Origin,
    /// The part of the value at fault, appended to the setting's key (`.sha256`, `[2]`).
    pub within: String,
    pub why: String,
}

/// Checks `node` against `setting_type`.
pub fn check_value(
    setting_type: SettingType,
    node: &LocatedNode,
) -> Result<TypedValue, ValueProblem> {
    let refuse = |why: String| ValueProblem {
        origin: node.origin.clone(),
        within: String::new(),
        why,
    };
    match setting_type {
        SettingType::ListOf(item_type) => {
            let Node::Sequence(items) = &node.value else {
                return Err(refuse(format!(
                    "expected a list, found {}",
                    node.value.describe()
                )));
            };
            let mut values = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let value = check_value(*item_type, item).map_err(|mut problem| {
                    problem.within = format!("[{index}]{}", problem.within);
                    problem
                })?;
                values.push(value);
            }
            Ok(TypedValue::List(values))
        }
        SettingType::Image => check_image(node),
        SettingType::Count { min, max } => match &node.value {
            Node::Integer(number) if *number < i64::from(min) => {
                Err(refuse(format!("{number} is less than {min}")))
            }
            Node::Integer(number) if *number > i64::from(max) => {
                Err(refuse(format!("{number} is more than {max}")))
            }
            Node::Integer(number) => Ok(TypedValue::Count(*number as u32)),
            other => Err(refuse(format!(
                "expected a whole number, found {}",
                other.describe()
            ))),
        },
        SettingType::Boolean => match &node.value {
            Node::Bool(value) => Ok(TypedValue::Flag(*value)),
            other => Err(refuse(format!(
                "expected `true` or `false`, found {}",
                other.describe()
            ))),
        },
        SettingType::Memory | SettingType::DiskSize => {
            let text = match &node.value {
                Node::Integer(_) | Node::String(_) => node.value.scalar_text().unwrap_or_default(),
                other => {
                    return Err(refuse(format!(
                        "expected a size, found {}",
                        other.describe()
                    )))
                }
            };
            if setting_type == SettingType::Memory {
                let memory = MiB::parse(&text).map_err(|error| refuse(error.to_string()))?;
                match guest_memory_problem(memory) {
                    Some(problem) => Err(refuse(problem)),
                    None => Ok(TypedValue::Memory(memory)),
                }
            } else {
                let size = Bytes::parse_disk(&text).map_err(|error| refuse(error.to_string()))?;
                match guest_disk_problem(size) {
                    Some(problem) => Err(refuse(problem)),
                    None => Ok(TypedValue::Disk(size)),
                }
            }
        }
        _ => {
            let Node::String(text) = &node.value else {
                return Err(refuse(format!(
                    "expected {}, found {}",
                    setting_type.describe(),
                    node.value.describe()
                )));
            };
            check_text(setting_type, text).map_err(refuse)
        }
    }
}

/// The longest value a text setting takes, in bytes: what its kind of value can be at most, or
/// a path's limit for free text, so a value pasted by mistake (a whole file) is refused rather
/// than written into every guest.
fn longest_text(setting_type: SettingType) -> usize {
    match setting_type {
        SettingType::UserName => 32,
        // RFC 5321's limit on an address in a mail path.
        SettingType::Email => 254,
        SettingType::DnsName | SettingType::DomainName | SettingType::HostAddress => 253,
        SettingType::PackageName => 128,
        SettingType::Timezone | SettingType::HypervisorName | SettingType::TenantName => 64,
        SettingType::Url | SettingType::LibvirtUri => 2048,
        // PATH_MAX: free text here is a release's name or a path.
        _ => 4096,
    }
}

/// An email address as a guest's mail system takes it: `local@domain`, the local part of the
/// characters RFC 5322 allows unquoted (at most 64), the domain a DNS name.
fn email_problem(text: &str) -> Option<&'static str> {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return Some("it has no `@`");
    };
    if local.is_empty() || local.len() > 64 {
        return Some("the part before `@` must be 1 to 64 characters");
    }
    let plain_local = local
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-.".contains(c));
    if !plain_local || local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Some("the part before `@` holds a character an address cannot hold unquoted");
    }
    let valid_domain = domain.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    });
    if !valid_domain {
        return Some("the part after `@` is not a domain name");
    }
    None
}

/// Checks a value written as text.
fn check_text(setting_type: SettingType, text: &str) -> Result<TypedValue, String> {
    if text.trim().is_empty() {
        return Err("it is empty".to_string());
    }
    let longest = longest_text(setting_type);
    if text.len() > longest {
        return Err(format!(
            "it is {} bytes long; {} takes at most {longest}",
            text.len(),
            setting_type.describe()
        ));
    }
    if let Some(control) = text.chars().find(|c| c.is_control()) {
        return Err(format!(
            "it holds the control character {}",
            control.escape_default()
        ));
    }
    let plain = || Ok(TypedValue::Text(text.to_string()));
    match setting_type {
        SettingType::Text => plain(),
        SettingType::UserName => {
            let valid = text.len() <= 32
                && text.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && text
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if valid {
                plain()
            } else {
                Err(format!(
                    "`{text}` is not a login name (a-z, 0-9, `_`, `-`; starting with a letter)"
                ))
            }
        }
        SettingType::Email => match email_problem(text) {
            None => plain(),
            Some(why) => Err(format!("`{text}` is not an email address: {why}")),
        },
        SettingType::PackageName => {
            // Debian policy 5.6.1: lower case, digits, `+`, `-`, `.`; two characters at least,
            // starting with a letter or digit.
            let valid = text.len() >= 2
                && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && text.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.')
                });
            if valid {
                plain()
            } else {
                Err(format!(
                    "`{text}` is not a package name (a-z, 0-9, `+`, `-`, `.`; starting with a letter or digit)"
                ))
            }
        }
        SettingType::Url => match text.split_once("://") {
            Some(("http" | "https", rest))
                if !rest.is_empty() && !text.contains(char::is_whitespace) =>
            {
                plain()
            }
            _ => Err(format!("`{text}` is not an http:// or https:// URL")),
        },
        SettingType::OneOf(words) => {
            if words.contains(&text) {
                plain()
            } else {
                Err(format!(
                    "`{text}` is not one of {}",
                    setting_type.describe()
                ))
            }
        }
        SettingType::DomainName => DomainName::parse(text)
            .map(TypedValue::Domain)
            .map_err(|error| error.to_string()),
        SettingType::HypervisorName => HypervisorName::parse(text)
            .map(TypedValue::Hypervisor)
            .map_err(|error| error.to_string()),
        SettingType::TenantName => TenantName::parse(text)
            .map(TypedValue::Tenant)
            .map_err(|error| error.to_string()),
        SettingType::LibvirtUri => LibvirtUri::parse(text)
            .map(TypedValue::Uri)
            .map_err(|error| error.to_string()),
        SettingType::IpAddress => text
            .parse::<IpAddr>()
            .map(TypedValue::Ip)
            .map_err(|_| format!("`{text}` is not an IP address")),
        SettingType::CidrAddress => IpCidr::parse(text).map(TypedValue::Cidr),
        SettingType::AddressRange => {
            crate::model::address_range::AddressRange::parse(text).map(TypedValue::Range)
        }
        SettingType::HostAddress => match text.parse::<IpAddr>() {
            Ok(_) => plain(),
            Err(_) => check_text(SettingType::DnsName, text)
                .map_err(|_| format!("`{text}` is neither an IP address nor a DNS name")),
        },
        SettingType::DnsName => {
            let valid = !text.ends_with('.')
                && text.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                });
            if valid {
                plain()
            } else {
                Err(format!("`{text}` is not a DNS name"))
            }
        }
        SettingType::Timezone => {
            let valid = !text.starts_with('/')
                && !text.split('/').any(|part| part.is_empty() || part == "..")
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'));
            if valid {
                plain()
            } else {
                Err(format!(
                    "`{text}` is not a time zone name such as `Europe/Berlin`"
                ))
            }
        }
        SettingType::ListOf(_)
        | SettingType::Image
        | SettingType::Count { .. }
        | SettingType::Boolean
        | SettingType::Memory
        | SettingType::DiskSize => {
            unreachable!("structured types are checked by check_value")
        }
    }
}

/// `image: {url, sha256}`: both required, nothing else.
fn check_image(node: &LocatedNode) -> Result<TypedValue, ValueProblem> {
    let Node::Mapping(entries) = &node.value else {
        return Err(ValueProblem {
            origin: node.origin.clone(),
            within: String::new(),
            why: format!(
                "expected a mapping with `url` and `sha256`, found {}",
                node.value.describe()
            ),
        });
    };
    for (key, entry) in entries {
        if key != "url" && key != "sha256" {
            return Err(ValueProblem {
                origin: entry.key_origin.clone(),
                within: format!(".{key}"),
                why: "an image has only `url` and `sha256`".to_string(),
            });
        }
    }
    let part = |key: &str| -> Result<(String, Origin), ValueProblem> {
        let entry = entries.get(key).ok_or_else(|| ValueProblem {
            origin: node.origin.clone(),
            within: String::new(),
            why: format!("`{key}` is missing: an image needs both `url` and `sha256`"),
        })?;
        match &entry.value.value {
            Node::String(text) => Ok((text.clone(), entry.value.origin.clone())),
            other => Err(ValueProblem {
                origin: entry.value.origin.clone(),
                within: format!(".{key}"),
                why: format!("expected text, found {}", other.describe()),
            }),
        }
    };
    let (url, url_origin) = part("url")?;
    let (sha256, sha256_origin) = part("sha256")?;
    // A base image may also be a file on this machine: trog fetches and verifies it here and
    // uploads it through libvirt, so the hypervisor never needs the path.
    let local_file = url
        .strip_prefix("file://")
        .is_some_and(|path| path.starts_with('/'));
    let checked = if local_file {
        Ok(())
    } else {
        check_text(SettingType::Url, &url).map(|_| ())
    };
    if let Err(why) = checked.map_err(|why| format!("{why}, nor a file:///absolute/path")) {
        return Err(ValueProblem {
            origin: url_origin,
            within: ".url".to_string(),
            why,
        });
    }
    if sha256.len() != 64 || !sha256.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ValueProblem {
            origin: sha256_origin,
            within: ".sha256".to_string(),
            why: format!("`{sha256}` is not a sha256 digest (64 hexadecimal digits)"),
        });
    }
    Ok(TypedValue::Image(ImageSource {
        url,
        sha256: sha256.to_ascii_lowercase(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::yaml::parse_located;
    use std::path::Path;

    fn check(setting_type: SettingType, yaml: &str) -> Result<TypedValue, ValueProblem> {
        let tree = parse_located(Path::new("v.yaml"), &format!("value: {yaml}\n")).unwrap();
        let Node::Mapping(entries) = tree.value else {
            panic!()
        };
        check_value(setting_type, &entries["value"].value)
    }

    fn refused(setting_type: SettingType, yaml: &str) -> String {
        check(setting_type, yaml).unwrap_err().why
    }

    #[test]
    fn cidr_addresses_take_v4_and_v6() {
        assert_eq!(
            IpCidr::parse("192.0.2.10/24").unwrap().to_string(),
            "192.0.2.10/24"
        );
        assert_eq!(IpCidr::parse("2001:db8::10/64").unwrap().prefix_len, 64);
        assert!(IpCidr::parse("192.0.2.10")
            .unwrap_err()
            .contains("no prefix"));
        assert!(IpCidr::parse("192.0.2.10/33").is_err());
        assert!(IpCidr::parse("192.0.2.300/24").is_err());
    }

    #[test]
    fn sizes_accept_numbers_and_suffixes() {
        assert_eq!(
            check(SettingType::Memory, "2048").unwrap(),
            TypedValue::Memory(MiB(2048))
        );
        assert_eq!(
            check(SettingType::Memory, "2G").unwrap(),
            TypedValue::Memory(MiB(2048))
        );
        assert_eq!(
            check(SettingType::DiskSize, "4").unwrap(),
            TypedValue::Disk(Bytes::from_gib(4))
        );
        assert!(refused(SettingType::Memory, "lots").contains("not a size"));
        assert!(refused(SettingType::Memory, "0").contains("less than a guest boots in"));
        assert!(refused(SettingType::DiskSize, "0").contains("less than a root disk holds"));
        assert!(refused(SettingType::DiskSize, "512M").contains("less than a root disk holds"));
        assert!(refused(SettingType::DiskSize, "[1]").contains("expected a size"));
    }

    #[test]
    fn counts_are_whole_and_at_least_the_minimum() {
        let cpus = SettingType::Count { min: 1, max: 255 };
        assert_eq!(check(cpus, "2").unwrap(), TypedValue::Count(2));
        assert!(refused(cpus, "0").contains("less than 1"));
        assert!(refused(cpus, "256").contains("more than 255"));
        assert!(refused(cpus, "99999999999").contains("more than 255"));
        assert!(refused(cpus, "-1").contains("less than 1"));
        assert!(refused(cpus, "\"2\"").contains("expected a whole number"));
        assert!(refused(cpus, "1.5").contains("expected a whole number"));
    }

    #[test]
    fn text_kinds_are_checked() {
        assert!(check(SettingType::Email, "ops@example.test").is_ok());
        assert!(refused(SettingType::Email, "ops").contains("not an email"));
        assert!(check(SettingType::Email, "first.last+ops@mail-1.example.test").is_ok());
        assert!(check(SettingType::Email, "root@localhost").is_ok());
        for bad in [
            "ops@",
            "'@example.test'",
            "a b@example.test",
            "ops@example..test",
            "ops@-example.test",
            ".ops@example.test",
            "o\"ps@example.test",
            "ops@exa_mple.test",
        ] {
            assert!(
                refused(SettingType::Email, bad).contains("not an email"),
                "{bad}"
            );
        }
        let long = format!("{}@example.test", "a".repeat(1024 * 1024));
        let why = refused(SettingType::Email, &long);
        assert!(why.contains("at most 254"), "{why}");
        assert!(why.len() < 200, "the value is not repeated: {why}");
        assert!(refused(SettingType::Email, r#""ops@example.test\nbcc: x""#).contains("\\n"));
        assert!(check(SettingType::Url, "http://mirror.example.test/debian").is_ok());
        assert!(refused(SettingType::Url, "ftp://x").contains("not an http"));
        assert!(check(SettingType::PackageName, "libc6-dev").is_ok());
        assert!(check(SettingType::PackageName, "g++").is_ok());
        for wrong in ["vim;rm", "Vim", "-x", "a b", "x"] {
            assert!(
                refused(SettingType::PackageName, wrong).contains("not a package name"),
                "{wrong}"
            );
        }
        assert!(check(SettingType::OneOf(&["debian", "ubuntu"]), "debian").is_ok());
        assert!(refused(SettingType::OneOf(&["debian", "ubuntu"]), "arch")
            .contains("`debian` or `ubuntu`"));
        assert!(refused(SettingType::UserName, "Admin").contains("login name"));
        assert!(check(SettingType::Timezone, "America/Argentina/Buenos_Aires").is_ok());
        assert!(refused(SettingType::Timezone, "../etc").contains("time zone"));
        assert!(refused(SettingType::Text, "\"\"").contains("empty"));
        assert!(refused(SettingType::Text, "3").contains("expected text, found the number `3`"));
        assert!(refused(SettingType::DomainName, "db").contains("fully qualified"));
        assert!(refused(SettingType::LibvirtUri, "qemu+tcp://hv/system").contains("no shell"));
    }

    #[test]
    fn list_problems_name_the_item() {
        let ips = SettingType::ListOf(&SettingType::CidrAddress);
        let problem = check(ips, "\n  - 192.0.2.10/24\n  - 192.0.2.11\n").unwrap_err();
        assert_eq!(problem.within, "[1]");
        assert_eq!(problem.origin.line, 3);
        assert!(refused(ips, "192.0.2.10/24").contains("expected a list"));
    }

    #[test]
    fn images_need_url_and_a_real_digest() {
        let digest = "a".repeat(64);
        let good = format!("{{url: \"https://img.example.test/x.qcow2\", sha256: {digest}}}");
        assert!(matches!(
            check(SettingType::Image, &good).unwrap(),
            TypedValue::Image(_)
        ));
        let problem = check(
            SettingType::Image,
            "{url: \"https://i.example.test/x\", sha256: abc}",
        )
        .unwrap_err();
        assert_eq!(problem.within, ".sha256");
        assert!(problem.why.contains("64 hexadecimal"));
        assert!(
            refused(SettingType::Image, "{url: \"https://i.example.test/x\"}")
                .contains("`sha256` is missing")
        );
        let extra = check(
            SettingType::Image,
            &format!("{{url: \"https://i/x\", sha256: {digest}, size: 3}}"),
        );
        assert_eq!(extra.unwrap_err().within, ".size");
    }
}
