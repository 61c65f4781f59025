//! Reading every recipe folder into a [`Cookbook`]: the manifests and the text of every template
//! and fragment they name, so rendering afterwards needs no file access.
//!
//! The only environment read is in [`recipes_dir`] (the search order: [`crate::cookbook::search`]); [`load_cookbook`] takes the path.

use crate::config::merge::Origins;
use crate::cookbook::manifest::{
    manifest_origins, parse_manifest, ManifestError, RecipeKind, RecipeManifest,
};
use crate::cookbook::search;
use crate::model::names::{NameError, RecipeName};
use indexmap::IndexMap;
use std::path::{Path, PathBuf};

/// The environment variable naming another recipe directory (tests, or a site's own recipes).
pub const RECIPES_DIR_VARIABLE: &str = "TROG_RECIPES";

/// The checkout this binary was built from: read only by a binary running from inside it.
const CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// The recipe directory, in the order [`crate::cookbook::search`] documents: `TROG_RECIPES`,
/// then `<prefix>/share/trog/recipes` beside the binary, then a development build's checkout.
pub fn recipes_dir() -> Result<PathBuf, CookbookError> {
    let from_environment = std::env::var_os(RECIPES_DIR_VARIABLE)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    // Resolved, so that a symlink (/usr/local/bin/trog → /opt/trog/bin/trog) finds its own tree.
    let executable = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    search::find_recipes_dir(
        from_environment,
        executable.as_deref(),
        Path::new(CHECKOUT),
        Path::is_dir,
    )
    .map_err(|looked| CookbookError::NoRecipeDir {
        looked: looked
            .iter()
            .map(|dir| dir.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A recipe's manifest, in its folder.
const MANIFEST_FILE: &str = "recipe.yaml";

/// One recipe: its manifest and the files in its folder that the manifest names.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub name: RecipeName,
    pub folder: PathBuf,
    pub manifest: RecipeManifest,
    /// File name inside the folder → its text, for every template and the fragment.
    pub sources: IndexMap<String, String>,
    /// Where each key of the manifest was written, for errors found after loading.
    pub origins: Origins,
}

impl Recipe {
    /// The text of a file the manifest names (every such file was read when loading).
    pub fn source(&self, file_name: &str) -> &str {
        self.sources
            .get(file_name)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// Its manifest, `recipe.yaml` in its folder.
    pub fn manifest_file(&self) -> PathBuf {
        self.folder.join(MANIFEST_FILE)
    }

    /// The Makefile fragment's text, when the recipe has one.
    pub fn fragment(&self) -> Option<&str> {
        self.manifest
            .makefile
            .as_deref()
            .map(|name| self.source(name))
    }
}

/// Every recipe, by name, in name order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cookbook {
    pub recipes: IndexMap<RecipeName, Recipe>,
}

impl Cookbook {
    /// Builds a cookbook from recipes already in memory, checking the same cross-references as
    /// loading does (`requires` naming recipes that exist).
    pub fn from_recipes(
        recipes: impl IntoIterator<Item = Recipe>,
    ) -> Result<Cookbook, CookbookError> {
        let mut by_name: IndexMap<RecipeName, Recipe> = recipes
            .into_iter()
            .map(|recipe| (recipe.name.clone(), recipe))
            .collect();
        by_name.sort_keys();
        let cookbook = Cookbook { recipes: by_name };
        cookbook.check_references()?;
        Ok(cookbook)
    }

    pub fn get(&self, name: &RecipeName) -> Option<&Recipe> {
        self.recipes.get(name)
    }

    pub fn get_str(&self, name: &str) -> Option<&Recipe> {
        self.recipes
            .iter()
            .find(|(key, _)| key.as_str() == name)
            .map(|(_, recipe)| recipe)
    }

    /// Recipes of one kind, in name order.
    pub fn of_kind(&self, kind: RecipeKind) -> impl Iterator<Item = &Recipe> {
        self.recipes
            .values()
            .filter(move |recipe| recipe.manifest.kind == kind)
    }

    pub fn names(&self) -> Vec<&str> {
        self.recipes.keys().map(RecipeName::as_str).collect()
    }

    fn check_references(&self) -> Result<(), CookbookError> {
        for recipe in self.recipes.values() {
            for required in recipe.manifest.requires.keys() {
                let written_at = || {
                    recipe
                        .origins
                        .locate(&format!("/requires/{required}"))
                        .map(ToString::to_string)
                };
                if !self.recipes.contains_key(required) {
                    return Err(CookbookError::UnknownRequirement {
                        recipe: recipe.name.clone(),
                        required: required.clone(),
                        known: self.names().join(", "),
                        written_at: written_at(),
                    });
                }
                if required == &recipe.name {
                    return Err(CookbookError::RequiresItself {
                        recipe: recipe.name.clone(),
                        written_at: written_at(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Why the recipe directory could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CookbookError {
    #[error("no recipe directory found: {RECIPES_DIR_VARIABLE} is not set, and none of these is a folder: {looked}")]
    NoRecipeDir { looked: String },
    #[error("cannot read the recipe directory {}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("recipe folder {} has an invalid name", folder.display())]
    FolderName {
        folder: PathBuf,
        #[source]
        source: NameError,
    },
    #[error("cannot read {}", file.display())]
    ReadFile {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("recipe `{recipe}` names {} in its manifest, which does not exist", file.display())]
    MissingFile { recipe: RecipeName, file: PathBuf },
    #[error("invalid recipe manifest")]
    Manifest(#[from] ManifestError),
    #[error("{}recipe `{recipe}` requires `{required}`, which is not a recipe (known: {known})", at(.written_at))]
    UnknownRequirement {
        recipe: RecipeName,
        required: RecipeName,
        known: String,
        /// Where the manifest names it (`file:line:column`).
        written_at: Option<String>,
    },
    #[error("{}recipe `{recipe}` requires itself", at(.written_at))]
    RequiresItself {
        recipe: RecipeName,
        written_at: Option<String>,
    },
}

/// `file:line:column: ` in front of a message, when the place is known.
fn at(written_at: &Option<String>) -> String {
    written_at
        .as_ref()
        .map(|place| format!("{place}: "))
        .unwrap_or_default()
}

impl crate::diagnose::Diagnose for CookbookError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        match self {
            CookbookError::NoRecipeDir { .. } => Some(format!(
                "install trog's package (its recipes go to /usr/share/trog/recipes), or set {RECIPES_DIR_VARIABLE} to a folder holding one folder per recipe"
            )),
            CookbookError::ReadDir { .. } => Some(format!(
                "set {RECIPES_DIR_VARIABLE} to a folder holding one folder per recipe, or unset it to use the installed recipes"
            )),
            CookbookError::FolderName { .. } => Some("rename the folder: recipe names are lower case, digits, `_` and `-`".into()),
            CookbookError::ReadFile { source, .. } => Some(
                crate::config::bounded_read::read_problem_hint(source)
                    .unwrap_or_else(|| "check the file's permissions".into()),
            ),
            CookbookError::MissingFile { .. } => {
                Some("add the file to the recipe's folder, or correct its name in recipe.yaml".into())
            }
            CookbookError::Manifest(inner) => crate::diagnose::Diagnose::hint(inner),
            CookbookError::UnknownRequirement { .. } => {
                Some("add that recipe under recipes/, or correct the name under `requires`".into())
            }
            CookbookError::RequiresItself { .. } => Some("remove the recipe's own name from its `requires`".into()),
        }
    }
}

/// Loads every folder of `dir` that holds a `recipe.yaml`. Other entries (a README, notes) are
/// left alone.
pub fn load_cookbook(dir: &Path) -> Result<Cookbook, CookbookError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CookbookError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut folders = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CookbookError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if path.is_dir() && path.join("recipe.yaml").is_file() {
            folders.push(path);
        }
    }
    folders.sort();
    let recipes = folders
        .iter()
        .map(|folder| load_recipe(folder))
        .collect::<Result<Vec<_>, _>>()?;
    Cookbook::from_recipes(recipes)
}

/// Loads one recipe folder.
pub fn load_recipe(folder: &Path) -> Result<Recipe, CookbookError> {
    let folder_name = folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = RecipeName::parse(&folder_name).map_err(|source| CookbookError::FolderName {
        folder: folder.to_path_buf(),
        source,
    })?;
    let manifest_file = folder.join(MANIFEST_FILE);
    let text = read(&manifest_file)?;
    let manifest = parse_manifest(&manifest_file, &text)?;
    let mut sources = IndexMap::new();
    for file_name in manifest.named_files() {
        let file = folder.join(file_name);
        if !file.is_file() {
            return Err(CookbookError::MissingFile { recipe: name, file });
        }
        sources.insert(file_name.to_string(), read(&file)?);
    }
    Ok(Recipe {
        name,
        folder: folder.to_path_buf(),
        manifest,
        sources,
        origins: manifest_origins(&manifest_file, &text),
    })
}

fn read(file: &Path) -> Result<String, CookbookError> {
    crate::config::bounded_read::read_text_bounded(file).map_err(|source| CookbookError::ReadFile {
        file: file.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, recipe: &str, manifest: &str, files: &[(&str, &str)]) {
        let folder = dir.join(recipe);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("recipe.yaml"), manifest).unwrap();
        for (name, text) in files {
            std::fs::write(folder.join(name), text).unwrap();
        }
    }

    #[test]
    fn loads_folders_in_name_order_with_their_sources() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "web",
            "description: w\nkind: guest\nmakefile: f.mk\nrequires: {fw: {}}\n",
            &[("f.mk", "web:\n")],
        );
        write(dir.path(), "fw", "description: f\nkind: guest\n", &[]);
        std::fs::write(dir.path().join("NOTES.md"), "not a recipe").unwrap();
        let cookbook = load_cookbook(dir.path()).unwrap();
        assert_eq!(cookbook.names(), ["fw", "web"]);
        assert_eq!(cookbook.get_str("web").unwrap().fragment(), Some("web:\n"));
    }

    #[test]
    fn missing_template_is_named() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "web",
            "description: w\nkind: guest\nfiles: [{template: a.j2, path: /a}]\n",
            &[],
        );
        let error = load_cookbook(dir.path()).unwrap_err();
        assert!(
            matches!(&error, CookbookError::MissingFile { file, .. } if file.ends_with("web/a.j2")),
            "{error}"
        );
    }

    #[test]
    fn missing_fragment_is_named() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "web",
            "description: w\nkind: guest\nmakefile: web.mk\n",
            &[],
        );
        assert!(matches!(
            load_cookbook(dir.path()).unwrap_err(),
            CookbookError::MissingFile { .. }
        ));
    }

    #[test]
    fn unknown_required_recipe_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "web",
            "description: w\nkind: guest\nrequires: {nope: {}}\n",
            &[],
        );
        let error = load_cookbook(dir.path()).unwrap_err();
        assert!(error.to_string().contains("requires `nope`"), "{error}");
    }

    #[test]
    fn manifest_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "web",
            "description: w\nkind: guest\nextra: 1\n",
            &[],
        );
        let error = load_cookbook(dir.path()).unwrap_err();
        let CookbookError::Manifest(inner) = &error else {
            panic!("{error}")
        };
        assert!(inner.to_string().contains("web/recipe.yaml:3:1"), "{inner}");
    }

    #[test]
    fn bad_folder_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Web", "description: w\nkind: guest\n", &[]);
        assert!(matches!(
            load_cookbook(dir.path()).unwrap_err(),
            CookbookError::FolderName { .. }
        ));
    }

    #[test]
    fn missing_directory_is_an_error() {
        assert!(matches!(
            load_cookbook(Path::new("/nonexistent/recipes")),
            Err(CookbookError::ReadDir { .. })
        ));
    }
}
