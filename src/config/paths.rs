//! Where an installation's files are: `/etc/trog-provisioner` unless `TROG_PROVISIONER_CONFIG`
//! says otherwise, with `--recipes` and `--hvconf` replacing one file each.
//!
//! Nothing of an installation lives in the checkout.

use std::path::{Path, PathBuf};

/// The configuration directory when nothing says otherwise.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/trog-provisioner";
/// The environment variable that points at another installation.
pub const CONFIG_DIR_VARIABLE: &str = "TROG_PROVISIONER_CONFIG";

/// The resolved paths of one installation's files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstallationPaths {
    /// The configuration directory.
    pub dir: PathBuf,
    /// The fleet: one `[block]` per hypervisor. May be absent (build on this machine), unless
    /// the command line named it.
    pub hypervisors_conf: PathBuf,
    /// Whether `--hvconf` named the fleet file: a file asked for by name must exist, since a
    /// misspelt path must not quietly mean "build on this machine".
    pub hypervisors_conf_named: bool,
    /// `_base` and its `_global`: the installation's settings and the recipes every guest gets.
    pub recipes_yaml: PathBuf,
    /// One `<fqdn>.yaml` per guest, and beside it an optional `<fqdn>/` folder of site files
    /// (`users.yaml`, `data.tar.gz`).
    pub recipes_d: PathBuf,
    /// The KeePass (KDBX4) secret store.
    pub secrets_kdbx: PathBuf,
    /// The SQLite database of address ranges and who holds each address.
    pub ips_db: PathBuf,
}

impl InstallationPaths {
    /// Resolves the paths from the command line's overrides and the value of
    /// `TROG_PROVISIONER_CONFIG` (passed in, so this stays free of process state).
    pub fn resolve(
        config_dir_variable: Option<&str>,
        recipes_override: Option<&Path>,
        hvconf_override: Option<&Path>,
    ) -> InstallationPaths {
        let dir = match config_dir_variable {
            Some(value) if !value.is_empty() => PathBuf::from(value),
            _ => PathBuf::from(DEFAULT_CONFIG_DIR),
        };
        InstallationPaths {
            hypervisors_conf: hvconf_override
                .map(Path::to_path_buf)
                .unwrap_or_else(|| dir.join("hypervisors.conf")),
            hypervisors_conf_named: hvconf_override.is_some(),
            recipes_yaml: recipes_override
                .map(Path::to_path_buf)
                .unwrap_or_else(|| dir.join("recipes.yaml")),
            recipes_d: dir.join("recipes.d"),
            secrets_kdbx: dir.join("secrets.kdbx"),
            ips_db: dir.join("ips.db"),
            dir,
        }
    }

    /// Resolves the paths for this process: its environment, and the files the command line
    /// replaced (`--recipes`, `--hvconf`).
    pub fn from_environment(
        recipes_override: Option<&Path>,
        hvconf_override: Option<&Path>,
    ) -> InstallationPaths {
        let variable = std::env::var(CONFIG_DIR_VARIABLE).ok();
        InstallationPaths::resolve(variable.as_deref(), recipes_override, hvconf_override)
    }

    /// The guest's own configuration file.
    pub fn domain_file(&self, domain: &crate::model::names::DomainName) -> PathBuf {
        self.recipes_d.join(format!("{domain}.yaml"))
    }

    /// The folder of the guest's site files (`users.yaml`, `data.tar.gz`).
    pub fn site_dir(&self, domain: &crate::model::names::DomainName) -> PathBuf {
        self.recipes_d.join(domain.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_etc() {
        let paths = InstallationPaths::resolve(None, None, None);
        assert_eq!(paths.dir, PathBuf::from("/etc/trog-provisioner"));
        assert_eq!(
            paths.hypervisors_conf,
            PathBuf::from("/etc/trog-provisioner/hypervisors.conf")
        );
        assert_eq!(
            paths.secrets_kdbx,
            PathBuf::from("/etc/trog-provisioner/secrets.kdbx")
        );
    }

    #[test]
    fn variable_moves_everything_and_flags_move_one_file() {
        let paths =
            InstallationPaths::resolve(Some("/tmp/inst"), Some(Path::new("/x/r.yaml")), None);
        assert_eq!(paths.recipes_yaml, PathBuf::from("/x/r.yaml"));
        assert_eq!(
            paths.hypervisors_conf,
            PathBuf::from("/tmp/inst/hypervisors.conf")
        );
        assert_eq!(paths.recipes_d, PathBuf::from("/tmp/inst/recipes.d"));
    }
}
