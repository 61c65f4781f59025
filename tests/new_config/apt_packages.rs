//! The distro target's package step, from `trog new_config`'s Makefile: `upgrade` with the
//! recipes' packages named, or `upgrade` alone when every named package is already installed
//! and marked as installed on purpose (a root disk over a baked image, a guest finished before),
//! and the full command after it when `upgrade` kept a package back, and neither while nothing
//! an upgrade rests on changed since the last one. The Makefile runs in a
//! mount namespace of its own (this machine's /etc/apt and apt's state hidden behind empty ones),
//! with apt-get and dpkg-query replaced by scripts that log what they were asked; the check of
//! what is in place is also run against this machine's real dpkg.

use crate::harness::{self, read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn payload() -> (harness::Installation, PathBuf) {
    let installation = harness::Installation::example();
    installation.write_guest(
        "apt.example.test",
        "apt.example.test:\n  _global:\n    memory: 1024\n    cpus: 1\n    size: 4G\n  nginx: {}\n",
    );
    let out = installation.out("apt");
    installation.new_config("apt.example.test", &out);
    (installation, out.join("payload"))
}

/// The packages the debian target names, from the Makefile's `upgrade` line.
fn named_packages(payload: &Path) -> Vec<String> {
    let makefile = read(&payload.join("Makefile"));
    let line = makefile
        .lines()
        .rev()
        .find(|line| line.contains("$(APT_GET) upgrade --no-install-recommends "))
        .unwrap_or_else(|| panic!("no upgrade with packages in:\n{makefile}"));
    let names = line.split("--no-install-recommends ").nth(1).unwrap();
    let names = names.split(" &&").next().unwrap();
    names.split_whitespace().map(str::to_string).collect()
}

/// How the fake dpkg and apt answer.
struct Guest<'a> {
    /// Named packages dpkg does not have installed.
    missing: &'a [&'a str],
    /// Named packages apt marks as pulled in by another.
    auto: &'a [&'a str],
    /// `upgrade` alone says it kept packages back.
    keeps_back: bool,
}

/// Runs the payload's `debian` target against `guest`, with `APT_GET` (apt-get and its options)
/// replaced by the fake: returns the arguments of each apt-get it ran, and everything make
/// printed.
fn run_debian_target(payload: &Path, guest: &Guest) -> (Vec<String>, String) {
    let kept = tempfile::tempdir().unwrap();
    run_debian_target_over(payload, guest, &kept.path().join("apt-upgraded"), "")
}

/// The same, with the state of the last upgrade kept in `upgraded` (the Makefile's
/// `APT_UPGRADED`) and `packages_list` as the text of apt's one package list (always of the same
/// time: as apt leaves a list its update found unchanged).
fn run_debian_target_over(
    payload: &Path,
    guest: &Guest,
    upgraded: &Path,
    packages_list: &str,
) -> (Vec<String>, String) {
    let work = tempfile::tempdir().unwrap();
    let list = work.path().join("Packages");
    std::fs::write(&list, packages_list).unwrap();
    let log = work.path().join("apt-get.log");
    let apt_get = work.path().join("apt-get");
    std::fs::write(
        &apt_get,
        format!(
            "#!/bin/sh\necho \"$*\" >> {log}\n\
             if [ \"$*\" = 'upgrade --no-install-recommends' ] && [ {keeps_back} = yes ]; then\n\
             printf 'The following packages have been kept back:\\n  nginx\\n0 upgraded, 0 newly installed, 0 to remove and 1 not upgraded.\\n'; fi\n",
            log = log.display(),
            keeps_back = if guest.keeps_back { "yes" } else { "no" },
        ),
    )
    .unwrap();
    let dpkg_query = work.path().join("dpkg-query");
    let missing = guest.missing.join(" ");
    std::fs::write(
        &dpkg_query,
        format!(
            "#!/bin/sh\n# dpkg-query -W --showformat=FORMAT NAME…\nshift 2\nstatus=0\n\
             for name; do case ' {missing} ' in *\" $name \"*) status=1;; *) echo 'ii ';; esac; done\n\
             exit $status\n"
        ),
    )
    .unwrap();
    for script in [&apt_get, &dpkg_query] {
        std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let extended_states: String = guest
        .auto
        .iter()
        .map(|name| format!("Package: {name}\nArchitecture: amd64\nAuto-Installed: 1\n\n"))
        .collect();
    let states = work.path().join("extended_states");
    std::fs::write(&states, extended_states).unwrap();
    let script = format!(
        "set -e\n\
         for dir in /etc/apt /var/lib/apt; do mount -t tmpfs tmpfs \"$dir\"; done\n\
         mkdir -p /etc/apt/sources.list.d /etc/apt/apt.conf.d\n\
         cp {states} /var/lib/apt/extended_states\n\
         mkdir -p /var/lib/apt/lists\n\
         cp {list} /var/lib/apt/lists/mirror.example.test_debian_dists_bookworm_main_binary-amd64_Packages\n\
         touch -d @1767225600 /var/lib/apt/lists/*_Packages\n\
         PATH={bin}:$PATH make -C {payload} debian APT_GET={apt_get} APT_UPGRADED={upgraded} 2>&1\n",
        states = states.display(),
        list = list.display(),
        bin = work.path().display(),
        payload = payload.display(),
        apt_get = apt_get.display(),
        upgraded = upgraded.display(),
    );
    let (succeeded, said) = harness::in_own_mount_namespace(&script);
    assert!(succeeded, "make debian failed:\n{said}");
    let commands = std::fs::read_to_string(&log).unwrap_or_default();
    let commands = commands.lines().map(str::to_string).collect();
    (commands, said)
}

fn upgrade_with(names: &[String]) -> String {
    format!("upgrade --no-install-recommends {}", names.join(" "))
}

const UPDATE: &str = "-o pkgCacheFile::Generate=false update";
const UPGRADE_ALONE: &str = "upgrade --no-install-recommends";

#[test]
fn with_every_named_package_in_place_apt_upgrades_without_the_names() {
    let (_installation, payload) = payload();
    let names = named_packages(&payload);
    assert!(names.contains(&"nginx".to_string()), "{names:?}");
    let (commands, said) = run_debian_target(
        &payload,
        &Guest {
            missing: &[],
            auto: &["libc6", "libssl3"],
            keeps_back: false,
        },
    );
    assert_eq!(commands, [UPDATE, UPGRADE_ALONE], "{said}");
}

#[test]
fn a_named_package_missing_or_pulled_in_by_another_takes_the_full_command() {
    let (_installation, payload) = payload();
    let names = named_packages(&payload);
    for guest in [
        Guest {
            missing: &["nginx"],
            auto: &[],
            keeps_back: false,
        },
        Guest {
            missing: &[],
            auto: &["curl"],
            keeps_back: false,
        },
    ] {
        let (commands, said) = run_debian_target(&payload, &guest);
        assert_eq!(commands, [UPDATE, &upgrade_with(&names)], "{said}");
    }
}

#[test]
fn a_package_kept_back_by_upgrade_alone_takes_the_full_command_after_it() {
    let (_installation, payload) = payload();
    let names = named_packages(&payload);
    let (commands, said) = run_debian_target(
        &payload,
        &Guest {
            missing: &[],
            auto: &[],
            keeps_back: true,
        },
    );
    assert_eq!(
        commands,
        [UPDATE, UPGRADE_ALONE, &upgrade_with(&names)],
        "{said}"
    );
    assert!(
        said.contains("have been kept back"),
        "apt's output reaches the log:\n{said}"
    );
}

/// After an upgrade the state it rested on is kept; over the same lists, packages and pins the
/// next finish upgrades nothing, and a changed list (or a named package missing) brings the
/// upgrade back.
#[test]
fn an_upgrade_is_left_out_while_nothing_it_rests_on_changed() {
    let (_installation, payload) = payload();
    let names = named_packages(&payload);
    let kept = tempfile::tempdir().unwrap();
    let upgraded = kept.path().join("apt-upgraded");
    let in_place = Guest {
        missing: &[],
        auto: &[],
        keeps_back: false,
    };
    let (commands, said) = run_debian_target_over(&payload, &in_place, &upgraded, "Version: 1\n");
    assert_eq!(commands, [UPDATE, UPGRADE_ALONE], "{said}");
    let state = read(&upgraded);
    assert!(state.trim_end().ends_with(" -"), "an md5sum: {state}");

    let (commands, said) = run_debian_target_over(&payload, &in_place, &upgraded, "Version: 1\n");
    assert_eq!(commands, [UPDATE], "{said}");
    assert!(said.contains("apt: nothing to upgrade"), "{said}");
    assert_eq!(read(&upgraded), state);

    let newer = "Version: 1.1\n";
    let (commands, said) = run_debian_target_over(&payload, &in_place, &upgraded, newer);
    assert_eq!(commands, [UPDATE, UPGRADE_ALONE], "{said}");
    assert_ne!(
        read(&upgraded),
        state,
        "the state after this upgrade is kept"
    );

    let missing = Guest {
        missing: &["nginx"],
        ..in_place
    };
    let (commands, said) = run_debian_target_over(&payload, &missing, &upgraded, newer);
    assert_eq!(commands, [UPDATE, &upgrade_with(&names)], "{said}");

    // A package kept back: the full command runs, and the state after it is kept.
    let kept_back = tempfile::tempdir().unwrap();
    let upgraded = kept_back.path().join("apt-upgraded");
    let keeps_back = Guest {
        keeps_back: true,
        ..in_place
    };
    let (commands, said) = run_debian_target_over(&payload, &keeps_back, &upgraded, newer);
    assert_eq!(
        commands,
        [UPDATE, UPGRADE_ALONE, &upgrade_with(&names)],
        "{said}"
    );
    assert!(upgraded.exists());
    let (commands, said) = run_debian_target_over(&payload, &keeps_back, &upgraded, newer);
    assert_eq!(commands, [UPDATE], "{said}");
}

/// The Makefile's check, against this machine's real dpkg and apt state: packages installed on
/// purpose are in place; one pulled in by another, one not installed, or a name with a version
/// is not.
#[test]
fn the_in_place_check_reads_the_real_dpkg_and_apt_marks() {
    let (_installation, payload) = payload();
    let listed = |command: &str| -> Vec<String> {
        let output = std::process::Command::new("apt-mark")
            .arg(command)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let manual = listed("showmanual");
    let auto = listed("showauto");
    assert!(manual.len() >= 2 && !auto.is_empty(), "{manual:?} {auto:?}");
    let check = payload.join("in-place.mk");
    std::fs::write(
        &check,
        "in-place:\n\t@$(APT_NAMED_IN_PLACE) $(NAMES) && echo in place || echo not in place\n",
    )
    .unwrap();
    let in_place = |names: &str| -> String {
        let output = std::process::Command::new("make")
            .args(["-s", "-C"])
            .arg(&payload)
            .args(["-f", "Makefile", "-f", "in-place.mk", "in-place"])
            .arg(format!("NAMES={names}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let both = format!("{} {}", manual[0], manual[1]);
    assert_eq!(in_place(&both), "in place", "{both}");
    for names in [
        format!("{both} {}", auto[0]),
        format!("{both} trog-no-such-package"),
        format!("{}=0 {}", manual[0], manual[1]),
        String::new(),
    ] {
        assert_eq!(in_place(&names), "not in place", "{names}");
    }
}
