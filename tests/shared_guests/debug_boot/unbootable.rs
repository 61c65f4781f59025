//! The second half of the guest's life: made unbootable on purpose, its kernel's panic on the
//! console (streamed as JSON events), its disk read without booting it, rescue mode through
//! --single, and a restore of the definition and the GRUB configuration byte for byte.

use super::{connection, debug_boot, definition, fetch_until};
use crate::support::*;
use std::path::Path;

/// The guest's own GRUB configuration, which --single changes.
const GRUB_CONFIG: &str = "/boot/grub/grub.cfg";

/// The file of the guest's root disk (a qcow2 overlay in the test's pool).
fn root_disk(domain: &str) -> String {
    let xml = definition(domain);
    let document = roxmltree::Document::parse(&xml).unwrap();
    let source = document
        .descendants()
        .find(|node| node.has_tag_name("disk") && node.attribute("device") == Some("disk"))
        .and_then(|disk| disk.children().find(|node| node.has_tag_name("source")))
        .unwrap();
    connection()
        .lookup_storage_pool_by_name(source.attribute("pool").unwrap())
        .unwrap()
        .lookup_storage_vol_by_name(source.attribute("volume").unwrap())
        .unwrap()
        .path()
        .unwrap()
}

/// libguestfs itself, as the oracle for what trog reads and writes on a guest's disk.
fn guestfish(disk: &str, mode: &str, commands: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = std::process::Command::new("sudo")
        .args([
            "-n",
            "env",
            "LIBGUESTFS_BACKEND=direct",
            // No usable KVM where the tests run.
            "LIBGUESTFS_BACKEND_SETTINGS=force_tcg",
            "guestfish",
            mode,
            "--format=qcow2",
            "-a",
            disk,
            "-i",
        ])
        .args(commands)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    output.stdout
}

/// The guest's GRUB configuration as libguestfs reads it, replaced by `new` in the same
/// session: every launch of libguestfs's appliance is a boot under emulation, so the oracle's
/// read and the next write share one.
fn read_then_write_grub_config(disk: &str, new: &[u8]) -> Vec<u8> {
    guestfish(
        disk,
        "--rw",
        &[
            "download",
            GRUB_CONFIG,
            "-",
            ":",
            "upload",
            "-",
            GRUB_CONFIG,
        ],
        new,
    )
}

/// `--json --console`, read as it runs: each console line is an event as it comes (the first is
/// read while the run still captures and before the capture holds its last line), and the last
/// event is the result, naming how the capture ended. Returns the console's lines.
fn json_console_until_the_end(dir: &Path, domain: &str, end: &str) -> Vec<String> {
    let capture = format!("/var/log/libvirt/qemu/{domain}-debug-console.log");
    let mut run = spawn_verb("debug_boot", dir, &["--json", domain, "--console"]);
    let stdout = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut events = Vec::new();
    let mut root_warning_seen = false;
    for line in std::io::BufRead::lines(stdout) {
        let line = line.unwrap();
        if !root_warning_seen && root_warning::is_root_warning(&line) {
            root_warning_seen = true;
            continue;
        }
        if events.is_empty() {
            assert!(run.try_wait().unwrap().is_none(), "{line}");
            let so_far = std::fs::read_to_string(&capture).unwrap_or_default();
            assert!(!so_far.contains("Kernel panic"), "{line}\n{so_far}");
        }
        events.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
    }
    let output = run.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let (result, lines) = events.split_last().unwrap();
    assert_eq!(result["event"], "debug_boot", "{result}");
    assert_eq!(result["action"], "console", "{result}");
    assert_eq!(result["end"]["reason"], end, "{result}");
    lines
        .iter()
        .map(|event| {
            assert_eq!(event["event"], "console_line", "{event}");
            event["text"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A guest made unbootable (its kernel told to run inits that do not exist), read without
/// booting it, mended, booted into rescue mode with --single, and restored byte for byte.
pub fn disk_actions_on_an_unbootable_guest(dir: &Path, domain: &str, provisioned: &str) {
    force_off(domain);
    let disk = root_disk(domain);

    // --cat: the guest's GRUB configuration, which holds its kernel line.
    let (status, provisioned_grub, stderr) = debug_boot(dir, &[domain, "--cat", GRUB_CONFIG]);
    assert_eq!(status, Some(0), "{stderr}");
    let provisioned_grub = provisioned_grub.into_bytes();
    let grub = String::from_utf8(provisioned_grub.clone()).unwrap();
    assert!(grub.contains("\nlinux /boot/vmlinuz"), "{grub}");
    // Both inits: initramfs-tools would fall back to /sbin/init for a missing `init=`; without
    // its initramfs's own init the kernel mounts the root itself, cannot by LABEL, and panics.
    let broken = grub.replace(
        " net.ifnames=1",
        " net.ifnames=1 rdinit=/nonexistent init=/nonexistent",
    );
    assert_ne!(broken, grub);
    assert_eq!(
        read_then_write_grub_config(&disk, broken.as_bytes()),
        provisioned_grub,
        "--cat reads what libguestfs reads"
    );

    // --console: the kernel cannot find its init and panics; the capture ends there.
    let console = json_console_until_the_end(dir, domain, "kernel_panic");
    let last = console.last().map(String::as_str).unwrap_or_default();
    assert!(last.contains("Kernel panic - not syncing"), "{console:?}");
    assert!(
        console
            .iter()
            .any(|line| line.contains("init=/nonexistent")),
        "{console:?}"
    );

    // The disk actions refuse a running guest, and --single writes nothing then.
    let (status, _, stderr) = debug_boot(dir, &[domain, "--single"]);
    assert_eq!(status, Some(7), "{stderr}");
    assert!(
        stderr.contains("is running") && stderr.contains("shut it off first"),
        "{stderr}"
    );
    force_off(domain);

    // --ls lists a directory; a path missing in the guest is named.
    let (status, listing, stderr) = debug_boot(dir, &[domain, "--ls", "/boot"]);
    assert_eq!(status, Some(0), "{stderr}");
    let names: Vec<&str> = listing.lines().collect();
    assert!(names.contains(&"grub"), "{listing}");
    assert!(
        names.iter().any(|name| name.starts_with("vmlinuz-")),
        "{listing}"
    );
    let (status, _, stderr) = debug_boot(dir, &[domain, "--cat", "/etc/no-such-file"]);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains("has no file /etc/no-such-file") && stderr.contains("--ls /etc"),
        "{stderr}"
    );

    // Mended as provision made it. The disk still holds what was written before: the refused
    // --single and the reads wrote nothing. (A --single whose start fails takes its change back:
    // the unit tests of debug_boot show it against the fake hypervisor.)
    assert_eq!(
        String::from_utf8(read_then_write_grub_config(&disk, &provisioned_grub)).unwrap(),
        broken,
        "the GRUB configuration was changed by an action that reads or was refused"
    );

    // --single boots it into rescue mode, as the console shows.
    let (status, stdout, stderr) = debug_boot(dir, &[domain, "--single"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(
        stdout.contains("rescue mode") && stdout.contains("--restore"),
        "{stdout}"
    );
    let console = fetch_until(dir, domain, "You are in rescue mode");
    assert!(console.contains(" single"), "{console}");

    // --restore: the definition and the GRUB configuration are what provision made, byte for byte.
    force_off(domain);
    let (status, stdout, stderr) = debug_boot(dir, &[domain, "--restore"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("rescue mode"), "{stdout}");
    assert_eq!(definition(domain), provisioned);
    // Read with --cat, which read what libguestfs reads above: one appliance boot fewer.
    let (status, restored_grub, stderr) = debug_boot(dir, &[domain, "--cat", GRUB_CONFIG]);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(restored_grub.into_bytes(), provisioned_grub);
}
