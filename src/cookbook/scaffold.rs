//! What `new_guest` writes for a list of recipes, derived from their schemas rather than guessed.
//!
//! A required argument gets its default when the schema has one, else `CHANGEME` (which stops
//! configuration generation until someone fills it in). Optional arguments are left out so the
//! recipe's own defaults keep applying instead of being frozen into the file the day it was
//! written. Whatever the installation's `_base` already supplies is left to `_base`.

use crate::cookbook::load::Cookbook;
use crate::cookbook::manifest::RecipeKind;
use crate::model::names::RecipeName;
use indexmap::IndexMap;
use serde_json::{Map, Value};

/// The placeholder for a value nobody has chosen yet.
pub const CHANGEME: &str = "CHANGEME";

/// The recipes part of a new guest's file, and what is left to fill in.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Scaffold {
    pub recipes: IndexMap<RecipeName, Value>,
    /// `recipe.argument` for every `CHANGEME` written, in order.
    pub to_fill: Vec<String>,
}

impl Scaffold {
    /// The recipes as YAML, as they appear under the domain's key.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(&self.recipes).expect("JSON values always serialise")
    }
}

/// Why no scaffold could be made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("there is no guest recipe `{recipe}` (guest recipes: {known})")]
    UnknownRecipe { recipe: String, known: String },
    #[error("`{recipe}` is a {kind} recipe, not one a guest names")]
    NotAGuestRecipe { recipe: String, kind: &'static str },
}

impl crate::diagnose::Diagnose for ScaffoldError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ScaffoldError::UnknownRecipe { .. } => "`trog recipes` lists the guest recipes".into(),
            ScaffoldError::NotAGuestRecipe { .. } => {
                "distro and machine recipes are configured in _global (distro, release, cpu_mode, disk_bus, …)".into()
            }
        })
    }
}

/// Builds the scaffold for `names`. `base` is the installation's `_base` (its recipes with their
/// arguments, and `_global`); `Value::Null` when there is none.
pub fn scaffold(
    cookbook: &Cookbook,
    names: &[&str],
    base: &Value,
) -> Result<Scaffold, ScaffoldError> {
    let mut recipes = IndexMap::new();
    let mut to_fill = Vec::new();
    for &name in names {
        let recipe = cookbook
            .get_str(name)
            .ok_or_else(|| ScaffoldError::UnknownRecipe {
                recipe: name.to_string(),
                known: cookbook
                    .of_kind(RecipeKind::Guest)
                    .map(|recipe| recipe.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if recipe.manifest.kind != RecipeKind::Guest {
            return Err(ScaffoldError::NotAGuestRecipe {
                recipe: name.to_string(),
                kind: recipe.manifest.kind.as_str(),
            });
        }
        let schema = &recipe.manifest.args;
        let supplied = base.get(name);
        let mut args = Map::new();
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for argument in required.iter().filter_map(Value::as_str) {
            if supplied.and_then(|given| given.get(argument)).is_some() {
                continue;
            }
            match schema.pointer(&format!("/properties/{argument}/default")) {
                Some(default) => {
                    args.insert(argument.to_string(), default.clone());
                }
                None => {
                    args.insert(argument.to_string(), Value::from(CHANGEME));
                    to_fill.push(format!("{name}.{argument}"));
                }
            }
        }
        recipes.insert(recipe.name.clone(), Value::Object(args));
    }
    Ok(Scaffold { recipes, to_fill })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookbook::test_support::cookbook;
    use serde_json::json;

    const MARIADB: &str = r#"
description: Database
kind: guest
args:
  type: object
  required: [root_pw, version, dumpfile]
  properties:
    root_pw: {type: string}
    version: {type: string, default: "10.11"}
    dumpfile: {type: string}
    port: {type: integer, default: 3306}
"#;

    fn book() -> Cookbook {
        cookbook(&[
            ("mariadb", MARIADB),
            ("nginx", "description: web\nkind: guest\n"),
        ])
    }

    #[test]
    fn required_get_default_or_changeme_and_optional_are_left_out() {
        let made = scaffold(&book(), &["nginx", "mariadb"], &Value::Null).unwrap();
        assert_eq!(
            made.recipes
                .keys()
                .map(RecipeName::as_str)
                .collect::<Vec<_>>(),
            ["nginx", "mariadb"]
        );
        assert_eq!(
            made.recipes[1],
            json!({"root_pw": "CHANGEME", "version": "10.11", "dumpfile": "CHANGEME"})
        );
        assert_eq!(made.recipes[0], json!({}));
        assert_eq!(made.to_fill, ["mariadb.root_pw", "mariadb.dumpfile"]);
    }

    #[test]
    fn what_base_supplies_is_left_to_base() {
        let base = json!({"_global": {"admin_user": "a"}, "mariadb": {"root_pw": "secret:Db/root/password", "version": "11.4"}});
        let made = scaffold(&book(), &["mariadb"], &base).unwrap();
        assert_eq!(made.recipes[0], json!({"dumpfile": "CHANGEME"}));
        assert_eq!(made.to_fill, ["mariadb.dumpfile"]);
    }

    #[test]
    fn yaml_is_what_new_guest_writes() {
        let made = scaffold(&book(), &["mariadb"], &Value::Null).unwrap();
        let yaml = made.to_yaml();
        assert!(yaml.starts_with("mariadb:\n"), "{yaml}");
        assert!(yaml.contains("root_pw: CHANGEME"), "{yaml}");
    }

    #[test]
    fn unknown_and_non_guest_recipes_are_refused() {
        let error = scaffold(&book(), &["nope"], &Value::Null).unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no guest recipe `nope` (guest recipes: mariadb, nginx)"
        );
        assert!(matches!(
            scaffold(&book(), &["vm"], &Value::Null),
            Err(ScaffoldError::NotAGuestRecipe { .. })
        ));
    }
}
