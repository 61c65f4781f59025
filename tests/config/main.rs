//! The recipes side of an installation, read from real files: the example in `etc/` and the
//! documentation's examples load, and every kind of mistake is reported as a person would read it
//! (file, line, what, hint).

mod docs_examples;

use std::fs;
use std::path::{Path, PathBuf};
use trog::config::changeme::refuse_changeme;
use trog::config::guest::{list_domains, load_guest, GuestConfig};
use trog::config::paths::InstallationPaths;
use trog::diagnose::Failure;
use trog::model::names::DomainName;

/// A temporary installation directory with recipes.yaml and recipes.d.
struct Installation {
    dir: tempfile::TempDir,
}

impl Installation {
    fn new(recipes_yaml: &str) -> Installation {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("recipes.d")).unwrap();
        fs::write(dir.path().join("recipes.yaml"), recipes_yaml).unwrap();
        Installation { dir }
    }

    fn with_guest(self, domain: &str, text: &str) -> Installation {
        fs::write(
            self.dir
                .path()
                .join("recipes.d")
                .join(format!("{domain}.yaml")),
            text,
        )
        .unwrap();
        self
    }

    fn paths(&self) -> InstallationPaths {
        InstallationPaths::resolve(self.dir.path().to_str(), None, None)
    }

    fn load(&self, domain: &str) -> Result<GuestConfig, Failure> {
        load_guest(&self.paths(), &DomainName::parse(domain).unwrap()).map_err(Failure::from)
    }

    /// The error report as printed, with this installation's directory written `[INSTALL]`.
    fn report(&self, failure: Failure) -> String {
        let rendered = failure.render();
        rendered.replace(self.dir.path().to_str().unwrap(), "[INSTALL]")
    }

    fn load_error(&self, domain: &str) -> String {
        let failure = self
            .load(domain)
            .expect_err("the configuration should have been refused");
        assert_eq!(
            failure.status.code(),
            3,
            "configuration errors exit with status 3"
        );
        self.report(failure)
    }
}

const BASE: &str = "\
_base:
  _global:
    admin_user: siteadmin
    contact_email: ops@example.test
    distro: debian
  adminconfig: {}
";

fn example_installation() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("etc")
}

#[test]
fn the_example_installation_loads_cleanly() {
    let paths = InstallationPaths::resolve(example_installation().to_str(), None, None);
    let domains = list_domains(&paths).unwrap();
    assert_eq!(
        domains.iter().map(DomainName::as_str).collect::<Vec<_>>(),
        ["example.test"]
    );
    let guest = load_guest(&paths, &domains[0]).unwrap();
    refuse_changeme(&guest).unwrap();
    assert_eq!(guest.settings.admin_user, "siteadmin");
    assert_eq!(guest.settings.distro.as_str(), "debian");
    assert_eq!(guest.settings.release.as_deref(), Some("bookworm"));
    assert_eq!(guest.settings.memory.0, 1024);
    assert_eq!(guest.settings.cpus, 1);
    assert_eq!(guest.settings.size.to_string(), "4GB");
    let recipes: Vec<_> = guest.recipes.keys().map(|name| name.as_str()).collect();
    assert_eq!(recipes, ["adminconfig", "nginx", "data"]);
    assert_eq!(guest.recipes[1]["server_names"][0], "www.example.test");
    assert!(guest.deprecations.is_empty());
}

#[test]
fn a_guest_merges_base_and_its_own_file() {
    let installation = Installation::new(BASE).with_guest(
        "www.example.test",
        "www.example.test:\n  _global:\n    memory: 2G\n    ips: [192.0.2.10/24, 2001:db8::10/64]\n  adminconfig: {shell: zsh}\n  nginx:\n",
    );
    let guest = installation.load("www.example.test").unwrap();
    assert_eq!(guest.settings.memory.0, 2048);
    assert_eq!(guest.settings.ips.len(), 2);
    assert_eq!(guest.recipes[0].to_string(), r#"{"shell":"zsh"}"#);
    assert_eq!(guest.recipes[1].to_string(), "{}");
    let origin = guest
        .origins
        .locate_recipe_arg("adminconfig", "/shell")
        .unwrap();
    assert_eq!(
        origin.file.as_ref(),
        installation.paths().domain_file(&guest.domain).as_path()
    );
}

#[test]
fn domains_are_listed_sorted_passing_over_other_files() {
    let installation = Installation::new(BASE)
        .with_guest("www.example.test", "www.example.test:\n")
        .with_guest("db.example.test", "db.example.test:\n")
        .with_guest("a.example.net", "a.example.net:\n");
    let recipes_d = installation.dir.path().join("recipes.d");
    fs::create_dir(recipes_d.join("www.example.test")).unwrap();
    fs::write(recipes_d.join("www.example.test.yaml~"), "").unwrap();
    fs::write(recipes_d.join("notes.txt"), "").unwrap();
    let domains = list_domains(&installation.paths()).unwrap();
    let names: Vec<_> = domains.iter().map(DomainName::as_str).collect();
    assert_eq!(
        names,
        ["a.example.net", "db.example.test", "www.example.test"]
    );
}

#[test]
fn a_badly_named_guest_file_is_an_error_when_listing() {
    let installation = Installation::new(BASE).with_guest("Www", "x:\n");
    let failure = Failure::from(list_domains(&installation.paths()).unwrap_err());
    insta::assert_snapshot!("badly_named_guest_file", installation.report(failure));
}

#[test]
fn listing_without_recipes_d_is_an_error() {
    let installation = Installation::new(BASE);
    fs::remove_dir(installation.dir.path().join("recipes.d")).unwrap();
    let failure = Failure::from(list_domains(&installation.paths()).unwrap_err());
    insta::assert_snapshot!("no_recipes_d", installation.report(failure));
}

#[test]
fn a_missing_recipes_yaml_is_reported() {
    let installation = Installation::new("").with_guest("www.example.test", "www.example.test:\n");
    fs::remove_file(installation.dir.path().join("recipes.yaml")).unwrap();
    insta::assert_snapshot!(
        "missing_recipes_yaml",
        installation.load_error("www.example.test")
    );
}

#[test]
fn a_guest_without_a_file_is_reported() {
    let installation = Installation::new(BASE);
    insta::assert_snapshot!(
        "missing_domain_file",
        installation.load_error("www.example.test")
    );
}

#[test]
fn malformed_yaml_is_reported_at_its_line() {
    let installation = Installation::new(BASE).with_guest(
        "www.example.test",
        "www.example.test:\n  nginx: {server_name: [x\n  data: {}\n",
    );
    insta::assert_snapshot!(
        "malformed_yaml",
        installation.load_error("www.example.test")
    );
}

#[test]
fn duplicate_keys_are_reported_at_the_second() {
    let installation = Installation::new(
        "_base:\n  _global:\n    admin_user: a\n    contact_email: ops@example.test\n    admin_user: b\n",
    )
    .with_guest("www.example.test", "www.example.test:\n");
    insta::assert_snapshot!("duplicate_key", installation.load_error("www.example.test"));
}

#[test]
fn unknown_top_level_keys_in_recipes_yaml_are_reported() {
    let installation = Installation::new(&format!("{BASE}www.example.test:\n  nginx: {{}}\n"))
        .with_guest("www.example.test", "www.example.test:\n");
    insta::assert_snapshot!(
        "unknown_top_level_key",
        installation.load_error("www.example.test")
    );
}

#[test]
fn a_domain_file_under_another_name_is_reported() {
    let installation =
        Installation::new(BASE).with_guest("www.example.test", "web.example.test:\n  nginx: {}\n");
    insta::assert_snapshot!(
        "domain_key_mismatch",
        installation.load_error("www.example.test")
    );
}

#[test]
fn a_list_where_recipe_args_belong_is_reported() {
    let installation = Installation::new(BASE)
        .with_guest("www.example.test", "www.example.test:\n  nginx: [www]\n");
    insta::assert_snapshot!(
        "recipe_args_not_a_mapping",
        installation.load_error("www.example.test")
    );
}

#[test]
fn every_settings_problem_is_reported_in_one_error() {
    let installation = Installation::new(
        "_base:\n  _global:\n    distro: arch\n  adminconfig: {}\n",
    )
    .with_guest(
        "www.example.test",
        "www.example.test:\n  _global:\n    memroy: 2048\n    cpus: two\n    ips: [192.0.2.10]\n",
    );
    insta::assert_snapshot!(
        "settings_problems",
        installation.load_error("www.example.test")
    );
}

#[test]
fn changeme_is_listed_with_file_and_line_but_does_not_stop_loading() {
    let installation = Installation::new(
        "_base:\n  _global:\n    admin_user: CHANGEME\n    contact_email: ops@example.test\n  adminconfig: {}\n",
    )
    .with_guest(
        "db.example.test",
        "db.example.test:\n  mariadb:\n    root_pw: CHANGEME\n    dumpfile: CHANGEME\n    version: \"10.11\"\n",
    );
    let guest = installation.load("db.example.test").unwrap();
    let failure = Failure::from(refuse_changeme(&guest).unwrap_err());
    assert_eq!(failure.status.code(), 3);
    insta::assert_snapshot!("changeme", installation.report(failure));
}

#[test]
fn a_dependent_takes_the_package_sources_of_the_machine_at_the_end_of_its_chain() {
    let base = BASE.replace(
        "    distro: debian\n",
        "    distro: debian\n    mirror: http://base.example.test/debian\n",
    );
    let installation = Installation::new(&base)
        .with_guest(
            "db.example.test",
            "db.example.test:\n  _global:\n    mirror: http://hub.example.test/debian\n",
        )
        .with_guest(
            "web.example.test",
            "web.example.test:\n  _global:\n    depends_on: db.example.test\n",
        )
        .with_guest(
            "blog.example.test",
            "blog.example.test:\n  _global:\n    depends_on: web.example.test\n",
        );
    for domain in ["db.example.test", "web.example.test", "blog.example.test"] {
        let guest = installation.load(domain).unwrap();
        assert_eq!(
            guest.settings.mirror.as_deref(),
            Some("http://hub.example.test/debian"),
            "{domain}"
        );
    }

    // A chain that cannot be followed is the site graph's to refuse, with its lines: loading
    // one domain of it neither loops nor fails, and the domain keeps `_base`'s sources.
    let broken = Installation::new(&base)
        .with_guest(
            "a.example.test",
            "a.example.test:\n  _global:\n    depends_on: b.example.test\n",
        )
        .with_guest(
            "b.example.test",
            "b.example.test:\n  _global:\n    depends_on: a.example.test\n",
        )
        .with_guest(
            "c.example.test",
            "c.example.test:\n  _global:\n    depends_on: gone.example.test\n",
        );
    for domain in ["a.example.test", "c.example.test"] {
        let guest = broken.load(domain).unwrap();
        assert_eq!(
            guest.settings.mirror.as_deref(),
            Some("http://base.example.test/debian"),
            "{domain}"
        );
    }

    // A machine whose file is broken fails its dependents too, naming that file and line.
    let machine_broken = Installation::new(&base)
        .with_guest(
            "web.example.test",
            "web.example.test:\n  _global:\n    mirror: [unclosed\n",
        )
        .with_guest(
            "blog.example.test",
            "blog.example.test:\n  _global:\n    depends_on: web.example.test\n",
        );
    let report = machine_broken.load_error("blog.example.test");
    assert!(
        report.contains("[INSTALL]/recipes.d/web.example.test.yaml:"),
        "{report}"
    );
}
