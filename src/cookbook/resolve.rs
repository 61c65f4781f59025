//! From the recipes a guest names to the ordered set it runs: the distro recipe and `vm` always,
//! every `requires` followed, dependencies before what depends on them, each recipe with its
//! effective arguments, and the packages to install.
//!
//! Arguments a requirer hands over are defaults under the guest's own: a scalar the guest gives
//! wins, maps merge key by key. Lists are the exception: the guest's items are added to what the
//! requirers handed, never replace it, so a guest adding its own cron job does not silently drop
//! the database dump mariadb asked cron for (nor a firewall rule nginx needs). Between
//! requirers, maps merge, lists merge without duplicates, and for a scalar the requirer met first
//! wins.

use crate::cookbook::args_schema::{validate_args, ArgsError, EffectiveArgs};
use crate::cookbook::load::{Cookbook, Recipe};
use crate::cookbook::manifest::{BaseImage, RecipeKind};
use crate::model::names::RecipeName;
use indexmap::{IndexMap, IndexSet};
use serde_json::Value;

/// The name of the machine recipe every guest runs on.
pub const MACHINE_RECIPE: &str = "vm";

/// What the caller knows about a guest, taken from its merged configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestRecipes {
    /// The recipes under `_base` and the domain, with their merged arguments, in that order.
    pub recipes: IndexMap<RecipeName, Value>,
    /// `_global.distro`.
    pub distro: String,
    /// `_global.release`, or `None` for the distro recipe's default release.
    pub release: Option<String>,
    /// The distro recipe's arguments (from `_global`); `Value::Null` for none.
    pub distro_args: Value,
    /// `vm`'s arguments (the disk and libvirt knobs, from `_global`); `Value::Null` for none.
    pub machine_args: Value,
    /// Whether the guest is a VM trog builds, which runs the `vm` recipe; a domain on another's
    /// machine or on an existing host does not.
    pub on_own_vm: bool,
}

/// One recipe of the resolved set.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRecipe {
    pub name: RecipeName,
    /// The recipe as loaded: manifest and template sources.
    pub recipe: Recipe,
    pub args: EffectiveArgs,
}

/// Everything a guest runs, in the order it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRecipes {
    pub distro: RecipeName,
    pub release: String,
    pub image: BaseImage,
    /// Dependency order: the distro recipe first, then `vm`, then every recipe after those it requires.
    pub recipes: Vec<ResolvedRecipe>,
    /// Every recipe's packages for the distro, and the release's own, minus every conflict; in
    /// recipe order, each once.
    pub packages: Vec<String>,
}

impl ResolvedRecipes {
    pub fn get(&self, name: &str) -> Option<&ResolvedRecipe> {
        self.recipes
            .iter()
            .find(|resolved| resolved.name.as_str() == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.recipes
            .iter()
            .map(|resolved| resolved.name.as_str())
            .collect()
    }
}

/// Why a guest's recipes could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{}distro `{distro}` is not a distro recipe (known: {known})", at(.written_at))]
    UnknownDistro {
        distro: String,
        known: String,
        /// Where the configuration sets `distro` (`file:line:column`), once its layer said.
        written_at: Option<String>,
    },
    #[error("{}distro `{distro}` has no release `{release}` (known: {known})", at(.written_at))]
    UnknownRelease {
        distro: String,
        release: String,
        known: String,
        /// Where the configuration sets `release`, once its layer said.
        written_at: Option<String>,
    },
    #[error("{}there is no recipe `{recipe}` (guest recipes: {known})", at(.written_at))]
    UnknownRecipe {
        recipe: String,
        known: String,
        /// Where the guest's configuration names it (`file:line:column`), once its layer said.
        written_at: Option<String>,
    },
    #[error("{}`{recipe}` is a {kind} recipe, not one a guest names", at(.written_at))]
    NotAGuestRecipe {
        recipe: RecipeName,
        kind: &'static str,
        written_at: Option<String>,
    },
    #[error("{}recipe `{requirer}` requires `{recipe}`, which is a {kind} recipe", at(.written_at))]
    RequiresNonGuest {
        requirer: RecipeName,
        recipe: RecipeName,
        kind: &'static str,
        /// Where the requirer's manifest names it.
        written_at: Option<String>,
    },
    #[error("{}recipes require each other in a cycle: {}", at(.written_at), cycle.join(" → "))]
    Cycle {
        cycle: Vec<String>,
        /// Where the manifest of the cycle's last step names its first.
        written_at: Option<String>,
    },
    #[error("the recipes' arguments are invalid:{}", errors.iter().map(|error| format!("\n{error}")).collect::<String>())]
    Args { errors: Vec<ArgsError> },
}

/// `file:line:column: ` in front of a message, when the place is known.
fn at(written_at: &Option<String>) -> String {
    written_at
        .as_ref()
        .map(|place| format!("{place}: "))
        .unwrap_or_default()
}

impl ResolveError {
    /// The recipe a guest names that this error is about, for the caller to say where it was
    /// written: `None` for errors about anything else.
    pub fn named_recipe(&self) -> Option<&str> {
        match self {
            ResolveError::UnknownRecipe { recipe, .. } => Some(recipe),
            ResolveError::NotAGuestRecipe { recipe, .. } => Some(recipe.as_str()),
            _ => None,
        }
    }

    /// The `_global` setting of the guest's configuration that this error is about: `distro`
    /// or `release`; `None` for errors about anything else.
    pub fn named_setting(&self) -> Option<&'static str> {
        match self {
            ResolveError::UnknownDistro { .. } => Some("distro"),
            ResolveError::UnknownRelease { .. } => Some("release"),
            _ => None,
        }
    }

    /// Says where the recipe of [`ResolveError::named_recipe`] or the setting of
    /// [`ResolveError::named_setting`] was written.
    pub fn written_at(mut self, place: String) -> ResolveError {
        if let ResolveError::UnknownRecipe { written_at, .. }
        | ResolveError::NotAGuestRecipe { written_at, .. }
        | ResolveError::UnknownDistro { written_at, .. }
        | ResolveError::UnknownRelease { written_at, .. } = &mut self
        {
            *written_at = Some(place);
        }
        self
    }
}

impl crate::diagnose::Diagnose for ResolveError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ResolveError::UnknownDistro { .. } => "set `distro` in _global to one of the known distro recipes".into(),
            ResolveError::UnknownRelease { .. } => "set `release` in _global to a known release, or leave it out for the default".into(),
            ResolveError::UnknownRecipe { .. } => "correct the name; `trog recipes` lists what there is".into(),
            ResolveError::NotAGuestRecipe { kind: "distro", .. } => {
                "remove it from the guest's recipes: the distro is chosen by `distro` (and `release`) in _global".into()
            }
            ResolveError::NotAGuestRecipe { .. } => {
                "remove it from the guest's recipes: the machine's knobs (cpu_mode, disk_bus, …) go in _global; `trog recipes vm` lists them".into()
            }
            ResolveError::RequiresNonGuest { requirer, .. } => {
                format!("remove it from `requires` in recipes/{requirer}/recipe.yaml: every guest runs its distro and vm already")
            }
            ResolveError::Cycle { .. } => "break the cycle by removing one of the `requires` entries".into(),
            ResolveError::Args { .. } => "correct the arguments listed; `trog recipes NAME` shows what each recipe takes".into(),
        })
    }
}

/// Resolves a guest's recipes. Pure: the cookbook was loaded already.
pub fn resolve_recipes(
    cookbook: &Cookbook,
    guest: &GuestRecipes,
) -> Result<ResolvedRecipes, ResolveError> {
    let distro = find_distro(cookbook, &guest.distro)?;
    let distro_section = distro
        .manifest
        .distro
        .as_ref()
        .expect("a distro recipe has a distro section");
    let (release, release_spec) = distro_section
        .release(guest.release.as_deref())
        .ok_or_else(|| ResolveError::UnknownRelease {
            distro: guest.distro.clone(),
            release: guest.release.clone().unwrap_or_default(),
            known: distro_section
                .releases
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            written_at: None,
        })?;
    let machine = cookbook
        .get_str(MACHINE_RECIPE)
        .ok_or_else(|| ResolveError::UnknownRecipe {
            recipe: MACHINE_RECIPE.to_string(),
            known: cookbook.names().join(", "),
            written_at: None,
        })?;
    for name in guest.recipes.keys() {
        let recipe = find_guest_recipe(cookbook, name.as_str())?;
        if recipe.manifest.kind != RecipeKind::Guest {
            return Err(ResolveError::NotAGuestRecipe {
                recipe: name.clone(),
                kind: recipe.manifest.kind.as_str(),
                written_at: None,
            });
        }
    }

    // Discovery order: the distro, vm, the guest's recipes as written, then what they require.
    let mut discovered: IndexSet<RecipeName> = IndexSet::new();
    discovered.insert(distro.name.clone());
    if guest.on_own_vm {
        discovered.insert(machine.name.clone());
    }
    let mut handed: IndexMap<RecipeName, Value> = IndexMap::new();
    let mut queue: Vec<RecipeName> = guest.recipes.keys().cloned().collect();
    discovered.extend(queue.iter().cloned());
    let mut next = 0;
    while next < queue.len() {
        let requirer = cookbook.get(&queue[next]).expect("checked before queueing");
        next += 1;
        for (required, args) in &requirer.manifest.requires {
            let recipe = find_guest_recipe(cookbook, required.as_str())?;
            if recipe.manifest.kind != RecipeKind::Guest {
                return Err(ResolveError::RequiresNonGuest {
                    requirer: requirer.name.clone(),
                    recipe: required.clone(),
                    kind: recipe.manifest.kind.as_str(),
                    written_at: requirer
                        .origins
                        .locate(&format!("/requires/{required}"))
                        .map(ToString::to_string),
                });
            }
            let merged = handed.entry(required.clone()).or_insert(Value::Null);
            merge_handed(merged, args);
            if discovered.insert(required.clone()) {
                queue.push(required.clone());
            }
        }
    }
    check_cycles(cookbook, &guest.recipes.keys().cloned().collect::<Vec<_>>())?;
    let order = dependency_order(cookbook, &discovered);

    let mut recipes = Vec::new();
    let mut errors = Vec::new();
    for name in order {
        let recipe = cookbook.get(&name).expect("discovered recipes exist");
        let explicit = if name == distro.name {
            guest.distro_args.clone()
        } else if name == machine.name {
            guest.machine_args.clone()
        } else {
            guest.recipes.get(&name).cloned().unwrap_or(Value::Null)
        };
        let mut args = handed.get(&name).cloned().unwrap_or(Value::Null);
        overlay_explicit(&mut args, &explicit);
        match validate_args(&name, &recipe.manifest.args, &args) {
            Ok(effective) => recipes.push(ResolvedRecipe {
                name,
                recipe: recipe.clone(),
                args: effective,
            }),
            Err(ArgsError::Schema {
                recipe: name, why, ..
            }) => errors.push(ArgsError::Schema {
                recipe: name,
                why,
                written_at: recipe.origins.locate("/args").map(ToString::to_string),
            }),
            Err(error) => errors.push(error),
        }
    }
    if !errors.is_empty() {
        return Err(ResolveError::Args { errors });
    }
    let packages = package_set(&recipes, &guest.distro, &release_spec.packages);
    Ok(ResolvedRecipes {
        distro: distro.name.clone(),
        release: release.to_string(),
        image: release_spec.image.clone(),
        recipes,
        packages,
    })
}

fn find_distro<'a>(cookbook: &'a Cookbook, distro: &str) -> Result<&'a Recipe, ResolveError> {
    match cookbook.get_str(distro) {
        Some(recipe) if recipe.manifest.kind == RecipeKind::Distro => Ok(recipe),
        _ => Err(ResolveError::UnknownDistro {
            distro: distro.to_string(),
            known: cookbook
                .of_kind(RecipeKind::Distro)
                .map(|recipe| recipe.name.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            written_at: None,
        }),
    }
}

fn find_guest_recipe<'a>(cookbook: &'a Cookbook, name: &str) -> Result<&'a Recipe, ResolveError> {
    cookbook
        .get_str(name)
        .ok_or_else(|| ResolveError::UnknownRecipe {
            recipe: name.to_string(),
            known: cookbook
                .of_kind(RecipeKind::Guest)
                .map(|recipe| recipe.name.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            written_at: None,
        })
}

/// Merges what one more requirer hands to a recipe into what earlier ones handed it.
fn merge_handed(into: &mut Value, more: &Value) {
    match (into, more) {
        (Value::Object(existing), Value::Object(added)) => {
            for (key, value) in added {
                merge_handed(existing.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (Value::Array(existing), Value::Array(added)) => {
            for value in added {
                if !existing.contains(value) {
                    existing.push(value.clone());
                }
            }
        }
        (slot @ Value::Null, value) => *slot = value.clone(),
        _ => {}
    }
}

/// Lays the guest's own arguments over what requirers handed: maps merge, lists gain the guest's
/// items (each once), anything else the guest gives replaces.
fn overlay_explicit(base: &mut Value, explicit: &Value) {
    match (base, explicit) {
        (_, Value::Null) => {}
        (Value::Array(existing), Value::Array(given)) => {
            for value in given {
                if !existing.contains(value) {
                    existing.push(value.clone());
                }
            }
        }
        (Value::Object(existing), Value::Object(given)) => {
            for (key, value) in given {
                match existing.get_mut(key) {
                    Some(slot) => overlay_explicit(slot, value),
                    None => {
                        existing.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot, value) => *slot = value.clone(),
    }
}

/// Refuses a cycle among `requires`, naming it.
fn check_cycles(cookbook: &Cookbook, roots: &[RecipeName]) -> Result<(), ResolveError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    fn visit(
        cookbook: &Cookbook,
        name: &RecipeName,
        marks: &mut IndexMap<RecipeName, Mark>,
        path: &mut Vec<RecipeName>,
    ) -> Result<(), ResolveError> {
        match marks.get(name) {
            Some(Mark::Done) => return Ok(()),
            Some(Mark::Visiting) => {
                let start = path.iter().position(|step| step == name).unwrap_or(0);
                let mut cycle: Vec<String> =
                    path[start..].iter().map(ToString::to_string).collect();
                cycle.push(name.to_string());
                // The step that closes the cycle is written in the manifest of the last recipe
                // on the path.
                let written_at = path
                    .last()
                    .and_then(|last| cookbook.get(last))
                    .and_then(|last| last.origins.locate(&format!("/requires/{name}")))
                    .map(ToString::to_string);
                return Err(ResolveError::Cycle { cycle, written_at });
            }
            None => {}
        }
        marks.insert(name.clone(), Mark::Visiting);
        path.push(name.clone());
        if let Some(recipe) = cookbook.get(name) {
            for required in recipe.manifest.requires.keys() {
                visit(cookbook, required, marks, path)?;
            }
        }
        path.pop();
        marks.insert(name.clone(), Mark::Done);
        Ok(())
    }
    let mut marks = IndexMap::new();
    for root in roots {
        visit(cookbook, root, &mut marks, &mut Vec::new())?;
    }
    Ok(())
}

/// Orders the recipes so each comes after what it requires: the distro, then `vm`, then the
/// guest's recipes in the guest's order, each preceded by whatever it requires (in the order its
/// manifest lists them) that has not run yet. Cycles were refused before.
fn dependency_order(cookbook: &Cookbook, discovered: &IndexSet<RecipeName>) -> Vec<RecipeName> {
    fn visit(cookbook: &Cookbook, name: &RecipeName, order: &mut IndexSet<RecipeName>) {
        if order.contains(name) {
            return;
        }
        if let Some(recipe) = cookbook.get(name) {
            for required in recipe.manifest.requires.keys() {
                visit(cookbook, required, order);
            }
        }
        order.insert(name.clone());
    }
    let mut order = IndexSet::new();
    for name in discovered {
        visit(cookbook, name, &mut order);
    }
    order.into_iter().collect()
}

fn package_set(
    recipes: &[ResolvedRecipe],
    distro: &str,
    release_packages: &[String],
) -> Vec<String> {
    let mut wanted: IndexSet<String> = IndexSet::new();
    for (index, resolved) in recipes.iter().enumerate() {
        wanted.extend(
            resolved
                .recipe
                .manifest
                .packages_for(distro)
                .iter()
                .cloned(),
        );
        if index == 0 {
            wanted.extend(release_packages.iter().cloned());
        }
    }
    let conflicting: IndexSet<&String> = recipes
        .iter()
        .flat_map(|resolved| resolved.recipe.manifest.conflicts_for(distro))
        .collect();
    wanted
        .into_iter()
        .filter(|package| !conflicting.contains(package))
        .collect()
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
