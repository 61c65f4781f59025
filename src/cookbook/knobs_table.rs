//! The reference table of the settings `_global` takes from the distro and machine recipes (the
//! `vm` recipe's disk and firmware knobs, a distro's `upgrade`), read from their argument
//! schemas, as docs/CONFIGURATION.md carries it beside the global schema's.

use crate::config::convergence::convergence;
use crate::cookbook::load::Cookbook;
use crate::cookbook::manifest::RecipeKind;
use serde_json::Value;

/// One row per argument of every distro and machine recipe, in the cookbook's order; an
/// argument several recipes declare (`upgrade` of each distro) is listed under each.
pub fn recipe_knobs_table(cookbook: &Cookbook) -> String {
    let mut table = String::from(
        "| Setting | Recipe | Default | Meaning | When changed |\n|---|---|---|---|---|\n",
    );
    let recipes = cookbook
        .of_kind(RecipeKind::Machine)
        .chain(cookbook.of_kind(RecipeKind::Distro));
    for recipe in recipes {
        let Some(properties) = recipe
            .manifest
            .args
            .get("properties")
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (key, schema) in properties {
            let default = match schema.get("default") {
                None | Some(Value::Null) => "—".to_string(),
                Some(Value::String(text)) => format!("`{text}`"),
                Some(other) => format!("`{other}`"),
            };
            let meaning = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let when_changed =
                convergence(key).map_or("**unclassified**", |class| class.describe());
            table.push_str(&format!(
                "| `{key}` | {} | {default} | {} | {when_changed} |\n",
                recipe.name,
                meaning.replace('|', "\\|").replace('<', "&lt;")
            ));
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookbook::load::load_cookbook;
    use std::path::Path;

    #[test]
    fn the_documentation_carries_the_current_table() {
        let cookbook = load_cookbook(&Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes"))
            .expect("the shipped recipes load");
        let table = recipe_knobs_table(&cookbook);
        let documentation = include_str!("../../docs/CONFIGURATION.md");
        assert!(
            documentation.contains(&table),
            "docs/CONFIGURATION.md's table of the recipes' settings differs; paste this:\n{table}"
        );
    }
}
