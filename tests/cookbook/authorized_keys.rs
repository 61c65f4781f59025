//! The adminconfig recipe's key script (`/usr/local/lib/trog/authorized-keys`, from
//! authorized-keys.sh.j2), rendered and run against stand-ins for `getent`, `id` and `install`
//! (which keep the admin's home in this test's directory): the keys it adds, the ones it takes
//! back, and the ones it leaves. A real guest runs it in `tests/recipes_on_guests`.

use super::stand_ins::{rendered_file, StandIns};
use serde_json::json;
use std::path::{Path, PathBuf};

/// `getent passwd` and `id -gn` answer for the admin, whose home is `$here/home`; `install`
/// copies as the real one does, without the owner (the test is no root).
const FAKES: &[(&str, &str)] = &[
    (
        "getent",
        "#!/bin/sh\nhere=$(dirname \"$0\")/..\necho \"$2:x:1000:1000::$here/home:/bin/bash\"\n",
    ),
    ("id", "#!/bin/sh\necho siteadmin\n"),
    (
        "install",
        r#"#!/bin/sh
set -eu
dir=false mode=
while [ "$#" -gt 0 ]; do
  case $1 in
    -d) dir=true; shift ;;
    -m) mode=$2; shift 2 ;;
    -o|-g) shift 2 ;;
    *) break ;;
  esac
done
if $dir; then mkdir -p "$1"; chmod "$mode" "$1"; else cp "$1" "$2"; chmod "$mode" "$2"; fi
"#,
    ),
];

/// The key the guest's first boot authorized, which no run of the script may take out.
const GUEST_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuestKey trog@example.test";
const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyA alice@laptop";
const KEY_B: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABKeyB bob's key $(id) `id`";
const KEY_C: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhKeyC carol@desk";
const BY_HAND: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIByHand added@by.hand";

struct Guest {
    stand_ins: StandIns,
}

impl Guest {
    fn new() -> Guest {
        let stand_ins = StandIns::new(FAKES);
        std::fs::create_dir(stand_ins.path("home")).unwrap();
        Guest { stand_ins }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.stand_ins.path(name)
    }

    fn keys_file(&self) -> PathBuf {
        self.path("home/.ssh/authorized_keys")
    }

    /// The admin's keys, a line each; `None` when there is no file.
    fn keys(&self) -> Option<Vec<String>> {
        std::fs::read_to_string(self.keys_file())
            .ok()
            .map(|text| text.lines().map(str::to_string).collect())
    }

    /// Runs the script rendered for `keys`, its record moved into this directory.
    fn run(&self, keys: &[&str]) {
        let script = rendered_file(
            "adminconfig",
            json!({ "authorized_keys": keys }),
            "/usr/local/lib/trog/authorized-keys",
        )
        .replace(
            "/var/lib/trog/adminconfig/authorized_keys",
            &self.path("record/authorized_keys").display().to_string(),
        );
        let output = self
            .stand_ins
            .sh_script("authorized-keys", &script, &[], b"");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn lines(list: &[&str]) -> Vec<String> {
    list.iter().map(|line| line.to_string()).collect()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_admins_keys_follow_the_list_and_only_the_scripts_own_are_taken_back() {
    let guest = Guest::new();

    // No keys listed and none added before: nothing is made.
    guest.run(&[]);
    assert_eq!(guest.keys(), None);
    assert!(!guest.path("home/.ssh").exists());

    // The guest's own key, from its first boot, is there; the listed ones are added after it.
    std::fs::create_dir(guest.path("home/.ssh")).unwrap();
    std::fs::write(guest.keys_file(), format!("{GUEST_KEY}\n")).unwrap();
    guest.run(&[KEY_A, KEY_B]);
    assert_eq!(guest.keys(), Some(lines(&[GUEST_KEY, KEY_A, KEY_B])));
    assert_eq!(mode(&guest.keys_file()), 0o600);
    assert_eq!(mode(&guest.path("home/.ssh")), 0o700);

    // Again, unchanged: the file is not written.
    let before = std::fs::metadata(guest.keys_file()).unwrap();
    guest.run(&[KEY_A, KEY_B]);
    let after = std::fs::metadata(guest.keys_file()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec())
    );

    // A key added by hand stays; one dropped from the list is taken out; a new one is added.
    std::fs::write(
        guest.keys_file(),
        format!("{GUEST_KEY}\n{KEY_A}\n{KEY_B}\n{BY_HAND}\n"),
    )
    .unwrap();
    guest.run(&[KEY_B, KEY_C]);
    assert_eq!(
        guest.keys(),
        Some(lines(&[GUEST_KEY, KEY_B, BY_HAND, KEY_C]))
    );

    // The list emptied: every key the script added is taken out, the others stay.
    guest.run(&[]);
    assert_eq!(guest.keys(), Some(lines(&[GUEST_KEY, BY_HAND])));
    // And with nothing listed or added, a later run changes nothing.
    guest.run(&[]);
    assert_eq!(guest.keys(), Some(lines(&[GUEST_KEY, BY_HAND])));
}
