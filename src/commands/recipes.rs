//! `recipes`: what recipes there are, what one takes, and what `new_guest` would write for some.
//!
//! - `trog recipes` lists the guest recipes with what each is for (`--json`: the same as JSON).
//! - `trog recipes NAME` prints the recipe's args schema as JSON; distro and machine recipes can be
//!   named too (`trog recipes vm` shows the disk and libvirt knobs).
//! - `trog recipes --scaffold NAME…` prints the YAML `new_guest` would write for those recipes.

use crate::cli::GlobalArgs;
use crate::config::paths::InstallationPaths;
use crate::cookbook::load::{load_cookbook, recipes_dir, Cookbook};
use crate::cookbook::manifest::RecipeKind;
use crate::cookbook::scaffold::scaffold;
use crate::exit_status::ExitStatus;
use crate::report::{Diagnose, Failure};
use serde_json::Value;
use std::path::PathBuf;

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
    #[error("cannot read the installation's recipes file {}", file.display())]
    ReadInstallation {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse the installation's recipes file {}: {message}", file.display())]
    ParseInstallation { file: PathBuf, message: String },
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
            RecipesCommandError::ReadInstallation { .. }
            | RecipesCommandError::ParseInstallation { .. } => {
                "fix recipes.yaml, or point --recipes or TROG_PROVISIONER_CONFIG at another one"
                    .into()
            }
        })
    }
}

pub fn run(global: &GlobalArgs, args: RecipesArgs) -> Result<ExitStatus, Failure> {
    let cookbook = load_cookbook(&recipes_dir())?;
    if args.scaffold {
        let paths = InstallationPaths::from_environment(global);
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

/// Writes to stdout; a reader that went away (`trog recipes | head`) is not an error worth a report.
fn emit(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
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

/// The listing as a JSON array, one object per guest recipe.
pub fn listing_json(cookbook: &Cookbook) -> String {
    let listing: Vec<Value> = cookbook
        .of_kind(RecipeKind::Guest)
        .map(|recipe| {
            serde_json::json!({
                "name": recipe.name,
                "description": recipe.manifest.description,
                "requires": recipe.manifest.requires.keys().collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&listing).expect("JSON values always serialise") + "\n"
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

/// The installation's `_base` (recipes every guest gets, and `_global`), so the scaffold leaves
/// out what it supplies; `Value::Null` when there is no recipes file yet.
fn installation_base(paths: &InstallationPaths) -> Result<Value, RecipesCommandError> {
    let file = &paths.recipes_yaml;
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Value::Null),
        Err(source) => {
            return Err(RecipesCommandError::ReadInstallation {
                file: file.clone(),
                source,
            })
        }
    };
    let document: Value =
        serde_saphyr::from_str(&text).map_err(|error| RecipesCommandError::ParseInstallation {
            file: file.clone(),
            message: error.to_string(),
        })?;
    Ok(document.get("_base").cloned().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookbook::test_support::cookbook;

    #[test]
    fn listing_shows_only_guest_recipes() {
        let book = cookbook(&[("web", "description: Serves pages\nkind: guest\n")]);
        assert_eq!(listing_text(&book), "web  Serves pages\n");
        assert!(listing_json(&book).contains("\"name\": \"web\""));
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
}
