//! `CHANGEME`: the placeholder new_guest writes where a recipe needs a value nobody has given.
//!
//! It is a perfectly good string, so schema validation would let it through and a database
//! would get `CHANGEME` as its root password. Generation therefore refuses any guest that still
//! holds one, naming every such key at once.

use crate::config::guest::GuestConfig;
use crate::config::yaml::Origin;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::names::DomainName;
use serde_json::Value;
use std::fmt;

/// The placeholder, exactly as written.
pub const PLACEHOLDER: &str = "CHANGEME";

/// A key still holding the placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceholderKey {
    /// `mariadb.root_pw`, `_global.admin_user`, `ufw.allow[0]`.
    pub key_path: String,
    pub origin: Option<Origin>,
}

impl fmt::Display for PlaceholderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(origin) => write!(f, "{origin}: {}", self.key_path),
            None => f.write_str(&self.key_path),
        }
    }
}

/// Every key of the guest's settings and recipe arguments that still holds `CHANGEME`, in
/// the order they are merged (`_global` first, then each recipe).
pub fn find_changeme(guest: &GuestConfig) -> Vec<PlaceholderKey> {
    let mut found = Vec::new();
    let global = Value::Object(guest.global_as_written.clone());
    scan(guest, &global, "_global", "/_global", &mut found);
    for (recipe, args) in &guest.recipes {
        scan(
            guest,
            args,
            recipe.as_str(),
            &format!("/{}", escape(recipe.as_str())),
            &mut found,
        );
    }
    found
}

fn scan(
    guest: &GuestConfig,
    value: &Value,
    key_path: &str,
    pointer: &str,
    found: &mut Vec<PlaceholderKey>,
) {
    match value {
        Value::String(text) if text == PLACEHOLDER => found.push(PlaceholderKey {
            key_path: key_path.to_string(),
            origin: guest.origins.locate(pointer).cloned(),
        }),
        Value::Object(entries) => {
            for (key, item) in entries {
                scan(
                    guest,
                    item,
                    &format!("{key_path}.{key}"),
                    &format!("{pointer}/{}", escape(key)),
                    found,
                );
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                scan(
                    guest,
                    item,
                    &format!("{key_path}[{index}]"),
                    &format!("{pointer}/{index}"),
                    found,
                );
            }
        }
        _ => {}
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A guest that still holds placeholders.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{domain} still has {} `CHANGEME` value{} to fill in:{}",
    keys.len(), if keys.len() == 1 { "" } else { "s" },
    keys.iter().map(|key| format!("\n  {key}")).collect::<String>())]
pub struct ChangemeError {
    pub domain: DomainName,
    pub keys: Vec<PlaceholderKey>,
}

impl Diagnose for ChangemeError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(
            "replace each CHANGEME with the real value; a secret can be written as \
             `secret:Group/Entry/Field` to take it from secrets.kdbx"
                .to_string(),
        )
    }
}

/// `Ok` when nothing holds the placeholder; otherwise every key that does.
pub fn refuse_changeme(guest: &GuestConfig) -> Result<(), ChangemeError> {
    let keys = find_changeme(guest);
    if keys.is_empty() {
        Ok(())
    } else {
        Err(ChangemeError {
            domain: guest.domain.clone(),
            keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::guest::resolve_guest;
    use crate::config::recipes_file::{parse_domain_file, parse_recipes_yaml};
    use std::path::Path;

    fn guest(base: &str, own: &str) -> GuestConfig {
        let domain = DomainName::parse("db.example.test").unwrap();
        let recipes_yaml = parse_recipes_yaml(Path::new("recipes.yaml"), base).unwrap();
        let domain_file =
            parse_domain_file(Path::new("db.example.test.yaml"), &domain, own).unwrap();
        resolve_guest(&recipes_yaml, &domain_file, &[]).unwrap()
    }

    #[test]
    fn every_placeholder_is_named_with_where_it_was_written() {
        let base = "_base:\n  _global:\n    admin_user: CHANGEME\n    contact_email: ops@example.test\n  ufw: {allow: [CHANGEME]}\n";
        let own = "db.example.test:\n  mariadb:\n    root_pw: CHANGEME\n    version: \"10.11\"\n    nested: {dump: CHANGEME}\n";
        let keys = find_changeme(&guest(base, own));
        let text: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "recipes.yaml:3:5: _global.admin_user",
                "recipes.yaml:5:17: ufw.allow[0]",
                "db.example.test.yaml:3:5: mariadb.root_pw",
                "db.example.test.yaml:5:14: mariadb.nested.dump",
            ]
        );
    }

    #[test]
    fn a_domain_value_hides_the_base_placeholder() {
        let base =
            "_base:\n  _global:\n    admin_user: CHANGEME\n    contact_email: ops@example.test\n";
        let own = "db.example.test:\n  _global: {admin_user: dba}\n";
        assert!(refuse_changeme(&guest(base, own)).is_ok());
    }

    #[test]
    fn only_the_exact_placeholder_counts() {
        let base = "_base:\n  _global: {admin_user: a, contact_email: ops@example.test}\n";
        let own = "db.example.test:\n  r: {a: changeme, b: CHANGEME please}\n";
        assert!(find_changeme(&guest(base, own)).is_empty());
    }

    #[test]
    fn the_error_lists_every_key_and_hints() {
        let base = "_base:\n  _global: {admin_user: CHANGEME, contact_email: CHANGEME}\n";
        let error = refuse_changeme(&guest(base, "db.example.test:\n")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "db.example.test still has 2 `CHANGEME` values to fill in:\n  \
             recipes.yaml:2:13: _global.admin_user\n  recipes.yaml:2:35: _global.contact_email"
        );
        assert!(error.hint().unwrap().contains("secret:"));
    }
}
