//! `new_guest RECIPE… [--hostname FQDN] [--memory M] [--cpus N] [--size S]`: write a new guest's
//! file in recipes.d from a list of recipes, so a scratch guest is one command.
//!
//! What goes under each recipe is the scaffold (`cookbook::scaffold`): required arguments get their
//! default or `CHANGEME`, optional ones and whatever `_base` supplies are left out. `_global` holds
//! only the sizes given on the command line; the rest comes from `_base`, then from the defaults
//! of the global schema (1024 MiB of memory, 1 CPU, a 10 GiB disk — small on purpose, since a
//! scratch guest should fit anywhere). Without `--hostname` the guest is named by a random UUID
//! under `.test`, a top-level domain reserved for exactly this.
//!
//! The file is checked to load against the installation before it is written, an existing file
//! is never overwritten, and nothing is written when anything is refused.

use crate::cli::values;
use crate::cli::GlobalArgs;
use crate::commands::recipes::base_as_json;
use crate::config::guest::{load_recipes_yaml, resolve_guest};
use crate::config::recipes_file::{parse_domain_file, GLOBAL_KEY};
use crate::cookbook::load::{load_cookbook, recipes_dir};
use crate::cookbook::scaffold::{scaffold, Scaffold};
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::generate::recipe_settings;
use crate::model::names::{DomainName, RecipeName};
use crate::model::units::{
    guest_disk_problem, guest_memory_problem, Bytes, MiB, SizeError, GUEST_MAX_CPUS,
};
use crate::output::events::{to_line, Event};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct NewGuestArgs {
    /// The guest recipes it runs, besides those every guest gets from `_base` (`trog recipes`
    /// lists them).
    #[arg(value_name = "RECIPE", required = true)]
    pub names: Vec<String>,
    /// The guest's fully qualified name (default: a random UUID under `.test`).
    #[arg(long, value_name = "FQDN", value_parser = values::domain)]
    pub hostname: Option<DomainName>,
    /// Its memory; a bare number is MiB (`2048`, `2G`). Unset: `_base`'s, else 1024 MiB.
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Its virtual CPUs. Unset: `_base`'s, else 1.
    #[arg(long, value_name = "N")]
    pub cpus: Option<u32>,
    /// Its root disk; a bare number is GiB (`20`, `20G`). Unset: `_base`'s, else 10 GiB.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
}

/// Why `new_guest` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewGuestError {
    #[error("--memory is not a memory size")]
    Memory {
        #[source]
        source: SizeError,
    },
    #[error("--size is not a disk size")]
    Size {
        #[source]
        source: SizeError,
    },
    #[error("--{option} cannot be used: {why}")]
    OutOfRange { option: &'static str, why: String },
    #[error("recipe `{recipe}` is named more than once")]
    DuplicateRecipe { recipe: String },
    #[error("{} already exists", path.display())]
    Exists { path: PathBuf },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for NewGuestError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            NewGuestError::Exists { .. } => ExitStatus::Conflict,
            NewGuestError::Write { .. } => ExitStatus::Failure,
            _ => ExitStatus::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            NewGuestError::Memory { .. } => {
                "write memory as MiB (`2048`) or with a unit (`2G`, `512M`)".into()
            }
            NewGuestError::Size { .. } => {
                "write the disk size as GiB (`20`) or with a unit (`20G`, `512M`)".into()
            }
            NewGuestError::OutOfRange { .. } => {
                "give a size a guest can have, or leave the option out to take the default".into()
            }
            NewGuestError::DuplicateRecipe { .. } => "name each recipe once".into(),
            NewGuestError::Exists { .. } => {
                "pick another --hostname, or delete the file to start that guest over".into()
            }
            NewGuestError::Write { .. } => {
                "check that the installation's recipes.d is writable (TROG_PROVISIONER_CONFIG)"
                    .into()
            }
        })
    }
}

/// The sizes the command line gave; `None` leaves the setting to `_base` and the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuestShape {
    pub memory: Option<MiB>,
    pub cpus: Option<u32>,
    pub size: Option<Bytes>,
}

impl GuestShape {
    /// Reads `--memory`, `--cpus` and `--size`; none may be zero.
    pub fn parse(
        memory: Option<&str>,
        cpus: Option<u32>,
        size: Option<&str>,
    ) -> Result<GuestShape, NewGuestError> {
        let memory = memory
            .map(|text| MiB::parse(text).map_err(|source| NewGuestError::Memory { source }))
            .transpose()?;
        let size = size
            .map(|text| Bytes::parse_disk(text).map_err(|source| NewGuestError::Size { source }))
            .transpose()?;
        if let Some(why) = memory.and_then(guest_memory_problem) {
            return Err(NewGuestError::OutOfRange {
                option: "memory",
                why,
            });
        }
        match cpus {
            Some(0) => {
                return Err(NewGuestError::OutOfRange {
                    option: "cpus",
                    why: "a guest needs at least 1".into(),
                })
            }
            Some(count) if count > GUEST_MAX_CPUS => {
                return Err(NewGuestError::OutOfRange {
                    option: "cpus",
                    why: format!("{count} is more than a guest gets ({GUEST_MAX_CPUS} at most)"),
                })
            }
            _ => {}
        }
        if let Some(why) = size.and_then(guest_disk_problem) {
            return Err(NewGuestError::OutOfRange {
                option: "size",
                why,
            });
        }
        Ok(GuestShape { memory, cpus, size })
    }

    /// `_global` as written: only what was given, memory in MiB, the disk in the largest whole unit.
    fn global(&self) -> Map<String, Value> {
        let mut global = Map::new();
        if let Some(memory) = self.memory {
            global.insert("memory".into(), Value::from(memory.0));
        }
        if let Some(cpus) = self.cpus {
            global.insert("cpus".into(), Value::from(cpus));
        }
        if let Some(size) = self.size {
            global.insert("size".into(), Value::from(disk_size_text(size)));
        }
        global
    }
}

/// A disk size as the configuration reads it back: `20G`, `1536M`, or bytes as `…B`.
fn disk_size_text(size: Bytes) -> String {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    if size.0 % GIB == 0 {
        format!("{}G", size.0 / GIB)
    } else if size.0 % MIB == 0 {
        format!("{}M", size.0 / MIB)
    } else {
        format!("{}B", size.0)
    }
}

/// The name a guest gets without `--hostname`: the UUID under `.test`.
pub fn uuid_domain(uuid: uuid::Uuid) -> DomainName {
    DomainName::parse(&format!("{}.test", uuid.hyphenated()))
        .expect("a hyphenated UUID is a valid label")
}

/// Refuses a recipe named twice (its scaffold would be written once and its keys listed twice).
pub fn refuse_duplicates(names: &[&str]) -> Result<(), NewGuestError> {
    for (index, name) in names.iter().enumerate() {
        if names[..index].contains(name) {
            return Err(NewGuestError::DuplicateRecipe {
                recipe: name.to_string(),
            });
        }
    }
    Ok(())
}

/// The guest's file: one top-level key, the domain; `_global` when any size was given; then
/// each recipe with its scaffolded arguments.
pub fn guest_file_text(domain: &DomainName, shape: &GuestShape, made: &Scaffold) -> String {
    let mut section = Map::new();
    let global = shape.global();
    if !global.is_empty() {
        section.insert(GLOBAL_KEY.to_string(), Value::Object(global));
    }
    for (name, args) in &made.recipes {
        section.insert(name.as_str().to_string(), args.clone());
    }
    let mut document = Map::new();
    document.insert(domain.as_str().to_string(), Value::Object(section));
    let body = serde_saphyr::to_string(&Value::Object(document)).expect("JSON values serialise");
    format!(
        "# Written by `trog new_guest`. docs/CONFIGURATION.md describes the settings;\n\
         # `trog recipes NAME` shows what a recipe takes.\n{body}"
    )
}

/// What the command prints: where it wrote, what the guest runs, and what is left to fill in.
pub fn summary_text(
    file: &Path,
    domain: &DomainName,
    recipes: &[&str],
    to_fill: &[String],
) -> String {
    let count = match recipes.len() {
        1 => "1 recipe".to_string(),
        many => format!("{many} recipes"),
    };
    let mut text = format!(
        "Wrote {}\n{domain}: {count} ({})\n",
        file.display(),
        recipes.join(", ")
    );
    if !to_fill.is_empty() {
        text.push_str("\nFill these in before provisioning:\n");
        for key in to_fill {
            text.push_str(&format!("  {key}\n"));
        }
    }
    text
}

/// The same as a `guest_file_written` event, for programs.
pub fn summary_json(
    file: &Path,
    domain: &DomainName,
    recipes: &[&str],
    to_fill: &[String],
) -> String {
    to_line(&Event::GuestFileWritten {
        file: file.display().to_string(),
        domain: domain.as_str(),
        recipes,
        to_fill,
    })
}

pub fn run(global: &GlobalArgs, args: NewGuestArgs) -> Result<ExitStatus, Failure> {
    let domain = match &args.hostname {
        Some(name) => name.clone(),
        None => uuid_domain(uuid::Uuid::new_v4()),
    };
    let shape = GuestShape::parse(args.memory.as_deref(), args.cpus, args.size.as_deref())?;
    let names: Vec<&str> = args.names.iter().map(String::as_str).collect();
    refuse_duplicates(&names)?;

    let paths = global.installation_paths();
    let file = paths.domain_file(&domain);
    if file.exists() {
        return Err(NewGuestError::Exists { path: file }.into());
    }

    let cookbook = load_cookbook(&recipes_dir()?)?;
    let recipes_yaml = load_recipes_yaml(&paths)?;
    let made = scaffold(&cookbook, &names, &base_as_json(&recipes_yaml))?;
    let text = guest_file_text(&domain, &shape, &made);

    // What is written must load: the same parse and merge new_config does, before anything is
    // on disk. CHANGEME is expected here; new_config is what refuses it.
    let domain_file = parse_domain_file(&file, &domain, &text)?;
    resolve_guest(&recipes_yaml, &domain_file, &recipe_settings(&cookbook))?;

    write_new(&file, text.as_bytes())?;

    let recipe_names: Vec<&str> = made.recipes.keys().map(RecipeName::as_str).collect();
    let output = if global.json {
        summary_json(&file, &domain, &recipe_names, &made.to_fill) + "\n"
    } else {
        summary_text(&file, &domain, &recipe_names, &made.to_fill)
    };
    crate::out!("{output}");
    Ok(ExitStatus::Success)
}

/// Creates `path` (and recipes.d if absent), refusing to replace a file that appeared meanwhile.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), NewGuestError> {
    use std::io::Write;
    let fail = |source| NewGuestError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => NewGuestError::Exists {
                path: path.to_path_buf(),
            },
            _ => fail(source),
        })?;
    created.write_all(bytes).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::recipes_file::parse_recipes_yaml;
    use indexmap::IndexMap;
    use serde_json::json;

    fn domain() -> DomainName {
        DomainName::parse("scratch.example.test").unwrap()
    }

    #[test]
    fn shape_reads_units_and_refuses_zero_and_nonsense() {
        let shape = GuestShape::parse(Some("2G"), Some(2), Some("1536M")).unwrap();
        assert_eq!(shape.memory, Some(MiB(2048)));
        assert_eq!(shape.global()["size"], "1536M");
        assert_eq!(
            GuestShape::parse(None, None, None).unwrap(),
            GuestShape::default()
        );
        assert_eq!(
            GuestShape::parse(None, None, Some("20")).unwrap().global()["size"],
            "20G"
        );
        assert!(matches!(
            GuestShape::parse(Some("lots"), None, None),
            Err(NewGuestError::Memory { .. })
        ));
        assert!(matches!(
            GuestShape::parse(Some("1500K"), None, None),
            Err(NewGuestError::Memory { .. })
        ));
        assert!(matches!(
            GuestShape::parse(None, None, Some("big")),
            Err(NewGuestError::Size { .. })
        ));
        for (memory, cpus, size, option) in [
            (Some("0"), None, None, "memory"),
            (Some("64M"), None, None, "memory"),
            (None, Some(0), None, "cpus"),
            (None, Some(100_000), None, "cpus"),
            (None, None, Some("0G"), "size"),
            (None, None, Some("100M"), "size"),
        ] {
            let error = GuestShape::parse(memory, cpus, size).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("--{option} cannot be used: ")),
                "{error}"
            );
            assert_eq!(error.exit_status(), ExitStatus::Usage);
        }
    }

    #[test]
    fn uuid_domains_are_under_test() {
        let uuid = uuid::Uuid::parse_str("f1698301-2db6-41ec-90fd-effec2f148d4").unwrap();
        assert_eq!(
            uuid_domain(uuid).as_str(),
            "f1698301-2db6-41ec-90fd-effec2f148d4.test"
        );
    }

    #[test]
    fn duplicates_are_refused() {
        assert!(refuse_duplicates(&["nginx", "mariadb"]).is_ok());
        assert_eq!(
            refuse_duplicates(&["nginx", "mariadb", "nginx"])
                .unwrap_err()
                .to_string(),
            "recipe `nginx` is named more than once"
        );
    }

    fn made() -> Scaffold {
        let mut recipes = IndexMap::new();
        recipes.insert(RecipeName::parse("nginx").unwrap(), json!({}));
        recipes.insert(
            RecipeName::parse("mariadb").unwrap(),
            json!({"root_pw": "CHANGEME", "version": "10.11"}),
        );
        Scaffold {
            recipes,
            to_fill: vec!["mariadb.root_pw".into()],
        }
    }

    #[test]
    fn the_file_holds_the_domain_the_given_sizes_and_the_recipes() {
        let shape = GuestShape::parse(Some("2048"), None, Some("20G")).unwrap();
        let text = guest_file_text(&domain(), &shape, &made());
        let base = parse_recipes_yaml(
            Path::new("recipes.yaml"),
            "_base:\n  _global: {admin_user: a, contact_email: ops@example.test, distro: debian}\n",
        )
        .unwrap();
        let file = parse_domain_file(Path::new("scratch.example.test.yaml"), &domain(), &text)
            .unwrap_or_else(|error| panic!("{error}\n{text}"));
        let guest = resolve_guest(&base, &file, &[]).unwrap();
        assert_eq!(guest.settings.memory, MiB(2048));
        assert_eq!(guest.settings.cpus, 1, "the schema's default");
        assert_eq!(guest.recipes[1]["version"], "10.11", "{text}");
        assert_eq!(
            guest
                .recipes
                .keys()
                .map(RecipeName::as_str)
                .collect::<Vec<_>>(),
            ["nginx", "mariadb"]
        );
        assert!(!text.contains("cpus"), "{text}");
    }

    #[test]
    fn no_global_without_sizes() {
        let text = guest_file_text(&domain(), &GuestShape::default(), &made());
        assert!(!text.contains("_global"), "{text}");
    }

    #[test]
    fn summary_lists_what_to_fill_only_when_there_is_some() {
        let file = Path::new("/etc/trog-provisioner/recipes.d/scratch.example.test.yaml");
        assert_eq!(
            summary_text(
                file,
                &domain(),
                &["nginx", "mariadb"],
                &["mariadb.root_pw".into()]
            ),
            "Wrote /etc/trog-provisioner/recipes.d/scratch.example.test.yaml\n\
             scratch.example.test: 2 recipes (nginx, mariadb)\n\n\
             Fill these in before provisioning:\n  mariadb.root_pw\n"
        );
        assert_eq!(
            summary_text(file, &domain(), &["nginx"], &[]),
            "Wrote /etc/trog-provisioner/recipes.d/scratch.example.test.yaml\n\
             scratch.example.test: 1 recipe (nginx)\n"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&summary_json(file, &domain(), &["nginx"], &[])).unwrap()
                ["to_fill"],
            json!([])
        );
    }
}
