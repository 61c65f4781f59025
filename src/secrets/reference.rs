//! Addresses of values in the secret store, and `secret:Group/Entry/Field` references to them in
//! recipe arguments. Pure: text in, values out.
//!
//! An address is a path of names separated by `/`: the groups under the store's root group, then
//! the entry's title. Names are matched exactly (case and all), so a reference means one thing; a
//! name containing `/` cannot be addressed. A reference adds the field after one more `/`:
//! `secret:Databases/mariadb/Password` is the `Password` field of the entry titled `mariadb` in the
//! group `Databases`. A reference names at least one group (as the cookbook's reading of recipe
//! arguments requires: `secret:mariadb/Password` is not a reference there, so not here either);
//! an [`EntryPath`] used from code may name an entry in the root group.

use std::fmt;

/// Where an entry is in the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryPath {
    groups: Vec<String>,
    title: String,
}

impl EntryPath {
    /// Parses `Group/Sub/Entry` (or just `Entry`, in the root group).
    pub fn parse(text: &str) -> Result<EntryPath, ReferenceError> {
        let mut names = split_names(text)?;
        let title = names.pop().unwrap_or_default();
        Ok(EntryPath {
            groups: names,
            title,
        })
    }

    /// The entry titled `title` in the group at `groups` under the root.
    pub fn new<S: Into<String>>(
        groups: impl IntoIterator<Item = S>,
        title: impl Into<String>,
    ) -> EntryPath {
        EntryPath {
            groups: groups.into_iter().map(Into::into).collect(),
            title: title.into(),
        }
    }

    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    pub fn title(&self) -> &str {
        &self.title
    }
}

impl fmt::Display for EntryPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for group in &self.groups {
            write!(formatter, "{group}/")?;
        }
        formatter.write_str(&self.title)
    }
}

/// A field of an entry: KeePass's standard ones, or a custom field (an "attribute").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldName {
    Title,
    UserName,
    Password,
    Url,
    Notes,
    Custom(String),
}

impl FieldName {
    /// The field named `name` as KeePass spells it (`Title`, `UserName`, `Password`, `URL`,
    /// `Notes`); any other name is a custom field.
    pub fn parse(name: &str) -> FieldName {
        match name {
            "Title" => FieldName::Title,
            "UserName" => FieldName::UserName,
            "Password" => FieldName::Password,
            "URL" => FieldName::Url,
            "Notes" => FieldName::Notes,
            custom => FieldName::Custom(custom.to_string()),
        }
    }

    /// The key of the field in the KDBX file.
    pub fn as_str(&self) -> &str {
        match self {
            FieldName::Title => "Title",
            FieldName::UserName => "UserName",
            FieldName::Password => "Password",
            FieldName::Url => "URL",
            FieldName::Notes => "Notes",
            FieldName::Custom(name) => name,
        }
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A `secret:Group/Entry/Field` reference, as a recipe argument may hold one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretReference {
    pub entry: EntryPath,
    pub field: FieldName,
}

impl SecretReference {
    /// What a string starts with to be a reference rather than a value.
    pub const PREFIX: &'static str = "secret:";

    /// Whether `text` is meant as a reference (it may still be a malformed one).
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SecretReference::PREFIX)
    }

    /// Parses `secret:Group/Entry/Field`.
    pub fn parse(text: &str) -> Result<SecretReference, ReferenceError> {
        let Some(address) = text.strip_prefix(SecretReference::PREFIX) else {
            return Err(ReferenceError::NoPrefix);
        };
        let mut names = split_names(address).map_err(|error| error.in_reference(text))?;
        if names.len() < 3 {
            return Err(ReferenceError::TooShort {
                reference: text.to_string(),
            });
        }
        let field = FieldName::parse(&names.pop().unwrap_or_default());
        let title = names.pop().unwrap_or_default();
        Ok(SecretReference {
            entry: EntryPath {
                groups: names,
                title,
            },
            field,
        })
    }

    /// The reference to `field` of the entry at `entry`.
    pub fn new(entry: EntryPath, field: FieldName) -> SecretReference {
        SecretReference { entry, field }
    }
}

impl fmt::Display for SecretReference {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}{}/{}",
            SecretReference::PREFIX,
            self.entry,
            self.field
        )
    }
}

fn split_names(address: &str) -> Result<Vec<String>, ReferenceError> {
    if address.is_empty() {
        return Err(ReferenceError::Empty { reference: None });
    }
    let names: Vec<String> = address.split('/').map(str::to_string).collect();
    if let Some(position) = names.iter().position(String::is_empty) {
        return Err(ReferenceError::EmptyName {
            address: address.to_string(),
            position: position + 1,
        });
    }
    Ok(names)
}

/// Why an address or a reference was refused. The text shown is the address itself, never a value:
/// a string without the `secret:` prefix is not repeated, since it may be a value written in place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("a secret reference starts with `secret:`")]
    NoPrefix,
    #[error("{} addresses nothing", .reference.as_deref().map(|r| format!("`{r}`")).unwrap_or_else(|| "an empty address".to_string()))]
    Empty { reference: Option<String> },
    #[error(
        "`{address}` has an empty name at position {position} (two `/` in a row, or one at an end)"
    )]
    EmptyName { address: String, position: usize },
    #[error("`{reference}` does not name a group, an entry and a field: write it as `secret:Group/Entry/Field`")]
    TooShort { reference: String },
}

impl ReferenceError {
    fn in_reference(self, reference: &str) -> ReferenceError {
        match self {
            ReferenceError::Empty { .. } => ReferenceError::Empty {
                reference: Some(reference.to_string()),
            },
            ReferenceError::EmptyName { position, .. } => ReferenceError::EmptyName {
                address: reference.to_string(),
                position,
            },
            other => other,
        }
    }
}

impl crate::diagnose::Diagnose for ReferenceError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some("a reference reads `secret:Group/Sub/Entry/Field`, e.g. `secret:Databases/mariadb/Password`".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_groups_entry_and_field() {
        let reference = SecretReference::parse("secret:Infra/Databases/mariadb/Password").unwrap();
        assert_eq!(reference.entry.groups(), ["Infra", "Databases"]);
        assert_eq!(reference.entry.title(), "mariadb");
        assert_eq!(reference.field, FieldName::Password);
        assert_eq!(
            reference.to_string(),
            "secret:Infra/Databases/mariadb/Password"
        );
    }

    #[test]
    fn custom_fields_may_hold_spaces() {
        let reference = SecretReference::parse("secret:Databases/mariadb/root pw").unwrap();
        assert_eq!(reference.entry.groups(), ["Databases"]);
        assert_eq!(reference.field, FieldName::Custom("root pw".to_string()));
        assert_eq!(reference.to_string(), "secret:Databases/mariadb/root pw");
    }

    #[test]
    fn standard_field_names_are_keepass_spellings() {
        for name in ["Title", "UserName", "Password", "URL", "Notes"] {
            let field = FieldName::parse(name);
            assert!(!matches!(field, FieldName::Custom(_)), "{name}");
            assert_eq!(field.as_str(), name);
        }
        assert_eq!(
            FieldName::parse("password"),
            FieldName::Custom("password".to_string())
        );
    }

    #[test]
    fn refuses_malformed_references_naming_them() {
        assert_eq!(
            SecretReference::parse("hunter2"),
            Err(ReferenceError::NoPrefix)
        );
        assert!(!ReferenceError::NoPrefix.to_string().contains("hunter2"));
        assert_eq!(
            SecretReference::parse("secret:"),
            Err(ReferenceError::Empty {
                reference: Some("secret:".to_string())
            })
        );
        for short in ["secret:mariadb", "secret:mariadb/Password"] {
            assert_eq!(
                SecretReference::parse(short),
                Err(ReferenceError::TooShort {
                    reference: short.to_string()
                })
            );
        }
        let error = SecretReference::parse("secret:Infra//mariadb/Password").unwrap_err();
        assert_eq!(
            error.to_string(),
            "`secret:Infra//mariadb/Password` has an empty name at position 2 (two `/` in a row, or one at an end)"
        );
        assert!(matches!(
            SecretReference::parse("secret:Infra/mariadb/"),
            Err(ReferenceError::EmptyName { position: 3, .. })
        ));
    }

    #[test]
    fn entry_paths_parse_and_print_alike() {
        let path = EntryPath::parse("trog/guests/www.example.test").unwrap();
        assert_eq!(path, EntryPath::new(["trog", "guests"], "www.example.test"));
        assert_eq!(path.to_string(), "trog/guests/www.example.test");
        assert!(EntryPath::parse("").is_err());
        assert!(EntryPath::parse("a//b").is_err());
    }

    #[test]
    fn only_the_prefix_makes_a_reference() {
        assert!(SecretReference::is_reference("secret:a/b"));
        assert!(!SecretReference::is_reference("Secret:a/b"));
        assert!(!SecretReference::is_reference("plain value"));
    }

    #[test]
    fn the_cookbook_and_the_store_read_the_same_strings_as_references() {
        use crate::cookbook::args_schema::SecretReference as CookbookReference;
        for text in [
            "secret:Databases/mariadb/Password",
            "secret:Sites/Db/mariadb/root pw",
            "secret:mariadb/Password",
            "secret:Databases//Password",
            "secret:Databases/mariadb/",
            "secret:",
        ] {
            let cookbook = CookbookReference::parse("/arg", text);
            let store = SecretReference::parse(text);
            assert_eq!(cookbook.is_some(), store.is_ok(), "{text}");
            if let (Some(cookbook), Ok(store)) = (cookbook, store) {
                let groups = cookbook
                    .group
                    .split('/')
                    .map(str::to_string)
                    .collect::<Vec<_>>();
                assert_eq!(store.entry.groups(), groups.as_slice(), "{text}");
                assert_eq!(store.entry.title(), cookbook.entry, "{text}");
                assert_eq!(store.field.as_str(), cookbook.field, "{text}");
            }
        }
    }
}
