//! Identifiers that are checked once, where they enter trog, and trusted after.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{name}` is not a fully qualified domain name: {why}")]
    Domain { name: String, why: &'static str },
    #[error("`{name}` is not a valid hypervisor name: {why}")]
    Hypervisor { name: String, why: &'static str },
    #[error("`{name}` is not a valid recipe name: {why}")]
    Recipe { name: String, why: &'static str },
}

/// A guest's fully qualified domain name, in its one spelling: lower case, at least two labels,
/// no trailing dot. It names the guest's file in `recipes.d`, its libvirt domain and its volumes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DomainName(String);

impl DomainName {
    pub fn parse(name: &str) -> Result<DomainName, NameError> {
        let refuse = |why| {
            Err(NameError::Domain {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if name.len() > 253 {
            return refuse("it is longer than 253 characters");
        }
        if name.ends_with('.') {
            return refuse("write it without the trailing dot");
        }
        if name.chars().any(|c| c.is_ascii_uppercase()) {
            return refuse("domains have one spelling, in lower case");
        }
        let labels: Vec<&str> = name.split('.').collect();
        if labels.len() < 2 {
            return refuse("it has no parent domain (write it in full, e.g. `www.example.test`)");
        }
        for label in labels {
            if label.is_empty() {
                return refuse("it has an empty label");
            }
            if label.len() > 63 {
                return refuse("a label is longer than 63 characters");
            }
            if !label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return refuse("labels may hold only a-z, 0-9 and `-`");
            }
            if label.starts_with('-') || label.ends_with('-') {
                return refuse("a label may not begin or end with `-`");
            }
        }
        Ok(DomainName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first label, which becomes the guest's hostname.
    pub fn host_label(&self) -> &str {
        self.0.split('.').next().unwrap_or(&self.0)
    }
}

impl TryFrom<String> for DomainName {
    type Error = NameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        DomainName::parse(&value)
    }
}

impl From<DomainName> for String {
    fn from(value: DomainName) -> String {
        value.0
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name of a `[block]` in `hypervisors.conf`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HypervisorName(String);

impl HypervisorName {
    pub fn parse(name: &str) -> Result<HypervisorName, NameError> {
        let refuse = |why| {
            Err(NameError::Hypervisor {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return refuse("names may hold only letters, digits, `-`, `_` and `.`");
        }
        Ok(HypervisorName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for HypervisorName {
    type Error = NameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        HypervisorName::parse(&value)
    }
}

impl From<HypervisorName> for String {
    fn from(value: HypervisorName) -> String {
        value.0
    }
}

impl fmt::Display for HypervisorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name of a recipe: the name of its folder under `recipes/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RecipeName(String);

impl RecipeName {
    pub fn parse(name: &str) -> Result<RecipeName, NameError> {
        let refuse = |why| {
            Err(NameError::Recipe {
                name: name.to_string(),
                why,
            })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if name.starts_with('_') {
            return refuse("names starting with `_` are reserved for settings such as `_global`");
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return refuse("names may hold only a-z, 0-9, `_` and `-`");
        }
        Ok(RecipeName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RecipeName {
    type Error = NameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        RecipeName::parse(&value)
    }
}

impl From<RecipeName> for String {
    fn from(value: RecipeName) -> String {
        value.0
    }
}

impl fmt::Display for RecipeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn hypervisor_and_recipe_names() {
        assert!(HypervisorName::parse("hv1.example").is_ok());
        assert!(HypervisorName::parse("hv 1").is_err());
        assert!(RecipeName::parse("mariadb").is_ok());
        assert!(RecipeName::parse("_global").is_err());
    }
}
