//! The crate's layering, checked on its source (ARCHITECTURE.md, "Invariants"): only `libvirt/`
//! names the `virt` crate, the rest of trog reaches `libvirt/` only through the traits of
//! `hypervisor/` (one file opens it), and the top-level modules import each other without a
//! cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, with its path relative to `src/`.
fn rust_files(dir: &Path, found: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(source_dir()).unwrap();
            found.push((
                relative.to_string_lossy().into_owned(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

/// `text` without its comments (from `//` to the end of the line): doc links are not imports.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::` (`crate::a::b` and `crate::{a, b::c}`).
fn named_modules(code: &str) -> BTreeSet<String> {
    let identifier = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's own names: those at its first level of braces.
            let mut depth = 0;
            let mut item_start = true;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && depth == 0 && !c.is_whitespace() => {
                        names.insert(identifier(&group[offset..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            names.insert(identifier(rest));
        }
    }
    names
}

/// Which top-level module imports which, and from which files.
fn import_graph() -> BTreeMap<(String, String), Vec<String>> {
    let mut files = Vec::new();
    rust_files(&source_dir(), &mut files);
    let top = |path: &str| -> String {
        let first = path.split('/').next().unwrap();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|(path, _)| top(path)).collect();
    let mut graph: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (path, text) in &files {
        let from = top(path);
        for to in named_modules(&code_of(text)) {
            if to != from && modules.contains(&to) {
                graph
                    .entry((from.clone(), to))
                    .or_default()
                    .push(path.clone());
            }
        }
    }
    graph
}

/// A cycle of `edges`, as the modules along it, when there is one.
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
    }
    // Depth first, from every module in turn; `path` is the walk so far.
    fn walk<'a>(
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|module| *module == at) {
            let mut cycle: Vec<String> = path[start..].iter().map(|m| m.to_string()).collect();
            cycle.push(at.to_string());
            return Some(cycle);
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        for to in next.get(at).into_iter().flatten() {
            if let Some(cycle) = walk(to, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for start in next.keys() {
        if let Some(cycle) = walk(start, &next, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn the_top_level_modules_import_each_other_without_a_cycle() {
    let graph = import_graph();
    let edges: BTreeSet<(String, String)> = graph.keys().cloned().collect();
    if let Some(cycle) = find_cycle(&edges) {
        let files: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                let edge = (pair[0].clone(), pair[1].clone());
                format!("{} -> {}: {}", pair[0], pair[1], graph[&edge].join(", "))
            })
            .collect();
        panic!(
            "the modules import each other in a circle: {}\n{}",
            cycle.join(" -> "),
            files.join("\n")
        );
    }
}

#[test]
fn the_check_sees_grouped_imports_and_finds_a_circle() {
    assert_eq!(
        named_modules("use crate::{\n    config::paths,\n    diagnose::{Diagnose, Failure},\n};"),
        ["config", "diagnose"].map(String::from).into()
    );
    assert_eq!(
        named_modules(&code_of(
            "use crate::model::names; // not crate::plan\n/// [`crate::render`]"
        )),
        ["model"].map(String::from).into()
    );
    let edge = |from: &str, to: &str| (from.to_string(), to.to_string());
    let circle: BTreeSet<_> = [edge("a", "b"), edge("b", "c"), edge("c", "a")].into();
    assert_eq!(
        find_cycle(&circle).unwrap(),
        ["a", "b", "c", "a"].map(String::from)
    );
    let line: BTreeSet<_> = [edge("a", "b"), edge("b", "c"), edge("a", "c")].into();
    assert_eq!(find_cycle(&line), None);
}

/// Where `code` names the `virt` crate (`virt::`, but not the `libvirt::` of a module path).
fn names_virt(code: &str) -> bool {
    code.match_indices("virt::")
        .any(|(at, _)| !code[..at].ends_with("lib"))
}

#[test]
fn only_libvirt_names_the_virt_crate() {
    let mut files = Vec::new();
    rust_files(&source_dir(), &mut files);
    let naming: Vec<&str> = files
        .iter()
        .filter(|(path, _)| !path.starts_with("libvirt/") && !path.ends_with("layering_tests.rs"))
        .filter(|(_, text)| names_virt(&code_of(text)))
        .map(|(path, _)| path.as_str())
        .collect();
    assert!(
        naming.is_empty(),
        "these files name the virt crate outside libvirt/: {naming:?}"
    );
    assert!(names_virt("connection: &virt::connect::Connect"));
    assert!(!names_virt("use crate::libvirt::LibvirtObserver;"));
}

/// The one file outside `libvirt/` that names it: the opening of a hypervisor, which says which
/// backend answers (a second backend would be chosen there). Everything else holds what it
/// returns, a `Hypervisor` or a `HypervisorObserver`.
const OPENS_THE_BACKEND: &str = "workflow/open.rs";

/// The files outside `libvirt/` whose code names it (`crate::libvirt::…`, or `libvirt` in a
/// grouped `use crate::{…}`).
fn naming_libvirt(files: &[(String, String)]) -> Vec<&str> {
    files
        .iter()
        .filter(|(path, _)| !path.starts_with("libvirt/") && !path.ends_with("layering_tests.rs"))
        .filter(|(_, text)| named_modules(&code_of(text)).contains("libvirt"))
        .map(|(path, _)| path.as_str())
        .collect()
}

#[test]
fn only_the_opening_of_a_hypervisor_names_the_libvirt_backend() {
    let mut files = Vec::new();
    rust_files(&source_dir(), &mut files);
    let naming: Vec<&str> = naming_libvirt(&files)
        .into_iter()
        .filter(|path| *path != OPENS_THE_BACKEND)
        .collect();
    assert!(
        naming.is_empty(),
        "these files reach into libvirt/ instead of through the traits of hypervisor/ \
         (only {OPENS_THE_BACKEND} opens the backend): {naming:?}"
    );
    // The check sees a plain path and a grouped one, and not a comment or another module.
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let probes = [
        file(
            "provision/a.rs",
            "use crate::libvirt::guest_state::stopped_state;",
        ),
        file(
            "workflow/b.rs",
            "use crate::{diagnose::Failure, libvirt::ask_fleet};",
        ),
        file(
            "workflow/c.rs",
            "let x = crate::libvirt::DEFAULT_ANSWER_TIMEOUT;",
        ),
        file(
            "cli/d.rs",
            "// once crate::libvirt::X\nuse crate::hypervisor::Hypervisor;",
        ),
        file("libvirt/e.rs", "use crate::libvirt::connection::connect;"),
    ];
    assert_eq!(
        naming_libvirt(&probes),
        ["provision/a.rs", "workflow/b.rs", "workflow/c.rs"]
    );
}

/// The files that may declare a `DOMAIN` of their own: a verb whose guest is optional
/// (`backup --sweep`, `provision --all`, `status --all`) or a list of them (`inventory`), which
/// a flattened required argument cannot be.
const OWN_DOMAIN_ARGUMENT: [&str; 4] = [
    "commands/backup.rs",
    "commands/provision.rs",
    "commands/status.rs",
    "commands/inventory.rs",
];

#[test]
fn the_arguments_verbs_share_are_declared_once() {
    let mut files = Vec::new();
    rust_files(&source_dir(), &mut files);
    for (path, text) in &files {
        if !(path.starts_with("commands/") || path.starts_with("cli/")) || path == "cli/target.rs" {
            continue;
        }
        let code = code_of(text);
        assert!(
            !code.contains("values::hypervisor"),
            "{path} declares --hypervisor itself instead of flattening cli::target::OneHypervisor"
        );
        assert!(
            !code.contains("LONGEST_ANSWER_TIMEOUT"),
            "{path} declares --timeout itself instead of flattening cli::target::AnswerTimeout"
        );
        if !OWN_DOMAIN_ARGUMENT.contains(&path.as_str()) {
            assert!(
                !code.contains("value_name = \"DOMAIN\""),
                "{path} declares DOMAIN itself instead of flattening cli::target::GuestName"
            );
        }
    }
}
