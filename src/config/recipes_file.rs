//! The shape of recipes.yaml and of recipes.d/<fqdn>.yaml, checked and split into `_global` and
//! recipes. Pure: text in, sections or located errors out.
//!
//! recipes.yaml holds one top-level key, `_base`; a domain file holds one top-level key, the
//! domain its file is named after. Under either: `_global` (settings) and recipe names with
//! their arguments.

use crate::config::error::{GuestConfigError, StructureProblem};
use crate::config::global_schema::closest;
use crate::config::yaml::{parse_located, LocatedEntry, LocatedNode, Node, Origin};
use crate::model::names::{DomainName, RecipeName};
use indexmap::IndexMap;
use std::path::{Path, PathBuf};

/// The name of the settings section.
pub const GLOBAL_KEY: &str = "_global";
/// The name of recipes.yaml's one section, what every guest starts from.
pub const BASE_KEY: &str = "_base";

/// `_global` and the recipes of `_base` or of one domain.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GuestSection {
    /// Where `_global:` was written, if it was.
    pub global_origin: Option<Origin>,
    pub global: IndexMap<String, LocatedEntry>,
    /// Each recipe's entry; its value is always a mapping (`nginx:` alone is `nginx: {}`).
    pub recipes: IndexMap<RecipeName, LocatedEntry>,
}

/// recipes.yaml, read.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipesYaml {
    pub file: PathBuf,
    pub base: GuestSection,
}

/// recipes.d/<fqdn>.yaml, read.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainFile {
    pub file: PathBuf,
    pub domain: DomainName,
    pub section: GuestSection,
}

fn structure(origin: &Origin, problem: StructureProblem) -> GuestConfigError {
    GuestConfigError::Structure {
        origin: origin.clone(),
        problem,
    }
}

/// The entries of `node`, or an error saying that `what` must be a mapping. `~` is empty.
fn mapping_entries<'a>(
    node: &'a LocatedNode,
    what: &str,
) -> Result<Option<&'a IndexMap<String, LocatedEntry>>, GuestConfigError> {
    match &node.value {
        Node::Mapping(entries) => Ok(Some(entries)),
        Node::Null => Ok(None),
        other => Err(structure(
            &node.origin,
            StructureProblem::NotAMapping {
                what: what.to_string(),
                found: other.describe(),
            },
        )),
    }
}

/// Parses recipes.yaml. `file` names the file in errors and origins.
pub fn parse_recipes_yaml(file: &Path, text: &str) -> Result<RecipesYaml, GuestConfigError> {
    let tree = parse_located(file, text)?;
    let mut base = GuestSection::default();
    if let Some(entries) = mapping_entries(&tree, "the top level of recipes.yaml")? {
        for (key, entry) in entries {
            if key != BASE_KEY {
                return Err(structure(
                    &entry.key_origin,
                    StructureProblem::UnknownTopLevelKey { key: key.clone() },
                ));
            }
        }
        if let Some(entry) = entries.get(BASE_KEY) {
            base = guest_section(&entry.value, "`_base`")?;
        }
    }
    Ok(RecipesYaml {
        file: file.to_path_buf(),
        base,
    })
}

/// Parses the domain file of `domain`. Its one top-level key must be `domain`.
pub fn parse_domain_file(
    file: &Path,
    domain: &DomainName,
    text: &str,
) -> Result<DomainFile, GuestConfigError> {
    let tree = parse_located(file, text)?;
    let count_problem = |count| StructureProblem::DomainKeyCount {
        expected: domain.clone(),
        count,
    };
    let entries = match mapping_entries(&tree, "the top level of a domain file")? {
        Some(entries) => entries,
        None => return Err(structure(&tree.origin, count_problem(0))),
    };
    if entries.len() != 1 {
        let second = entries
            .values()
            .nth(1)
            .map(|entry| &entry.key_origin)
            .unwrap_or(&tree.origin);
        return Err(structure(second, count_problem(entries.len())));
    }
    let (key, entry) = entries.first().expect("one entry");
    if key != domain.as_str() {
        return Err(structure(
            &entry.key_origin,
            StructureProblem::DomainKeyMismatch {
                expected: domain.clone(),
                found: key.clone(),
            },
        ));
    }
    let section = guest_section(&entry.value, &format!("`{domain}`"))?;
    Ok(DomainFile {
        file: file.to_path_buf(),
        domain: domain.clone(),
        section,
    })
}

/// Splits `_base` or a domain's mapping into `_global` and recipes, checking each key.
fn guest_section(node: &LocatedNode, what: &str) -> Result<GuestSection, GuestConfigError> {
    let mut section = GuestSection::default();
    let Some(entries) = mapping_entries(node, what)? else {
        return Ok(section);
    };
    for (key, entry) in entries {
        if key == GLOBAL_KEY {
            section.global_origin = Some(entry.key_origin.clone());
            if let Some(global) = mapping_entries(&entry.value, "`_global`")? {
                section.global = global.clone();
            }
            continue;
        }
        if key.starts_with('_') {
            let suggestion = closest(key, [GLOBAL_KEY].into_iter());
            return Err(structure(
                &entry.key_origin,
                StructureProblem::ReservedKey {
                    key: key.clone(),
                    suggestion,
                },
            ));
        }
        let name = RecipeName::parse(key).map_err(|error| {
            let why = match error {
                crate::model::names::NameError::Recipe { why, .. } => why.to_string(),
                other => other.to_string(),
            };
            structure(
                &entry.key_origin,
                StructureProblem::BadRecipeName {
                    key: key.clone(),
                    why,
                },
            )
        })?;
        let args_what = format!("the arguments of recipe `{key}`");
        let args = match mapping_entries(&entry.value, &args_what)? {
            Some(_) => entry.value.clone(),
            None => LocatedNode {
                value: Node::Mapping(IndexMap::new()),
                origin: entry.value.origin.clone(),
            },
        };
        section.recipes.insert(
            name,
            LocatedEntry {
                key_origin: entry.key_origin.clone(),
                value: args,
            },
        );
    }
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(text: &str) -> Result<RecipesYaml, GuestConfigError> {
        parse_recipes_yaml(Path::new("recipes.yaml"), text)
    }

    fn domain(text: &str) -> Result<DomainFile, GuestConfigError> {
        let name = DomainName::parse("www.example.test").unwrap();
        parse_domain_file(Path::new("www.example.test.yaml"), &name, text)
    }

    fn message(result: Result<impl std::fmt::Debug, GuestConfigError>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn base_splits_global_and_recipes() {
        let read =
            base("_base:\n  _global:\n    admin_user: a\n  adminconfig: {}\n  ufw:\n").unwrap();
        assert_eq!(read.base.global.keys().collect::<Vec<_>>(), ["admin_user"]);
        assert_eq!(read.base.global_origin.unwrap().line, 2);
        let names: Vec<_> = read.base.recipes.keys().map(RecipeName::as_str).collect();
        assert_eq!(names, ["adminconfig", "ufw"]);
        assert_eq!(
            read.base.recipes[1].value.value,
            Node::Mapping(IndexMap::new()),
            "`ufw:` alone is `ufw: {{}}`"
        );
    }

    #[test]
    fn an_empty_recipes_yaml_is_an_empty_base() {
        assert_eq!(base("").unwrap().base, GuestSection::default());
        assert_eq!(base("_base:\n").unwrap().base, GuestSection::default());
    }

    #[test]
    fn base_refuses_other_top_level_keys() {
        assert_eq!(
            message(base("_base: {}\nwww.example.test: {}\n")),
            "recipes.yaml:2:1: `www.example.test` is not allowed at the top of recipes.yaml, which holds only `_base`"
        );
    }

    #[test]
    fn non_mappings_are_refused_where_mappings_belong() {
        assert_eq!(
            message(base("- a\n")),
            "recipes.yaml:1:1: the top level of recipes.yaml must be a mapping, but it is a list"
        );
        assert_eq!(
            message(base("_base: [a]\n")),
            "recipes.yaml:1:8: `_base` must be a mapping, but it is a list"
        );
        assert_eq!(
            message(base("_base:\n  _global: 3\n")),
            "recipes.yaml:2:12: `_global` must be a mapping, but it is the number `3`"
        );
        assert_eq!(
            message(base("_base:\n  nginx: yes\n")),
            "recipes.yaml:2:10: the arguments of recipe `nginx` must be a mapping, but it is the text `yes`"
        );
    }

    #[test]
    fn reserved_and_malformed_recipe_names_are_refused() {
        let error = base("_base:\n  _globals: {}\n").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("recipes.yaml:2:3: `_globals` is not a section"));
        assert_eq!(
            crate::diagnose::Diagnose::hint(&error).unwrap(),
            "did you mean `_global`?"
        );
        assert_eq!(
            message(base("_base:\n  Nginx: {}\n")),
            "recipes.yaml:2:3: `Nginx` is not a recipe name: recipe names are written in lower case"
        );
    }

    #[test]
    fn a_domain_file_holds_its_domain() {
        let read =
            domain("www.example.test:\n  _global: {memory: 2048}\n  nginx: {server_name: x}\n")
                .unwrap();
        assert_eq!(read.domain.as_str(), "www.example.test");
        assert_eq!(read.section.global.len(), 1);
        assert_eq!(read.section.recipes.len(), 1);
        assert!(domain("www.example.test:\n")
            .unwrap()
            .section
            .recipes
            .is_empty());
    }

    #[test]
    fn a_domain_file_under_another_name_is_refused() {
        assert_eq!(
            message(domain("web.example.test:\n  nginx: {}\n")),
            "www.example.test.yaml:1:1: the file is named after www.example.test, but its top-level key is `web.example.test`"
        );
    }

    #[test]
    fn a_domain_file_with_no_or_two_keys_is_refused() {
        assert!(message(domain(""))
            .contains("exactly one top-level key, `www.example.test`, but it holds 0"));
        assert_eq!(
            message(domain("www.example.test: {}\nother.example.test: {}\n")),
            "www.example.test.yaml:2:1: the file must hold exactly one top-level key, `www.example.test`, but it holds 2"
        );
    }

    #[test]
    fn syntax_errors_pass_through_located() {
        assert_eq!(
            message(domain("www.example.test:\n  nginx: {}\n  nginx: {}\n")),
            "www.example.test.yaml:3:3: the key `nginx` appears a second time in the same mapping"
        );
    }
}
