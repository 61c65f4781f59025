//! Every YAML example of the documentation that is a file of an installation (a `recipes.yaml`,
//! or guest files of `recipes.d`) is read by the loader a run uses, with the shipped recipes: its
//! settings and its recipes' arguments are checked as `provision` checks them before it does
//! anything. An example that names a setting or an argument that does not exist fails here.

use std::cell::RefCell;
use std::fs;
use std::path::Path;
use trog::config::paths::InstallationPaths;
use trog::model::names::DomainName;
use trog::workflow::inputs::load_guest_configured;
use trog::workflow::reporter::Reporter;

/// The documents whose examples are checked.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "docs/BACKUPS.md",
    "docs/CONFIGURATION.md",
    "docs/CONVERGE.md",
    "docs/DEBUG_BOOT.md",
    "docs/EXAMPLE.md",
    "docs/IMAGES.md",
    "docs/INTEGRATION.md",
    "docs/INVENTORY.md",
    "docs/JSON.md",
    "docs/NETWORK.md",
    "docs/RECIPES.md",
    "docs/SITES.md",
];

/// The settings every guest needs, for guest examples that leave them to `_base`.
const BASE: &str = "\
_base:
  _global:
    admin_user: someadmin
    contact_email: ops@example.test
    distro: debian
";

/// One ```yaml block: where it starts, and its text without the fence's indentation.
struct Example {
    place: String,
    text: String,
}

/// What an example is, from its top-level keys.
enum Kind {
    /// A `recipes.yaml`: `_base` alone.
    RecipesYaml,
    /// One or more guest files, each top-level key a domain.
    GuestFiles(Vec<(DomainName, String)>),
    /// A recipe's manifest (docs/RECIPES.md), not a file of an installation.
    RecipeManifest,
}

fn checkout() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_examples(document: &str) -> Vec<Example> {
    /// Where the reading is: outside a block, in another kind of block, or in a ```yaml one
    /// (its first line, its fence's indentation, its lines so far).
    enum Block {
        Outside,
        Other,
        Yaml(usize, usize, Vec<String>),
    }
    let text = fs::read_to_string(checkout().join(document)).unwrap();
    let mut examples = Vec::new();
    let mut block = Block::Outside;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```");
        let indent = line.len() - trimmed.len();
        block = match block {
            Block::Outside if fence && trimmed.trim_end() == "```yaml" => {
                Block::Yaml(index + 1, indent, Vec::new())
            }
            Block::Outside if fence => Block::Other,
            Block::Other if fence => Block::Outside,
            Block::Yaml(start, _, lines) if fence => {
                examples.push(Example {
                    place: format!("{document}:{start}"),
                    text: lines.join("\n") + "\n",
                });
                Block::Outside
            }
            Block::Yaml(start, fence_indent, mut lines) => {
                lines.push(line.get(fence_indent..).unwrap_or("").to_string());
                Block::Yaml(start, fence_indent, lines)
            }
            unchanged => unchanged,
        };
    }
    assert!(
        matches!(block, Block::Outside),
        "{document} ends inside a code block"
    );
    examples
}

/// The key a line starts at the top level, when it does.
fn top_level_key(line: &str) -> Option<&str> {
    if line.starts_with([' ', '#', '-']) || line.trim().is_empty() {
        return None;
    }
    line.split_once(':').map(|(key, _)| key.trim())
}

fn kind(example: &Example) -> Kind {
    let keys: Vec<&str> = example.text.lines().filter_map(top_level_key).collect();
    if keys == ["_base"] {
        return Kind::RecipesYaml;
    }
    if keys.contains(&"kind") && keys.contains(&"args") {
        return Kind::RecipeManifest;
    }
    let domains: Vec<DomainName> = keys
        .iter()
        .map(|key| {
            DomainName::parse(key)
                .ok()
                .filter(|_| key.contains('.'))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: a YAML example this test cannot place (top-level key `{key}`): \
                         teach docs_examples.rs what it is",
                        example.place
                    )
                })
        })
        .collect();
    // Each domain's file runs from its key to the next domain's.
    let mut files: Vec<(DomainName, String)> = Vec::new();
    for line in example.text.lines() {
        if top_level_key(line).is_some() {
            files.push((domains[files.len()].clone(), String::new()));
        }
        if let Some((_, file)) = files.last_mut() {
            file.push_str(line);
            file.push('\n');
        }
    }
    Kind::GuestFiles(files)
}

/// Keeps what a load warns about: an example with a deprecated setting is a failure too.
#[derive(Default)]
struct Warnings(RefCell<Vec<String>>);

impl Reporter for Warnings {
    fn say(&self, line: &str) {
        self.0.borrow_mut().push(line.to_string());
    }
}

/// Loads `domain` of the installation in `dir` as a run does; what went wrong, if anything.
fn problem(dir: &Path, domain: &DomainName) -> Option<String> {
    let paths = InstallationPaths::resolve(dir.to_str(), None, None);
    let warnings = Warnings::default();
    let report = match load_guest_configured(&paths, domain, &warnings) {
        Ok(_) => warnings.0.into_inner().join("\n"),
        Err(failure) => failure.render(),
    };
    (!report.is_empty()).then(|| report.replace(dir.to_str().unwrap(), "[INSTALL]"))
}

fn installation(recipes_yaml: &str, guests: &[(DomainName, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("recipes.yaml"), recipes_yaml).unwrap();
    fs::create_dir(dir.path().join("recipes.d")).unwrap();
    for (domain, text) in guests {
        let file = dir.path().join("recipes.d").join(format!("{domain}.yaml"));
        assert!(!file.exists(), "{domain} is written twice");
        fs::write(file, text).unwrap();
    }
    dir
}

#[test]
fn every_installation_example_of_the_documentation_loads() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for document in DOCUMENTS {
        // The guest examples of one document go into one installation, so that a `depends_on`
        // finds the machine another example of the document declares.
        let mut guests: Vec<(DomainName, String)> = Vec::new();
        let mut places = Vec::new();
        for example in yaml_examples(document) {
            match kind(&example) {
                Kind::RecipeManifest => {}
                Kind::RecipesYaml => {
                    // Loaded with one guest that adds only what every guest needs and the
                    // example leaves out.
                    let mut probe = String::from("probe.example.test:\n  _global:\n");
                    for (key, value) in [
                        ("admin_user", "someadmin"),
                        ("contact_email", "ops@example.test"),
                    ] {
                        if !example.text.contains(&format!("{key}:")) {
                            probe.push_str(&format!("    {key}: {value}\n"));
                        }
                    }
                    let domain = DomainName::parse("probe.example.test").unwrap();
                    let dir = installation(&example.text, &[(domain.clone(), probe)]);
                    if let Some(problem) = problem(dir.path(), &domain) {
                        problems.push(format!("{}:\n{problem}", example.place));
                    }
                    checked += 1;
                }
                Kind::GuestFiles(files) => {
                    for (domain, text) in files {
                        places.push((domain.clone(), example.place.clone()));
                        guests.push((domain, text));
                    }
                }
            }
        }
        if guests.is_empty() {
            continue;
        }
        let dir = installation(BASE, &guests);
        for (domain, place) in &places {
            if let Some(problem) = problem(dir.path(), domain) {
                problems.push(format!("{place} ({domain}):\n{problem}"));
            }
            checked += 1;
        }
    }
    assert!(
        problems.is_empty(),
        "examples of the documentation that do not load:\n\n{}",
        problems.join("\n\n")
    );
    // README's site, CONFIGURATION.md's guests and recipes.yaml files, NETWORK.md's and more:
    // a parser that stopped finding them would pass for the wrong reason.
    assert!(checked >= 12, "only {checked} examples found");
}

#[test]
fn every_document_with_examples_is_checked() {
    let mut listed: Vec<String> = fs::read_dir(checkout().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    listed.push("README.md".to_string());
    listed.sort();
    let mut documents: Vec<String> = DOCUMENTS.iter().map(ToString::to_string).collect();
    documents.sort();
    assert_eq!(
        documents, listed,
        "DOCUMENTS in tests/config/docs_examples.rs lists every document"
    );
}

#[test]
fn the_example_finder_sees_indented_blocks_and_skips_others() {
    let examples = yaml_examples("docs/NETWORK.md");
    assert!(examples.iter().any(|example| example
        .text
        .starts_with("_base:\n  _global:\n    network: default")));
    assert!(examples.iter().all(|example| !example.text.contains("```")));
}
