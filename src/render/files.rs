//! Rendering every recipe's files: the template, and its path, owner and group on the guest
//! (each a template too), into bytes ready for the payload.
//!
//! Pure: the template sources were read by the loader. Secret references in the recipes' args
//! must have been replaced by the caller before rendering; what is passed in is what is written.

use crate::cookbook::resolve::ResolvedRecipes;
use crate::model::names::RecipeName;
use crate::render::templates::{
    render_template, template_context, GuestFacts, Quoting, RecipeRenderError, ResolvedSecrets,
    Template,
};
use minijinja::Environment;

/// Where rendered files sit inside the payload: `files/` followed by the guest path.
pub const PAYLOAD_FILES_DIR: &str = "files";

/// One file for the guest. Its contents may hold resolved secrets: Debug shows their size only.
#[derive(Clone, PartialEq, Eq)]
pub struct RenderedFile {
    pub recipe: RecipeName,
    /// Absolute path on the guest.
    pub guest_path: String,
    /// Octal permission bits, as written in the manifest (`0644`).
    pub mode: String,
    pub owner: String,
    pub group: String,
    pub contents: Vec<u8>,
}

impl std::fmt::Debug for RenderedFile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RenderedFile")
            .field("recipe", &self.recipe)
            .field("guest_path", &self.guest_path)
            .field("mode", &self.mode)
            .field("owner", &self.owner)
            .field("group", &self.group)
            .field("contents", &format_args!("<{} bytes>", self.contents.len()))
            .finish()
    }
}

impl RenderedFile {
    /// Its path inside the payload, relative to the payload's root (`files/etc/…`).
    pub fn payload_path(&self) -> String {
        format!("{PAYLOAD_FILES_DIR}{}", self.guest_path)
    }
}

/// Renders the files of every recipe, in recipe order then manifest order, for recipes whose
/// arguments reference no secret.
pub fn render_files(
    environment: &Environment<'static>,
    guest: &GuestFacts,
    resolved: &ResolvedRecipes,
) -> Result<Vec<RenderedFile>, RecipeRenderError> {
    render_files_with_secrets(environment, guest, resolved, &ResolvedSecrets::none())
}

/// [`render_files`], every `secret:` argument given its value from `secrets`.
pub fn render_files_with_secrets(
    environment: &Environment<'static>,
    guest: &GuestFacts,
    resolved: &ResolvedRecipes,
    secrets: &ResolvedSecrets,
) -> Result<Vec<RenderedFile>, RecipeRenderError> {
    let mut rendered: Vec<RenderedFile> = Vec::new();
    for each in &resolved.recipes {
        let context = template_context(guest, resolved, &each.name);
        for spec in &each.recipe.manifest.files {
            // The template's own file, or a short template written in the manifest.
            let render = |what: String, source: &str| {
                let template = Template {
                    recipe: &each.name,
                    what,
                    file: each.recipe.manifest_file(),
                    whole_file: false,
                    source,
                    quoting: Quoting::None,
                };
                render_template(environment, &template, &context, secrets)
            };
            let contents = render_template(
                environment,
                &Template {
                    recipe: &each.name,
                    what: spec.template.clone(),
                    file: each.recipe.folder.join(&spec.template),
                    whole_file: true,
                    source: each.recipe.source(&spec.template),
                    quoting: Quoting::of_file(&spec.template),
                },
                &context,
                secrets,
            )?;
            let guest_path = render(format!("{} path", spec.template), &spec.path)?
                .trim()
                .to_string();
            check_guest_path(&each.name, &spec.template, &guest_path)?;
            let owner = render(format!("{} owner", spec.template), &spec.owner)?
                .trim()
                .to_string();
            let group = match &spec.group {
                Some(group) => render(format!("{} group", spec.template), group)?
                    .trim()
                    .to_string(),
                None => owner.clone(),
            };
            if let Some(earlier) = rendered.iter().find(|file| file.guest_path == guest_path) {
                return Err(RecipeRenderError::SamePath {
                    path: guest_path,
                    first: earlier.recipe.clone(),
                    second: each.name.clone(),
                });
            }
            rendered.push(RenderedFile {
                recipe: each.name.clone(),
                guest_path,
                mode: spec.mode.clone(),
                owner,
                group,
                contents: contents.into_bytes(),
            });
        }
    }
    Ok(rendered)
}

fn check_guest_path(
    recipe: &RecipeName,
    template: &str,
    path: &str,
) -> Result<(), RecipeRenderError> {
    let refuse = |why| {
        Err(RecipeRenderError::GuestPath {
            recipe: recipe.clone(),
            template: template.to_string(),
            path: path.to_string(),
            why,
        })
    };
    if !path.starts_with('/') {
        return refuse("is not absolute");
    }
    if path.ends_with('/') {
        return refuse("names a directory, not a file");
    }
    if path[1..]
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return refuse("has an empty, `.` or `..` part");
    }
    if path.contains(['\n', '\\']) {
        return refuse("holds a newline or backslash");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookbook::load::Cookbook;
    use crate::cookbook::resolve::{resolve_recipes, GuestRecipes};
    use crate::cookbook::test_support::{name, recipe, DEBIAN, VM};
    use crate::model::names::DomainName;
    use crate::render::templates::template_environment;
    use serde_json::{json, Value};

    #[test]
    fn debug_shows_a_files_size_not_its_contents() {
        let file = RenderedFile {
            recipe: name("site"),
            guest_path: "/etc/site.conf".into(),
            mode: "0600".into(),
            owner: "root".into(),
            group: "root".into(),
            contents: b"password=planted-4711\n".to_vec(),
        };
        let shown = format!("{file:?}");
        assert!(!shown.contains("planted-4711"), "{shown}");
        assert!(shown.contains("<22 bytes>"), "{shown}");
    }

    const SITE: &str = r#"
description: A site
kind: guest
args:
  type: object
  properties:
    port: {type: integer, default: 8080}
files:
  - {template: site.conf.j2, path: "/etc/site/{{ domain }}.conf", mode: "0640", owner: "{{ global.admin_user }}", group: www-data}
  - {template: motd.j2, path: /etc/motd}
"#;

    fn resolved(site_manifest: &str, sources: &[(&str, &str)]) -> ResolvedRecipes {
        let cookbook = Cookbook::from_recipes([
            recipe("debian", DEBIAN, &[]),
            recipe("vm", VM, &[]),
            recipe("site", site_manifest, sources),
        ])
        .unwrap();
        let guest = GuestRecipes {
            on_own_vm: true,
            recipes: [(name("site"), json!({}))].into_iter().collect(),
            distro: "debian".into(),
            release: None,
            distro_args: Value::Null,
            machine_args: Value::Null,
        };
        resolve_recipes(&cookbook, &guest).unwrap()
    }

    fn facts() -> GuestFacts {
        GuestFacts {
            domain: DomainName::parse("www.example.test").unwrap(),
            global: json!({"admin_user": "ops"}),
        }
    }

    const SOURCES: &[(&str, &str)] = &[
        (
            "site.conf.j2",
            "listen {{ args.port }}; # {{ hostname }} on {{ distro }} {{ release }}\n",
        ),
        ("motd.j2", "{{ recipes.vm.cpu_mode }}\n"),
    ];

    #[test]
    fn files_render_with_templated_paths_and_owners() {
        let files =
            render_files(&template_environment(), &facts(), &resolved(SITE, SOURCES)).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].guest_path, "/etc/site/www.example.test.conf");
        assert_eq!(
            files[0].payload_path(),
            "files/etc/site/www.example.test.conf"
        );
        assert_eq!(
            (
                files[0].mode.as_str(),
                files[0].owner.as_str(),
                files[0].group.as_str()
            ),
            ("0640", "ops", "www-data")
        );
        assert_eq!(
            String::from_utf8_lossy(&files[0].contents),
            "listen 8080; # www on debian bookworm\n"
        );
        assert_eq!(
            (
                files[1].owner.as_str(),
                files[1].group.as_str(),
                files[1].mode.as_str()
            ),
            ("root", "root", "0644")
        );
        assert_eq!(
            String::from_utf8_lossy(&files[1].contents),
            "host-passthrough\n"
        );
    }

    #[test]
    fn undefined_names_are_errors_naming_the_template() {
        let sources = [("site.conf.j2", "{{ args.nope }}"), ("motd.j2", "")];
        let error =
            render_files(&template_environment(), &facts(), &resolved(SITE, &sources)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("site.conf.j2:1: ") && message.contains("of recipe `site`"),
            "{message}"
        );
        assert!(message.contains("undefined value"), "{message}");
        assert!(!message.contains("error:"), "{message}");
    }

    #[test]
    fn relative_or_climbing_paths_are_refused() {
        for path in ["etc/x", "/etc/../x", "/etc//x", "/etc/"] {
            let manifest = SITE.replace("/etc/motd", path);
            let error = render_files(
                &template_environment(),
                &facts(),
                &resolved(&manifest, SOURCES),
            )
            .unwrap_err();
            assert!(
                matches!(error, RecipeRenderError::GuestPath { .. }),
                "{path}: {error}"
            );
        }
    }

    #[test]
    fn two_files_on_one_path_are_refused() {
        let manifest = SITE.replace("path: /etc/motd", "path: \"/etc/site/{{ domain }}.conf\"");
        let error = render_files(
            &template_environment(),
            &facts(),
            &resolved(&manifest, SOURCES),
        )
        .unwrap_err();
        assert!(
            matches!(error, RecipeRenderError::SamePath { .. }),
            "{error}"
        );
    }
}
