//! The shipped recipes: every one loads, validates its own defaults, and renders; the Makefile
//! of a typical guest and the `recipes` command's output are pinned by snapshots.

#[path = "../support/root_warning.rs"]
mod root_warning;

mod authorized_keys;
mod converge_mounts;
mod data_target;
mod hostile_values;
mod stand_ins;
mod ufw_allow;

use indexmap::IndexMap;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use trog::cookbook::load::{load_cookbook, Cookbook};
use trog::cookbook::manifest::RecipeKind;
use trog::cookbook::resolve::{resolve_recipes, GuestRecipes, ResolvedRecipes};
use trog::model::names::{DomainName, RecipeName};
use trog::render::files::render_files;
use trog::render::makefile::render_makefile;
use trog::render::templates::{template_environment, GuestFacts};

fn shipped() -> Cookbook {
    load_cookbook(&Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes"))
        .unwrap_or_else(|error| panic!("{}", trog::diagnose::Failure::from(error).render()))
}

fn facts() -> GuestFacts {
    GuestFacts {
        domain: DomainName::parse("www.example.test").unwrap(),
        global: json!({"admin_user": "someadmin", "contact_email": "ops@example.test", "distro": "debian"}),
    }
}

/// Arguments that satisfy every shipped recipe's required ones and exercise its optional parts.
fn sample_args(recipe: &str) -> Value {
    match recipe {
        "mariadb" => {
            json!({"root_pw": "correct horse battery", "databases": [{"name": "shop", "user": "shop", "password": "it's a secret"}]})
        }
        "postgres" => {
            json!({"databases": [{"name": "app", "owner": "app", "password": "another long one"}]})
        }
        "mounts" => {
            json!({"entries": ["LABEL=extra /srv/extra defaults,noatime"]})
        }
        "cron" => {
            json!({"jobs": [{"name": "tidy", "schedule": "@daily", "command": "find /tmp -mtime +7 -delete # 100%"}]})
        }
        "nginx" => json!({"server_names": ["example.test"]}),
        "logshipper" => json!({"collector": "logs.example.test"}),
        "aptmirror" => json!({"upstream": "http://proxy.example.test:3142"}),
        "trogrunner" => json!({
            "release_url": "http://files.example.test/trog.tar.gz",
            "release_sha256": "0".repeat(64),
            "ssh_private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n",
            "known_hosts": ["hv1.example.test ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA"],
            "hypervisors_conf": "[hv1]\nlibvirt_uri = qemu+ssh://trog@hv1.example.test/system\n",
            "recipes_yaml": "_base: {}\n",
        }),
        _ => json!({}),
    }
}

fn guest(recipes: &[&str], distro: &str) -> GuestRecipes {
    GuestRecipes {
        on_own_vm: true,
        recipes: recipes
            .iter()
            .map(|name| (RecipeName::parse(name).unwrap(), sample_args(name)))
            .collect::<IndexMap<_, _>>(),
        distro: distro.to_string(),
        release: None,
        distro_args: Value::Null,
        machine_args: json!({"data_volume_size": "20G"}),
    }
}

fn resolve(recipes: &[&str], distro: &str) -> ResolvedRecipes {
    resolve_recipes(&shipped(), &guest(recipes, distro)).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn every_shipped_recipe_loads_and_is_complete() {
    let cookbook = shipped();
    let names = cookbook.names();
    for expected in [
        "adminconfig",
        "cron",
        "data",
        "debian",
        "mariadb",
        "mounts",
        "nginx",
        "postgres",
        "ubuntu",
        "ufw",
        "vm",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} is missing from {names:?}"
        );
    }
    for recipe in cookbook.recipes.values() {
        let manifest = &recipe.manifest;
        assert!(
            manifest.makefile.is_some(),
            "{} has no fragment",
            recipe.name
        );
        assert!(!manifest.tests.is_empty(), "{} has no test", recipe.name);
        for (name, property) in manifest.args["properties"].as_object().unwrap() {
            assert!(
                property.get("description").is_some(),
                "{}.{name} has no description",
                recipe.name
            );
        }
        if manifest.kind != RecipeKind::Distro {
            assert!(
                manifest.packages.contains_key("debian")
                    && manifest.packages.contains_key("ubuntu"),
                "{}",
                recipe.name
            );
        }
    }
    assert_eq!(
        cookbook.get_str("vm").unwrap().manifest.kind,
        RecipeKind::Machine
    );
}

#[test]
fn every_guest_recipe_validates_its_defaults_and_renders_on_both_distros() {
    let cookbook = shipped();
    let environment = template_environment();
    for distro in ["debian", "ubuntu"] {
        for recipe in cookbook
            .recipes
            .values()
            .filter(|recipe| recipe.manifest.kind == RecipeKind::Guest)
        {
            let resolved = resolve_recipes(&cookbook, &guest(&[recipe.name.as_str()], distro))
                .unwrap_or_else(|error| panic!("{} on {distro}: {error}", recipe.name));
            let files = render_files(&environment, &facts(), &resolved).unwrap_or_else(|error| {
                panic!(
                    "{} on {distro}: {error}: {:?}",
                    recipe.name,
                    std::error::Error::source(&error)
                )
            });
            render_makefile(&environment, &facts(), &resolved, &files).unwrap_or_else(|error| {
                panic!(
                    "{} on {distro}: {error}: {:?}",
                    recipe.name,
                    std::error::Error::source(&error)
                )
            });
        }
    }
}

#[test]
fn recipes_render_without_optional_arguments_too() {
    let cookbook = shipped();
    let environment = template_environment();
    let bare = GuestRecipes {
        on_own_vm: true,
        recipes: [
            "adminconfig",
            "nginx",
            "cron",
            "mounts",
            "ufw",
            "data",
            "postgres",
        ]
        .iter()
        .map(|name| (RecipeName::parse(name).unwrap(), Value::Null))
        .collect(),
        distro: "ubuntu".into(),
        release: None,
        distro_args: Value::Null,
        machine_args: Value::Null,
    };
    let resolved = resolve_recipes(&cookbook, &bare).unwrap();
    let facts = GuestFacts {
        domain: DomainName::parse("bare.example.test").unwrap(),
        global: json!({}),
    };
    let files = render_files(&environment, &facts, &resolved).unwrap();
    render_makefile(&environment, &facts, &resolved, &files).unwrap();
}

#[test]
fn makefile_for_nginx_mariadb_and_data_on_debian() {
    let resolved = resolve(&["nginx", "mariadb", "data"], "debian");
    let environment = template_environment();
    let files = render_files(&environment, &facts(), &resolved).unwrap();
    let makefile = render_makefile(&environment, &facts(), &resolved, &files).unwrap();
    insta::assert_snapshot!("makefile_nginx_mariadb_data_debian", makefile);
    insta::assert_snapshot!("files_nginx_mariadb_data_debian", file_listing(&files));
}

fn file_listing(files: &[trog::render::files::RenderedFile]) -> String {
    files
        .iter()
        .map(|file| {
            let contents = String::from_utf8_lossy(&file.contents);
            format!(
                "== {} ({} {}:{}) from {}\n{contents}",
                file.guest_path, file.mode, file.owner, file.group, file.recipe
            )
        })
        .collect()
}

#[test]
fn files_for_adminconfig_cron_mounts_and_postgres_on_ubuntu() {
    let resolved = resolve(&["adminconfig", "cron", "mounts", "postgres"], "ubuntu");
    let files = render_files(&template_environment(), &facts(), &resolved).unwrap();
    let cron = files
        .iter()
        .find(|file| file.guest_path == "/etc/cron.d/trog")
        .unwrap();
    let cron = String::from_utf8_lossy(&cron.contents);
    assert!(
        cron.contains("@daily root find /tmp -mtime +7 -delete # 100\\%"),
        "cron needs % escaped: {cron}"
    );
    assert!(
        cron.contains("27 3 * * * postgres umask 077 && pg_dumpall"),
        "postgres hands its dump job to cron: {cron}"
    );
    insta::assert_snapshot!(
        "files_adminconfig_cron_mounts_postgres_ubuntu",
        file_listing(&files)
    );
}

#[test]
fn shipped_makefile_is_valid_make() {
    // `make -n` parses the whole file and prints what it would run, running nothing.
    let resolved = resolve(
        &[
            "adminconfig",
            "nginx",
            "mariadb",
            "postgres",
            "data",
            "mounts",
        ],
        "debian",
    );
    let environment = template_environment();
    let files = render_files(&environment, &facts(), &resolved).unwrap();
    let makefile = render_makefile(&environment, &facts(), &resolved, &files).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Makefile"), makefile).unwrap();
    for target in ["all", "test"] {
        let output = Command::new("make")
            .args(["-n", target])
            .current_dir(dir.path())
            .output()
            .expect("make runs");
        assert!(
            output.status.success(),
            "make -n {target}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn trog(args: &[&str]) -> (String, String, i32) {
    let config = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_trog"))
        .args(args)
        .env("TROG_PROVISIONER_CONFIG", config.path())
        .env(
            "TROG_RECIPES",
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("recipes"),
        )
        .output()
        .expect("trog runs");
    let output = root_warning::output_without_root_warning(output);
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
        output.status.code().unwrap_or(-1),
    )
}

#[test]
fn recipes_lists_guest_recipes() {
    let (stdout, _, status) = trog(&["recipes"]);
    assert_eq!(status, 0);
    assert!(!stdout.contains("debian") && !stdout.lines().any(|line| line.starts_with("vm ")));
    insta::assert_snapshot!("recipes", stdout);
}

#[test]
fn recipes_json_lists_them_as_json() {
    let (stdout, _, status) = trog(&["recipes", "--json"]);
    assert_eq!(status, 0);
    let parsed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(parsed["event"], "recipes");
    assert!(parsed["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|entry| entry["name"] != "vm"));
    let pretty = serde_json::to_string_pretty(&parsed).unwrap();
    insta::assert_snapshot!("recipes_json", pretty);
}

#[test]
fn recipes_name_prints_the_schema() {
    let (stdout, _, status) = trog(&["recipes", "mariadb"]);
    assert_eq!(status, 0);
    serde_json::from_str::<Value>(&stdout).unwrap();
    insta::assert_snapshot!("recipes_mariadb", stdout);
    let (stdout, _, status) = trog(&["recipes", "vm"]);
    assert_eq!(status, 0);
    assert!(stdout.contains("disk_cache"));
}

#[test]
fn recipes_scaffold_prints_what_new_guest_writes() {
    let (stdout, _, status) = trog(&["recipes", "--scaffold", "mariadb"]);
    assert_eq!(status, 0);
    insta::assert_snapshot!("recipes_scaffold_mariadb", stdout);
}

#[test]
fn unknown_recipe_is_a_configuration_error_listing_the_known_ones() {
    let (stdout, stderr, status) = trog(&["recipes", "nosuch"]);
    assert_eq!(status, 3, "{stderr}");
    assert!(stdout.is_empty());
    insta::assert_snapshot!("recipes_unknown", stderr);
    let (_, stderr, status) = trog(&["recipes", "--scaffold", "vm"]);
    assert_eq!(status, 3);
    assert!(stderr.contains("machine recipe"), "{stderr}");
}

/// A domain without a machine of its own refuses every argument of the machine recipe: one
/// missing from the list would be accepted there and do nothing.
#[test]
fn every_machine_recipe_argument_is_a_machine_setting() {
    let cookbook = shipped();
    let vm = cookbook
        .get_str(trog::cookbook::resolve::MACHINE_RECIPE)
        .unwrap();
    let arguments = vm.manifest.args["properties"].as_object().unwrap();
    let missing: Vec<&String> = arguments
        .keys()
        .filter(|name| !trog::config::guest::MACHINE_SETTINGS.contains(&name.as_str()))
        .collect();
    assert!(missing.is_empty(), "not in MACHINE_SETTINGS: {missing:?}");
}
