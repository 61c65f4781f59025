//! Facts into checks. Every check is made whatever the others found, so one run of preflight
//! lists everything there is to fix.

use super::*;

/// `11003000` → `11.3.0`.
pub fn version_text(version: u32) -> String {
    format!(
        "{}.{}.{}",
        version / 1_000_000,
        version / 1000 % 1000,
        version % 1000
    )
}

/// Reads `findmnt --noheadings --bytes --output TARGET,FSTYPE,SIZE,AVAIL` output.
pub fn parse_findmnt(text: &str) -> Option<FilesystemFacts> {
    let fields: Vec<&str> = text.lines().next()?.split_whitespace().collect();
    let [mount_point, fs_type, size, available] = fields[..] else {
        return None;
    };
    Some(FilesystemFacts {
        mount_point: mount_point.to_string(),
        fs_type: fs_type.to_string(),
        size_bytes: size.parse().ok()?,
        available_bytes: available.parse().ok()?,
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1024.0 * 1024.0 * 1024.0))
}

/// The sudoers lines a login needs, as the command that prints them: one `NOPASSWD` line for each
/// of trog's root programs, and nothing else.
fn nopasswd_line(user: &str) -> String {
    format!("lines `trog root-programs sudoers --user {user}` prints")
}

/// Whether the host has trog's root programs, as this trog embeds them.
fn root_programs_check(
    host: &str,
    user: &str,
    found: &Result<Option<Vec<(String, Installed)>>, String>,
) -> Check {
    let found = match found {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Check::note(
                format!("trog runs as root on {host}: it needs no sudo, and runs the root programs it embeds"),
                "run trog as an account in group libvirt instead (bin/setup makes one, `trog`), with the sudoers lines `trog root-programs sudoers` prints",
            )
        }
        Err(why) => {
            return Check::failed(
                format!("trog's root programs on {host} not checked: {why}"),
                "fix the connection first",
            )
        }
    };
    let named = |wanted: Installed| {
        found
            .iter()
            .filter(|(_, state)| *state == wanted)
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>()
    };
    let (missing, differing) = (named(Installed::Missing), named(Installed::Differs));
    if missing.is_empty() && differing.is_empty() {
        return Check::ok(format!(
            "trog's {} root programs on {host} are this trog's",
            found.len()
        ));
    }
    let mut summary = format!("trog's root programs on {host} are not this trog's:");
    if !missing.is_empty() {
        summary.push_str(&format!(" missing {}", missing.join(", ")));
    }
    if !differing.is_empty() {
        if !missing.is_empty() {
            summary.push(';');
        }
        summary.push_str(&format!(" another version's {}", differing.join(", ")));
    }
    let advice = if host == "this machine" {
        format!("install them as root: `trog root-programs install-script --user {user} | sudo sh` (bin/setup does)")
    } else {
        format!("install them there: `trog root-programs install-script --user {user} | ssh {user}@{host} sudo sh` (as a login that may run sudo sh there)")
    };
    Check::failed(summary, advice)
}

/// The checks of one hypervisor, in the order they are printed.
pub fn hypervisor_checks(facts: &HypervisorFacts) -> Vec<Check> {
    let host = &facts.host;
    let user = facts
        .expected_user
        .clone()
        .or_else(|| facts.login.clone().ok())
        .unwrap_or_else(|| "the login".into());
    let mut checks = Vec::new();

    // Reached as the expected user.
    checks.push(match (&facts.login, &facts.expected_user) {
        (Ok(login), Some(expected)) if login != expected => Check::failed(
            format!("Reached {host} as {login}, not as {expected}"),
            "the login is rewritten on the way (a User line in ~/.ssh/config?): make it the user the URI names",
        ),
        (Ok(login), _) => Check::ok(format!("Reached {host} as {login}")),
        (Err(why), _) => Check::failed(
            format!("Cannot reach {host}: {why}"),
            format!("make `ssh {user}@{host}` work without a prompt (keys, agent, ~/.ssh/config)"),
        ),
    });

    // Passwordless sudo.
    checks.push(match &facts.sudo {
        Ok(SudoFact::Passwordless) => Check::ok(format!("Passwordless sudo for {user} on {host}")),
        Ok(SudoFact::PasswordHandedInWorks) => Check::ok(format!(
            "sudo for {user} on {host} works with the password handed in"
        )),
        Ok(SudoFact::WantsPassword) => Check::failed(
            format!("No passwordless sudo for {user} on {host}"),
            format!(
                "add the sudoers {} there, or hand the password in: printf 'sudo: %s\\n\\n' \"$SUDO\" | trog … --credentials",
                nopasswd_line(&user)
            ),
        ),
        Ok(SudoFact::PasswordHandedInRefused) => Check::failed(
            format!("sudo for {user} on {host} refuses the password handed in"),
            format!("hand in the right password, or add the sudoers {}", nopasswd_line(&user)),
        ),
        Ok(SudoFact::Refused(detail)) => Check::failed(
            format!("No sudo for {user} on {host}: {detail}"),
            format!("install sudo there and add the sudoers {}", nopasswd_line(&user)),
        ),
        Err(why) => Check::failed(
            format!("sudo for {user} on {host} not checked: {why}"),
            "fix the connection first",
        ),
    });

    checks.push(root_programs_check(host, &user, &facts.root_programs));

    // libvirt answers; versions match.
    match &facts.libvirt {
        Ok(libvirt) => {
            let qemu = if libvirt.hypervisor_version > 0 {
                format!(" (hypervisor {})", version_text(libvirt.hypervisor_version))
            } else {
                String::new()
            };
            checks.push(Check::ok(format!(
                "libvirt answers, running {}{qemu}",
                version_text(libvirt.daemon_version)
            )));
            let (linked, daemon) = (facts.linked_version, libvirt.daemon_version);
            checks.push(if linked / 1000 == daemon / 1000 {
                Check::ok(format!(
                    "libvirt {} that trog is linked against matches libvirt {} on the hypervisor",
                    version_text(linked),
                    version_text(daemon)
                ))
            } else {
                Check::failed(
                    format!(
                        "libvirt {} that trog is linked against differs from libvirt {} on the hypervisor",
                        version_text(linked),
                        version_text(daemon)
                    ),
                    "run a trog built against the hypervisor's libvirt release (same major.minor), or bring the two to one release: calls then fail with errors that do not look like a version problem",
                )
            });
        }
        Err(why) => {
            checks.push(Check::failed(
                format!("libvirt does not answer at {}: {why}", facts.uri),
                "check the libvirt_uri in hypervisors.conf (driver, path /system) and that libvirtd runs there; the login must be in the group that owns libvirt's socket",
            ));
            checks.push(Check::failed(
                format!(
                    "libvirt {} that trog is linked against not compared: libvirt did not answer",
                    version_text(facts.linked_version)
                ),
                "fix the libvirt connection first",
            ));
        }
    }

    // The storage pool and its filesystem.
    let pool = &facts.pool_name;
    match &facts.libvirt {
        Err(_) => checks.push(Check::failed(
            format!("Storage pool {pool} not checked: libvirt did not answer"),
            "fix the libvirt connection first",
        )),
        Ok(LibvirtFacts { pool: None, .. }) => checks.push(Check::note(
            format!("Storage pool {pool} does not exist"),
            "provision defines it at the hypervisor's pool_path; if pool_path is meant to be a filesystem of its own (with a quota), create and mount that first, or the pool fills whatever disk it lands on",
        )),
        Ok(LibvirtFacts { pool: Some(found), .. }) => {
            checks.push(if found.active {
                Check::ok(format!("Storage pool {pool} exists at {}", found.path))
            } else {
                Check::note(
                    format!("Storage pool {pool} exists at {} but is not running", found.path),
                    "provision starts it; if it does not start, see `virsh pool-start` there",
                )
            });
            checks.push(pool_filesystem_check(pool, &found.path, facts.pool_filesystem.as_ref()));
        }
    }

    // TPM and swtpm.
    checks.push(match (&facts.real_tpm, &facts.swtpm) {
        (Ok(true), Ok(true)) => Check::ok("Real TPM and swtpm: guests get an emulated TPM"),
        (Ok(true), Ok(false)) => Check::note(
            "Real TPM but no swtpm: guests are built without a TPM",
            "install swtpm and swtpm-tools there so guests get an emulated TPM backed by this host's",
        ),
        (Ok(false), _) => Check::note(
            "No real TPM: guests are built without one",
            "nothing to do unless guests must seal secrets; an emulated TPM without a real one beneath it would protect nothing",
        ),
        (Err(why), _) | (_, Err(why)) => Check::note(
            format!("TPM not checked: {why}"),
            "fix the connection first",
        ),
    });

    // virtiofsd, for guests' shared folders.
    checks.push(match &facts.virtiofsd {
        Ok(Some(path)) => Check::ok(format!("virtiofsd at {path}: guests can share folders from {host}")),
        Ok(None) => Check::note(
            format!("No virtiofsd on {host}: guests with shared_folders are refused there"),
            "install virtiofsd there if guests are to share its folders (Debian from trixie: `apt-get install virtiofsd`; on bookworm, as root: `apt-get install libseccomp-dev libcap-ng-dev && cargo install virtiofsd --root /usr/local`)",
        ),
        Err(why) => Check::note(format!("virtiofsd not checked: {why}"), "fix the connection first"),
    });

    // Hardware virtualisation, against the configured domain_type.
    checks.push(kvm_check(facts));

    // qemu-img, without which no guest can be built there.
    checks.push(match &facts.qemu_img {
        Ok(true) => Check::ok("qemu-img is there"),
        Ok(false) => Check::failed(
            format!("No qemu-img on {host}: provision cannot place a base image nor make a root disk there"),
            "install qemu-utils there (Debian and Ubuntu; qemu-img on Fedora)",
        ),
        // Not reached: the connection's own check has failed already.
        Err(why) => Check::note(
            format!("qemu-img not checked: {why}"),
            "fix the connection first",
        ),
    });

    // libguestfs, for debug_boot.
    checks.push(match &facts.libguestfs {
        Ok(true) => Check::ok("libguestfs is there"),
        Ok(false) => Check::note(
            "No libguestfs: debug_boot cannot read a guest's disk",
            "install libguestfs-tools there; without it debug_boot has all but --cat, --ls and --single",
        ),
        Err(why) => Check::note(
            format!("libguestfs not checked: {why}"),
            "fix the connection first",
        ),
    });

    // The SSH connection kept for the next run.
    match &facts.connection_kept {
        None => {}
        Some(Ok(())) => checks.push(Check::ok(format!(
            "The SSH connection to {host} stays open for a minute after each run, for the next run to use"
        ))),
        Some(Err(why)) => checks.push(Check::note(
            format!("The SSH connection to {host} is not kept between runs: {why}"),
            "give this user a private XDG_RUNTIME_DIR, or a home nobody else may write to; meanwhile every run pays SSH's handshake again",
        )),
    }
    checks
}

/// Whether the hypervisor's `domain_type` suits what its KVM does.
fn kvm_check(facts: &HypervisorFacts) -> Check {
    use crate::machine::hypervisor_ops::KvmVerdict;
    use crate::model::hypervisor::DomainType;
    let (host, name) = (&facts.host, &facts.name);
    match (&facts.kvm, facts.domain_type) {
        (Ok(KvmVerdict::Works), DomainType::Kvm) => {
            Check::ok(format!("KVM works on {host}: guests run with hardware virtualisation"))
        }
        (Ok(KvmVerdict::Works), DomainType::Qemu) => Check::note(
            format!("KVM works on {host}, but domain_type = qemu: guests run under software emulation, many times slower"),
            format!("remove `domain_type = qemu` from the [{name}] block of hypervisors.conf"),
        ),
        (Ok(KvmVerdict::DoesNotWork { reason }), DomainType::Kvm) => Check::failed(
            format!("KVM does not work on {host} ({reason}): guests with domain_type kvm do not start"),
            format!("write `domain_type = qemu` in the [{name}] block of hypervisors.conf (bin/setup does it for this machine)"),
        ),
        (Ok(KvmVerdict::DoesNotWork { reason }), DomainType::Qemu) => Check::ok(format!(
            "KVM does not work on {host} ({reason}); domain_type = qemu runs guests under software emulation"
        )),
        (Err(why), _) => Check::note(
            format!("KVM not checked: {why}"),
            "fix the connection and sudo first; QEMU (qemu-system-x86) must be installed there",
        ),
    }
}

/// Whether the pool's filesystem limits it. Decided by where that filesystem is mounted: at the
/// pool's own directory, it is a filesystem (a ZFS dataset with a quota, an LVM volume, …) that
/// the kernel stops at its size; at `/`, the pool can fill the whole disk; anywhere else, the pool
/// shares a filesystem with whatever else is there. A quota that is not a mount of its own (an
/// XFS project quota, a btrfs qgroup on an unmounted subvolume) is not seen.
fn pool_filesystem_check(
    pool: &str,
    pool_path: &str,
    filesystem: Option<&Result<FilesystemFacts, String>>,
) -> Check {
    let limit_advice = format!(
        "give the pool a filesystem of its own mounted at {pool_path} (e.g. `zfs create -o quota=500G -o mountpoint={pool_path} …`), so the kernel stops it at a size rather than at a full disk"
    );
    match filesystem {
        None => Check::note(format!("Filesystem of pool {pool} not checked"), limit_advice),
        Some(Err(why)) => Check::note(
            format!("Filesystem of pool {pool} not checked: {why}"),
            limit_advice,
        ),
        Some(Ok(fs)) if fs.mount_point == pool_path.trim_end_matches('/') => Check::ok(format!(
            "Pool {pool} has a filesystem of its own ({}, {}, {} free): it is limited to that",
            fs.fs_type,
            gib(fs.size_bytes),
            gib(fs.available_bytes)
        )),
        Some(Ok(fs)) if fs.mount_point == "/" => Check::note(
            format!(
                "Pool {pool} is on the root filesystem ({}, {} free): nothing limits it but the whole disk",
                gib(fs.size_bytes),
                gib(fs.available_bytes)
            ),
            limit_advice,
        ),
        Some(Ok(fs)) => Check::note(
            format!(
                "Pool {pool} shares the filesystem mounted at {} ({}, {} free): it is limited only by what the others leave",
                fs.mount_point,
                gib(fs.size_bytes),
                gib(fs.available_bytes)
            ),
            limit_advice,
        ),
    }
}

/// Whether the addresses trog gives guests itself on `hypervisor`'s networks lie outside those
/// networks' DHCP pools: a reservation does not end a lease, so a machine that leased such an
/// address keeps answering at it until its lease ends (docs/NETWORK.md). One note for each pool
/// and set of addresses, naming the guests; nothing when no guest that may be placed there
/// has addresses of its own on a network with a pool.
pub fn own_address_checks(
    hypervisor: &str,
    libvirt: &LibvirtFacts,
    guests: &[OwnAddresses],
) -> Vec<Check> {
    let mut overlapping: Vec<(&DhcpPool, String, Vec<&str>)> = Vec::new();
    let mut outside: Vec<&str> = Vec::new();
    let here = guests.iter().filter(|guest| {
        guest
            .hypervisor
            .as_deref()
            .is_none_or(|pinned| pinned == hypervisor)
    });
    for guest in here {
        let pools = libvirt
            .dhcp_pools
            .iter()
            .filter(|pool| pool.network == guest.network);
        for pool in pools {
            let in_pool = |address: std::net::Ipv4Addr| (pool.first..=pool.last).contains(&address);
            let mut held = Vec::new();
            if let Some(range) = &guest.address_range {
                if range.first <= pool.last && pool.first <= range.last {
                    held.push(format!("address_range {}–{}", range.first, range.last));
                }
            }
            let ips: Vec<String> = guest
                .ips
                .iter()
                .filter(|ip| in_pool(**ip))
                .map(ToString::to_string)
                .collect();
            if !ips.is_empty() {
                held.push(format!("ips {}", ips.join(", ")));
            }
            if held.is_empty() {
                outside.push(&guest.network);
                continue;
            }
            let what = held.join(" and ");
            match overlapping
                .iter_mut()
                .find(|(found, named, _)| *found == pool && *named == what)
            {
                Some((_, _, named_guests)) => named_guests.push(&guest.guest),
                None => overlapping.push((pool, what, vec![&guest.guest])),
            }
        }
    }
    let mut checks: Vec<Check> = overlapping
        .into_iter()
        .map(|(pool, what, named_guests)| {
            Check::note(
                format!(
                    "network {}'s DHCP pool on {hypervisor} ({}–{}) holds addresses trog gives \
                     guests itself: {what} ({})",
                    pool.network,
                    pool.first,
                    pool.last,
                    named_guests.join(", ")
                ),
                format!(
                    "narrow the pool so it leaves them out (`virsh net-update {network} delete \
                     ip-dhcp-range …` then `add`, with --live --config: docs/NETWORK.md, \"DHCP \
                     reservations\"), or give the guests addresses outside it: a machine that \
                     leased one of them keeps it until its lease ends, and provision refuses an \
                     address a running domain holds",
                    network = pool.network
                ),
            )
        })
        .collect();
    if checks.is_empty() && !outside.is_empty() {
        outside.sort_unstable();
        outside.dedup();
        checks.push(Check::ok(format!(
            "the guests' own addresses on {hypervisor} lie outside the DHCP pool of {}",
            outside.join(", ")
        )));
    }
    checks
}

/// The checks of the installation's configuration.
pub fn configuration_checks(facts: &ConfigurationFacts) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(if facts.dir_exists {
        Check::ok(format!("Configuration directory {}", facts.dir))
    } else {
        Check::failed(
            format!("No configuration directory {}", facts.dir),
            "create it (bin/setup), or point TROG_PROVISIONER_CONFIG at the installation",
        )
    });
    checks.push(match &facts.hypervisors_conf {
        FileFact::Loaded(what) => Check::ok(format!("hypervisors.conf: {what}")),
        FileFact::Missing => Check::ok("No hypervisors.conf: guests are built on this machine"),
        FileFact::Invalid(why) => Check::failed(
            format!("hypervisors.conf is invalid: {why}"),
            "fix the file; `trog fleet` shows the same error with its hint",
        ),
    });
    checks.push(match &facts.recipes_yaml {
        FileFact::Loaded(what) => Check::ok(format!("recipes.yaml: {what}")),
        FileFact::Missing => Check::failed(
            "No recipes.yaml",
            "write one (bin/setup writes an example); every guest's settings start from its _base",
        ),
        FileFact::Invalid(why) => {
            Check::failed(format!("recipes.yaml is invalid: {why}"), "fix the file")
        }
    });
    match &facts.guests {
        Err(problem) => checks.push(Check::failed(
            format!("recipes.d: {}", problem.why),
            problem.hint.clone(),
        )),
        Ok(guests) => {
            let broken: Vec<_> = guests.iter().filter(|(_, error)| error.is_some()).collect();
            if broken.is_empty() {
                checks.push(Check::ok(format!(
                    "recipes.d: {} guest{} load",
                    guests.len(),
                    if guests.len() == 1 { "" } else { "s" }
                )));
            }
            for (name, error) in broken {
                checks.push(Check::failed(
                    format!("recipes.d/{name}.yaml does not load: {}", error.as_deref().unwrap_or_default()),
                    "fix the file; `trog new_config` on that guest shows the same error with its hint",
                ));
            }
        }
    }
    match facts.mirror {
        Some(true) => checks.push(Check::ok("A mirror is configured in _global")),
        Some(false) => checks.push(Check::note(
            "No mirror in _global: every guest installs its packages from the distribution's servers",
            "each build downloads every package again, over the internet, and fails when that is slow or down; build a guest with the aptmirror recipe and name it in _global's mirror (docs/CONFIGURATION.md)",
        )),
        None => {}
    }
    match facts.cache {
        Some(true) => checks.push(Check::ok("A download cache is configured in _global")),
        Some(false) => checks.push(Check::note(
            "No cache in _global: what recipes download is fetched from its origin on every build",
            "build a guest with the fetchcache recipe and name it in _global's cache, so rebuilds do not depend on other people's servers (docs/CONFIGURATION.md)",
        )),
        None => {}
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> HypervisorFacts {
        HypervisorFacts {
            name: "hv1".into(),
            uri: "qemu+ssh://admin@hv1/system".into(),
            host: "hv1".into(),
            expected_user: Some("admin".into()),
            login: Ok("admin".into()),
            sudo: Ok(SudoFact::Passwordless),
            root_programs: Ok(Some(
                crate::machine::hypervisor_ops::root_programs::ALL
                    .iter()
                    .map(|program| (program.path(), Installed::Current))
                    .collect(),
            )),
            libvirt: Ok(LibvirtFacts {
                daemon_version: 11_003_000,
                hypervisor_version: 10_000_002,
                pool: Some(PoolFacts {
                    path: "/vms".into(),
                    active: true,
                }),
                dhcp_pools: Vec::new(),
            }),
            linked_version: 11_003_002,
            pool_name: "trog".into(),
            pool_filesystem: Some(Ok(FilesystemFacts {
                mount_point: "/vms".into(),
                fs_type: "zfs".into(),
                size_bytes: 500 << 30,
                available_bytes: 400 << 30,
            })),
            real_tpm: Ok(true),
            swtpm: Ok(true),
            virtiofsd: Ok(Some("/usr/libexec/virtiofsd".into())),
            libguestfs: Ok(true),
            qemu_img: Ok(true),
            domain_type: crate::model::hypervisor::DomainType::Kvm,
            kvm: Ok(crate::machine::hypervisor_ops::KvmVerdict::Works),
            connection_kept: Some(Ok(())),
        }
    }

    fn outcomes(checks: &[Check]) -> Vec<Outcome> {
        checks.iter().map(|c| c.outcome).collect()
    }

    #[test]
    fn a_healthy_hypervisor_is_all_ok() {
        let checks = hypervisor_checks(&healthy());
        assert!(
            checks.iter().all(|c| c.outcome == Outcome::Ok),
            "{checks:#?}"
        );
        assert_eq!(checks.len(), 13);
    }

    #[test]
    fn a_connection_that_cannot_be_kept_is_a_note_with_why() {
        let facts = HypervisorFacts {
            connection_kept: Some(Err("/home/www is not this user's own".into())),
            ..healthy()
        };
        let checks = hypervisor_checks(&facts);
        let last = checks.last().unwrap();
        assert_eq!(last.outcome, Outcome::Note);
        assert!(
            last.summary
                .ends_with("not kept between runs: /home/www is not this user's own"),
            "{}",
            last.summary
        );
        let local = HypervisorFacts {
            connection_kept: None,
            ..healthy()
        };
        assert_eq!(hypervisor_checks(&local).len(), 12);
    }

    #[test]
    fn every_check_is_made_even_when_nothing_answers() {
        let facts = HypervisorFacts {
            login: Err("connection refused".into()),
            sudo: Err("not reached".into()),
            root_programs: Err("not reached".into()),
            libvirt: Err("cannot connect".into()),
            pool_filesystem: None,
            real_tpm: Err("not reached".into()),
            swtpm: Err("not reached".into()),
            virtiofsd: Err("not reached".into()),
            libguestfs: Err("not reached".into()),
            qemu_img: Err("not reached".into()),
            kvm: Err("not reached".into()),
            ..healthy()
        };
        let checks = hypervisor_checks(&facts);
        assert_eq!(
            outcomes(&checks),
            [
                Outcome::Failed,
                Outcome::Failed,
                Outcome::Failed,
                Outcome::Failed,
                Outcome::Failed,
                Outcome::Failed,
                Outcome::Note,
                Outcome::Note,
                Outcome::Note,
                Outcome::Note,
                Outcome::Note,
                Outcome::Ok
            ]
        );
    }

    #[test]
    fn a_hypervisor_without_qemu_img_fails_with_the_package_to_install() {
        let facts = HypervisorFacts {
            qemu_img: Ok(false),
            ..healthy()
        };
        let checks = hypervisor_checks(&facts);
        let failed: Vec<_> = checks
            .iter()
            .filter(|check| check.outcome == Outcome::Failed)
            .collect();
        assert_eq!(failed.len(), 1, "{checks:#?}");
        assert!(
            failed[0].summary.contains("No qemu-img on hv1"),
            "{failed:?}"
        );
        assert!(
            failed[0]
                .advice
                .as_deref()
                .unwrap_or("")
                .contains("qemu-utils"),
            "{failed:?}"
        );
    }

    #[test]
    fn versions_are_compared_on_major_and_minor() {
        let mut facts = healthy();
        facts.linked_version = 9_000_000;
        let checks = hypervisor_checks(&facts);
        assert_eq!(checks[4].outcome, Outcome::Failed);
        assert!(checks[4].summary.contains("9.0.0"), "{}", checks[4].summary);
    }

    #[test]
    fn a_pool_on_the_root_filesystem_is_not_limited() {
        let mut facts = healthy();
        facts.pool_filesystem = Some(Ok(
            parse_findmnt("/ ext4 107374182400 53687091200\n").unwrap()
        ));
        let check = &hypervisor_checks(&facts)[6];
        assert_eq!(check.outcome, Outcome::Note);
        assert!(check.summary.contains("whole disk"), "{}", check.summary);
    }

    #[test]
    fn root_programs_missing_or_of_another_version_fail_with_the_command_that_installs_them() {
        let mut facts = healthy();
        let Ok(Some(found)) = &mut facts.root_programs else {
            unreachable!()
        };
        found[1].1 = Installed::Missing;
        found[2].1 = Installed::Differs;
        let check = &hypervisor_checks(&facts)[2];
        assert_eq!(check.outcome, Outcome::Failed);
        assert_eq!(
            check.summary,
            "trog's root programs on hv1 are not this trog's: missing /usr/libexec/trog/place-in-pool; another version's /usr/libexec/trog/boot-files"
        );
        assert_eq!(
            check.advice.as_deref(),
            Some("install them there: `trog root-programs install-script --user admin | ssh admin@hv1 sudo sh` (as a login that may run sudo sh there)")
        );
        facts.root_programs = Ok(None);
        let check = &hypervisor_checks(&facts)[2];
        assert_eq!(check.outcome, Outcome::Note);
        assert!(check.summary.contains("runs as root"), "{}", check.summary);
    }

    #[test]
    fn sudo_wanting_a_password_fails_with_the_nopasswd_line() {
        let mut facts = healthy();
        facts.sudo = Ok(SudoFact::WantsPassword);
        let check = &hypervisor_checks(&facts)[1];
        assert_eq!(check.outcome, Outcome::Failed);
        assert!(check
            .advice
            .as_deref()
            .unwrap()
            .contains("sudoers lines `trog root-programs sudoers --user admin` prints"));
    }

    #[test]
    fn findmnt_lines_are_read() {
        assert_eq!(parse_findmnt("garbage"), None);
        assert_eq!(version_text(11_003_000), "11.3.0");
    }
}

#[cfg(test)]
mod own_address_tests {
    use super::*;
    use crate::model::address_range::AddressRange;

    fn libvirt(pools: &[(&str, &str, &str)]) -> LibvirtFacts {
        LibvirtFacts {
            daemon_version: 11_003_000,
            hypervisor_version: 0,
            pool: None,
            dhcp_pools: pools
                .iter()
                .map(|(network, first, last)| DhcpPool {
                    network: network.to_string(),
                    first: first.parse().unwrap(),
                    last: last.parse().unwrap(),
                })
                .collect(),
        }
    }

    fn guest(name: &str, pinned: Option<&str>, range: Option<&str>, ips: &[&str]) -> OwnAddresses {
        OwnAddresses {
            guest: name.into(),
            hypervisor: pinned.map(str::to_string),
            network: "default".into(),
            address_range: range.map(|text| AddressRange::parse(text).unwrap()),
            ips: ips.iter().map(|ip| ip.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn own_addresses_in_a_networks_dhcp_pool_are_noted_once_per_pool_naming_the_guests() {
        let facts = libvirt(&[("default", "192.168.122.2", "192.168.122.254")]);
        let range = Some("192.168.122.100-192.168.122.199/24");
        let guests = [
            guest("a.test", None, range, &[]),
            guest("b.test", Some("hv1"), range, &[]),
            guest("c.test", None, None, &["192.168.122.50", "10.0.0.5"]),
            // Pinned elsewhere: not this hypervisor's business.
            guest("d.test", Some("hv2"), range, &[]),
        ];
        let checks = own_address_checks("hv1", &facts, &guests);
        let said: Vec<String> = checks.iter().map(|check| check.summary.clone()).collect();
        assert_eq!(
            said,
            [
                "network default's DHCP pool on hv1 (192.168.122.2–192.168.122.254) holds \
                 addresses trog gives guests itself: address_range \
                 192.168.122.100–192.168.122.199 (a.test, b.test)",
                "network default's DHCP pool on hv1 (192.168.122.2–192.168.122.254) holds \
                 addresses trog gives guests itself: ips 192.168.122.50 (c.test)",
            ]
        );
        assert!(checks.iter().all(|check| check.outcome == Outcome::Note));
        assert!(checks[0]
            .advice
            .as_deref()
            .unwrap()
            .contains("virsh net-update default delete ip-dhcp-range"));
    }

    #[test]
    fn own_addresses_outside_the_pool_or_on_other_networks_are_fine() {
        let narrowed = libvirt(&[
            ("default", "192.168.122.2", "192.168.122.99"),
            ("other", "192.168.122.2", "192.168.122.254"),
        ]);
        let guests = [guest(
            "a.test",
            None,
            Some("192.168.122.100-192.168.122.199/24"),
            &["192.168.122.200"],
        )];
        let checks = own_address_checks("hv1", &narrowed, &guests);
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].outcome, Outcome::Ok);
        assert_eq!(
            checks[0].summary,
            "the guests' own addresses on hv1 lie outside the DHCP pool of default"
        );
        // No guest with addresses of its own, or no pool on its network: nothing to say.
        assert!(own_address_checks("hv1", &narrowed, &[]).is_empty());
        assert!(own_address_checks("hv1", &libvirt(&[]), &guests).is_empty());
    }
}
