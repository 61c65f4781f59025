//! `trog inventory`: the ssh_config blocks read back by OpenSSH itself (`ssh -G`,
//! `ssh-keygen -F`), the login key written only when asked and only as a new private file, and
//! the Ansible inventory read back as JSON and by `ansible-inventory`.

use super::{said, Site};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// What OpenSSH makes of `host` in the config file `config`: `ssh -G`'s lines as (key, value).
fn ssh_g(config: &Path, host: &str) -> Vec<(String, String)> {
    let output = Command::new("ssh")
        .args(["-G", "-F"])
        .arg(config)
        .arg(host)
        .output()
        .unwrap();
    assert!(output.status.success(), "ssh -G: {}", said(&output));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn option<'a>(options: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    options
        .iter()
        .filter(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
        .collect()
}

#[test]
fn openssh_reads_each_machine_with_its_address_admin_user_and_pinned_host_key() {
    let site = Site::with_two_built_guests();
    let known_hosts = site.path("known hosts");
    let config = site.path("ssh_config");
    let text = site.inventory(&[
        "--format",
        "ssh-config",
        "--known-hosts",
        known_hosts.to_str().unwrap(),
    ]);
    std::fs::write(&config, &text).unwrap();

    let www = ssh_g(&config, "www.site.test");
    assert_eq!(option(&www, "hostname"), ["192.0.2.10"]);
    assert_eq!(option(&www, "user"), ["siteadmin"]);
    assert_eq!(option(&www, "hostkeyalias"), ["trog-guest.www.site.test"]);
    assert_eq!(
        option(&www, "userknownhostsfile"),
        [known_hosts.to_str().unwrap()]
    );
    assert_eq!(option(&www, "globalknownhostsfile"), ["none"]);
    assert_eq!(option(&www, "stricthostkeychecking"), ["true"]);
    assert!(!text.contains("IdentityFile"), "{text}");
    let db = ssh_g(&config, "db.site.test");
    assert_eq!(option(&db, "hostname"), ["192.0.2.11"]);
    assert_eq!(option(&db, "hostkeyalias"), ["trog-guest.db.site.test"]);

    // The known_hosts file holds each built machine's pinned key under its alias.
    for (alias, keypair) in [
        ("trog-guest.www.site.test", &site.www),
        ("trog-guest.db.site.test", &site.db),
    ] {
        let found = Command::new("ssh-keygen")
            .args(["-F", alias, "-f"])
            .arg(&known_hosts)
            .output()
            .unwrap();
        assert!(found.status.success(), "{alias}: {}", said(&found));
        let found = String::from_utf8(found.stdout).unwrap();
        assert!(
            found.contains(&format!(
                "{alias} {}",
                keypair.host_key().public_key_openssh
            )),
            "{found}"
        );
    }
    let pinned = std::fs::read_to_string(&known_hosts).unwrap();
    assert!(!pinned.contains("new.site.test"), "never built: {pinned}");
    // A machine without a pinned key has a block ssh refuses (`foreign`: the domain of its name
    // on hv1 is not trog's, so it is on no hypervisor); one without an address, none.
    assert!(
        text.contains("`trog provision foreign.site.test` builds it"),
        "{text}"
    );
    assert!(text.contains("# new.site.test: no address known"), "{text}");
    assert!(!text.contains("Host new.site.test"), "{text}");
    assert!(text.contains("# www.site.test: on hv1\n"), "{text}");
    assert!(!text.contains("# foreign.site.test: on hv1"), "{text}");
    assert!(!text.contains("PRIVATE KEY"));

    // A second run replaces trog's own file.
    site.inventory(&["--known-hosts", known_hosts.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), pinned);
}

#[test]
fn the_login_key_is_written_only_when_asked_for_one_machine_into_a_new_private_file() {
    let site = Site::with_two_built_guests();
    let known_hosts = site.path("known_hosts");
    let key = site.path("www.key");
    let args = |key: &Path| {
        vec![
            "--known-hosts".to_string(),
            known_hosts.to_str().unwrap().to_string(),
            "--identity-file".to_string(),
            key.to_str().unwrap().to_string(),
            "www.site.test".to_string(),
        ]
    };
    let owned = args(&key);
    let text = site.inventory(&owned.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        std::fs::read_to_string(&key).unwrap(),
        site.www.private_key_openssh().expose()
    );
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let config = site.path("ssh_config");
    std::fs::write(&config, &text).unwrap();
    let www = ssh_g(&config, "www.site.test");
    assert_eq!(option(&www, "identityfile"), [key.to_str().unwrap()]);
    assert_eq!(option(&www, "identitiesonly"), ["yes"]);
    assert!(!text.contains("db.site.test"), "only the machine named");
    // A rerun finds its own key there and keeps it.
    site.inventory(&owned.iter().map(String::as_str).collect::<Vec<_>>());

    // A link where the key would go is not followed, and what it points at is left alone.
    let target = site.path("precious");
    std::fs::write(&target, "mine\n").unwrap();
    let link = site.path("link.key");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut all = vec!["inventory".to_string()];
    all.extend(args(&link));
    let refused = site.trog(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(refused.status.code(), Some(7), "{}", said(&refused));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine\n");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());

    // Several machines, or one never built, get no key.
    let several = site.trog(&[
        "inventory",
        "--known-hosts",
        known_hosts.to_str().unwrap(),
        "--identity-file",
        site.path("two.key").to_str().unwrap(),
        "www.site.test",
        "db.site.test",
    ]);
    assert_eq!(several.status.code(), Some(2), "{}", said(&several));
    let unbuilt = site.trog(&[
        "inventory",
        "--known-hosts",
        known_hosts.to_str().unwrap(),
        "--identity-file",
        site.path("new.key").to_str().unwrap(),
        "new.site.test",
    ]);
    assert_eq!(unbuilt.status.code(), Some(1), "{}", said(&unbuilt));
    assert!(said(&unbuilt).contains("hint: `trog provision new.site.test`"));
    assert!(!site.path("new.key").exists());
}

#[test]
fn a_known_hosts_file_trog_did_not_write_is_left_alone() {
    let site = Site::with_two_built_guests();
    let theirs = site.path("known_hosts");
    std::fs::write(&theirs, "github.com ssh-ed25519 AAAAtheirs\n").unwrap();
    let refused = site.trog(&["inventory", "--known-hosts", theirs.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(7), "{}", said(&refused));
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        "github.com ssh-ed25519 AAAAtheirs\n"
    );
    let without = site.trog(&["inventory", "--format", "ssh-config"]);
    assert_eq!(without.status.code(), Some(2), "{}", said(&without));
    assert!(said(&without).contains("hint: add `--known-hosts FILE`"));
}

#[test]
fn the_ansible_inventory_groups_the_machines_and_ansible_reads_it() {
    let site = Site::with_two_built_guests();
    let known_hosts = site.path("known_hosts");
    let text = site.inventory(&[
        "--format",
        "ansible",
        "--known-hosts",
        known_hosts.to_str().unwrap(),
    ]);
    let inventory: serde_json::Value = serde_json::from_str(&text).unwrap();
    let www = &inventory["_meta"]["hostvars"]["www.site.test"];
    assert_eq!(www["ansible_host"], "192.0.2.10");
    assert_eq!(www["ansible_user"], "siteadmin");
    assert_eq!(www["trog_hypervisor"], "hv1");
    assert!(www["ansible_ssh_common_args"]
        .as_str()
        .unwrap()
        .contains("HostKeyAlias=trog-guest.www.site.test"));
    assert_eq!(
        inventory["hypervisor_hv1"]["hosts"],
        serde_json::json!(["db.site.test", "www.site.test"])
    );
    assert_eq!(
        inventory["tenant_blue"]["hosts"],
        serde_json::json!(["db.site.test"])
    );
    assert_eq!(
        inventory["recipe_nginx"]["hosts"].as_array().unwrap().len(),
        4
    );

    // Ansible's own reading: the inventory as a script's output.
    let found = Command::new("ansible-inventory")
        .arg("--version")
        .output()
        .expect("ansible-inventory is missing (bash .ci/install-packages installs ansible-core)");
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let script = site.path("inventory.sh");
    let saved = site.path("inventory.json");
    std::fs::write(&saved, &text).unwrap();
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec cat '{}'\n", saved.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let read = Command::new("ansible-inventory")
        .arg("-i")
        .arg(&script)
        .arg("--list")
        .env("ANSIBLE_LOCAL_TEMP", site.path("ansible-tmp"))
        .env("ANSIBLE_HOME", site.path("ansible-home"))
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", said(&read));
    assert!(
        !String::from_utf8_lossy(&read.stderr).contains("WARNING"),
        "{}",
        said(&read)
    );
    let listed: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(
        listed["_meta"]["hostvars"]["db.site.test"]["ansible_host"],
        "192.0.2.11"
    );
    assert_eq!(
        listed["tenant_blue"]["hosts"],
        serde_json::json!(["db.site.test"])
    );
}

#[test]
fn the_json_event_lists_the_machines_without_a_secret() {
    let site = Site::with_two_built_guests();
    let text = site.inventory(&["--json", "--format", "ansible"]);
    let event: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(event["event"], "inventory");
    let machines = event["machines"].as_array().unwrap();
    let names: Vec<&str> = machines
        .iter()
        .map(|machine| machine["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "db.site.test",
            "foreign.site.test",
            "new.site.test",
            "www.site.test"
        ]
    );
    assert_eq!(machines[3]["address_origin"], "declared");
    assert_eq!(
        machines[3]["host_keys"][0],
        site.www.host_key().public_key_openssh
    );
    assert_eq!(machines[2]["address"], serde_json::Value::Null);
    assert!(!text.contains("PRIVATE KEY"));
}

#[test]
fn an_address_assign_ip_recorded_in_ips_db_is_the_machines_address() {
    let site = Site::with_two_built_guests();
    std::fs::write(
        site.path("etc/recipes.d/new.site.test.yaml"),
        "new.site.test:\n  _global:\n    cpus: 1\n    address_range: 192.0.2.100-192.0.2.110/24\n    gateway: 192.0.2.1\n  nginx: {}\n",
    )
    .unwrap();
    let assigned = site.trog(&["assign_ip", "new.site.test"]);
    assert!(assigned.status.success(), "{}", said(&assigned));
    let text = site.inventory(&["--json", "--format", "ansible", "new.site.test"]);
    let event: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let machines = event["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 1, "only the machine named: {text}");
    assert_eq!(machines[0]["address"], "192.0.2.100");
    assert_eq!(machines[0]["address_origin"], "recorded");
    let unknown = site.trog(&["inventory", "--format", "ansible", "gone.site.test"]);
    assert_eq!(unknown.status.code(), Some(3), "{}", said(&unknown));
}

#[test]
fn an_existing_host_is_at_its_address_and_a_dependent_is_reached_as_its_machine() {
    let site = Site::with_two_built_guests();
    let recipes_d = site.path("etc/recipes.d");
    std::fs::write(
        recipes_d.join("old.site.test.yaml"),
        "old.site.test:\n  _global:\n    existing_host: old-box.example.test\n    admin_user: ~\n  nginx: {}\n",
    )
    .unwrap();
    std::fs::write(
        recipes_d.join("blog.site.test.yaml"),
        "blog.site.test:\n  _global:\n    depends_on: www.site.test\n  nginx: {}\n",
    )
    .unwrap();
    let inventory: serde_json::Value =
        serde_json::from_str(&site.inventory(&["--format", "ansible"])).unwrap();
    let hostvars = &inventory["_meta"]["hostvars"];
    assert_eq!(
        hostvars["old.site.test"]["ansible_host"],
        "old-box.example.test"
    );
    // `_base`'s admin_user unset for it (`~`) and none of its own: root, as the specification
    // says.
    assert_eq!(hostvars["old.site.test"]["ansible_user"], "root");
    assert_eq!(hostvars["blog.site.test"]["ansible_host"], "192.0.2.10");
    assert_eq!(hostvars["blog.site.test"]["ansible_user"], "siteadmin");
    assert_eq!(hostvars["blog.site.test"]["trog_runs_on"], "www.site.test");

    // OpenSSH reads the dependent's block as its machine's: address, login and pinned key.
    let config = site.path("ssh_config");
    let known_hosts = site.path("known_hosts");
    std::fs::write(
        &config,
        site.inventory(&[
            "--format",
            "ssh-config",
            "--known-hosts",
            known_hosts.to_str().unwrap(),
        ]),
    )
    .unwrap();
    let blog = ssh_g(&config, "blog.site.test");
    assert_eq!(option(&blog, "hostname"), ["192.0.2.10"]);
    assert_eq!(option(&blog, "user"), ["siteadmin"]);
    let old = ssh_g(&config, "old.site.test");
    assert_eq!(option(&old, "hostname"), ["old-box.example.test"]);
    assert_eq!(option(&old, "user"), ["root"]);
}
