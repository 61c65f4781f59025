//! Every refused run: the exit status, a message naming what is wrong with a hint, and nothing
//! written — no output directory, no new or changed file in the installation (not even the store).

use crate::harness::{Installation, Outcome, Stdin, CREDENTIALS};
use std::time::Duration;

/// Runs `trog ARGS…` expecting a refusal with `code`; checks that nothing was written; returns
/// the error output with the installation's paths replaced.
fn refused(installation: &Installation, args: &[&str], stdin: Stdin, code: i32) -> String {
    let before = installation.every_file();
    let outcome: Outcome = installation.trog(args, stdin);
    assert_eq!(outcome.code, code, "{outcome:#?}");
    assert_eq!(outcome.stdout, "", "{outcome:#?}");
    let after = installation.every_file();
    let changed: Vec<_> = after
        .keys()
        .chain(before.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(changed.is_empty(), "a refused run wrote {changed:?}");
    installation.redact_paths(&outcome.stderr)
}

const OUT: [&str; 2] = ["--out", "out"];

fn new_config(domain: &str) -> Vec<&str> {
    let mut args = vec!["--credentials", "new_config", domain];
    args.extend(OUT);
    args
}

#[test]
fn changeme_left_in_names_every_key() {
    let installation = Installation::example();
    installation.write_guest(
        "todo.example.test",
        "todo.example.test:\n  _global:\n    admin_user: CHANGEME\n  mariadb:\n    root_pw: CHANGEME\n",
    );
    let stderr = refused(
        &installation,
        &new_config("todo.example.test"),
        Stdin::Text(CREDENTIALS),
        3,
    );
    insta::assert_snapshot!("refused_changeme", stderr);
    assert!(stderr.contains("_global.admin_user") && stderr.contains("mariadb.root_pw"));
}

#[test]
fn a_schema_violation_names_the_recipe_and_the_argument() {
    // No store yet: a refused configuration must not make one either.
    let installation = Installation::example();
    installation.write_guest(
        "bad.example.test",
        "bad.example.test:\n  nginx:\n    port: 70000\n    colour: blue\n",
    );
    let stderr = refused(
        &installation,
        &new_config("bad.example.test"),
        Stdin::Text(CREDENTIALS),
        3,
    );
    insta::assert_snapshot!("refused_schema_violation", stderr);
    assert!(stderr.contains("`nginx`") && stderr.contains("/port") && stderr.contains("colour"));
}

#[test]
fn an_unknown_credential_name_suggests_the_known_one() {
    let installation = Installation::example();
    installation.store_with_fixed_keys(&["example.test"]);
    let stderr = refused(
        &installation,
        &new_config("example.test"),
        Stdin::Text("keepas: correct horse battery staple\n\n"),
        4,
    );
    insta::assert_snapshot!("refused_unknown_credential", stderr);
}

/// Without credentials and without a terminal, with or without a store, with or without
/// `--credentials`: refused at once, saying how to hand the passphrase in.
#[test]
fn no_credentials_and_no_terminal_fails_at_once_with_the_hint() {
    for store_exists in [false, true] {
        let installation = Installation::example();
        if store_exists {
            installation.store_with_fixed_keys(&["example.test"]);
        }
        for mut args in [
            new_config("example.test"),
            new_config("example.test")[1..].to_vec(),
        ] {
            if !store_exists {
                args.push("--new-secret-store");
            }
            let started = std::time::Instant::now();
            let stderr = refused(&installation, &args, Stdin::Null, 4);
            assert!(started.elapsed() < Duration::from_secs(10));
            assert!(
                stderr.contains("no terminal to ask on")
                    && stderr
                        .contains("hint: hand it in on standard input: printf 'keepass: %s\\n\\n'"),
                "{stderr}"
            );
            if store_exists && args[0] == "--credentials" {
                insta::assert_snapshot!("refused_no_terminal", stderr);
            }
        }
    }
}

#[test]
fn a_wrong_passphrase_is_refused() {
    let installation = Installation::example();
    installation.store_with_fixed_keys(&["example.test"]);
    let stderr = refused(
        &installation,
        &new_config("example.test"),
        Stdin::Text("keepass: wrong\n\n"),
        4,
    );
    insta::assert_snapshot!("refused_wrong_passphrase", stderr);
}

#[test]
fn an_unknown_domain_is_refused_with_a_hint() {
    let installation = Installation::example();
    let stderr = refused(
        &installation,
        &new_config("nope.example.test"),
        Stdin::Text(CREDENTIALS),
        3,
    );
    insta::assert_snapshot!("refused_unknown_domain", stderr);
    assert!(stderr.contains("hint:"), "{stderr}");
}
