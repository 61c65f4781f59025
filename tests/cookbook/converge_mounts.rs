//! The vm recipe's mount script (`/usr/local/lib/trog/converge-mounts`, from
//! converge-mounts.sh.j2), rendered and run against stand-ins for `mount`, `umount`,
//! `mountpoint`, `findmnt` and `systemctl` that keep the kernel's mount table in a file: what it
//! writes to fstab, what it mounts, remounts and unmounts, and what it leaves. The mounts recipe's
//! target, which feeds it and moves a guest's older marker block over, runs here too. Real
//! guests run both in `tests/e2e` (the data volume and an extra disk moved) and
//! `tests/recipes_on_guests` (the mounts recipe's entry moved).

use super::stand_ins::{rendered_file, target_alone, StandIns};
use serde_json::json;
use std::path::PathBuf;

/// The stand-ins. `$here/mounted` is the kernel's table, a line `POINT SOURCE OPTIONS` a mount,
/// the source as the fstab line named it; `$here/busy` lists the points something uses. Every
/// call that changes something is recorded in `$here/calls`.
const FAKES: &[(&str, &str)] = &[
    (
        "mount",
        r#"#!/bin/sh
set -eu
here=$(dirname "$0")/..
echo "mount $*" >>"$here/calls"
if [ "$1" = -o ]; then point=$3; else point=$1; fi
line=$(awk -v point="$point" '$1 !~ /^#/ && $2 == point { print; exit }' "$here/fstab")
[ -n "$line" ] || { echo "mount: $point: can't find in /etc/fstab." >&2; exit 1; }
set -- $line
awk -v point="$2" '$1 != point' "$here/mounted" >"$here/mounted.new"
echo "$2 $1 $4" >>"$here/mounted.new"
mv "$here/mounted.new" "$here/mounted"
"#,
    ),
    (
        "umount",
        r#"#!/bin/sh
set -eu
here=$(dirname "$0")/..
echo "umount $*" >>"$here/calls"
if grep -qxF "$1" "$here/busy"; then echo "umount: $1: target is busy." >&2; exit 32; fi
awk -v point="$1" '$1 != point' "$here/mounted" >"$here/mounted.new"
mv "$here/mounted.new" "$here/mounted"
"#,
    ),
    (
        "mountpoint",
        r#"#!/bin/sh
here=$(dirname "$0")/..
awk -v point="$2" '$1 == point { found = 1 } END { exit !found }' "$here/mounted"
"#,
    ),
    (
        "findmnt",
        r#"#!/bin/sh
# Only as the script asks: findmnt -n -o COLUMN --mountpoint POINT
here=$(dirname "$0")/..
source=$(awk -v point="$5" '$1 == point { print $2 }' "$here/mounted")
case $3 in
  UUID) case $source in UUID=*) echo "${source#UUID=}" ;; *) echo ;; esac ;;
  LABEL) case $source in LABEL=*) echo "${source#LABEL=}" ;; *) echo ;; esac ;;
  SOURCE) echo "$source" ;;
esac
"#,
    ),
    (
        "systemctl",
        r#"#!/bin/sh
here=$(dirname "$0")/..
echo "systemctl $*" >>"$here/calls"
"#,
    ),
];

const SYSTEM_LINES: &str =
    "# /etc/fstab: static file system information.\nUUID=root / ext4 errors=remount-ro 0 1\n";

struct Guest {
    stand_ins: StandIns,
}

impl Guest {
    fn new() -> Guest {
        let stand_ins = StandIns::new(FAKES);
        for file in ["busy", "calls"] {
            std::fs::write(stand_ins.path(file), "").unwrap();
        }
        std::fs::write(stand_ins.path("fstab"), SYSTEM_LINES).unwrap();
        std::fs::write(stand_ins.path("mounted"), "/ UUID=root errors=remount-ro\n").unwrap();
        Guest { stand_ins }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.stand_ins.path(name)
    }

    /// A mount point in this directory.
    fn point(&self, name: &str) -> String {
        self.path("root").join(name).display().to_string()
    }

    fn read(&self, name: &str) -> String {
        self.stand_ins.read(name)
    }

    /// The rendered script with its paths moved into this directory.
    fn script(&self) -> String {
        rendered_file("mounts", json!({}), "/usr/local/lib/trog/converge-mounts")
            .replace(
                "fstab=/etc/fstab",
                &format!("fstab={}", self.path("fstab").display()),
            )
            .replace(
                "record=/var/lib/trog/mounts/",
                &format!("record={}/", self.path("records").display()),
            )
    }

    /// What a run returned: whether it succeeded, what it said on stderr, and the calls that
    /// changed something.
    fn outcome(&self, output: std::process::Output) -> (bool, String, Vec<String>) {
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            self.stand_ins.lines("calls"),
        )
    }

    /// Runs the script as `owner`, wanting `lines`.
    fn converge(&self, owner: &str, lines: &[String]) -> (bool, String, Vec<String>) {
        std::fs::write(self.path("calls"), "").unwrap();
        let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let output = self.stand_ins.sh_script(
            "converge-mounts",
            &self.script(),
            &[owner],
            input.as_bytes(),
        );
        self.outcome(output)
    }

    /// Runs `make mounts` with the Makefile written here.
    fn make_mounts(&self) -> (bool, String, Vec<String>) {
        std::fs::write(self.path("calls"), "").unwrap();
        let output = self.stand_ins.run("make", &["-s", "mounts"], b"");
        self.outcome(output)
    }

    /// The kernel's table, without the root filesystem.
    fn mounted(&self) -> Vec<String> {
        let mut mounted: Vec<String> = self
            .stand_ins
            .lines("mounted")
            .into_iter()
            .filter(|line| !line.starts_with("/ "))
            .collect();
        mounted.sort();
        mounted
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|item| item.to_string()).collect()
}

#[test]
fn mounts_follow_their_lines_and_a_dropped_one_is_unmounted() {
    let guest = Guest::new();
    let (a, b, c) = (guest.point("a"), guest.point("b"), guest.point("c"));
    let line =
        |source: &str, point: &str, options: &str| format!("{source} {point} ext4 {options} 0 2");

    // Nothing wanted and nothing recorded: nothing is touched, nothing recorded.
    let (ok, _, calls) = guest.converge("vm-disks", &[]);
    assert!(ok);
    assert_eq!(calls, Vec::<String>::new());
    assert!(!guest.path("records/vm-disks").exists());

    // First run: both lines appended to fstab (what was there stays as it was), systemd told
    // once, both mounted.
    let first = [
        line("UUID=aaa", &a, "defaults,nofail"),
        line("LABEL=data", &b, "defaults,nofail"),
    ];
    let (ok, stderr, calls) = guest.converge("vm-disks", &first);
    assert!(ok, "{stderr}");
    assert_eq!(
        calls,
        [
            "systemctl daemon-reload".to_string(),
            format!("mount {a}"),
            format!("mount {b}")
        ]
    );
    assert_eq!(
        guest.read("fstab"),
        format!("{SYSTEM_LINES}{}\n{}\n", first[0], first[1])
    );
    assert!(std::path::Path::new(&a).is_dir());

    // Again, unchanged: nothing is called that changes anything.
    let (ok, stderr, calls) = guest.converge("vm-disks", &first);
    assert!(ok, "{stderr}");
    assert_eq!(calls, Vec::<String>::new());

    // a's options change (remounted), b gets another filesystem (unmounted, mounted), c is new.
    let second = [
        line("UUID=aaa", &a, "defaults,nofail,noatime"),
        line("LABEL=other", &b, "defaults,nofail"),
        line("/dev/vdc", &c, "defaults,nofail"),
    ];
    let (ok, stderr, calls) = guest.converge("vm-disks", &second);
    assert!(ok, "{stderr}");
    assert_eq!(
        calls,
        [
            "systemctl daemon-reload".to_string(),
            format!("mount -o remount {a}"),
            format!("umount {b}"),
            format!("mount {b}"),
            format!("mount {c}"),
        ]
    );
    assert_eq!(
        guest.read("fstab"),
        format!(
            "{SYSTEM_LINES}{}\n{}\n{}\n",
            second[0], second[1], second[2]
        )
    );
    assert_eq!(
        guest.mounted(),
        [
            format!("{a} UUID=aaa defaults,nofail,noatime"),
            format!("{b} LABEL=other defaults,nofail"),
            format!("{c} /dev/vdc defaults,nofail"),
        ]
    );

    // c dropped (unmounted, out of fstab); b back to LABEL=data while something uses it: the run
    // fails naming b, and the next run, b no longer in use, does what is left.
    std::fs::write(guest.path("busy"), format!("{b}\n")).unwrap();
    let third = [second[0].clone(), first[1].clone()];
    let (ok, stderr, calls) = guest.converge("vm-disks", &third);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("{b} is in use")) && stderr.contains("LABEL=data"),
        "{stderr}"
    );
    assert_eq!(
        calls,
        [
            "systemctl daemon-reload".to_string(),
            format!("umount {c}"),
            format!("umount {b}"),
        ]
    );
    std::fs::write(guest.path("busy"), "").unwrap();
    let (ok, stderr, calls) = guest.converge("vm-disks", &third);
    assert!(ok, "{stderr}");
    assert_eq!(calls, [format!("umount {b}"), format!("mount {b}")]);
    assert_eq!(
        guest.read("fstab"),
        format!("{SYSTEM_LINES}{}\n{}\n", third[0], third[1])
    );
    assert_eq!(
        guest.mounted(),
        [
            format!("{a} UUID=aaa defaults,nofail,noatime"),
            format!("{b} LABEL=data defaults,nofail"),
        ]
    );

    // A point another owner's line holds now is not unmounted when this owner drops it; one in
    // use stays mounted, and the run says so without failing.
    let with_c = [third[0].clone(), third[1].clone(), second[2].clone()];
    let (ok, stderr, calls) = guest.converge("vm-disks", &with_c);
    assert!(ok, "{stderr}");
    assert_eq!(
        calls,
        ["systemctl daemon-reload".to_string(), format!("mount {c}")]
    );
    let theirs = line("/dev/vdd", &c, "defaults");
    let (ok, stderr, calls) = guest.converge("mounts", std::slice::from_ref(&theirs));
    assert!(ok, "{stderr}");
    assert_eq!(
        calls,
        [
            "systemctl daemon-reload".to_string(),
            format!("umount {c}"),
            format!("mount {c}")
        ]
    );
    std::fs::write(guest.path("busy"), format!("{b}\n")).unwrap();
    let (ok, stderr, calls) = guest.converge("vm-disks", &[third[0].clone()]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{b} (LABEL=data) is no longer listed, but is in use"
        )),
        "{stderr}"
    );
    assert_eq!(
        calls,
        ["systemctl daemon-reload".to_string(), format!("umount {b}")]
    );
    assert_eq!(
        guest.read("fstab"),
        format!("{SYSTEM_LINES}{}\n{theirs}\n", third[0])
    );
    assert_eq!(
        guest.mounted(),
        [
            format!("{a} UUID=aaa defaults,nofail,noatime"),
            format!("{b} LABEL=data defaults,nofail"),
            format!("{c} /dev/vdd defaults"),
        ]
    );
}

/// The mounts recipe's Makefile target, its paths moved into `guest`'s directory (its entries
/// file written there too).
fn mounts_target(guest: &Guest, entries: &[&str]) -> String {
    let (target, files) = target_alone("mounts", json!({ "entries": entries }));
    let entries_file = files
        .iter()
        .find(|file| file.guest_path == "/etc/trog/mounts/fstab")
        .unwrap();
    std::fs::write(guest.path("entries"), &entries_file.contents).unwrap();
    std::fs::write(guest.path("converge-mounts"), guest.script()).unwrap();
    target
        .replace("/etc/fstab", &guest.path("fstab").display().to_string())
        .replace(
            "/var/lib/trog/mounts",
            &guest.path("records").display().to_string(),
        )
        .replace(
            "/usr/local/lib/trog/converge-mounts",
            &format!("sh {}", guest.path("converge-mounts").display()),
        )
        .replace(
            "/etc/trog/mounts/fstab",
            &guest.path("entries").display().to_string(),
        )
}

#[test]
fn the_mounts_recipe_takes_over_a_guests_marker_block() {
    let guest = Guest::new();
    let (old, kept) = (guest.point("old"), guest.point("kept"));
    // A guest finished before: its entries between two markers, both mounted.
    std::fs::write(
        guest.path("fstab"),
        format!(
            "{SYSTEM_LINES}# BEGIN trog mounts\n/dev/vdb {kept} auto defaults,nofail 0 2\n/dev/vdc {old} auto defaults,nofail 0 2\n# END trog mounts\n"
        ),
    )
    .unwrap();
    std::fs::write(
        guest.path("mounted"),
        format!("/ UUID=root errors=remount-ro\n{kept} /dev/vdb defaults,nofail\n{old} /dev/vdc defaults,nofail\n"),
    )
    .unwrap();
    let entry = format!("/dev/vdb {kept}");
    std::fs::write(guest.path("Makefile"), mounts_target(&guest, &[&entry])).unwrap();

    // The entry still listed stays mounted as it was; the one dropped is unmounted; the markers go.
    let (ok, stderr, calls) = guest.make_mounts();
    assert!(ok, "{stderr}");
    assert_eq!(
        calls,
        [
            "systemctl daemon-reload".to_string(),
            format!("umount {old}")
        ]
    );
    assert_eq!(
        guest.read("fstab"),
        format!("{SYSTEM_LINES}/dev/vdb {kept} auto defaults,nofail 0 2\n")
    );
    assert_eq!(
        guest.read("records/mounts"),
        format!("/dev/vdb {kept} auto defaults,nofail 0 2\n")
    );

    // Finished again: nothing to do.
    let (ok, stderr, calls) = guest.make_mounts();
    assert!(ok, "{stderr}");
    assert_eq!(calls, strings(&[]));
}
