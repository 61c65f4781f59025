//! A recipe's manifest, `recipes/<name>/recipe.yaml`, as a typed value.
//!
//! Parsing is strict: booleans are only `true`/`false`, a key given twice is an error, and a
//! field this file does not declare is an error (a misspelt `packges:` would otherwise silently
//! install nothing). Parsing is pure: the text comes in, a manifest or an error naming the file,
//! line and column goes out. [`crate::cookbook::load`] reads the files.
//!
//! ```yaml
//! description: One line saying what it is for
//! kind: guest                   # guest | distro | machine
//! args: {type: object, ...}     # an OpenAPI-3 schema object
//! packages: {debian: [mariadb-server], ubuntu: [mariadb-server]}
//! conflicts: {debian: [mysql-server]}
//! requires: {ufw: {allow: ["3306/tcp"]}}
//! serves: [{port_arg: port}]  # or {port: 3306, protocol: tcp}: a guest with ufw allows it
//! files:
//!   - {template: my.cnf.j2, path: /etc/mysql/conf.d/trog.cnf, mode: "0644", owner: root}
//! makefile: fragment.mk
//! backup: [/var/lib/mysql-dumps]
//! tests:
//!   - {name: mariadb answers, run: mysqladmin ping}
//! ```
//!
//! A distro recipe (`kind: distro`) also carries a `distro:` section, [`DistroSection`]:
//!
//! ```yaml
//! distro:
//!   packager: apt               # how packages are installed; only apt so far
//!   default_release: bookworm   # the release a guest gets when its _global names none
//!   releases:
//!     bookworm:
//!       image: {url: https://…/debian-12-genericcloud-amd64.qcow2, sha512: <128 hex>}  # or sha256
//!       packages: []            # extra packages only this release needs
//!   first_boot:                 # what cloud-init does before trog connects to finish the guest
//!     packages: [make, at]      # installed by cloud-init, so the finishing Makefile can run
//!     commands: []              # shell lines run once, as root, after cloud-init, in order
//!     apt_sources: |            # the sources.list written when the installation has a mirror
//!       deb $PRIMARY $RELEASE main
//! ```

use crate::config::merge::Origins;
use crate::config::yaml::{parse_located, LocatedNode, Node, Origin};
use crate::model::digest::{DigestAlgorithm, ImageDigest};
use crate::model::names::RecipeName;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a recipe is: something a guest runs, what the guest is, or what it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeKind {
    /// Named under a domain in `recipes.d/<fqdn>.yaml`.
    Guest,
    /// What a guest is built from (`debian`, `ubuntu`); chosen by `_global.distro`.
    Distro,
    /// What a guest runs on (`vm`): the libvirt XML and the disk knobs, set in `_global`.
    Machine,
}

impl RecipeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecipeKind::Guest => "guest",
            RecipeKind::Distro => "distro",
            RecipeKind::Machine => "machine",
        }
    }
}

/// One file a recipe renders onto the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The template's file name, inside the recipe's folder.
    pub template: String,
    /// Where the file goes on the guest; itself a template (`/etc/nginx/sites-available/{{ domain }}`).
    pub path: String,
    /// Octal permission bits, as a string so YAML cannot read `0644` as a decimal number.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// The owning user; a template, so `{{ global.admin_user }}` works.
    #[serde(default = "default_owner")]
    pub owner: String,
    /// The owning group; a template. The owner's name when left out.
    #[serde(default)]
    pub group: Option<String>,
}

fn default_mode() -> String {
    "0644".to_string()
}

fn default_owner() -> String {
    "root".to_string()
}

/// A check run on the guest after the Makefile's default target, by `make test`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeTest {
    pub name: String,
    /// One shell command line (a template); succeeding means the test passed.
    pub run: String,
}

/// A port the recipe's service answers other machines on (`serves`): a guest whose recipes
/// include the firewall (`ufw`) allows it, so that a service and a firewall on one guest do not
/// silently serve nobody. The port is written as a number, or as the name of the integer argument
/// that holds it (`port_arg`), so that a port a guest chooses is the one allowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServedPort {
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub port_arg: Option<String>,
    #[serde(default)]
    pub protocol: Protocol,
}

/// The transport protocol of a served port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

impl ServedPort {
    /// The port, given the recipe's effective arguments; `None` when `port_arg` does not hold a
    /// port there (the manifest's check makes the argument an integer from 1 to 65535).
    pub fn resolve(&self, args: &serde_json::Value) -> Option<u16> {
        match (&self.port, &self.port_arg) {
            (Some(port), _) => Some(*port),
            (None, Some(arg)) => args
                .get(arg)
                .and_then(serde_json::Value::as_u64)
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0),
            (None, None) => None,
        }
    }
}

/// How a distro installs packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Packager {
    Apt,
}

/// A base image, pinned by digest so one configuration always boots the same bytes: `sha256` or
/// `sha512`, whichever the distribution publishes (exactly one of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImage {
    pub url: String,
    /// Lower-case hex SHA-256 of the file at `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Lower-case hex SHA-512 of the file at `url` (what Debian publishes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512: Option<String>,
}

impl BaseImage {
    /// The pinned digest; `None` when not exactly one is given (the loader refuses that).
    pub fn digest(&self) -> Option<ImageDigest> {
        match (&self.sha256, &self.sha512) {
            (Some(hex), None) => ImageDigest::parse(DigestAlgorithm::Sha256, hex).ok(),
            (None, Some(hex)) => ImageDigest::parse(DigestAlgorithm::Sha512, hex).ok(),
            _ => None,
        }
    }
}

/// One release of a distro.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistroRelease {
    pub image: BaseImage,
    /// Packages only this release needs, on top of the recipes' packages for the distro.
    #[serde(default)]
    pub packages: Vec<String>,
}

/// What cloud-init does on the first boot, before trog connects to run the Makefile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstBoot {
    /// Installed by cloud-init: what the finishing step itself needs (`make`, `at`, …).
    #[serde(default)]
    pub packages: Vec<String>,
    /// Shell lines run once on the first boot, as root, in order, once cloud-init is over and
    /// before the Makefile (`guest::cloud_init`), each whatever the one before it returned.
    #[serde(default)]
    pub commands: Vec<String>,
    /// The `sources.list` cloud-init writes when the installation has a mirror, in cloud-init's
    /// template words (`$PRIMARY`, `$SECURITY`, `$RELEASE`): the suites the Makefile's own
    /// sources name, so the first boot fetches no index the guest will not keep. Left out,
    /// cloud-init's template for the distro is used (Debian's adds source packages and backports).
    #[serde(default)]
    pub apt_sources: Option<String>,
}

/// The part of a manifest only distro recipes have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistroSection {
    pub packager: Packager,
    /// The release a guest gets when its `_global` names none; a key of `releases`.
    pub default_release: String,
    pub releases: IndexMap<String, DistroRelease>,
    #[serde(default)]
    pub first_boot: FirstBoot,
}

impl DistroSection {
    /// The named release, or the default one.
    pub fn release(&self, name: Option<&str>) -> Option<(&str, &DistroRelease)> {
        let wanted = name.unwrap_or(&self.default_release);
        self.releases
            .get_key_value(wanted)
            .map(|(key, release)| (key.as_str(), release))
    }
}

/// `recipes/<name>/recipe.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeManifest {
    pub description: String,
    pub kind: RecipeKind,
    /// The OpenAPI-3 schema of the recipe's arguments (an object schema).
    #[serde(default = "empty_object_schema")]
    pub args: serde_json::Value,
    /// Packages to install, per distro name.
    #[serde(default)]
    pub packages: IndexMap<String, Vec<String>>,
    /// Packages that must not be installed alongside this recipe, per distro name.
    #[serde(default)]
    pub conflicts: IndexMap<String, Vec<String>>,
    /// Recipes this one needs, each with the arguments handed to it.
    #[serde(default)]
    pub requires: IndexMap<RecipeName, serde_json::Value>,
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// The Makefile fragment's file name, inside the recipe's folder.
    #[serde(default)]
    pub makefile: Option<String>,
    /// Paths on the guest to back up before it is rebuilt and restore after.
    #[serde(default)]
    pub backup: Vec<String>,
    #[serde(default)]
    pub tests: Vec<RecipeTest>,
    /// The ports its service answers other machines on; the firewall allows them.
    #[serde(default)]
    pub serves: Vec<ServedPort>,
    #[serde(default)]
    pub distro: Option<DistroSection>,
}

fn empty_object_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

impl RecipeManifest {
    /// This recipe's packages for `distro` (none when it names no list for it).
    pub fn packages_for(&self, distro: &str) -> &[String] {
        self.packages.get(distro).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn conflicts_for(&self, distro: &str) -> &[String] {
        self.conflicts.get(distro).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every file inside the recipe's folder the manifest names: templates and the fragment.
    pub fn named_files(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .files
            .iter()
            .map(|file| file.template.as_str())
            .collect();
        names.extend(self.makefile.as_deref());
        names
    }
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{file}:{line}:{column}: {message}", file = file.display())]
    Syntax {
        file: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
    #[error("{}: {field}: {why}", written_at.as_ref().map(ToString::to_string).unwrap_or_else(|| file.display().to_string()))]
    Invalid {
        file: PathBuf,
        /// Where the field (or the nearest written part of it) is in the file.
        written_at: Option<Origin>,
        field: String,
        why: String,
    },
}

impl crate::diagnose::Diagnose for ManifestError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ManifestError::Syntax { message, .. } if message.contains("unknown field") => {
                "a manifest takes description, kind, args, packages, conflicts, requires, files, \
                 makefile, backup, tests, serves and (distro recipes only) distro; check the spelling"
                    .to_string()
            }
            ManifestError::Syntax { message, .. } if message.contains("second time") => {
                "each key may appear once in a mapping; merge the two entries".to_string()
            }
            ManifestError::Syntax { .. } => {
                "fix the manifest at that line; booleans are written true or false, modes are quoted (\"0644\")"
                    .to_string()
            }
            ManifestError::Invalid { .. } => {
                "see the format in src/cookbook/manifest.rs or an existing recipe under recipes/".to_string()
            }
        })
    }
}

/// Parses and checks the text of `recipe.yaml`; `file` is only used to name it in errors.
pub fn parse_manifest(file: &Path, text: &str) -> Result<RecipeManifest, ManifestError> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    let mut manifest: RecipeManifest = serde_saphyr::from_str_with_options(text, options)
        .map_err(|error| syntax_error(file, &error))?;
    for value in manifest.requires.values_mut() {
        if value.is_null() {
            *value = serde_json::json!({});
        }
    }
    check_manifest(file, &manifest).map_err(|error| match error {
        ManifestError::Invalid {
            file,
            field,
            why,
            written_at: None,
        } => ManifestError::Invalid {
            written_at: manifest_origins(&file, text)
                .locate(&field_pointer(&field))
                .cloned(),
            file,
            field,
            why,
        },
        other => other,
    })?;
    Ok(manifest)
}

/// Where every key of a manifest was written, by JSON pointer (`/requires/nginx`), for errors
/// found after parsing; empty when the text is not a YAML mapping.
pub fn manifest_origins(file: &Path, text: &str) -> Origins {
    match parse_located(file, text) {
        Ok(LocatedNode {
            value: Node::Mapping(entries),
            ..
        }) => Origins::record(&entries),
        _ => Origins::default(),
    }
}

/// A field as the checks name it (`files[0].mode`, `distro.default_release`) as a JSON pointer.
fn field_pointer(field: &str) -> String {
    let path = field.replace('[', ".").replace(']', "");
    path.split('.')
        .filter(|part| !part.is_empty())
        .map(|part| format!("/{}", part.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn syntax_error(file: &Path, error: &serde_saphyr::Error) -> ManifestError {
    let (line, column) = error
        .location()
        .map(|location| (location.line(), location.column()))
        .unwrap_or((0, 0));
    let message = crate::config::yaml::bare_message(error);
    ManifestError::Syntax {
        file: file.to_path_buf(),
        line,
        column,
        message,
    }
}

fn invalid(file: &Path, field: impl Into<String>, why: impl Into<String>) -> ManifestError {
    ManifestError::Invalid {
        file: file.to_path_buf(),
        written_at: None,
        field: field.into(),
        why: why.into(),
    }
}

/// The rules serde cannot say: shapes of strings, and which sections go with which kind.
fn check_manifest(file: &Path, manifest: &RecipeManifest) -> Result<(), ManifestError> {
    if manifest.description.trim().is_empty() {
        return Err(invalid(
            file,
            "description",
            "is empty; say in one line what the recipe is for",
        ));
    }
    if manifest.args.get("type").and_then(|kind| kind.as_str()) != Some("object") {
        return Err(invalid(
            file,
            "args",
            "must be an object schema (`type: object`)",
        ));
    }
    for (index, spec) in manifest.files.iter().enumerate() {
        if !is_octal_mode(&spec.mode) {
            return Err(invalid(
                file,
                format!("files[{index}].mode"),
                format!("`{}` is not an octal mode such as \"0644\"", spec.mode),
            ));
        }
        if spec.template.contains('/') || spec.template.starts_with('.') {
            return Err(invalid(
                file,
                format!("files[{index}].template"),
                "must be a file name inside the recipe's folder",
            ));
        }
    }
    for (index, test) in manifest.tests.iter().enumerate() {
        if test.run.contains('\n') {
            return Err(invalid(
                file,
                format!("tests[{index}].run"),
                "must be one command line; put a longer check in a script among the recipe's files",
            ));
        }
        if test.name.contains('\n') || test.name.trim().is_empty() {
            return Err(invalid(
                file,
                format!("tests[{index}].name"),
                "must be one non-empty line",
            ));
        }
    }
    for (index, served) in manifest.serves.iter().enumerate() {
        check_served_port(file, &manifest.args, index, served)?;
    }
    match (manifest.kind, &manifest.distro) {
        (RecipeKind::Distro, None) => {
            return Err(invalid(
                file,
                "distro",
                "a distro recipe needs a distro section",
            ))
        }
        (RecipeKind::Distro, Some(distro)) => check_distro(file, distro)?,
        (_, Some(_)) => {
            return Err(invalid(
                file,
                "distro",
                "only a recipe of kind distro has a distro section",
            ))
        }
        (_, None) => {}
    }
    Ok(())
}

/// A served port is a number from 1 to 65535, or an argument that can only hold one.
fn check_served_port(
    file: &Path,
    args: &serde_json::Value,
    index: usize,
    served: &ServedPort,
) -> Result<(), ManifestError> {
    match (served.port, &served.port_arg) {
        (Some(0), None) => Err(invalid(
            file,
            format!("serves[{index}].port"),
            "is 0; a port is from 1 to 65535",
        )),
        (Some(_), None) => Ok(()),
        (None, Some(arg)) => {
            let property = &args["properties"][arg.as_str()];
            let bound = |key: &str| property.get(key).and_then(serde_json::Value::as_i64);
            let holds_a_port = property.get("type").and_then(serde_json::Value::as_str)
                == Some("integer")
                && bound("minimum").is_some_and(|minimum| minimum >= 1)
                && bound("maximum").is_some_and(|maximum| maximum <= 65535);
            if holds_a_port {
                Ok(())
            } else {
                Err(invalid(
                    file,
                    format!("serves[{index}].port_arg"),
                    format!(
                        "`{arg}` is not an argument of type integer with minimum 1 (or more) and maximum 65535 (or less) in args"
                    ),
                ))
            }
        }
        _ => Err(invalid(
            file,
            format!("serves[{index}]"),
            "needs exactly one of port (a number) and port_arg (the argument that holds it)",
        )),
    }
}

fn check_distro(file: &Path, distro: &DistroSection) -> Result<(), ManifestError> {
    if !distro.releases.contains_key(&distro.default_release) {
        return Err(invalid(
            file,
            "distro.default_release",
            format!("`{}` is not among distro.releases", distro.default_release),
        ));
    }
    for (name, release) in &distro.releases {
        if !release.image.url.starts_with("https://") {
            return Err(invalid(
                file,
                format!("distro.releases.{name}.image.url"),
                "must be an https:// URL",
            ));
        }
        if release.image.digest().is_none() {
            return Err(invalid(
                file,
                format!("distro.releases.{name}.image"),
                "needs exactly one of sha256 (64 hex digits) or sha512 (128 hex digits)",
            ));
        }
    }
    Ok(())
}

fn is_octal_mode(mode: &str) -> bool {
    (3..=4).contains(&mode.len()) && mode.chars().all(|c| ('0'..='7').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Diagnose;

    fn parse(text: &str) -> Result<RecipeManifest, ManifestError> {
        parse_manifest(Path::new("recipes/x/recipe.yaml"), text)
    }

    const MINIMAL: &str = "description: Something\nkind: guest\n";

    #[test]
    fn a_field_refused_after_parsing_is_pointed_at_where_it_is_written() {
        let text = "description: Something\nkind: guest\nfiles:\n  - template: a.j2\n    path: /etc/a\n    mode: \"999\"\n";
        let message = parse(text).unwrap_err().to_string();
        assert!(
            message.starts_with("recipes/x/recipe.yaml:6:5: files[0].mode: "),
            "{message}"
        );
        let message = parse("description: \"  \"\nkind: guest\n")
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("recipes/x/recipe.yaml:1:1: description: "),
            "{message}"
        );
    }

    #[test]
    fn minimal_manifest_gets_defaults() {
        let manifest = parse(MINIMAL).unwrap();
        assert_eq!(manifest.kind, RecipeKind::Guest);
        assert_eq!(manifest.args["type"], "object");
        assert!(
            manifest.packages.is_empty()
                && manifest.files.is_empty()
                && manifest.makefile.is_none()
        );
    }

    #[test]
    fn full_manifest_parses() {
        let text = r#"
description: Database
kind: guest
args:
  type: object
  required: [root_pw]
  properties:
    root_pw: {type: string}
packages: {debian: [mariadb-server]}
conflicts: {debian: [mysql-server]}
requires:
  ufw: {allow: ["3306/tcp"]}
  cron:
files:
  - {template: my.cnf.j2, path: /etc/mysql/conf.d/trog.cnf, mode: "0640", owner: root, group: mysql}
makefile: fragment.mk
backup: [/var/lib/mysql-dumps]
tests:
  - {name: answers, run: mysqladmin ping}
"#;
        let manifest = parse(text).unwrap();
        assert_eq!(manifest.packages_for("debian"), ["mariadb-server"]);
        assert_eq!(manifest.packages_for("ubuntu"), [] as [String; 0]);
        assert_eq!(
            manifest.requires[&RecipeName::parse("cron").unwrap()],
            serde_json::json!({})
        );
        assert_eq!(manifest.files[0].group.as_deref(), Some("mysql"));
        assert_eq!(manifest.named_files(), ["my.cnf.j2", "fragment.mk"]);
    }

    #[test]
    fn a_served_port_is_a_number_or_an_argument_that_holds_one() {
        let with = |args: &str, serves: &str| {
            parse(&format!(
                "description: x\nkind: guest\nargs: {{type: object, properties: {args}}}\nserves: {serves}\n"
            ))
        };
        let port = "{port: {type: integer, minimum: 1, maximum: 65535, default: 3142}}";
        let manifest = with(port, "[{port_arg: port}, {port: 514, protocol: udp}]").unwrap();
        assert_eq!(
            manifest.serves[0].resolve(&serde_json::json!({"port": 8080})),
            Some(8080)
        );
        assert_eq!(manifest.serves[0].protocol, Protocol::Tcp);
        assert_eq!(
            manifest.serves[1].resolve(&serde_json::json!({})),
            Some(514)
        );
        assert_eq!(manifest.serves[1].protocol.as_str(), "udp");

        for (args, serves, field, says) in [
            (port, "[{port: 0}]", "serves[0].port", "is 0"),
            (port, "[{}]", "serves[0]", "exactly one of port"),
            (
                port,
                "[{port: 1, port_arg: port}]",
                "serves[0]",
                "exactly one of port",
            ),
            (
                port,
                "[{port_arg: nope}]",
                "serves[0].port_arg",
                "`nope` is not an argument",
            ),
            (
                "{port: {type: string}}",
                "[{port_arg: port}]",
                "serves[0].port_arg",
                "of type integer",
            ),
            (
                "{port: {type: integer, minimum: 0, maximum: 65535}}",
                "[{port_arg: port}]",
                "serves[0].port_arg",
                "minimum 1",
            ),
            (
                "{port: {type: integer, minimum: 1}}",
                "[{port_arg: port}]",
                "serves[0].port_arg",
                "maximum 65535",
            ),
        ] {
            let error = with(args, serves).unwrap_err();
            let ManifestError::Invalid {
                field: found, why, ..
            } = &error
            else {
                panic!("{serves}: {error}")
            };
            assert_eq!(found, field, "{serves}: {error}");
            assert!(why.contains(says), "{serves}: {error}");
        }
        let error = with(port, "[{port: 70000}]").unwrap_err();
        assert!(matches!(error, ManifestError::Syntax { .. }), "{error}");
        let error = with(port, "[{port: 1, protocol: sctp}]").unwrap_err();
        assert!(matches!(error, ManifestError::Syntax { .. }), "{error}");
    }

    #[test]
    fn unknown_field_names_line_and_column() {
        let error = parse("description: x\nkind: guest\npackges: {}\n").unwrap_err();
        let ManifestError::Syntax {
            line,
            column,
            message,
            ..
        } = &error
        else {
            panic!("{error}")
        };
        assert_eq!((*line, *column), (3, 1), "{message}");
        assert!(message.contains("packges"), "{message}");
        assert!(
            error.to_string().starts_with("recipes/x/recipe.yaml:3:1: "),
            "{error}"
        );
        assert!(crate::diagnose::Diagnose::hint(&error)
            .unwrap()
            .contains("spelling"));
    }

    #[test]
    fn duplicate_key_is_refused() {
        let error = parse("description: x\nkind: guest\ndescription: y\n").unwrap_err();
        let ManifestError::Syntax { line, message, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(*line, 3, "{message}");
        assert!(
            message.contains("`description` appears a second time"),
            "{message}"
        );
        assert!(error.hint().unwrap().contains("once"), "{error}");
    }

    #[test]
    fn booleans_are_strict() {
        // `yes` is a string under strict booleans, so it cannot be `kind`'s enum or a bool.
        assert!(parse("description: x\nkind: yes\n").is_err());
    }

    #[test]
    fn malformed_yaml_is_a_syntax_error() {
        let error = parse("description: [unclosed\nkind: guest\n").unwrap_err();
        assert!(matches!(error, ManifestError::Syntax { .. }), "{error}");
    }

    #[test]
    fn wrong_kind_and_missing_fields_are_refused() {
        assert!(parse("description: x\nkind: service\n").is_err());
        assert!(parse("kind: guest\n").is_err());
    }

    #[test]
    fn modes_must_be_octal_strings() {
        let text = format!("{MINIMAL}files: [{{template: a.j2, path: /a, mode: \"0999\"}}]\n");
        let error = parse(&text).unwrap_err();
        assert!(error.to_string().contains("files[0].mode"), "{error}");
    }

    #[test]
    fn templates_stay_inside_the_recipe_folder() {
        let text = format!("{MINIMAL}files: [{{template: ../other/a.j2, path: /a}}]\n");
        assert!(parse(&text).is_err());
    }

    #[test]
    fn tests_are_one_line() {
        let text = format!("{MINIMAL}tests: [{{name: a, run: \"true\\nfalse\"}}]\n");
        assert!(parse(&text)
            .unwrap_err()
            .to_string()
            .contains("tests[0].run"));
    }

    #[test]
    fn args_must_be_an_object_schema() {
        let text = format!("{MINIMAL}args: {{type: string}}\n");
        assert!(parse(&text).unwrap_err().to_string().contains("args"));
    }

    const DISTRO: &str = r#"
description: Debian
kind: distro
distro:
  packager: apt
  default_release: bookworm
  releases:
    bookworm:
      image:
        url: https://cloud.debian.org/images/cloud/bookworm/x/debian-12-genericcloud-amd64.qcow2
        sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  first_boot: {packages: [make]}
"#;

    #[test]
    fn distro_section_parses_and_picks_releases() {
        let manifest = parse(DISTRO).unwrap();
        let distro = manifest.distro.unwrap();
        assert_eq!(distro.release(None).unwrap().0, "bookworm");
        assert!(distro.release(Some("trixie")).is_none());
        assert_eq!(distro.first_boot.packages, ["make"]);
    }

    #[test]
    fn distro_rules() {
        assert!(parse("description: x\nkind: distro\n").is_err());
        let bad_digest = DISTRO.replace("0123456789abcdef0123", "0123");
        assert!(parse(&bad_digest)
            .unwrap_err()
            .to_string()
            .contains("sha256"));
        let bad_default = DISTRO.replace("default_release: bookworm", "default_release: trixie");
        assert!(parse(&bad_default)
            .unwrap_err()
            .to_string()
            .contains("default_release"));
        let http = DISTRO.replace("https://", "http://");
        assert!(parse(&http).is_err());
        let guest_with_distro = DISTRO.replace("kind: distro", "kind: guest");
        assert!(parse(&guest_with_distro).is_err());
    }
}
