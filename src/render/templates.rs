//! The one template environment every rendering uses, and the context recipe templates see.
//!
//! Undefined values are errors (a misspelt `{{ args.rootpw }}` must not render as an empty
//! password), and a template's final newline is kept (config files and Makefiles end in one).
//!
//! What a value is quoted for follows from what the template is ([`Quoting`]): in a Makefile
//! fragment every `{{ … }}` is quoted for make's command line, in a test's command and a `.sh.j2`
//! file for the shell, so a value can never become code there; a list prints as one quoted word
//! per item. Other files (configuration in its own syntax) are not escaped; they may quote a
//! value themselves with the `shell_quote` and `make_quote` filters. `| safe` prints a value as
//! it is, for a template that means to insert shell code.

use crate::cookbook::resolve::ResolvedRecipes;
use crate::credentials::Secret;
use crate::model::names::{DomainName, RecipeName};
pub use crate::render::quote::Quoting;
use crate::render::quote::{install_quoting, Unquotable};
use indexmap::IndexMap;
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The template environment: strict about undefined values, keeps trailing newlines, quotes
/// values by the template's [`Quoting`].
pub fn template_environment() -> Environment<'static> {
    let mut environment = Environment::new();
    environment.set_undefined_behavior(UndefinedBehavior::Strict);
    install_quoting(&mut environment);
    let syntax = SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .build()
        .expect("the default delimiters are valid");
    environment.set_syntax(syntax);
    environment
}

/// The guest facts the recipes do not hold: its name and its merged `_global` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestFacts {
    pub domain: DomainName,
    /// `_base`'s `_global` with the domain's on top.
    pub global: Value,
}

/// What a recipe's templates, fragment and test commands see, but for the secrets: an argument
/// that is a `secret:` reference holds its reference text here, and its value is put in its place
/// only in the transient value handed to the template engine ([`render_template`]). Debug leaves
/// the arguments out all the same.
#[derive(Clone, Serialize)]
pub struct TemplateContext {
    /// The fully qualified domain name.
    pub domain: String,
    /// Its first label.
    pub hostname: String,
    /// The merged `_global` settings.
    pub global: Value,
    /// This recipe's effective arguments (schema defaults applied).
    pub args: Value,
    /// Every recipe's effective arguments, by name.
    pub recipes: IndexMap<String, Value>,
    pub distro: String,
    pub release: String,
    /// The packages the guest gets (the distro recipe's fragment installs them).
    pub packages: Vec<String>,
    /// The ports the guest's recipes serve other machines on (their manifests' `serves`), as
    /// `PORT/PROTOCOL`, each once: what the firewall recipe allows.
    pub served: Vec<String>,
    /// The name of the recipe being rendered.
    pub recipe: String,
}

impl std::fmt::Debug for TemplateContext {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TemplateContext")
            .field("domain", &self.domain)
            .field("recipe", &self.recipe)
            .field("args", &format_args!("<redacted>"))
            .field("recipes", &self.recipes.keys().collect::<Vec<_>>())
            .field("distro", &self.distro)
            .field("release", &self.release)
            .field("packages", &self.packages)
            .field("served", &self.served)
            .finish_non_exhaustive()
    }
}

/// The context for `recipe`, one of `resolved`'s recipes.
pub fn template_context(
    guest: &GuestFacts,
    resolved: &ResolvedRecipes,
    recipe: &RecipeName,
) -> TemplateContext {
    let recipes: IndexMap<String, Value> = resolved
        .recipes
        .iter()
        .map(|each| (each.name.to_string(), each.args.value.clone()))
        .collect();
    TemplateContext {
        domain: guest.domain.to_string(),
        hostname: guest.domain.host_label().to_string(),
        global: guest.global.clone(),
        args: recipes.get(recipe.as_str()).cloned().unwrap_or(Value::Null),
        recipes,
        distro: resolved.distro.to_string(),
        release: resolved.release.clone(),
        packages: resolved.packages.clone(),
        served: served_ports(resolved),
        recipe: recipe.to_string(),
    }
}

/// The ports every recipe of `resolved` serves, in recipe order, each once (`PORT/PROTOCOL`).
fn served_ports(resolved: &ResolvedRecipes) -> Vec<String> {
    let mut served: Vec<String> = Vec::new();
    for each in &resolved.recipes {
        for port in &each.recipe.manifest.serves {
            // The manifest's check makes a `port_arg` an integer argument from 1 to 65535, and
            // the arguments were checked against the schema: every port resolves.
            let Some(number) = port.resolve(&each.args.value) else {
                continue;
            };
            let rule = format!("{number}/{}", port.protocol.as_str());
            if !served.contains(&rule) {
                served.push(rule);
            }
        }
    }
    served
}

/// Why a recipe's templates could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RecipeRenderError {
    #[error("{}: {problem} (in {what} of recipe `{recipe}`)", place(file, *line))]
    Template {
        recipe: RecipeName,
        what: String,
        /// The file the template is written in: its own, or the recipe's manifest for the short
        /// templates a manifest holds (a file's path, a test's command).
        file: PathBuf,
        /// The line in `file`, when the template is the whole file and the engine said.
        line: Option<usize>,
        /// What the template engine found wrong, in its words.
        problem: String,
    },
    #[error("recipe `{recipe}` puts {template} at `{path}`, which {why}")]
    GuestPath {
        recipe: RecipeName,
        template: String,
        path: String,
        why: &'static str,
    },
    #[error("recipes `{first}` and `{second}` both write `{path}`")]
    SamePath {
        path: String,
        first: RecipeName,
        second: RecipeName,
    },
    #[error("recipe `{recipe}`: its Makefile fragment defines no target `{recipe}:`")]
    MissingTarget { recipe: RecipeName },
    #[error("recipe `{recipe}`: test `{test}` renders to more than one line")]
    MultilineTest { recipe: RecipeName, test: String },
    #[error("{}: a value cannot be written on a command line: {why} (in {what} of recipe `{recipe}`)", place(file, *line))]
    Unquotable {
        recipe: RecipeName,
        what: String,
        file: PathBuf,
        line: Option<usize>,
        why: Unquotable,
    },
    #[error("`_global.{key}` cannot be written into the guest's Makefile: {why}")]
    MakeVariable {
        key: &'static str,
        why: crate::render::quote::Unquotable,
    },
}

fn place(file: &Path, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{}:{line}", file.display()),
        None => file.display().to_string(),
    }
}

/// One template to render: whose, what it is, and where it is written.
pub struct Template<'a> {
    pub recipe: &'a RecipeName,
    /// What it renders, for messages (`site.conf.j2`, `test \`http\``).
    pub what: String,
    /// The file it is written in.
    pub file: PathBuf,
    /// Whether the template is that whole file, so the engine's line numbers are the file's.
    pub whole_file: bool,
    pub source: &'a str,
    /// What its values are quoted for.
    pub quoting: Quoting,
}

impl crate::diagnose::Diagnose for RecipeRenderError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            RecipeRenderError::Template { recipe, .. } => format!(
                "an undefined name usually means an argument the guest did not set and the schema gives no default for; `trog recipes {recipe}` shows them"
            ),
            RecipeRenderError::GuestPath { .. } => "make the path absolute, without `..` or empty parts".into(),
            RecipeRenderError::SamePath { .. } => "only one recipe may own a file on the guest; change one path".into(),
            RecipeRenderError::MissingTarget { recipe } => {
                format!("add a rule `{recipe}:` to the fragment; the generated `all` target depends on it")
            }
            RecipeRenderError::MultilineTest { .. } => "keep test commands on one line".into(),
            RecipeRenderError::Unquotable { recipe, .. } => format!(
                "an argument or `_global` setting this line prints holds it; remove it from the value (`trog recipes {recipe}` shows the recipe's arguments)"
            ),
            RecipeRenderError::MakeVariable { key, .. } => format!(
                "`_global.{key}` is a URL: percent-encode the character (`%5C` for a backslash)"
            ),
        })
    }
}

/// The values of the `secret:` references in the recipes' arguments, looked up in the secret
/// store: the one place a resolved secret is kept between generation and rendering. Each value
/// is a [`Secret`]; Debug names where each goes, never what it is, and nothing serialises it.
#[derive(Default)]
pub struct ResolvedSecrets {
    values: Vec<ResolvedSecret>,
}

struct ResolvedSecret {
    recipe: String,
    /// JSON pointer of the argument inside the recipe's args (`/root_password`).
    pointer: String,
    value: Secret,
}

impl ResolvedSecrets {
    /// No secrets: for recipes whose arguments reference none.
    pub fn none() -> ResolvedSecrets {
        ResolvedSecrets::default()
    }

    /// The value of the argument at `pointer` of `recipe`'s args.
    pub fn insert(&mut self, recipe: &RecipeName, pointer: &str, value: Secret) {
        self.values.push(ResolvedSecret {
            recipe: recipe.to_string(),
            pointer: pointer.to_string(),
            value,
        });
    }

    /// Where each value goes in the context of `recipe`'s templates: under `args` for its own,
    /// under `recipes.<name>` for every recipe's.
    fn in_context<'a>(&'a self, recipe: &'a str) -> impl Iterator<Item = (String, &'a Secret)> {
        self.values.iter().flat_map(move |secret| {
            let shared = (
                format!("/recipes/{}{}", secret.recipe, secret.pointer),
                &secret.value,
            );
            let own = (secret.recipe == recipe)
                .then(|| (format!("/args{}", secret.pointer), &secret.value));
            std::iter::once(shared).chain(own)
        })
    }
}

impl std::fmt::Debug for ResolvedSecrets {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_list()
            .entries(
                self.values
                    .iter()
                    .map(|secret| format!("{}{} = <redacted>", secret.recipe, secret.pointer)),
            )
            .finish()
    }
}

/// Renders one template, naming it `recipe/what` to the engine; an error says the file and line.
/// The engine gets the context with every secret in place of its reference; that value lives only
/// for this call.
pub fn render_template(
    environment: &Environment<'static>,
    template: &Template,
    context: &TemplateContext,
    secrets: &ResolvedSecrets,
) -> Result<String, RecipeRenderError> {
    let name = format!(
        "{}{}/{}",
        template.quoting.name_prefix(),
        template.recipe,
        template.what
    );
    let mut engine_context =
        serde_json::to_value(context).expect("a template context is plain JSON");
    for (pointer, secret) in secrets.in_context(template.recipe.as_str()) {
        if let Some(slot) = engine_context.pointer_mut(&pointer) {
            *slot = Value::String(secret.expose().to_string());
        }
    }
    environment
        .render_named_str(
            &name,
            template.source,
            minijinja::Value::from(minijinja::value::Serde(&engine_context)),
        )
        .map_err(|error| {
            let line = error.line().filter(|_| template.whole_file);
            let why = std::error::Error::source(&error)
                .and_then(|source| source.downcast_ref::<Unquotable>());
            if let Some(why) = why {
                return RecipeRenderError::Unquotable {
                    recipe: template.recipe.clone(),
                    what: template.what.clone(),
                    file: template.file.clone(),
                    line,
                    why: *why,
                };
            }
            RecipeRenderError::Template {
                recipe: template.recipe.clone(),
                what: template.what.clone(),
                file: template.file.clone(),
                line,
                // The engine's kind after its detail, never `kind: detail`: its own `… error:` inside
                // trog's would read as two errors.
                problem: match error.detail() {
                    Some(detail) => format!("{detail} ({})", error.kind()),
                    None => error.kind().to_string(),
                },
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The context of the `mariadb` recipe of `db.example.test`, with `args`.
    fn mariadb_context(args: Value) -> TemplateContext {
        TemplateContext {
            domain: "db.example.test".into(),
            hostname: "db".into(),
            global: Value::Null,
            args: args.clone(),
            recipes: [("mariadb".to_string(), args)].into_iter().collect(),
            distro: "debian".into(),
            release: "12".into(),
            packages: vec![],
            served: vec![],
            recipe: "mariadb".into(),
        }
    }

    #[test]
    fn the_ports_the_recipes_serve_are_in_every_recipes_context_once_each() {
        use crate::cookbook::resolve::{resolve_recipes, GuestRecipes};
        use crate::cookbook::test_support::cookbook;
        let port = "args: {type: object, properties: {port: {type: integer, minimum: 1, maximum: 65535, default: 3142}}}";
        let book = cookbook(&[
            ("mirror", &format!("description: m\nkind: guest\n{port}\nserves: [{{port_arg: port}}]\n")),
            ("cache", "description: c\nkind: guest\nserves: [{port: 3128}, {port: 514, protocol: udp}, {port: 3128}]\n"),
            ("firewall", "description: f\nkind: guest\n"),
        ]);
        let guest = |mirror_args: Value| GuestRecipes {
            on_own_vm: true,
            recipes: [
                (RecipeName::parse("firewall").unwrap(), Value::Null),
                (RecipeName::parse("mirror").unwrap(), mirror_args),
                (RecipeName::parse("cache").unwrap(), Value::Null),
            ]
            .into_iter()
            .collect(),
            distro: "debian".into(),
            release: None,
            distro_args: Value::Null,
            machine_args: Value::Null,
        };
        let facts = GuestFacts {
            domain: DomainName::parse("hub.example.test").unwrap(),
            global: Value::Null,
        };
        let firewall = RecipeName::parse("firewall").unwrap();
        // The mirror's port is its argument's default, or the one the guest gives.
        for (args, first) in [
            (Value::Null, "3142/tcp"),
            (serde_json::json!({"port": 8080}), "8080/tcp"),
        ] {
            let resolved = resolve_recipes(&book, &guest(args)).unwrap();
            let context = template_context(&facts, &resolved, &firewall);
            assert_eq!(context.served, [first, "3128/tcp", "514/udp"]);
        }
        // A guest without a serving recipe serves nothing.
        let resolved = resolve_recipes(
            &book,
            &GuestRecipes {
                recipes: [(firewall.clone(), Value::Null)].into_iter().collect(),
                ..guest(Value::Null)
            },
        )
        .unwrap();
        assert!(template_context(&facts, &resolved, &firewall)
            .served
            .is_empty());
    }

    #[test]
    fn a_secret_reaches_the_template_and_no_type_that_prints_or_serialises() {
        let recipe = RecipeName::parse("mariadb").unwrap();
        let args = serde_json::json!({"root_pw": "secret:Db/root/password", "port": 3306});
        let context = mariadb_context(args);
        let mut secrets = ResolvedSecrets::none();
        secrets.insert(&recipe, "/root_pw", Secret::new("planted-4711"));
        let template = Template {
            recipe: &recipe,
            what: "my.cnf.j2".into(),
            file: PathBuf::from("recipes/mariadb/my.cnf.j2"),
            whole_file: true,
            source: "{{ args.root_pw }} {{ recipes.mariadb.root_pw }} {{ args.port }}",
            quoting: Quoting::None,
        };
        let rendered =
            render_template(&template_environment(), &template, &context, &secrets).unwrap();
        assert_eq!(rendered, "planted-4711 planted-4711 3306");
        for shown in [
            format!("{secrets:?}"),
            format!("{context:?}"),
            serde_json::to_string(&context).unwrap(),
        ] {
            assert!(!shown.contains("planted-4711"), "{shown}");
        }
        assert!(format!("{secrets:?}").contains("mariadb/root_pw"));
    }

    #[test]
    fn debug_leaves_out_the_arguments_that_hold_secrets() {
        let args = serde_json::json!({"root_pw": "planted-4711"});
        let context = mariadb_context(args);
        let shown = format!("{context:?}");
        assert!(!shown.contains("planted-4711"), "{shown}");
        assert!(shown.contains("mariadb"), "{shown}");
    }

    /// Renders `source` as `quoting` with `args`, for the `mariadb` recipe.
    fn render_as(quoting: Quoting, source: &str, args: Value) -> Result<String, RecipeRenderError> {
        let recipe = RecipeName::parse("mariadb").unwrap();
        let template = Template {
            recipe: &recipe,
            what: "fragment.mk".into(),
            file: PathBuf::from("recipes/mariadb/fragment.mk"),
            whole_file: true,
            source,
            quoting,
        };
        render_template(
            &template_environment(),
            &template,
            &mariadb_context(args),
            &ResolvedSecrets::none(),
        )
    }

    #[test]
    fn values_are_quoted_for_the_templates_context() {
        let args =
            serde_json::json!({"dir": "/srv/it's $HOME", "list": ["a b", "c"], "port": 3306});
        let source =
            "x {{ args.dir }} {{ args.list }} {{ args.port }} {{ domain }}{{ ' ;' | safe }}";
        assert_eq!(
            render_as(Quoting::MakeRecipe, source, args.clone()).unwrap(),
            r"x '/srv/it'\''s $$HOME' 'a b' c 3306 db.example.test ;"
        );
        assert_eq!(
            render_as(Quoting::Shell, source, args.clone()).unwrap(),
            r"x '/srv/it'\''s $HOME' 'a b' c 3306 db.example.test ;"
        );
        assert_eq!(
            render_as(Quoting::None, source, args.clone()).unwrap(),
            r"x /srv/it's $HOME ['a b', 'c'] 3306 db.example.test ;"
        );
        assert_eq!(
            render_as(
                Quoting::None,
                "{{ args.dir | shell_quote }} {{ args.dir | make_quote }}",
                args
            )
            .unwrap(),
            r"'/srv/it'\''s $HOME' '/srv/it'\''s $$HOME'"
        );
    }

    #[test]
    fn a_line_break_on_a_makefile_line_is_refused_naming_the_line() {
        let args = serde_json::json!({"key": "ssh-ed25519 AAAA\nrm -rf /"});
        let error =
            render_as(Quoting::MakeRecipe, "t:\n\techo {{ args.key }}\n", args).unwrap_err();
        assert!(
            matches!(
                error,
                RecipeRenderError::Unquotable {
                    why: Unquotable::Newline,
                    line: Some(2),
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(!error.to_string().contains("rm -rf"), "{error}");
    }

    #[test]
    fn environment_is_strict_and_keeps_the_final_newline() {
        let environment = template_environment();
        assert_eq!(
            environment
                .render_str("a {{ x }}\n", minijinja::context! { x => "<b>" })
                .unwrap(),
            "a <b>\n"
        );
        assert!(environment
            .render_str("{{ missing }}", minijinja::context! {})
            .is_err());
        assert!(environment
            .render_str(
                "{{ x.missing }}",
                minijinja::context! { x => minijinja::context!{} }
            )
            .is_err());
    }
}
