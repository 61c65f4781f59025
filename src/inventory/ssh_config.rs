//! An OpenSSH `ssh_config` block per machine: `ssh -F FILE www.example.test` (or an `Include` of
//! the file) logs in as the machine's admin user at its address, accepting the host key trog
//! pinned for it and no other.

use super::{SiteMachine, SshFiles};

/// A path ssh_config cannot carry unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{}` cannot be written into an ssh_config: it {why}",
    crate::untrusted::one_line(path)
)]
pub struct PathNotExpressible {
    pub path: String,
    pub why: &'static str,
}

/// `path` as an ssh_config value of a file option (`UserKnownHostsFile`, `IdentityFile`): in
/// double quotes, `%` doubled (OpenSSH expands `%` tokens there). Quotes, backslashes, `$` (an
/// environment variable there) and control characters have no plain spelling and are refused.
pub fn file_value(path: &str) -> Result<String, PathNotExpressible> {
    let refuse = |why| PathNotExpressible {
        path: path.to_string(),
        why,
    };
    if !path.starts_with('/') {
        return Err(refuse("is not absolute"));
    }
    if path.contains(['"', '\\']) {
        return Err(refuse("holds a quote or a backslash"));
    }
    if path.contains('$') {
        return Err(refuse(
            "holds a `$`, which OpenSSH reads as a variable there",
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(refuse("holds a control character"));
    }
    Ok(format!("\"{}\"", path.replace('%', "%%")))
}

/// The blocks of every machine. `files` holds values already made by [`file_value`]. A machine
/// without an address is named in a comment and left out: `Host` without `HostName` would send
/// ssh to whatever its name resolves to.
pub fn render(machines: &[SiteMachine], files: SshFiles<'_>) -> String {
    let mut text = String::from(
        "# The site's machines, written by `trog inventory --format ssh-config`.\n\
         # Each accepts only the host key trog pinned for it.\n",
    );
    for machine in machines {
        text.push('\n');
        let Some(address) = &machine.address else {
            text.push_str(&format!(
                "# {}: no address known (no `ips`, none in ips.db, no lease): left out\n",
                machine.name
            ));
            continue;
        };
        if let Some(hypervisor) = &machine.hypervisor {
            text.push_str(&format!("# {}: on {hypervisor}\n", machine.name));
        }
        if let Some(machine_name) = &machine.runs_on {
            text.push_str(&format!(
                "# {}: runs on {machine_name}'s machine (`depends_on`)\n",
                machine.name
            ));
        }
        if machine.host_keys.is_empty() {
            text.push_str(&format!(
                "# {}: the secret store holds no host key for it: ssh refuses it until \
                 `trog provision {}` builds it\n",
                machine.name, machine.name
            ));
        }
        text.push_str(&format!("Host {}\n", machine.name));
        text.push_str(&format!("    HostName {address}\n"));
        text.push_str(&format!("    User {}\n", machine.admin_user));
        text.push_str(&format!(
            "    HostKeyAlias {}\n",
            crate::secrets::host_key_alias(&machine.name)
        ));
        text.push_str(&format!("    UserKnownHostsFile {}\n", files.known_hosts));
        text.push_str("    GlobalKnownHostsFile none\n");
        text.push_str("    StrictHostKeyChecking yes\n");
        text.push_str("    UpdateHostKeys no\n");
        if let Some((_, identity)) = files.identity.filter(|(name, _)| *name == machine.name) {
            text.push_str(&format!("    IdentityFile {identity}\n"));
            text.push_str("    IdentitiesOnly yes\n");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::fixtures::machine;

    const FILES: SshFiles<'static> = SshFiles {
        known_hosts: "\"/home/ops/.ssh/trog_known_hosts\"",
        identity: None,
    };

    #[test]
    fn a_machine_is_its_address_its_admin_user_and_its_pinned_key() {
        let text = render(&[machine("www.example.test")], FILES);
        assert_eq!(
            text,
            "# The site's machines, written by `trog inventory --format ssh-config`.\n\
             # Each accepts only the host key trog pinned for it.\n\
             \n\
             # www.example.test: on hv1\n\
             Host www.example.test\n    \
             HostName 192.0.2.10\n    \
             User siteadmin\n    \
             HostKeyAlias trog-guest.www.example.test\n    \
             UserKnownHostsFile \"/home/ops/.ssh/trog_known_hosts\"\n    \
             GlobalKnownHostsFile none\n    \
             StrictHostKeyChecking yes\n    \
             UpdateHostKeys no\n"
        );
        assert!(!text.contains("IdentityFile"), "only when asked");
    }

    #[test]
    fn the_key_file_goes_to_the_one_machine_it_was_written_for() {
        let files = SshFiles {
            identity: Some(("db.example.test", "\"/home/ops/db.key\"")),
            ..FILES
        };
        let text = render(
            &[machine("www.example.test"), machine("db.example.test")],
            files,
        );
        let (www, db) = text.split_once("Host db.example.test").unwrap();
        assert!(!www.contains("IdentityFile"));
        assert!(db.contains("    IdentityFile \"/home/ops/db.key\"\n    IdentitiesOnly yes\n"));
    }

    #[test]
    fn a_machine_without_address_is_left_out_and_one_without_key_is_said() {
        let mut nowhere = machine("nowhere.example.test");
        nowhere.address = None;
        let mut unbuilt = machine("new.example.test");
        unbuilt.host_keys.clear();
        let text = render(&[nowhere, unbuilt], FILES);
        assert!(text.contains("# nowhere.example.test: no address known"));
        assert!(!text.contains("Host nowhere.example.test"));
        assert!(text.contains("Host new.example.test\n"));
        assert!(text.contains("`trog provision new.example.test` builds it"));
    }

    #[test]
    fn a_file_value_is_quoted_with_its_tokens_escaped() {
        assert_eq!(
            file_value("/home/ops/my keys/100%").unwrap(),
            "\"/home/ops/my keys/100%%\""
        );
        for (path, why) in [
            ("keys/www", "is not absolute"),
            ("/a\"b", "holds a quote or a backslash"),
            ("/a\\b", "holds a quote or a backslash"),
            (
                "/home/$USER/k",
                "holds a `$`, which OpenSSH reads as a variable there",
            ),
            ("/a\nHost *", "holds a control character"),
        ] {
            assert_eq!(file_value(path).unwrap_err().why, why, "{path:?}");
        }
    }
}
