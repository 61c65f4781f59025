//! Folders of the hypervisor shared with a guest through virtiofs (the `vm` recipe's
//! `shared_folders`): read once from the recipe's effective arguments, checked for what its
//! schema cannot say (a name or a mount point used twice), then laid out in the domain XML and
//! mounted by the recipe's Makefile under the same tag. Pure.

use crate::model::system_directory::system_directory;
use serde_json::Value;

/// One folder: the hypervisor's `source` directory, seen by the guest at `mount` under the tag
/// `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFolder {
    /// The virtiofs tag, which the guest mounts by (`mount -t virtiofs NAME /mount`).
    pub name: String,
    /// The directory on the hypervisor.
    pub source: String,
    /// Where the guest mounts it.
    pub mount: String,
    pub readonly: bool,
}

/// A list the `vm` recipe's schema lets through but a guest cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedFolderError {
    #[error("shared folder `{name}` is listed twice (entries {first} and {second})")]
    NameTwice {
        name: String,
        first: usize,
        second: usize,
    },
    #[error("two shared folders are mounted at {mount} (entries {first} and {second})")]
    MountTwice {
        mount: String,
        first: usize,
        second: usize,
    },
    #[error("shared folder `{name}` would be mounted at {mount}, which the guest's system needs")]
    SystemMount {
        name: String,
        mount: String,
        entry: usize,
    },
}

impl SharedFolderError {
    /// The entry (counted from 0) of `shared_folders` to point the user at.
    pub fn entry(&self) -> usize {
        match self {
            SharedFolderError::NameTwice { second, .. }
            | SharedFolderError::MountTwice { second, .. } => *second,
            SharedFolderError::SystemMount { entry, .. } => *entry,
        }
    }
}

/// The folders `machine` (the `vm` recipe's effective arguments) declares, in their order.
/// Entries the schema already refused never get here; a value of another shape reads as none.
pub fn shared_folders(machine: &Value) -> Result<Vec<SharedFolder>, SharedFolderError> {
    let entries = machine
        .get("shared_folders")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut folders: Vec<SharedFolder> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let text = |key: &str| {
            entry
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let folder = SharedFolder {
            name: text("name"),
            source: text("source"),
            mount: text("mount"),
            readonly: entry
                .get("readonly")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        // Mounted over a system directory, the folder would hide the guest's own system.
        if system_directory(&folder.mount).is_some() {
            return Err(SharedFolderError::SystemMount {
                name: folder.name,
                mount: folder.mount,
                entry: index,
            });
        }
        if let Some(first) = folders.iter().position(|seen| seen.name == folder.name) {
            return Err(SharedFolderError::NameTwice {
                name: folder.name,
                first,
                second: index,
            });
        }
        if let Some(first) = folders.iter().position(|seen| seen.mount == folder.mount) {
            return Err(SharedFolderError::MountTwice {
                mount: folder.mount,
                first,
                second: index,
            });
        }
        folders.push(folder);
    }
    Ok(folders)
}

/// The folders as one fingerprint value: a change of any of them (or of their order, which
/// decides nothing but is cheap to follow) is a new definition.
pub fn fingerprint_value(folders: &[SharedFolder]) -> String {
    folders
        .iter()
        .map(|folder| {
            format!(
                "{}={}:{}{}",
                folder.name,
                folder.source,
                folder.mount,
                if folder.readonly { ":ro" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn folders_are_read_in_order_with_readonly_defaulting_to_writable() {
        let machine = json!({"shared_folders": [
            {"name": "site", "source": "/srv/share/site", "mount": "/srv/site"},
            {"name": "media", "source": "/srv/media", "mount": "/srv/media", "readonly": true},
        ]});
        let folders = shared_folders(&machine).unwrap();
        assert_eq!(folders.len(), 2);
        assert_eq!(folders[0].name, "site");
        assert!(!folders[0].readonly);
        assert!(folders[1].readonly);
        assert_eq!(
            fingerprint_value(&folders),
            "site=/srv/share/site:/srv/site,media=/srv/media:/srv/media:ro"
        );
    }

    #[test]
    fn none_declared_is_an_empty_list() {
        assert_eq!(shared_folders(&json!({})).unwrap(), []);
        assert_eq!(shared_folders(&Value::Null).unwrap(), []);
    }

    #[test]
    fn a_name_or_a_mount_used_twice_or_a_system_directory_is_refused() {
        let twice_named = json!({"shared_folders": [
            {"name": "a", "source": "/x", "mount": "/m1"},
            {"name": "a", "source": "/y", "mount": "/m2"},
        ]});
        assert_eq!(
            shared_folders(&twice_named).unwrap_err(),
            SharedFolderError::NameTwice {
                name: "a".into(),
                first: 0,
                second: 1
            }
        );
        let twice_mounted = json!({"shared_folders": [
            {"name": "a", "source": "/x", "mount": "/m"},
            {"name": "b", "source": "/y", "mount": "/m"},
        ]});
        assert_eq!(shared_folders(&twice_mounted).unwrap_err().entry(), 1);
        for system in ["/etc", "/lib32", "/usr/"] {
            let over = json!({"shared_folders": [{"name": "a", "source": "/x", "mount": system}]});
            assert!(
                matches!(
                    shared_folders(&over),
                    Err(SharedFolderError::SystemMount { .. })
                ),
                "{system}"
            );
        }
    }
}
