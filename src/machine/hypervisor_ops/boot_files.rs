//! What [`HypervisorOp::BootFiles`](super::HypervisorOp::BootFiles) found in a base image: the
//! kernel to boot a guest's first boot with, or why there is none. Pure.

use crate::model::direct_boot::DirectBoot;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootFiles {
    Direct(DirectBoot),
    /// Why the image's kernel cannot be booted directly (the guest boots from its disk).
    None(String),
}

/// The script's standard output: `kernel PATH`, `initrd PATH`, `cmdline TEXT` lines and
/// perhaps a `network_stage UNIT` line, or one `none REASON` line. `None` for anything else, a
/// command line no XML could carry, or a unit name that is not one.
pub fn parse(stdout: &str) -> Option<BootFiles> {
    if let Some(reason) = stdout.strip_prefix("none ") {
        return Some(BootFiles::None(reason.trim_end().to_string()));
    }
    let mut lines = stdout.lines();
    let mut field = |name: &str| {
        lines
            .next()
            .and_then(|line| line.strip_prefix(name))
            .and_then(|rest| rest.strip_prefix(' '))
            .map(str::to_string)
    };
    let (kernel, initrd, cmdline) = (field("kernel")?, field("initrd")?, field("cmdline")?);
    let cloud_init_network_unit = match lines.next() {
        None => None,
        Some(line) => Some(line.strip_prefix("network_stage ")?.to_string()),
    };
    let boot = DirectBoot {
        kernel,
        initrd,
        cmdline,
        cloud_init_network_unit,
        // The seed decides it, not the image: the provision sets it for the first boot.
        final_stage_deferred: false,
    };
    let printable = |text: &str| !text.is_empty() && !text.chars().any(char::is_control);
    // A unit's name goes into the kernel's command line: nothing but what unit names are made of.
    let unit_name = |name: &String| {
        name.ends_with(".service")
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "@._-".contains(c))
    };
    let whole = printable(&boot.kernel)
        && printable(&boot.initrd)
        && !boot.cmdline.chars().any(char::is_control)
        && boot.cloud_init_network_unit.as_ref().is_none_or(unit_name);
    (whole && lines.next().is_none()).then_some(BootFiles::Direct(boot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_lines_are_a_direct_boot() {
        let stdout = "kernel /p/trog-base-1.qcow2.kernel\ninitrd /p/trog-base-1.qcow2.initrd\ncmdline root=LABEL=r ro console=ttyS0\n";
        assert_eq!(
            parse(stdout),
            Some(BootFiles::Direct(DirectBoot {
                kernel: "/p/trog-base-1.qcow2.kernel".into(),
                initrd: "/p/trog-base-1.qcow2.initrd".into(),
                cmdline: "root=LABEL=r ro console=ttyS0".into(),
                cloud_init_network_unit: None,
                final_stage_deferred: false,
            }))
        );
    }

    #[test]
    fn an_empty_command_line_is_one_too() {
        assert!(matches!(
            parse("kernel /k\ninitrd /i\ncmdline \n"),
            Some(BootFiles::Direct(boot)) if boot.cmdline.is_empty()
        ));
    }

    #[test]
    fn a_fourth_line_names_the_network_stage_unit() {
        let boot = |stdout: &str| match parse(stdout) {
            Some(BootFiles::Direct(boot)) => Some(boot.cloud_init_network_unit),
            _ => None,
        };
        assert_eq!(
            boot("kernel /k\ninitrd /i\ncmdline x\nnetwork_stage cloud-init.service\n"),
            Some(Some("cloud-init.service".into()))
        );
        for stdout in [
            "kernel /k\ninitrd /i\ncmdline x\nnetwork_stage cloud init.service\n",
            "kernel /k\ninitrd /i\ncmdline x\nnetwork_stage init=/bin/sh\n",
            "kernel /k\ninitrd /i\ncmdline x\nnetwork_stage \n",
            "kernel /k\ninitrd /i\ncmdline x\nnetwork_stage a.service\nmore\n",
        ] {
            assert_eq!(parse(stdout), None, "{stdout:?}");
        }
    }

    #[test]
    fn none_says_why() {
        assert_eq!(
            parse("none its GRUB menu starts entry \"2\", not the first\n"),
            Some(BootFiles::None(
                "its GRUB menu starts entry \"2\", not the first".into()
            ))
        );
    }

    #[test]
    fn anything_else_is_not_understood() {
        for stdout in [
            "",
            "kernel /k\n",
            "kernel /k\ninitrd /i\n",
            "kernel /k\ninitrd /i\ncmdline x\nmore\n",
            "initrd /i\nkernel /k\ncmdline x\n",
            "kernel \ninitrd /i\ncmdline x\n",
            "kernel /k\ninitrd /i\ncmdline a\u{7}b\n",
        ] {
            assert_eq!(parse(stdout), None, "{stdout:?}");
        }
    }

    /// Runs the script here as the test's own user, on a pool of its own.
    fn read_out(dir: &std::path::Path, base: &str) -> Option<BootFiles> {
        use crate::machine::Machine;
        let op = super::super::HypervisorOp::BootFiles {
            dir: dir.display().to_string(),
            base: base.to_string(),
        };
        let output = crate::machine::local::LocalMachine
            .run(&op.command_here())
            .unwrap();
        let output = output.success().unwrap();
        parse(&output.stdout_text())
    }

    fn run(program: &str, args: &[&str], input: Option<&str>) {
        use std::io::Write;
        let mut child = std::process::Command::new(program)
            .args(args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{program}: {error}"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.unwrap_or("").as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "{program} {args:?}");
    }

    /// A qcow2 disk as cloud images are made: a partition table and one ext4 filesystem at
    /// 1 MiB holding `files` (path, contents), or the filesystem alone on the whole disk.
    fn image(pool: &std::path::Path, name: &str, partitioned: bool, files: &[(&str, &str)]) {
        let files: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(path, contents)| (*path, contents.as_bytes()))
            .collect();
        image_of_bytes(pool, name, partitioned, &files);
    }

    fn image_of_bytes(
        pool: &std::path::Path,
        name: &str,
        partitioned: bool,
        files: &[(&str, &[u8])],
    ) {
        let tree = tempfile::tempdir().unwrap();
        for (path, contents) in files {
            let path = tree.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        let raw = pool.join(format!("{name}.raw"));
        let raw_text = raw.display().to_string();
        std::fs::File::create(&raw)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let tree_text = tree.path().display().to_string();
        if partitioned {
            run(
                "sfdisk",
                &["-q", &raw_text],
                Some("label: dos\nstart=2048, type=83\n"),
            );
            run(
                "mkfs.ext4",
                &[
                    "-q",
                    "-F",
                    "-d",
                    &tree_text,
                    "-E",
                    "offset=1048576",
                    &raw_text,
                    "12M",
                ],
                None,
            );
        } else {
            run(
                "mkfs.ext4",
                &["-q", "-F", "-d", &tree_text, &raw_text],
                None,
            );
        }
        let qcow2 = pool.join(name).display().to_string();
        run(
            "qemu-img",
            &["convert", "-f", "raw", "-O", "qcow2", &raw_text, &qcow2],
            None,
        );
        std::fs::remove_file(raw).unwrap();
    }

    const MENU: &str = "set default=\"0\"\nset timeout=0\nmenuentry 'Debian' {\n\tlinux\t/boot/vmlinuz-6 root=LABEL=root ro console=ttyS0,115200n8\n\tinitrd\t/boot/initrd.img-6\n}\nmenuentry 'Debian, recovery' {\n\tlinux\t/boot/vmlinuz-6 root=LABEL=root ro single\n\tinitrd\t/boot/initrd.img-6\n}\n";

    #[test]
    fn the_first_menu_entry_is_read_out_of_a_partitioned_image_and_kept() {
        let pool = tempfile::tempdir().unwrap();
        let files = [
            ("boot/grub/grub.cfg", MENU),
            ("boot/vmlinuz-6", "the kernel"),
            ("boot/initrd.img-6", "the initramfs"),
        ];
        image(pool.path(), "trog-base-1.qcow2", true, &files);
        let kept = pool.path().join("trog-base-1.qcow2");
        let expected = BootFiles::Direct(DirectBoot {
            kernel: format!("{}.kernel", kept.display()),
            initrd: format!("{}.initrd", kept.display()),
            cmdline: "root=LABEL=root ro console=ttyS0,115200n8".into(),
            cloud_init_network_unit: None,
            final_stage_deferred: false,
        });
        assert_eq!(
            read_out(pool.path(), "trog-base-1.qcow2"),
            Some(expected.clone())
        );
        let read =
            |suffix: &str| std::fs::read_to_string(format!("{}.{suffix}", kept.display())).unwrap();
        assert_eq!(read("kernel"), "the kernel");
        assert_eq!(read("initrd"), "the initramfs");
        // Kept: the next run reads nothing out of the image again.
        std::fs::write(&kept, "no longer an image").unwrap();
        assert_eq!(read_out(pool.path(), "trog-base-1.qcow2"), Some(expected));
        let mut names: Vec<_> = std::fs::read_dir(pool.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "trog-base-1.qcow2",
                "trog-base-1.qcow2.cmdline",
                "trog-base-1.qcow2.initrd",
                "trog-base-1.qcow2.kernel"
            ],
            "nothing else is left in the pool"
        );
    }

    #[test]
    fn a_boot_filesystem_of_its_own_is_read_too() {
        let pool = tempfile::tempdir().unwrap();
        let menu = "linux /vmlinuz-6 root=UUID=1234 ro\ninitrd /initrd.img-6\n";
        let files = [
            ("grub/grub.cfg", menu),
            ("vmlinuz-6", "k"),
            ("initrd.img-6", "i"),
        ];
        image(pool.path(), "b.qcow2", false, &files);
        assert!(matches!(
            read_out(pool.path(), "b.qcow2"),
            Some(BootFiles::Direct(boot)) if boot.cmdline == "root=UUID=1234 ro"
        ));
    }

    #[test]
    fn what_grub_would_not_boot_first_or_cannot_be_read_is_none_and_kept_so() {
        let pool = tempfile::tempdir().unwrap();
        // The image's name, its files, and what the reason must say.
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case; 4] = [
            (
                "saved.qcow2",
                &[(
                    "boot/grub/grub.cfg",
                    "set default=\"${saved_entry}\"\nlinux /boot/k root=x\ninitrd /boot/i\n",
                )],
                "not the first",
            ),
            (
                "variables.qcow2",
                &[
                    (
                        "boot/grub/grub.cfg",
                        "linux /boot/k root=x $vt_handoff\ninitrd /boot/i\n",
                    ),
                    ("boot/k", "k"),
                    ("boot/i", "i"),
                ],
                "variables",
            ),
            (
                "nomenu.qcow2",
                &[("etc/hostname", "x")],
                "no ext2/3/4 filesystem",
            ),
            (
                "nokernel.qcow2",
                &[(
                    "boot/grub/grub.cfg",
                    "linux /boot/k root=x\ninitrd /boot/i\n",
                )],
                "cannot be read",
            ),
        ];
        for (name, files, why) in cases {
            image(pool.path(), name, true, files);
            match read_out(pool.path(), name) {
                Some(BootFiles::None(reason)) => assert!(reason.contains(why), "{name}: {reason}"),
                other => panic!("{name}: {other:?}"),
            }
            let marker = pool.path().join(format!("{name}.no-direct-boot"));
            assert!(marker.exists(), "{name}: the reason is kept");
            assert!(!pool.path().join(format!("{name}.kernel")).exists());
        }
    }

    const NETWORK_STAGE_UNIT: &str =
        "[Unit]\nDescription=Initial cloud-init job (metadata service crawler)\n\n[Service]\nType=oneshot\nExecStart=/usr/bin/cloud-init init\n";

    #[test]
    fn a_separate_network_stage_service_is_reported_and_a_single_process_cloud_init_is_not() {
        let pool = tempfile::tempdir().unwrap();
        let menu = ("boot/grub/grub.cfg", MENU);
        let (kernel, initrd) = (("boot/vmlinuz-6", "k"), ("boot/initrd.img-6", "i"));
        let unit = ("lib/systemd/system/cloud-init.service", NETWORK_STAGE_UNIT);
        let main = ("lib/systemd/system/cloud-init-main.service", "[Service]\n");
        let local = (
            "lib/systemd/system/cloud-init.service",
            "[Service]\nExecStart=/usr/bin/cloud-init init --local\n",
        );
        // The image's name, its files, and the unit reported.
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Option<&'a str>);
        let cases: [Case; 4] = [
            (
                "separate.qcow2",
                vec![menu, kernel, initrd, unit],
                Some("cloud-init.service"),
            ),
            (
                "one-process.qcow2",
                vec![menu, kernel, initrd, unit, main],
                None,
            ),
            ("no-cloud-init.qcow2", vec![menu, kernel, initrd], None),
            (
                "other-command.qcow2",
                vec![menu, kernel, initrd, local],
                None,
            ),
        ];
        for (name, files, expected) in cases {
            image(pool.path(), name, true, &files);
            for _ in 0..2 {
                // Found in the image, then reported from what was kept.
                match read_out(pool.path(), name) {
                    Some(BootFiles::Direct(boot)) => {
                        assert_eq!(boot.cloud_init_network_unit.as_deref(), expected, "{name}")
                    }
                    other => panic!("{name}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_compressed_initramfs_is_kept_as_the_archive_it_holds() {
        let pool = tempfile::tempdir().unwrap();
        let shell = |script: &str| {
            let output = std::process::Command::new("sh")
                .args(["-c", script])
                .current_dir(pool.path())
                .output()
                .unwrap();
            assert!(output.status.success(), "{script}");
            output.stdout
        };
        // A cpio archive (newc, as initramfs-tools writes it), gzipped; and gzip of what is not.
        let archive = shell("mkdir -p tree/etc && echo x > tree/etc/x && cd tree && find . | cpio -o -H newc 2>/dev/null");
        let gzipped = shell("cd tree && find . | cpio -o -H newc 2>/dev/null | gzip -c");
        let not_archive = shell("echo plain text | gzip -c");
        for (name, initrd, kept) in [
            ("gzip.qcow2", gzipped.clone(), archive.clone()),
            ("plain.qcow2", archive.clone(), archive.clone()),
            ("other.qcow2", not_archive.clone(), not_archive.clone()),
        ] {
            let files: [(&str, &[u8]); 3] = [
                ("boot/grub/grub.cfg", MENU.as_bytes()),
                ("boot/vmlinuz-6", b"k"),
                ("boot/initrd.img-6", &initrd),
            ];
            image_of_bytes(pool.path(), name, true, &files);
            assert!(matches!(
                read_out(pool.path(), name),
                Some(BootFiles::Direct(_))
            ));
            let kept_path = pool.path().join(format!("{name}.initrd"));
            assert_eq!(std::fs::read(kept_path).unwrap(), kept, "{name}");
        }
    }
}
