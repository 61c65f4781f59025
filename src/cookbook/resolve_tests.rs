use super::*;
use crate::cookbook::test_support::{cookbook, name};
use serde_json::json;

fn guest(recipes: &[(&str, Value)]) -> GuestRecipes {
    GuestRecipes {
        on_own_vm: true,
        recipes: recipes
            .iter()
            .map(|(recipe, args)| (name(recipe), args.clone()))
            .collect(),
        distro: "debian".into(),
        release: None,
        distro_args: Value::Null,
        machine_args: Value::Null,
    }
}

const UFW: &str = r#"
description: Firewall
kind: guest
args:
  type: object
  properties:
    allow: {type: array, items: {type: string}, default: ["22/tcp"]}
    logging: {type: string, default: "low"}
packages: {debian: [ufw]}
"#;

const MARIADB: &str = r#"
description: Database
kind: guest
args:
  type: object
  required: [root_pw]
  properties:
    root_pw: {type: string}
packages: {debian: [mariadb-server, mysql-common]}
conflicts: {debian: [mysql-server]}
requires:
  ufw: {allow: ["3306/tcp"], logging: medium}
"#;

const NGINX: &str = r#"
description: Web server
kind: guest
packages: {debian: [nginx, mysql-server]}
requires:
  ufw: {allow: ["80/tcp", "3306/tcp"], logging: high}
"#;

fn shop() -> Cookbook {
    cookbook(&[("ufw", UFW), ("mariadb", MARIADB), ("nginx", NGINX)])
}

#[test]
fn distro_and_vm_come_first_and_requirements_before_requirers() {
    let resolved = resolve_recipes(
        &shop(),
        &guest(&[("mariadb", json!({"root_pw": "x"})), ("nginx", json!({}))]),
    )
    .unwrap();
    assert_eq!(
        resolved.names(),
        ["debian", "vm", "ufw", "mariadb", "nginx"]
    );
    assert_eq!(resolved.release, "bookworm");
    assert_eq!(resolved.image.url, "https://example.test/bookworm.qcow2");
}

#[test]
fn requirements_go_just_before_their_first_requirer() {
    let book = cookbook(&[
        ("site", "description: s\nkind: guest\n"),
        ("ufw", UFW),
        ("mariadb", MARIADB),
        ("nginx", NGINX),
    ]);
    let request = guest(&[
        ("nginx", json!({})),
        ("mariadb", json!({"root_pw": "x"})),
        ("site", json!({})),
    ]);
    let resolved = resolve_recipes(&book, &request).unwrap();
    assert_eq!(
        resolved.names(),
        ["debian", "vm", "ufw", "nginx", "mariadb", "site"],
        "the guest's last recipe stays last"
    );
}

#[test]
fn order_follows_the_guest_among_equals() {
    let book = cookbook(&[
        ("a", "description: a\nkind: guest\n"),
        ("b", "description: b\nkind: guest\n"),
    ]);
    let resolved = resolve_recipes(&book, &guest(&[("b", json!({})), ("a", json!({}))])).unwrap();
    assert_eq!(resolved.names(), ["debian", "vm", "b", "a"]);
}

#[test]
fn handed_lists_merge_without_duplicates_and_first_requirer_wins_scalars() {
    let resolved = resolve_recipes(
        &shop(),
        &guest(&[("mariadb", json!({"root_pw": "x"})), ("nginx", json!({}))]),
    )
    .unwrap();
    let ufw = &resolved.get("ufw").unwrap().args.value;
    assert_eq!(ufw["allow"], json!(["3306/tcp", "80/tcp"]));
    assert_eq!(ufw["logging"], "medium");
}

#[test]
fn the_guests_own_values_win_over_handed_ones() {
    let resolved = resolve_recipes(
        &shop(),
        &guest(&[
            ("mariadb", json!({"root_pw": "x"})),
            ("ufw", json!({"allow": ["22/tcp"]})),
        ]),
    )
    .unwrap();
    let ufw = &resolved.get("ufw").unwrap().args.value;
    assert_eq!(
        ufw["allow"],
        json!(["3306/tcp", "22/tcp"]),
        "lists gain the guest's items"
    );
    assert_eq!(
        ufw["logging"], "medium",
        "what the guest did not give still comes from the requirer"
    );
    let resolved = resolve_recipes(
        &shop(),
        &guest(&[
            ("mariadb", json!({"root_pw": "x"})),
            ("ufw", json!({"logging": "off", "allow": ["3306/tcp"]})),
        ]),
    )
    .unwrap();
    let ufw = &resolved.get("ufw").unwrap().args.value;
    assert_eq!(ufw["logging"], "off", "a scalar the guest gives wins");
    assert_eq!(ufw["allow"], json!(["3306/tcp"]), "each item once");
}

#[test]
fn schema_defaults_apply_under_everything() {
    let resolved = resolve_recipes(&shop(), &guest(&[("ufw", json!({}))])).unwrap();
    assert_eq!(
        resolved.get("ufw").unwrap().args.value,
        json!({"allow": ["22/tcp"], "logging": "low"})
    );
    assert_eq!(
        resolved.get("vm").unwrap().args.value["cpu_mode"],
        "host-passthrough"
    );
}

#[test]
fn machine_args_reach_vm() {
    let mut request = guest(&[]);
    request.machine_args = json!({"cpu_mode": "host-model"});
    let resolved = resolve_recipes(&shop(), &request).unwrap();
    assert_eq!(
        resolved.get("vm").unwrap().args.value["cpu_mode"],
        "host-model"
    );
}

#[test]
fn packages_are_the_union_minus_conflicts() {
    let resolved = resolve_recipes(
        &shop(),
        &guest(&[("mariadb", json!({"root_pw": "x"})), ("nginx", json!({}))]),
    )
    .unwrap();
    assert_eq!(
        resolved.packages,
        [
            "ca-certificates",
            "bookworm-only",
            "ufw",
            "mariadb-server",
            "mysql-common",
            "nginx"
        ]
    );
}

#[test]
fn release_packages_follow_the_release() {
    let mut request = guest(&[]);
    request.release = Some("trixie".into());
    let resolved = resolve_recipes(&shop(), &request).unwrap();
    assert_eq!(resolved.packages, ["ca-certificates"]);
    assert_eq!(resolved.release, "trixie");
}

#[test]
fn unknown_release_and_distro_list_the_known_ones() {
    let mut request = guest(&[]);
    request.release = Some("sid".into());
    let error = resolve_recipes(&shop(), &request).unwrap_err();
    assert!(
        error.to_string().contains("known: bookworm, trixie"),
        "{error}"
    );
    let mut request = guest(&[]);
    request.distro = "ubuntu".into();
    let error = resolve_recipes(&shop(), &request).unwrap_err();
    assert!(error.to_string().contains("known: debian"), "{error}");
}

#[test]
fn unknown_recipe_lists_guest_recipes() {
    let error = resolve_recipes(&shop(), &guest(&[("postgres", json!({}))])).unwrap_err();
    assert_eq!(
        error.to_string(),
        "there is no recipe `postgres` (guest recipes: mariadb, nginx, ufw)"
    );
}

#[test]
fn distro_or_machine_named_as_guest_recipe_is_refused_with_a_hint() {
    use crate::diagnose::Diagnose;
    let error = resolve_recipes(&shop(), &guest(&[("debian", json!({}))])).unwrap_err();
    assert!(matches!(
        error,
        ResolveError::NotAGuestRecipe { kind: "distro", .. }
    ));
    assert!(error.hint().unwrap().contains("_global"));
    let error = resolve_recipes(&shop(), &guest(&[("vm", json!({}))])).unwrap_err();
    assert!(
        error.hint().unwrap().contains("trog recipes vm"),
        "{:?}",
        error.hint()
    );
}

#[test]
fn requiring_a_distro_is_refused() {
    let book = cookbook(&[(
        "odd",
        "description: o\nkind: guest\nrequires: {debian: {}}\n",
    )]);
    let error = resolve_recipes(&book, &guest(&[("odd", json!({}))])).unwrap_err();
    assert!(
        matches!(error, ResolveError::RequiresNonGuest { .. }),
        "{error}"
    );
}

#[test]
fn cycles_are_named() {
    let book = cookbook(&[
        ("a", "description: a\nkind: guest\nrequires: {b: {}}\n"),
        ("b", "description: b\nkind: guest\nrequires: {c: {}}\n"),
        ("c", "description: c\nkind: guest\nrequires: {a: {}}\n"),
    ]);
    let error = resolve_recipes(&book, &guest(&[("a", json!({}))])).unwrap_err();
    assert_eq!(
        error.to_string(),
        "recipes/c/recipe.yaml:3:12: recipes require each other in a cycle: a → b → c → a"
    );
}

#[test]
fn argument_errors_of_every_recipe_come_together() {
    let error = resolve_recipes(
        &shop(),
        &guest(&[
            ("mariadb", json!({})),
            ("ufw", json!({"allow": "everything"})),
        ]),
    )
    .unwrap_err();
    let ResolveError::Args { errors } = &error else {
        panic!("{error}")
    };
    assert_eq!(errors.len(), 2, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("recipe `mariadb`")
            && text.contains("recipe `ufw`")
            && text.contains("/allow"),
        "{text}"
    );
}

#[test]
fn resolution_is_deterministic() {
    let request = guest(&[("nginx", json!({})), ("mariadb", json!({"root_pw": "x"}))]);
    let first = resolve_recipes(&shop(), &request).unwrap();
    for _ in 0..5 {
        assert_eq!(resolve_recipes(&shop(), &request).unwrap(), first);
    }
    assert_eq!(first.names(), ["debian", "vm", "ufw", "nginx", "mariadb"]);
}
