//! Identifiers that are checked once, where they enter trog, and trusted after.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What every checked name has besides its own `parse`: its text and its display, and for the
/// names serde reads, the conversions its `try_from`/`into` go through (so a name read from a
/// file is checked by the same `parse`).
macro_rules! checked_name {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
    ($name:ident, read_by_serde) => {
        checked_name!($name);

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $name::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }
    };
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{}` is not a fully qualified domain name: {why}", shown(name))]
    Domain { name: String, why: String },
    #[error("`{}` is not a valid hypervisor name: {why}", shown(name))]
    Hypervisor { name: String, why: String },
    #[error("`{}` is not a valid recipe name: {why}", shown(name))]
    Recipe { name: String, why: String },
    #[error("`{}` is not a valid tenant name: {why}", shown(name))]
    Tenant { name: String, why: String },
    #[error("`{}` is not a valid snapshot name: {why}", shown(name))]
    Snapshot { name: String, why: String },
}

/// A refused name (or any value a message quotes) as it can be printed: control characters (a
/// newline, an escape) shown as escapes, and a very long one cut, so the message stays one
/// readable line.
pub(crate) fn shown(name: &str) -> String {
    const LONGEST_SHOWN: usize = 80;
    let mut text: String = name
        .chars()
        .take(LONGEST_SHOWN)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if name.chars().count() > LONGEST_SHOWN {
        text.push('…');
    }
    text
}

/// Why a name was refused for one of its characters.
fn refused_character(bad: char, rule: &str) -> String {
    let what = match bad {
        ' ' => "a space".to_string(),
        c if c.is_control() => format!("the control character {}", c.escape_default()),
        c => format!("`{c}`"),
    };
    format!("it contains {what}; {rule}")
}

/// A guest's fully qualified domain name, in its one spelling: lower case, at least two labels,
/// no trailing dot. It names the guest's file in `recipes.d`, its libvirt domain and its volumes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DomainName(String);
checked_name!(DomainName, read_by_serde);

impl DomainName {
    pub fn parse(name: &str) -> Result<DomainName, NameError> {
        let refuse = |why: String| {
            Err(NameError::Domain {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty".into());
        }
        if name.len() > 253 {
            return refuse("it is longer than 253 characters".into());
        }
        // The characters first: a name with `;` in it is refused for the `;`, whatever else is
        // wrong with it.
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
        {
            return Err(NameError::Domain {
                name: name.to_string(),
                why: refused_character(bad, "a domain name holds only a-z, 0-9, `-` and `.`"),
            });
        }
        if name.ends_with('.') {
            return refuse("write it without the trailing dot".into());
        }
        if name.chars().any(|c| c.is_ascii_uppercase()) {
            return refuse("domains have one spelling, in lower case".into());
        }
        let labels: Vec<&str> = name.split('.').collect();
        if labels.len() < 2 {
            return refuse(
                "it has no parent domain (write it in full, e.g. `www.example.test`)".into(),
            );
        }
        for label in labels {
            if label.is_empty() {
                return refuse("it has an empty label".into());
            }
            if label.len() > 63 {
                return refuse("a label is longer than 63 characters".into());
            }
            if !label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return refuse("labels may hold only a-z, 0-9 and `-`".into());
            }
            if label.starts_with('-') || label.ends_with('-') {
                return refuse("a label may not begin or end with `-`".into());
            }
        }
        Ok(DomainName(name.to_string()))
    }

    /// The first label, which becomes the guest's hostname.
    pub fn host_label(&self) -> &str {
        self.0.split('.').next().unwrap_or(&self.0)
    }
}

/// The name of a `[block]` in `hypervisors.conf`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HypervisorName(String);
checked_name!(HypervisorName, read_by_serde);

impl HypervisorName {
    pub fn parse(name: &str) -> Result<HypervisorName, NameError> {
        let refuse = |why: String| {
            Err(NameError::Hypervisor {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty".into());
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return refuse(refused_character(
                bad,
                "hypervisor names hold only letters, digits, `-`, `_` and `.`",
            ));
        }
        Ok(HypervisorName(name.to_string()))
    }
}

/// The name of a recipe: the name of its folder under `recipes/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RecipeName(String);
checked_name!(RecipeName, read_by_serde);

impl RecipeName {
    pub fn parse(name: &str) -> Result<RecipeName, NameError> {
        let refuse = |why: String| {
            Err(NameError::Recipe {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty".into());
        }
        if name.starts_with('_') {
            return refuse(
                "names starting with `_` are reserved for settings such as `_global`".into(),
            );
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return refuse(refused_character(
                bad,
                "recipe names hold only a-z, 0-9, `_` and `-`",
            ));
        }
        if name.chars().any(|c| c.is_ascii_uppercase()) {
            return refuse("recipe names are written in lower case".into());
        }
        Ok(RecipeName(name.to_string()))
    }
}

/// The name of a snapshot trog takes (`snapshot --name`). It becomes part of libvirt's XML and
/// of file names on the hypervisor, so it is kept to a plain set of characters and cannot climb
/// out of a folder (no `/`, no leading `.`) or pass for an option (no leading `-`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SnapshotName(String);
checked_name!(SnapshotName);

impl SnapshotName {
    /// The longest snapshot name: long enough for any date-and-purpose name, short enough to
    /// read in a listing.
    pub const LONGEST: usize = 64;

    pub fn parse(name: &str) -> Result<SnapshotName, NameError> {
        let refuse = |why: String| {
            Err(NameError::Snapshot {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty".into());
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return refuse(refused_character(
                bad,
                "snapshot names hold only letters, digits, `.`, `_` and `-`",
            ));
        }
        if name.starts_with('-') || name.starts_with('.') {
            return refuse("it starts with `-` or `.`".into());
        }
        if name.len() > SnapshotName::LONGEST {
            return refuse(format!(
                "it is {} characters long; at most {} are allowed",
                name.len(),
                SnapshotName::LONGEST
            ));
        }
        Ok(SnapshotName(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_are_plain_and_stay_in_their_folder() {
        for good in [
            "before-upgrade",
            "20261204T101500Z",
            "v1.2_rc",
            &"a".repeat(64),
        ] {
            assert_eq!(SnapshotName::parse(good).unwrap().as_str(), good);
        }
        for (bad, why) in [
            ("../x", "`/`"),
            ("a/b", "`/`"),
            (".hidden", "starts with"),
            ("-x", "starts with"),
            ("", "empty"),
            ("a b", "a space"),
            ("a\nb", "control character \\n"),
            ("a\u{1b}b", "\\u{1b}"),
            ("a\"b", "`\"`"),
            (&"a".repeat(65), "65 characters"),
        ] {
            let error = SnapshotName::parse(bad).unwrap_err().to_string();
            assert!(error.contains(why), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{bad:?}: {error}");
        }
    }

    #[test]
    fn domain_names_have_one_spelling() {
        assert!(DomainName::parse("mysql.example.net").is_ok());
        assert!(DomainName::parse("f1698301-2db6-41ec-90fd-effec2f148d4.test").is_ok());
        for bad in [
            "mysql",
            "Mysql.example.net",
            "mysql.example.net.",
            "a..b",
            "-a.test",
            "a_b.test",
            "",
        ] {
            assert!(DomainName::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn host_label_is_the_first_label() {
        assert_eq!(
            DomainName::parse("www.example.test").unwrap().host_label(),
            "www"
        );
    }

    #[test]
    fn a_refusal_names_the_character_that_is_wrong() {
        for (bad, why) in [
            ("a;b.test", "`;`"),
            ("A;b.test", "`;`"),
            ("a;b", "`;`"),
            ("a b.test", "a space"),
            ("a\nb.test", "\\n"),
            ("a_b.test", "`_`"),
        ] {
            let error = DomainName::parse(bad).unwrap_err().to_string();
            assert!(error.contains(why), "{bad:?}: {error}");
            assert!(!error.contains("lower case"), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{bad:?}: {error}");
        }
        assert!(DomainName::parse("Www.example.test")
            .unwrap_err()
            .to_string()
            .contains("lower case"));
        let error = HypervisorName::parse("h;v").unwrap_err().to_string();
        assert!(error.contains("`;`"), "{error}");
        let error = RecipeName::parse("Ng;inx").unwrap_err().to_string();
        assert!(error.contains("`;`"), "{error}");
        let error = RecipeName::parse("Nginx").unwrap_err().to_string();
        assert!(error.contains("lower case"), "{error}");
        let long = "a".repeat(300) + ".test";
        assert!(DomainName::parse(&long).unwrap_err().to_string().len() < 200);
    }

    #[test]
    fn hypervisor_and_recipe_names() {
        assert!(HypervisorName::parse("hv1.example").is_ok());
        assert!(HypervisorName::parse("hv 1").is_err());
        assert!(RecipeName::parse("mariadb").is_ok());
        assert!(RecipeName::parse("_global").is_err());
    }
}

/// A group of guests kept apart from every other group on their network (`tenant` in `_global`).
/// It becomes part of libvirt network filter names, so it is short and plain: lower-case
/// letters, digits and `-`, starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TenantName(String);
checked_name!(TenantName);

impl TenantName {
    /// The longest tenant name: filter names stay well inside what libvirt and ebtables take.
    pub const LONGEST: usize = 32;

    pub fn parse(name: &str) -> Result<TenantName, NameError> {
        let refuse = |why: String| {
            Err(NameError::Tenant {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty".into());
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return refuse(refused_character(
                bad,
                "tenant names hold only lower-case letters, digits and `-`",
            ));
        }
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            return refuse("it does not start with a letter".into());
        }
        if name.len() > TenantName::LONGEST {
            return refuse(format!(
                "it is {} characters long; at most {} are allowed",
                name.len(),
                TenantName::LONGEST
            ));
        }
        Ok(TenantName(name.to_string()))
    }
}

#[cfg(test)]
mod tenant_tests {
    use super::TenantName;

    #[test]
    fn tenant_names_are_plain_and_short() {
        assert_eq!(TenantName::parse("shop-2").unwrap().as_str(), "shop-2");
        for bad in ["", "Shop", "2shop", "a b", "a;b", "a_b", &"x".repeat(33)] {
            assert!(TenantName::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let why = TenantName::parse("a;b").unwrap_err().to_string();
        assert!(why.contains("`;`"), "{why}");
    }
}
