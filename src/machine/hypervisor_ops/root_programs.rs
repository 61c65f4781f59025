//! The programs trog runs as root on a hypervisor. Each is a POSIX shell script embedded in trog,
//! installed once at a root-owned path (`/usr/libexec/trog/<name>`) and run there through sudo
//! with its arguments, never as `sh -c` text: so a site's sudoers can allow exactly these
//! programs (one `NOPASSWD` line each) and nothing else, and each program checks the form of
//! every argument it is given. Before one runs, trog checks that the installed file is the one
//! it embeds (its sha256), so a hypervisor left with an older trog's programs is told so, with
//! the command that installs them, instead of failing in a way that hides why.

use sha2::Digest;

/// Where the programs are installed on every hypervisor: root's, as sudoers requires of a
/// program it lets another account run as root.
pub const INSTALL_DIR: &str = "/usr/libexec/trog";

/// Where the install script puts the sudoers file of one account (checked with `visudo -c`).
pub const SUDOERS_DIR: &str = "/etc/sudoers.d";

/// One program of the list.
#[derive(Debug, PartialEq, Eq)]
pub struct RootProgram {
    /// Its file name in [`INSTALL_DIR`].
    pub name: &'static str,
    /// The script, byte for byte what is installed.
    pub text: &'static str,
}

impl RootProgram {
    /// Its installed path.
    pub fn path(&self) -> String {
        format!("{INSTALL_DIR}/{}", self.name)
    }

    /// The sha256 of its text, in lower-case hex: what `sha256sum` prints for the installed file.
    pub fn sha256_hex(&self) -> String {
        hex::encode(sha2::Sha256::digest(self.text.as_bytes()))
    }
}

/// Whether sudo runs trog's programs as root for the login (settling sudo runs this first).
pub const SUDO_CHECK: RootProgram = RootProgram {
    name: "sudo-check",
    text: include_str!("../sudo_check.sh"),
};
/// Fills a pool's file from standard input and puts it in place once whole and checked.
pub const PLACE_IN_POOL: RootProgram = RootProgram {
    name: "place-in-pool",
    text: include_str!("../place_in_pool.sh"),
};
/// Reads a base image's kernel, initramfs and command line out of it, into the pool.
pub const BOOT_FILES: RootProgram = RootProgram {
    name: "boot-files",
    text: include_str!("../boot_files.sh"),
};
/// Whether a guest runs under KVM here (bin/setup runs the same file from the checkout).
pub const KVM_PROBE: RootProgram = RootProgram {
    name: "kvm-probe",
    text: include_str!("../kvm_probe.sh"),
};
/// Makes the directory of trog's locks in `/run/lock`.
pub const MAKE_LOCK_DIR: RootProgram = RootProgram {
    name: "make-lock-dir",
    text: include_str!("../make_lock_dir.sh"),
};
/// Reads a guest's serial log, console capture or QEMU log, which libvirt writes as root.
pub const READ_LOG: RootProgram = RootProgram {
    name: "read-log",
    text: include_str!("../read_log.sh"),
};
/// `qemu-img info` of a guest's disk image, for snapshot sizes.
pub const DISK_IMAGE_INFO: RootProgram = RootProgram {
    name: "disk-image-info",
    text: include_str!("../disk_image_info.sh"),
};
/// One file of a shut-off guest's disks read or changed through libguestfs (debug_boot).
pub const GUEST_DISK: RootProgram = RootProgram {
    name: "guest-disk",
    text: include_str!("../guest_disk.sh"),
};

/// Every program, in the order the sudoers lines and the install script name them.
pub const ALL: [&RootProgram; 8] = [
    &SUDO_CHECK,
    &PLACE_IN_POOL,
    &BOOT_FILES,
    &KVM_PROBE,
    &MAKE_LOCK_DIR,
    &READ_LOG,
    &DISK_IMAGE_INFO,
    &GUEST_DISK,
];

/// The sudoers lines that let `user` run trog's programs as root without a password, one line a
/// program, and nothing else.
pub fn sudoers_lines(user: &str) -> Vec<String> {
    ALL.iter()
        .map(|program| format!("{user} ALL=(root) NOPASSWD: {}", program.path()))
        .collect()
}

/// The sudoers file of `user`: a comment saying where it comes from, then [`sudoers_lines`].
pub fn sudoers_file(user: &str) -> String {
    let mut text = format!(
        "# trog's programs, run as root by {user} and nothing else (`trog root-programs sudoers --user {user}`)\n"
    );
    for line in sudoers_lines(user) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The path of `user`'s sudoers file. sudo skips a file in sudoers.d whose name has a `.`.
pub fn sudoers_path(user: &str) -> String {
    format!("{SUDOERS_DIR}/trog-{}", user.replace('.', "_"))
}

/// Ends each program's text in the install script; no program may hold this line.
const HEREDOC_END: &str = "TROG_ROOT_PROGRAM_END";

/// A POSIX shell script that, run as root, installs every program into `dest_dir` +
/// [`INSTALL_DIR`] (each written beside its place, then renamed over it: a run that uses one
/// meanwhile sees the old or the new, whole), and with `sudoers_for` the sudoers file of that
/// account, checked with `visudo -c` before it is put in place. `dest_dir` is empty on a
/// hypervisor, and a package's staging folder when a package is built (then, not run as root,
/// the files are the builder's, and the package gives them to root).
pub fn install_script(dest_dir: &str, sudoers_for: Option<&str>) -> String {
    let quote = crate::machine::command::shell_quote;
    let dir = format!("{dest_dir}{INSTALL_DIR}");
    let mut script = String::from(
        "#!/bin/sh\n# Installs trog's root programs (written by `trog root-programs install-script`).\nset -eu\numask 022\n",
    );
    script.push_str(&format!(
        "dir={}\ninstall -d -m 0755 \"$dir\"\n",
        quote(&dir)
    ));
    script.push_str("if [ \"$(id -u)\" -eq 0 ]; then chown root:root \"$dir\"; fi\n");
    for program in ALL {
        let name = quote(program.name);
        script.push_str(&format!(
            "cat >\"$dir/.{name}.new\" <<'{HEREDOC_END}'\n{text}{HEREDOC_END}\nchmod 0755 \"$dir/.{name}.new\"\nmv -f \"$dir/.{name}.new\" \"$dir/\"{name}\n",
            name = name,
            text = program.text,
        ));
    }
    if let Some(user) = sudoers_for {
        let path = format!("{dest_dir}{}", sudoers_path(user));
        script.push_str(&format!(
            "sudoers={}\ninstall -d -m 0755 \"${{sudoers%/*}}\"\ncat >\"$sudoers.new\" <<'{HEREDOC_END}'\n{}{HEREDOC_END}\nchmod 0440 \"$sudoers.new\"\nif ! visudo -c -q -f \"$sudoers.new\"; then rm -f \"$sudoers.new\"; echo \"the sudoers file does not check\" >&2; exit 1; fi\nmv -f \"$sudoers.new\" \"$sudoers\"\n",
            quote(&path),
            sudoers_file(user),
        ));
    }
    script.push_str("echo \"installed trog's root programs in $dir\"\n");
    script
}

/// What a hypervisor has at a program's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The program trog embeds, byte for byte.
    Current,
    /// Nothing (or nothing readable).
    Missing,
    /// Another file: an older or newer trog's program, or one changed by hand.
    Differs,
}

/// The command (as the login, no root) whose answer [`read_installed`] reads: the sha256 of every
/// program's installed file, one line each for those that exist.
pub fn digest_command_argv() -> Vec<String> {
    let mut argv = vec!["sha256sum".to_string(), "--".to_string()];
    argv.extend(ALL.iter().map(|program| program.path()));
    argv
}

/// Reads `sha256sum`'s lines (`HEX  PATH`) into what each program's path holds.
pub fn read_installed(sha256sum_stdout: &str) -> Vec<(&'static RootProgram, Installed)> {
    ALL.iter()
        .map(|program| {
            let path = program.path();
            let found = sha256sum_stdout.lines().find_map(|line| {
                let (hex, rest) = line.split_once(' ')?;
                (rest.trim_start_matches([' ', '*']) == path).then_some(hex)
            });
            let state = match found {
                None => Installed::Missing,
                Some(hex) if hex == program.sha256_hex() => Installed::Current,
                Some(_) => Installed::Differs,
            };
            (*program, state)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sudoers_lines_allow_each_program_and_nothing_else() {
        assert_eq!(
            sudoers_lines("trog"),
            [
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/sudo-check",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/place-in-pool",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/boot-files",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/kvm-probe",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/make-lock-dir",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/read-log",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/disk-image-info",
                "trog ALL=(root) NOPASSWD: /usr/libexec/trog/guest-disk",
            ]
        );
        let file = sudoers_file("admin");
        assert!(
            !file.contains("ALL: ALL") && !file.contains("SETENV") && !file.contains("/bin/sh")
        );
        assert_eq!(sudoers_path("trog"), "/etc/sudoers.d/trog-trog");
        assert_eq!(sudoers_path("a.b"), "/etc/sudoers.d/trog-a_b");
    }

    #[test]
    fn every_program_is_a_shell_script_the_install_script_can_carry() {
        for program in ALL {
            assert!(program.text.starts_with("#!/bin/sh\n"), "{}", program.name);
            assert!(program.text.ends_with('\n'), "{}", program.name);
            assert!(!program.text.contains(HEREDOC_END), "{}", program.name);
        }
        let names: std::collections::BTreeSet<_> = ALL.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn installed_files_are_told_current_missing_or_different() {
        let stdout = format!(
            "{}  /usr/libexec/trog/sudo-check\n{}  /usr/libexec/trog/place-in-pool\n",
            SUDO_CHECK.sha256_hex(),
            "0".repeat(64)
        );
        let found = read_installed(&stdout);
        assert_eq!(found[0], (&SUDO_CHECK, Installed::Current));
        assert_eq!(found[1], (&PLACE_IN_POOL, Installed::Differs));
        assert!(found[2..]
            .iter()
            .all(|(_, state)| *state == Installed::Missing));
        assert_eq!(
            digest_command_argv()[..3],
            ["sha256sum", "--", "/usr/libexec/trog/sudo-check"]
        );
    }

    /// The install script, run into a staging folder, leaves every program there byte for byte,
    /// executable, and a second run replaces them in place.
    #[test]
    fn the_install_script_writes_every_program_as_trog_embeds_it() {
        let stage = tempfile::tempdir().unwrap();
        let dest = stage.path().display().to_string();
        for _ in 0..2 {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(install_script(&dest, None))
                .output()
                .unwrap();
            assert!(output.status.success(), "{output:?}");
        }
        use std::os::unix::fs::PermissionsExt;
        let dir = stage.path().join("usr/libexec/trog");
        for program in ALL {
            let path = dir.join(program.name);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), program.text);
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o755
            );
        }
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            ALL.len(),
            "no partial file left"
        );
        let sums = std::process::Command::new("sha256sum")
            .args(ALL.iter().map(|program| dir.join(program.name)))
            .output()
            .unwrap();
        let stdout = String::from_utf8(sums.stdout).unwrap().replace(&dest, "");
        assert!(read_installed(&stdout)
            .iter()
            .all(|(_, state)| *state == Installed::Current));
    }

    #[test]
    fn the_install_script_checks_the_sudoers_file_before_it_is_put_in_place() {
        let script = install_script("", Some("trog"));
        let check = script.find("visudo -c -q -f").unwrap();
        let put = script.find("mv -f \"$sudoers.new\" \"$sudoers\"").unwrap();
        assert!(check < put);
        assert!(script.contains("sudoers=/etc/sudoers.d/trog-trog\n"));
        for line in sudoers_lines("trog") {
            assert!(script.contains(&format!("\n{line}\n")), "{line}");
        }
    }
}
