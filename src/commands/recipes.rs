//! `recipes`: what recipes there are, what one takes, and what `new_guest` would write for some.
//!
//! - `trog recipes` lists the guest recipes with what each is for (`--json`: the same as JSON).
//! - `trog recipes NAME` prints the recipe's args schema as JSON; distro and machine recipes can be
//!   named too (`trog recipes vm` shows the disk and libvirt knobs).
//! - `trog recipes --scaffold NAME…` prints the YAML `new_guest` would write for those recipes.

use crate::cli::GlobalArgs;
use crate::config::error::GuestConfigError;
use crate::config::guest::load_recipes_yaml;
use crate::config::paths::InstallationPaths;
use crate::config::recipes_file::{RecipesYaml, GLOBAL_KEY};
use crate::config::yaml::Node;
use crate::cookbook::load::{load_cookbook, recipes_dir, Cookbook};
use crate::cookbook::manifest::RecipeKind;
use crate::cookbook::scaffold::scaffold;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::model::names::RecipeName;
use crate::output::events::{to_line, Event, RecipeListing};
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct RecipesArgs {
    /// Recipes to show the argument schema of (or, with --scaffold, to scaffold).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Print the YAML `new_guest` would write for the named recipes.
    #[arg(long, requires = "names")]
    pub scaffold: bool,
}

/// Why the `recipes` command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum RecipesCommandError {
    #[error("there is no recipe `{name}` (known: {known})")]
    UnknownRecipe { name: String, known: String },
}

impl Diagnose for RecipesCommandError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            RecipesCommandError::UnknownRecipe { .. } => {
                "`trog recipes` lists the guest recipes".into()
            }
        })
    }
}

pub fn run(global: &GlobalArgs, args: RecipesArgs) -> Result<ExitStatus, Failure> {
    let cookbook = load_cookbook(&recipes_dir()?)?;
    if args.scaffold {
        let paths = global.installation_paths();
        let base = installation_base(&paths)?;
        let names: Vec<&str> = args.names.iter().map(String::as_str).collect();
        emit(&scaffold_text(&cookbook, &names, &base)?);
    } else if args.names.is_empty() {
        emit(&if global.json {
            listing_json(&cookbook)
        } else {
            listing_text(&cookbook)
        });
    } else {
        for name in &args.names {
            emit(&(schema_json(&cookbook, name)? + "\n"));
        }
    }
    Ok(ExitStatus::Success)
}

/// Writes to stdout; a reader that went away (`trog recipes | head`) is not an error worth a
/// report (`output::print`).
fn emit(text: &str) {
    crate::output::print::write_stdout_bytes(text.as_bytes());
}

/// One line per guest recipe: its name and what it is for.
pub fn listing_text(cookbook: &Cookbook) -> String {
    let guests: Vec<_> = cookbook.of_kind(RecipeKind::Guest).collect();
    let width = guests
        .iter()
        .map(|recipe| recipe.name.as_str().len())
        .max()
        .unwrap_or(0);
    guests
        .iter()
        .map(|recipe| {
            format!(
                "{:width$}  {}\n",
                recipe.name.as_str(),
                recipe.manifest.description
            )
        })
        .collect()
}

/// The listing as a `recipes` event, one object per guest recipe.
pub fn listing_json(cookbook: &Cookbook) -> String {
    let recipes = cookbook
        .of_kind(RecipeKind::Guest)
        .map(|recipe| RecipeListing {
            name: recipe.name.as_str(),
            description: &recipe.manifest.description,
            requires: recipe
                .manifest
                .requires
                .keys()
                .map(RecipeName::as_str)
                .collect(),
        })
        .collect();
    to_line(&Event::Recipes { recipes }) + "\n"
}

/// The recipe's args schema (OpenAPI-3, as the recipe declares it), pretty-printed.
pub fn schema_json(cookbook: &Cookbook, name: &str) -> Result<String, RecipesCommandError> {
    let recipe = cookbook
        .get_str(name)
        .ok_or_else(|| RecipesCommandError::UnknownRecipe {
            name: name.to_string(),
            known: cookbook.names().join(", "),
        })?;
    Ok(serde_json::to_string_pretty(&recipe.manifest.args).expect("JSON values always serialise"))
}

/// What `new_guest` would write under the domain, then the keys left to fill in as comments.
pub fn scaffold_text(cookbook: &Cookbook, names: &[&str], base: &Value) -> Result<String, Failure> {
    let made = scaffold(cookbook, names, base)?;
    let mut text = made.to_yaml();
    if !made.to_fill.is_empty() {
        text.push_str("# Fill these in before provisioning:\n");
        for key in &made.to_fill {
            text.push_str(&format!("#   {key}\n"));
        }
    }
    Ok(text)
}

/// The installation's `_base` as the scaffold reads it, through the configuration loader;
/// `Value::Null` when the installation has no recipes file yet (there is nothing to leave to it).
fn installation_base(paths: &InstallationPaths) -> Result<Value, GuestConfigError> {
    match load_recipes_yaml(paths) {
        Ok(recipes_yaml) => Ok(base_as_json(&recipes_yaml)),
        Err(GuestConfigError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(Value::Null)
        }
        Err(error) => Err(error),
    }
}

/// `_base` as JSON: `_global` (when written) and each recipe with its arguments, in file order.
pub fn base_as_json(recipes_yaml: &RecipesYaml) -> Value {
    let base = &recipes_yaml.base;
    let mut object = serde_json::Map::new();
    if base.global_origin.is_some() {
        object.insert(
            GLOBAL_KEY.to_string(),
            Node::Mapping(base.global.clone()).to_json(),
        );
    }
    for (name, entry) in &base.recipes {
        object.insert(name.as_str().to_string(), entry.value.value.to_json());
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookbook::test_support::cookbook;

    #[test]
    fn listing_shows_only_guest_recipes() {
        let book = cookbook(&[("web", "description: Serves pages\nkind: guest\n")]);
        assert_eq!(listing_text(&book), "web  Serves pages\n");
        assert!(listing_json(&book).contains(r#""name":"web""#));
        assert!(!listing_json(&book).contains("debian"));
    }

    #[test]
    fn schema_of_any_kind_and_unknown_names() {
        let book = cookbook(&[]);
        assert!(schema_json(&book, "vm").unwrap().contains("cpu_mode"));
        let error = schema_json(&book, "nope").unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no recipe `nope` (known: debian, vm)"
        );
        assert_eq!(error.exit_status(), ExitStatus::Configuration);
    }

    #[test]
    fn base_as_json_holds_global_and_recipes() {
        let recipes_yaml = crate::config::recipes_file::parse_recipes_yaml(
            std::path::Path::new("recipes.yaml"),
            "_base:\n  _global: {admin_user: a, memory: 512}\n  adminconfig: {}\n  mariadb:\n    root_pw: secret:Db/root/password\n",
        )
        .unwrap();
        assert_eq!(
            base_as_json(&recipes_yaml),
            serde_json::json!({
                "_global": {"admin_user": "a", "memory": 512},
                "adminconfig": {},
                "mariadb": {"root_pw": "secret:Db/root/password"}
            })
        );
        let empty = crate::config::recipes_file::parse_recipes_yaml(
            std::path::Path::new("recipes.yaml"),
            "",
        )
        .unwrap();
        assert_eq!(base_as_json(&empty), serde_json::json!({}));
    }
}
