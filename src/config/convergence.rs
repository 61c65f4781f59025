//! How a change of each setting `_global` accepts reaches a guest that is already built: what
//! `provision` does about it on its next run. The reference tables in docs/CONFIGURATION.md
//! print it; a test generates a guest before and after a change of every setting and checks that
//! the digests the planner compares move as the class says.

/// What a changed setting costs an existing guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convergence {
    /// Part of the domain definition (the shape fingerprint): the domain is redefined and the
    /// guest restarted, or with `--restart-later` redefined and left running on its old
    /// definition until it is next started.
    Definition,
    /// Reaches the root disk or the cloud-init seed, which the guest reads on its root disk's
    /// first boot only: a new root disk is made (the data volume is kept, the guest's backed-up
    /// files are restored onto it).
    RootDisk,
    /// Carried by the payload (Makefile, rendered files): the guest is finished again, without
    /// a restart.
    Finish,
    /// The data volume: made and attached by a redefinition and a restart when it is declared;
    /// never shrunk, deleted or detached by a run (a bigger size is refused unless the run says
    /// `--destroy-data`; `destroy --purge` deletes it).
    DataVolume,
    /// The extra disks (`disks`): a disk new to the list is made and attached to the running guest
    /// and its definition, then formatted (when blank) and mounted by the finish, without a
    /// restart; one no longer listed is taken out of the definition and its volume kept; a
    /// different size is refused (never shrunk; growing is not supported); `destroy --purge`
    /// deletes them.
    ExtraDisks,
    /// Used when the guest is first built only: an existing guest is not moved or re-addressed.
    BuildTime,
    /// Used when a root disk is next made (the image it is made over); a guest is not rebuilt
    /// for it, and what it ends up holding is the same.
    NextRootDisk,
    /// Read by trog on the machine it runs on; nothing of the guest.
    Trog,
    /// Where the domain runs (its own guest, another domain's machine, an existing host): the
    /// next provision finishes it there; nothing of where it ran before is removed.
    WhereItRuns,
}

impl Convergence {
    /// How the reference tables say it.
    pub fn describe(self) -> &'static str {
        match self {
            Convergence::Definition => {
                "redefine and restart (`--restart-later`: at the next start)"
            }
            Convergence::RootDisk => "new root disk (data volume kept)",
            Convergence::Finish => "finish again",
            Convergence::DataVolume => "made and attached (restart); never shrunk or removed",
            Convergence::ExtraDisks => {
                "made, attached and mounted (no restart); never resized; an unlisted one detached and kept"
            }
            Convergence::BuildTime => "first build only",
            Convergence::NextRootDisk => "the next new root disk; nothing rebuilt for it",
            Convergence::Trog => "trog's own; not the guest's",
            Convergence::WhereItRuns => {
                "finished where it now runs; nothing of the old machine removed"
            }
        }
    }
}

/// The class of `key`, a setting of the global schema or an argument of a distro or machine
/// recipe; `None` for a key nobody has classified yet (a test refuses that).
pub fn convergence(key: &str) -> Option<Convergence> {
    use Convergence::*;
    Some(match key {
        // The domain definition.
        "memory" | "cpus" | "cpu_mode" | "tenant" | "network" | "bridge" | "machine_type"
        | "firmware" | "disk_bus" | "disk_cache" | "disk_discard" | "shared_folders" => Definition,
        // The seed (users, keys, addresses, mirrors, time zone, first-boot packages) and the
        // disk itself.
        "admin_user"
        | "contact_email"
        | "distro"
        | "release"
        | "mirror"
        | "security_mirror"
        | "fallback_mirrors"
        | "fallback_security_mirrors"
        | "timezone"
        | "gateway"
        | "resolvers"
        | "search_domains"
        | "ips"
        | "size"
        | "image"
        | "packages" => RootDisk,
        // The payload.
        "cache" | "aliases" | "data_mount" | "upgrade" => Finish,
        // A domain without a guest of its own is finished again where it now runs; nothing of
        // the machine it ran on before is removed (docs/SITES.md).
        "depends_on" | "existing_host" => WhereItRuns,
        "data_volume_size" => DataVolume,
        "disks" => ExtraDisks,
        // Placement and address assignment happen once: a guest stays where it was built, at
        // the address it was given.
        "hypervisor" | "libvirt_uri" | "address_range" => BuildTime,
        "keepass_key_file" | "backup_dir" | "backup_retention_days" => Trog,
        // Which image a root disk is made over, not what the guest holds after its finish.
        "bake_packages" | "baked_image_max_age_days" => NextRootDisk,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // That every setting `_global` accepts is classified is checked with the shipped recipes'
    // settings, in generate/convergence_tests.rs.

    #[test]
    fn an_unknown_key_is_not_classified() {
        assert_eq!(convergence("flavour"), None);
    }
}
