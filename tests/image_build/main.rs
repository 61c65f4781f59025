//! `trog image build` as an ordinary account, the way `bin/setup` leaves the `trog` account: an
//! account without subordinate ids is given a range by bin/setup's own script, and its build
//! then runs as root of a user namespace of its own, from the test services' apt proxy. The image
//! it files is the account's, and inside it the files belong to root and the packages' users
//! (read with debugfs from the image's filesystem), as a build by root makes them. No guest boots.
//!
//! Runs as root (as CI does), which makes the account.

#[path = "../support/local_services.rs"]
mod local_services;
#[path = "../support/root_warning.rs"]
mod root_warning;

use local_services::apt_proxy_url;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const ACCOUNT: &str = "trog-image-build";

fn checkout() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(command: &mut Command) -> Output {
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The account, made as `bin/setup` makes `trog` (a system account without subordinate ids),
/// then given a range by bin/setup's script; its uid.
fn account_with_subordinate_ids() -> u32 {
    let exists = || {
        Command::new("id")
            .arg(ACCOUNT)
            .output()
            .unwrap()
            .status
            .success()
    };
    if !exists() {
        let made = Command::new("useradd")
            .args(["--system", "--home-dir", "/nonexistent", "--no-create-home"])
            .args(["--shell", "/usr/sbin/nologin", ACCOUNT])
            .output()
            .unwrap();
        // A concurrent run may have made it meanwhile.
        assert!(made.status.success() || exists(), "{made:?}");
    }
    let granted = text(&run(Command::new("bash")
        .arg(checkout().join("src/images/grant_subordinate_ids.sh"))
        .arg(ACCOUNT)));
    assert!(
        granted.starts_with(&format!("gave {ACCOUNT} the subordinate ids "))
            || granted == format!("{ACCOUNT} has subordinate ids already"),
        "{granted}"
    );
    // Once it has them, the script changes nothing.
    assert_eq!(
        text(&run(Command::new("bash")
            .arg(checkout().join("src/images/grant_subordinate_ids.sh"))
            .arg(ACCOUNT))),
        format!("{ACCOUNT} has subordinate ids already")
    );
    text(&run(Command::new("id").args(["-u", ACCOUNT])))
        .parse()
        .unwrap()
}

#[test]
fn an_ordinary_account_builds_an_image_as_root_of_its_own_user_namespace() {
    // SAFETY: geteuid has no preconditions and touches no memory.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test makes an account: run it as root (CI does)"
    );
    let uid = account_with_subordinate_ids();
    let home = tempfile::Builder::new()
        .prefix("trog-image-build-")
        .tempdir_in("/var/tmp")
        .unwrap();
    run(Command::new("chown")
        .arg(format!("{ACCOUNT}:"))
        .arg(home.path()));
    let proxy = apt_proxy_url();
    let output = root_warning::output_without_root_warning(
        Command::new("setpriv")
            .arg(format!("--reuid={ACCOUNT}"))
            .arg(format!("--regid={ACCOUNT}"))
            .arg("--init-groups")
            .arg(env!("CARGO_BIN_EXE_trog"))
            .args([
                "image",
                "build",
                "--release",
                "bookworm",
                "--mirror",
                &proxy,
            ])
            .args(["--security-mirror", &format!("{proxy}-security")])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", home.path().join("cache"))
            .env("USER", ACCOUNT)
            .env("LOGNAME", ACCOUNT)
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    let built = stdout
        .lines()
        .find_map(|line| line.strip_prefix("built debian bookworm from "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let image = built
        .split_once(": ")
        .and_then(|(_, rest)| rest.rsplit_once(" ("))
        .map(|(path, _)| Path::new(path).to_path_buf())
        .unwrap_or_else(|| panic!("{built}"));
    assert!(
        image.starts_with(home.path().join("cache/trog/images")),
        "{}",
        image.display()
    );
    assert_eq!(
        std::fs::metadata(&image).unwrap().uid(),
        uid,
        "the image is the account's"
    );
    let packages = std::fs::read_to_string(image.with_extension("packages")).unwrap();
    assert!(
        packages.lines().any(|line| line.starts_with("cloud-init ")),
        "{packages}"
    );

    // Inside the image, the namespace's ids were recorded as root's and the packages' own.
    let raw = home.path().join("disk.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "qcow2", "-O", "raw"])
        .arg(&image)
        .arg(&raw));
    // The filesystem starts 1 MiB in (build_debian.sh's partition_start_sector).
    let filesystem = format!("{}?offset=1048576", raw.display());
    let owner_of = |path: &str| {
        let stat = run(Command::new("debugfs").args(["-R", &format!("stat {path}"), &filesystem]));
        let text = String::from_utf8_lossy(&stat.stdout).into_owned();
        let line = text
            .lines()
            .find(|line| line.starts_with("User:"))
            .unwrap_or_else(|| panic!("{path}: {text}"))
            .to_string();
        let numbers: Vec<u32> = line
            .split_whitespace()
            .filter_map(|word| word.parse().ok())
            .collect();
        (numbers[0], numbers[1])
    };
    assert_eq!(
        owner_of("/usr/bin/apt"),
        (0, 0),
        "root's, not the account's"
    );
    // /etc/shadow: root, and group shadow (42), which only the namespace's other ids can give.
    assert_eq!(owner_of("/etc/shadow"), (0, 42));
}
