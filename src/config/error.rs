//! What can go wrong reading an installation's recipes into one guest's configuration.

use crate::config::bounded_read::read_problem_hint;
use crate::config::settings::{SettingProblem, SettingProblemKind};
use crate::config::yaml::{Origin, YamlSyntaxError};
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::names::{DomainName, NameError};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GuestConfigError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("there is no configuration for {domain}: {} does not exist", path.display())]
    NoDomainFile { domain: DomainName, path: PathBuf },

    #[error(transparent)]
    Syntax(#[from] YamlSyntaxError),

    #[error("{origin}: {problem}")]
    Structure {
        origin: Origin,
        problem: StructureProblem,
    },

    #[error("the settings of {domain} are not valid:{}", problem_lines(problems))]
    Settings {
        domain: DomainName,
        recipes_yaml: PathBuf,
        domain_file: PathBuf,
        problems: Vec<SettingProblem>,
    },

    #[error("cannot list the guests in {}", path.display())]
    ListDomains {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is not named after a guest", path.display())]
    DomainFileName {
        path: PathBuf,
        #[source]
        source: NameError,
    },

    #[error("{} is not named after a guest: guest files end in `.yaml`", path.display())]
    GuestFileExtension { path: PathBuf },
}

fn problem_lines(problems: &[SettingProblem]) -> String {
    problems
        .iter()
        .map(|problem| format!("\n  {problem}"))
        .collect()
}

/// Something in the shape of recipes.yaml or a domain file that is not as it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructureProblem {
    #[error("{what} must be a mapping, but it is {found}")]
    NotAMapping { what: String, found: String },

    #[error("`{key}` is not allowed at the top of recipes.yaml, which holds only `_base`")]
    UnknownTopLevelKey { key: String },

    #[error("`{key}` is not a section a guest can have (only `_global` and recipe names)")]
    ReservedKey {
        key: String,
        suggestion: Option<&'static str>,
    },

    #[error("`{key}` is not a recipe name: {why}")]
    BadRecipeName { key: String, why: String },

    #[error("the file is named after {expected}, but its top-level key is `{found}`")]
    DomainKeyMismatch { expected: DomainName, found: String },

    #[error("the file must hold exactly one top-level key, `{expected}`, but it holds {count}")]
    DomainKeyCount { expected: DomainName, count: usize },
}

impl StructureProblem {
    fn hint(&self) -> String {
        match self {
            StructureProblem::NotAMapping { what, .. } => {
                format!(
                    "write {what} as `key: value` lines indented under it (an empty one is `{{}}`)"
                )
            }
            StructureProblem::UnknownTopLevelKey { .. } => {
                "put the installation's settings under `_base: {_global: …}` and each guest in \
                 recipes.d/<fqdn>.yaml"
                    .to_string()
            }
            StructureProblem::ReservedKey {
                suggestion: Some(suggestion),
                ..
            } => {
                format!("did you mean `{suggestion}`?")
            }
            StructureProblem::ReservedKey {
                suggestion: None, ..
            } => "names starting with `_` are reserved; `_global` is the only such section"
                .to_string(),
            StructureProblem::BadRecipeName { .. } => {
                "recipe names are the folder names under recipes/; `trog recipes` lists them"
                    .to_string()
            }
            StructureProblem::DomainKeyMismatch { expected, .. } => {
                format!("rename the key to `{expected}`, or the file after the key (domains have one spelling)")
            }
            StructureProblem::DomainKeyCount { expected, .. } => {
                format!("put everything for this guest under `{expected}:`; other guests get files of their own")
            }
        }
    }
}

impl Diagnose for GuestConfigError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            GuestConfigError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                "check the installation's directory (TROG_PROVISIONER_CONFIG, default /etc/trog-provisioner) \
                 or the --recipes option; docs/CONFIGURATION.md describes the file"
                    .to_string()
            }
            GuestConfigError::Read { source, .. } => {
                read_problem_hint(source).unwrap_or_else(|| "check the file's permissions".to_string())
            }
            GuestConfigError::NoDomainFile { domain, .. } => format!(
                "a guest is built only from its file in recipes.d: write it (`trog new_guest --hostname {domain} RECIPE…` \
                 starts one), or check the spelling"
            ),
            GuestConfigError::Syntax(error) => error.hint(),
            GuestConfigError::Structure { problem, .. } => problem.hint(),
            GuestConfigError::Settings { domain, recipes_yaml, domain_file, problems } => {
                settings_hint(domain, recipes_yaml, domain_file, problems)
            }
            GuestConfigError::ListDomains { .. } => {
                "check the installation's directory (TROG_PROVISIONER_CONFIG); guests are files in its recipes.d"
                    .to_string()
            }
            GuestConfigError::DomainFileName { .. } => {
                "rename it after the guest's fully qualified name in lower case (www.example.test.yaml), \
                 or move it out of recipes.d"
                    .to_string()
            }
            GuestConfigError::GuestFileExtension { path } => format!(
                "rename it to {}.yaml, or move it out of recipes.d",
                path.file_stem().map(|stem| stem.to_string_lossy()).unwrap_or_default()
            ),
        })
    }
}

fn settings_hint(
    domain: &DomainName,
    recipes_yaml: &std::path::Path,
    domain_file: &std::path::Path,
    problems: &[SettingProblem],
) -> String {
    let mut lines = Vec::new();
    if problems
        .iter()
        .any(|problem| matches!(problem.kind, SettingProblemKind::Missing { .. }))
    {
        lines.push(format!(
            "set what is missing under `_global` of `_base` in {} (for every guest),\n\
             or under `_global` of `{domain}` in {} (for this guest only)",
            recipes_yaml.display(),
            domain_file.display()
        ));
    }
    if problems
        .iter()
        .any(|problem| !matches!(problem.kind, SettingProblemKind::Missing { .. }))
    {
        lines.push(
            "every setting, its type and its default are listed in docs/CONFIGURATION.md"
                .to_string(),
        );
    }
    lines.join("\n")
}
