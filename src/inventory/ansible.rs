//! An Ansible dynamic inventory (the JSON `ansible-inventory --list` reads from a script): each
//! machine's address, login and pinned host key in `_meta.hostvars`, and groups by hypervisor,
//! tenant and recipe.

use super::SiteMachine;
use crate::render::quote::shell_quote;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The files the inventory points Ansible's ssh at, as absolute paths (checked with
/// [`super::ssh_config::file_value`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnsibleFiles<'a> {
    /// The known_hosts file of the machines' pinned host keys; without it, Ansible's ssh checks
    /// host keys as it always does.
    pub known_hosts: Option<&'a str>,
    /// The one machine whose login key was written, and the file it is in.
    pub identity: Option<(&'a str, &'a str)>,
}

/// A group name Ansible takes without a warning: letters, digits and `_`.
pub fn group_name(prefix: &str, name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{prefix}_{cleaned}")
}

/// The inventory: `_meta.hostvars`, one group per hypervisor (`hypervisor_NAME`), tenant
/// (`tenant_NAME`) and recipe (`recipe_NAME`), `ungrouped` for the machines in none, and `all`
/// listing the groups.
pub fn render(machines: &[SiteMachine], files: AnsibleFiles<'_>) -> Value {
    let mut hostvars = Map::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut ungrouped = Vec::new();
    for machine in machines {
        hostvars.insert(machine.name.clone(), host_vars(machine, files));
        let mut memberships = Vec::new();
        if let Some(hypervisor) = &machine.hypervisor {
            memberships.push(group_name("hypervisor", hypervisor));
        }
        if let Some(tenant) = &machine.tenant {
            memberships.push(group_name("tenant", tenant));
        }
        memberships.extend(
            machine
                .recipes
                .iter()
                .map(|recipe| group_name("recipe", recipe)),
        );
        if memberships.is_empty() {
            ungrouped.push(machine.name.clone());
        }
        for group in memberships {
            groups.entry(group).or_default().push(machine.name.clone());
        }
    }
    let mut inventory = Map::new();
    inventory.insert("_meta".into(), json!({ "hostvars": hostvars }));
    let mut children: Vec<String> = groups.keys().cloned().collect();
    children.push("ungrouped".into());
    inventory.insert("all".into(), json!({ "children": children }));
    inventory.insert("ungrouped".into(), json!({ "hosts": ungrouped }));
    for (group, hosts) in groups {
        inventory.insert(group, json!({ "hosts": hosts }));
    }
    Value::Object(inventory)
}

fn host_vars(machine: &SiteMachine, files: AnsibleFiles<'_>) -> Value {
    let mut vars = Map::new();
    if let Some(address) = &machine.address {
        vars.insert("ansible_host".into(), json!(address));
    }
    vars.insert("ansible_user".into(), json!(machine.admin_user));
    if let Some(machine_name) = &machine.runs_on {
        vars.insert("trog_runs_on".into(), json!(machine_name));
    }
    if let Some(known_hosts) = files.known_hosts {
        // Ansible splits these as a shell would (shlex); ssh then expands `%` in the value.
        let options = [
            format!(
                "HostKeyAlias={}",
                crate::secrets::host_key_alias(&machine.name)
            ),
            format!("UserKnownHostsFile={}", known_hosts.replace('%', "%%")),
            "GlobalKnownHostsFile=none".into(),
            "StrictHostKeyChecking=yes".into(),
        ];
        let words: Vec<String> = options
            .iter()
            .map(|option| {
                format!(
                    "-o {}",
                    shell_quote(option).expect("no NUL in a checked path")
                )
            })
            .collect();
        vars.insert("ansible_ssh_common_args".into(), json!(words.join(" ")));
    }
    if let Some((_, identity)) = files.identity.filter(|(name, _)| *name == machine.name) {
        vars.insert("ansible_ssh_private_key_file".into(), json!(identity));
    }
    vars.insert("trog_hypervisor".into(), json!(machine.hypervisor));
    vars.insert("trog_tenant".into(), json!(machine.tenant));
    vars.insert("trog_recipes".into(), json!(machine.recipes));
    vars.insert("trog_address_origin".into(), json!(machine.address_origin));
    Value::Object(vars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::fixtures::machine;

    #[test]
    fn machines_are_grouped_by_hypervisor_tenant_and_recipe() {
        let www = machine("www.example.test");
        let mut db = machine("db.example.test");
        db.hypervisor = Some("hv-2".into());
        db.tenant = Some("blue".into());
        db.recipes = vec!["adminconfig".into(), "postgresql".into()];
        let inventory = render(&[www, db], AnsibleFiles::default());
        assert_eq!(
            inventory["all"]["children"],
            json!([
                "hypervisor_hv1",
                "hypervisor_hv_2",
                "recipe_adminconfig",
                "recipe_nginx",
                "recipe_postgresql",
                "tenant_blue",
                "ungrouped"
            ])
        );
        assert_eq!(
            inventory["recipe_adminconfig"]["hosts"],
            json!(["www.example.test", "db.example.test"])
        );
        assert_eq!(
            inventory["hypervisor_hv_2"]["hosts"],
            json!(["db.example.test"])
        );
        assert_eq!(
            inventory["tenant_blue"]["hosts"],
            json!(["db.example.test"])
        );
        assert_eq!(inventory["ungrouped"]["hosts"], json!([]));
        let db_vars = &inventory["_meta"]["hostvars"]["db.example.test"];
        assert_eq!(db_vars["ansible_host"], "192.0.2.10");
        assert_eq!(db_vars["ansible_user"], "siteadmin");
        assert_eq!(db_vars["trog_tenant"], "blue");
        assert_eq!(db_vars["trog_address_origin"], "declared");
        assert!(db_vars.get("ansible_ssh_common_args").is_none());
        assert!(db_vars.get("ansible_ssh_private_key_file").is_none());
    }

    #[test]
    fn the_pinned_key_and_a_written_login_key_reach_ansibles_ssh() {
        let files = AnsibleFiles {
            known_hosts: Some("/home/ops/trog known_hosts"),
            identity: Some(("www.example.test", "/home/ops/www.key")),
        };
        let mut bare = machine("bare.example.test");
        bare.address = None;
        bare.hypervisor = None;
        bare.recipes.clear();
        let inventory = render(&[machine("www.example.test"), bare], files);
        let www = &inventory["_meta"]["hostvars"]["www.example.test"];
        assert_eq!(
            www["ansible_ssh_common_args"],
            "-o HostKeyAlias=trog-guest.www.example.test \
             -o 'UserKnownHostsFile=/home/ops/trog known_hosts' \
             -o GlobalKnownHostsFile=none -o StrictHostKeyChecking=yes"
        );
        assert_eq!(www["ansible_ssh_private_key_file"], "/home/ops/www.key");
        let bare = &inventory["_meta"]["hostvars"]["bare.example.test"];
        assert!(bare.get("ansible_host").is_none());
        assert!(bare.get("ansible_ssh_private_key_file").is_none());
        assert_eq!(
            inventory["ungrouped"]["hosts"],
            json!(["bare.example.test"])
        );
    }
}
