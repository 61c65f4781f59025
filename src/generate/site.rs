//! The site's own files beside a guest's configuration, in `recipes.d/<fqdn>/`: `users.yaml`
//! (cloud-init users), `data.tar.gz` (the site's data, restored by the `data` recipe).

use crate::config::bounded_read::{read_bounded, MAX_TEXT_FILE_BYTES};
use crate::config::paths::InstallationPaths;
use crate::config::yaml::{parse_located, LocatedNode, Node, Origin, YamlSyntaxError};
use crate::model::names::DomainName;
use std::path::PathBuf;

#[derive(Debug, Default, Clone)]
pub struct SiteFiles {
    /// cloud-init `users` entries.
    pub users: Vec<serde_json::Value>,
    /// The site's archive, shipped in the payload.
    pub data_archive: Option<Vec<u8>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SiteFilesError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// users.yaml is not YAML (the error says where).
    #[error(transparent)]
    UsersSyntax(YamlSyntaxError),
    /// users.yaml is YAML of the wrong shape.
    #[error("{at}: {message}")]
    Users { at: Origin, message: String },
    /// users.yaml names a user trog makes itself, or one that is no login of a guest.
    #[error("{at}: {}", reserved.why(name))]
    ReservedUser {
        at: Origin,
        name: String,
        reserved: ReservedUser,
    },
    #[error("{}: {message}", path.display())]
    UsersNotText { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    DataArchive { path: PathBuf, message: String },
}

/// A user users.yaml may not name, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservedUser {
    /// `root`: the system's own account, which no one logs into on a trog guest (the seed sets
    /// cloud-init's `disable_root`); an entry would only change it behind that.
    Root,
    /// The installation's `admin_user`, which the seed makes on every guest with passwordless
    /// sudo and trog's key: a second entry of that name would change its groups and keys.
    AdminUser,
}

impl ReservedUser {
    fn why(self, name: &str) -> String {
        match self {
            ReservedUser::Root => format!(
                "`{name}` is the guest's root account, which no one logs into on a trog guest; users.yaml lists the site's other logins"
            ),
            ReservedUser::AdminUser => format!(
                "`{name}` is the installation's admin_user, which trog makes on every guest itself (with passwordless sudo and trog's key); users.yaml lists the site's other logins"
            ),
        }
    }
}

impl crate::diagnose::Diagnose for SiteFilesError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        match self {
            SiteFilesError::UsersSyntax(error) => Some(error.hint()),
            SiteFilesError::Users { .. } | SiteFilesError::UsersNotText { .. } => Some("users.yaml is a list of cloud-init users: `- name: alice` with groups, ssh_authorized_keys, …".into()),
            SiteFilesError::ReservedUser { reserved: ReservedUser::Root, .. } => Some("remove the entry: log in as admin_user and use sudo, or give the person a login of their own".into()),
            SiteFilesError::ReservedUser { reserved: ReservedUser::AdminUser, .. } => Some("remove the entry: the adminconfig recipe's `authorized_keys` gives the admin more keys; or list the person under a login of their own".into()),
            SiteFilesError::DataArchive { .. } => Some("make it with `tar -czf data.tar.gz -C SITE_DIR .` (the data recipe restores it into site_dir)".into()),
            SiteFilesError::Read { .. } => Some("the site files are regular files in recipes.d/<fqdn>/: users.yaml and data.tar.gz; remove or replace what is there".into()),
        }
    }
}

/// Reads the site files of `domain`, whose `admin_user` (empty when it has none of its own) its
/// users.yaml may not name; absent files are simply not there.
pub fn load_site_files(
    paths: &InstallationPaths,
    domain: &DomainName,
    admin_user: &str,
) -> Result<SiteFiles, SiteFilesError> {
    let dir = paths.site_dir(domain);
    let read = |name: &str| -> Result<Option<Vec<u8>>, SiteFilesError> {
        let path = dir.join(name);
        let limit = if name == DATA_ARCHIVE {
            MAX_DATA_ARCHIVE_BYTES
        } else {
            MAX_TEXT_FILE_BYTES
        };
        match read_bounded(&path, limit) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SiteFilesError::Read { path, source }),
        }
    };
    let users = match read("users.yaml")? {
        None => Vec::new(),
        Some(bytes) => {
            let path = dir.join("users.yaml");
            let text = String::from_utf8(bytes).map_err(|_| SiteFilesError::UsersNotText {
                path: path.clone(),
                message: "it is not UTF-8 text".into(),
            })?;
            parse_users(&path, &text, admin_user)?
        }
    };
    let data_archive = read(DATA_ARCHIVE)?;
    if let Some(archive) = &data_archive {
        check_data_archive(archive).map_err(|message| SiteFilesError::DataArchive {
            path: dir.join(DATA_ARCHIVE),
            message,
        })?;
    }
    Ok(SiteFiles {
        users,
        data_archive,
    })
}

/// Reads users.yaml's text: a list of mappings, each with a `name` that is a login, not `root`
/// nor `admin_user`; an empty file is no users. Every problem is reported at the file, line and
/// column it was written at.
fn parse_users(
    path: &std::path::Path,
    text: &str,
    admin_user: &str,
) -> Result<Vec<serde_json::Value>, SiteFilesError> {
    let document = parse_located(path, text).map_err(SiteFilesError::UsersSyntax)?;
    let wrong = |node: &LocatedNode, message: String| SiteFilesError::Users {
        at: node.origin.clone(),
        message,
    };
    let items = match &document.value {
        Node::Null => return Ok(Vec::new()),
        Node::Sequence(items) => items,
        other => {
            return Err(wrong(
                &document,
                format!("a list of users is expected here, not {}", other.describe()),
            ))
        }
    };
    for item in items {
        let Node::Mapping(entries) = &item.value else {
            return Err(wrong(
                item,
                format!(
                    "each user is a mapping (`name: alice`, …), not {}",
                    item.value.describe()
                ),
            ));
        };
        match entries.get("name") {
            Some(name) if matches!(&name.value.value, Node::String(text) if !text.trim().is_empty()) => {
                if let Node::String(text) = &name.value.value {
                    if !is_login_name(text) {
                        return Err(wrong(
                            &name.value,
                            format!(
                                "`{}` is not a login name useradd makes (letters, digits, `_`, `.`, `-`, not starting with `-`, at most 32)",
                                crate::untrusted::one_line(text)
                            ),
                        ));
                    }
                    let reserved = if text == "root" {
                        Some(ReservedUser::Root)
                    } else if !admin_user.is_empty() && text == admin_user {
                        Some(ReservedUser::AdminUser)
                    } else {
                        None
                    };
                    if let Some(reserved) = reserved {
                        return Err(SiteFilesError::ReservedUser {
                            at: name.value.origin.clone(),
                            name: text.clone(),
                            reserved,
                        });
                    }
                }
            }
            Some(name) => {
                return Err(wrong(
                    &name.value,
                    format!(
                        "a user's `name` is its login, text, not {}",
                        name.value.value.describe()
                    ),
                ))
            }
            None => return Err(wrong(item, "this user has no `name`".into())),
        }
    }
    Ok(items.iter().map(|item| item.value.to_json()).collect())
}

/// Whether `name` is a login the guest's useradd makes (cloud-init creates the users with it):
/// letters, digits, `_`, `.` and `-`, not starting with `-`, an optional `$` at the end, not
/// `.` or `..` nor only digits, at most 32 characters.
fn is_login_name(name: &str) -> bool {
    let stem = name.strip_suffix('$').unwrap_or(name);
    !stem.is_empty()
        && name.len() <= 32
        && !stem.starts_with('-')
        && stem != "."
        && stem != ".."
        && !stem.chars().all(|c| c.is_ascii_digit())
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// The site's archive, in the guest's site folder.
const DATA_ARCHIVE: &str = "data.tar.gz";

/// The largest site archive trog ships: it is held in memory and copied into the payload, and a
/// site's bulk data belongs on its data volume, not in every rebuild's upload.
pub const MAX_DATA_ARCHIVE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Whether `archive` is a gzip-compressed tar archive that reads to its end, none of whose
/// members climbs out of the folder it is restored into (`..`, which tar on the guest refuses):
/// a file that is not would otherwise be found out only on the guest, minutes into a build.
fn check_data_archive(archive: &[u8]) -> Result<(), String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let entries = tar.entries().map_err(|error| error.to_string())?;
    for entry in entries {
        let mut entry =
            entry.map_err(|error| format!("it is not a gzip-compressed tar archive: {error}"))?;
        let name = entry.path_bytes();
        if name.split(|byte| *byte == b'/').any(|part| part == b"..") {
            return Err(format!(
                "its member `{}` climbs out of the folder it is restored into (`..`), which tar on the guest refuses",
                crate::untrusted::one_line(&String::from_utf8_lossy(&name))
            ));
        }
        std::io::copy(&mut entry, &mut std::io::sink())
            .map_err(|error| format!("it is not a gzip-compressed tar archive: {error}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn refusal(text: &str) -> String {
        let error = parse_users(Path::new("/etc/trog/users.yaml"), text, "siteadmin").unwrap_err();
        error.to_string()
    }

    /// A gzip-compressed tar archive of `members` (name, contents), names written as given.
    fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, contents) in members {
            let mut header = tar::Header::new_gnu();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_size(contents.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, *contents).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gzip, &tar).unwrap();
        gzip.finish().unwrap()
    }

    #[test]
    fn a_data_archive_member_that_climbs_out_is_refused() {
        assert!(check_data_archive(&archive(&[("public/index.html", b"hi")])).is_ok());
        assert!(check_data_archive(&archive(&[("a..b/x", b"")])).is_ok());
        for name in ["../../etc/evil", "public/../../x", ".."] {
            let message = check_data_archive(&archive(&[("ok", b""), (name, b"x")])).unwrap_err();
            assert!(
                message.contains(&format!("`{name}` climbs out")),
                "{message}"
            );
        }
    }

    #[test]
    fn a_login_name_is_what_useradd_makes() {
        for name in ["alice", "john.doe", "_svc", "web-1", "Admin", "machine$"] {
            assert!(is_login_name(name), "{name}");
        }
        for name in [
            "",
            "a;b",
            "-x",
            "..",
            "123",
            "a b",
            "tab\t",
            &"a".repeat(33),
            "$",
        ] {
            assert!(!is_login_name(name), "{name:?}");
        }
    }

    #[test]
    fn users_are_a_list_of_named_mappings() {
        let users = parse_users(
            Path::new("users.yaml"),
            "- name: alice\n  groups: sudo\n- name: bob\n",
            "siteadmin",
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[1]["name"], "bob");
        assert!(
            parse_users(Path::new("users.yaml"), "# none yet\n", "siteadmin")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn root_and_the_admin_user_are_refused_at_their_name() {
        let refused = |text: &str, admin_user: &str| {
            parse_users(Path::new("/etc/trog/users.yaml"), text, admin_user).unwrap_err()
        };
        let root = refused("- name: alice\n- name: root\n", "siteadmin");
        assert!(matches!(
            root,
            SiteFilesError::ReservedUser {
                reserved: ReservedUser::Root,
                ..
            }
        ));
        assert!(
            root.to_string()
                .starts_with("/etc/trog/users.yaml:2:9: `root` is the guest's root account"),
            "{root}"
        );
        let admin = refused("- name: siteadmin\n  groups: [www-data]\n", "siteadmin");
        assert!(
            admin.to_string().starts_with(
                "/etc/trog/users.yaml:1:9: `siteadmin` is the installation's admin_user"
            ),
            "{admin}"
        );
        assert_eq!(
            crate::diagnose::Diagnose::exit_status(&admin),
            crate::exit_status::ExitStatus::Configuration
        );
        assert!(crate::diagnose::Diagnose::hint(&admin)
            .unwrap()
            .contains("authorized_keys"));
        // Logins are case-sensitive, and a guest without an admin of its own (a dependent) has
        // none to refuse.
        for (text, admin_user) in [
            ("- name: Root\n", "siteadmin"),
            ("- name: SiteAdmin\n", "siteadmin"),
            ("- name: siteadmin\n", ""),
        ] {
            assert!(
                parse_users(Path::new("users.yaml"), text, admin_user).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn every_wrong_users_file_is_refused_at_its_line() {
        for (text, expected) in [
            (
                "name: alice\n",
                "/etc/trog/users.yaml:1:1: a list of users is expected here, not a mapping",
            ),
            ("- name: [alice\n", "/etc/trog/users.yaml:1:"),
            (
                "- name: alice\n- groups: sudo\n",
                "/etc/trog/users.yaml:2:3: this user has no `name`",
            ),
            (
                "- name: alice\n- bob\n",
                "/etc/trog/users.yaml:2:3: each user is a mapping",
            ),
            (
                "- name: 12\n",
                "/etc/trog/users.yaml:1:9: a user's `name` is its login, text, not the number `12`",
            ),
            ("- name: a\n  name: b\n", "/etc/trog/users.yaml:2:"),
            (
                "- name: alice\n- name: \"a;b\"\n",
                "/etc/trog/users.yaml:2:9: `a;b` is not a login name",
            ),
            (
                "- name: \"-oops\"\n",
                "/etc/trog/users.yaml:1:9: `-oops` is not a login name",
            ),
            (
                "- name: \"al ice\"\n",
                "/etc/trog/users.yaml:1:9: `al ice` is not a login name",
            ),
        ] {
            let message = refusal(text);
            assert!(message.starts_with(expected), "{text:?}: {message}");
            assert!(
                !message.contains("<input>") && !message.contains("error:"),
                "{message}"
            );
        }
    }
}
