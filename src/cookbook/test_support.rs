//! Building small cookbooks in memory for unit tests.

use crate::cookbook::load::{Cookbook, Recipe};
use crate::cookbook::manifest::{manifest_origins, parse_manifest};
use crate::model::names::RecipeName;
use indexmap::IndexMap;
use std::path::PathBuf;

/// A recipe from its manifest text and the sources it names.
pub fn recipe(name: &str, manifest: &str, sources: &[(&str, &str)]) -> Recipe {
    let folder = PathBuf::from(format!("recipes/{name}"));
    let text = manifest;
    let manifest =
        parse_manifest(&folder.join("recipe.yaml"), text).unwrap_or_else(|error| panic!("{error}"));
    let sources: IndexMap<String, String> = sources
        .iter()
        .map(|(file, text)| (file.to_string(), text.to_string()))
        .collect();
    Recipe {
        name: RecipeName::parse(name).unwrap(),
        origins: manifest_origins(&folder.join("recipe.yaml"), text),
        folder,
        manifest,
        sources,
    }
}

pub const DEBIAN: &str = r#"
description: Debian
kind: distro
packages: {debian: [ca-certificates]}
distro:
  packager: apt
  default_release: bookworm
  releases:
    bookworm:
      image: {url: "https://example.test/bookworm.qcow2", sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
      packages: [bookworm-only]
    trixie:
      image: {url: "https://example.test/trixie.qcow2", sha256: "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
"#;

pub const VM: &str = r#"
description: The machine
kind: machine
args:
  type: object
  properties:
    cpu_mode: {type: string, default: host-passthrough}
"#;

/// A cookbook of the distro, vm and the given guest recipes (name, manifest).
pub fn cookbook(guest_recipes: &[(&str, &str)]) -> Cookbook {
    let mut recipes = vec![recipe("debian", DEBIAN, &[]), recipe("vm", VM, &[])];
    recipes.extend(
        guest_recipes
            .iter()
            .map(|(name, manifest)| recipe(name, manifest, &[])),
    );
    Cookbook::from_recipes(recipes).unwrap_or_else(|error| panic!("{error}"))
}

pub fn name(name: &str) -> RecipeName {
    RecipeName::parse(name).unwrap()
}
