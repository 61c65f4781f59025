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
    /// never resized, deleted or detached by a run (a size other than its own, bigger or
    /// smaller, is refused unless the run says `--destroy-data`; `destroy --purge` deletes it).
    DataVolume,
    /// The extra disks (`disks`): a disk new to the list is made and attached to the running guest
    /// and its definition, then formatted (when blank) and mounted by the finish, without a
    /// restart; one no longer listed is taken out of the definition and its volume kept; a
    /// different size is refused (never shrunk; growing is not supported); `destroy --purge`
    /// deletes them.
    ExtraDisks,
    /// Used when the guest is first built only: an existing guest is not re-addressed.
    BuildTime,
    /// The pin (`hypervisor`): it places the first build, and a built guest is never moved. A
    /// built guest pinned to another hypervisor than the one holding it is refused on every
    /// provision until the pin names that one again, or the guest is destroyed.
    Pin,
    /// The guest's own `libvirt_uri`, without hypervisors.conf: the one place every verb looks
    /// for the guest. A changed one is looked at alone: provision builds a second guest there,
    /// and the first is left where it was, out of every verb's sight.
    GuestUri,
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
            Convergence::DataVolume => "made and attached (restart); never resized or removed",
            Convergence::ExtraDisks => {
                "made, attached and mounted (no restart); never resized; an unlisted one detached and kept"
            }
            Convergence::BuildTime => "first build only",
            Convergence::Pin => {
                "first build only; naming another hypervisor than the guest's fails every provision"
            }
            Convergence::GuestUri => {
                "first build only; a changed one builds a second guest there"
            }
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
        // the address it was given. A pin that no longer names where it is fails the run; a
        // changed URI (without hypervisors.conf) is where the guest is looked for, alone.
        "address_range" => BuildTime,
        "hypervisor" => Pin,
        "libvirt_uri" => GuestUri,
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
