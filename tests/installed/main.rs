//! trog as a system tool, for real: `packaging/build-deb` builds the Debian package from this
//! build's binary, `dpkg -i` installs it on this machine, and the installed pieces are checked (a
//! man page per verb, completions, recipes under /usr/share/trog). Then the installed
//! `contrib/reprovision` (the web button of docs/INTEGRATION.md) runs the INSTALLED `trog`, from
//! another folder and without `TROG_RECIPES`, with the passphrase piped from a root-only file,
//! its settings read from /etc/trog/reprovision.conf and none from its caller's environment (which
//! names another trog and installation): one real guest is provisioned from the offline test
//! image, the script's stream of events and its outcome for the user are checked, a misnamed
//! guest's outcome too, a name that is not a guest's and a settings file others may write are
//! refused, then the guest is destroyed and the package removed.

#[path = "../support/local_services.rs"]
mod local_services;
#[path = "../e2e/support.rs"]
#[allow(dead_code)]
mod support;

use local_services::local_hypervisors_conf;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::*;

const INSTALLED_TROG: &str = "/usr/bin/trog";
const INSTALLED_SCRIPT: &str = "/usr/share/trog/examples/reprovision";

/// Where the package's root programs go while it is installed here: bin/setup and the other
/// tests (the remote host, the e2e account, README's first command) run the ones at
/// /usr/libexec/trog through sudo at the same time, and dpkg must neither replace nor, at the
/// purge, remove them. A diversion sends the package's copies beside them instead.
const DIVERTED: &str = ".trog-package";

/// The package's files under /usr/libexec/trog.
fn packaged_root_programs(deb: &Path) -> Vec<String> {
    let listing = text(&run(Command::new("dpkg-deb").arg("-c").arg(deb)).stdout);
    listing
        .lines()
        .filter_map(|line| line.split_whitespace().last())
        .filter_map(|path| path.strip_prefix("./usr/libexec/trog/"))
        .filter(|name| !name.is_empty())
        .map(|name| format!("/usr/libexec/trog/{name}"))
        .collect()
}

/// What /usr/libexec/trog holds now (name and contents), which the package must leave alone.
fn programs_in_place() -> Vec<(PathBuf, Vec<u8>)> {
    let mut found: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir("/usr/libexec/trog")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| !path.to_string_lossy().ends_with(DIVERTED))
                .map(|path| {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    (path, bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Diverts the package's root programs for as long as it lives, then removes the package and
/// the diversions, whatever state the test stopped in.
struct InstalledPackage {
    diverted: Vec<String>,
}

impl InstalledPackage {
    fn divert(deb: &Path) -> InstalledPackage {
        let diverted = packaged_root_programs(deb);
        assert!(!diverted.is_empty(), "the package ships no root programs");
        for program in &diverted {
            run(Command::new("dpkg-divert")
                .args(["--quiet", "--package", "trog-tests", "--add", "--divert"])
                .arg(format!("{program}{DIVERTED}"))
                .arg(program));
        }
        InstalledPackage { diverted }
    }
}

impl Drop for InstalledPackage {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "trog"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for program in &self.diverted {
            let _ = Command::new("dpkg-divert")
                .args(["--quiet", "--package", "trog-tests", "--remove"])
                .arg(program)
                .status();
            let _ = std::fs::remove_file(format!("{program}{DIVERTED}"));
        }
    }
}

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    output
}

/// The installation: this machine under software emulation, the test image, the mirror.
fn write_installation(dir: &Path, domain: &str, pool: &str, mirror_url: &str) {
    let image = test_image();
    std::fs::write(
        dir.join("hypervisors.conf"),
        local_hypervisors_conf(pool, &dir.join("pool")),
    )
    .unwrap();
    std::fs::write(
        dir.join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror_url}\n    upgrade: false\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("recipes.d")).unwrap();
    std::fs::write(
        dir.join("recipes.d").join(format!("{domain}.yaml")),
        format!(
            "{domain}:\n  _global:\n    memory: 768\n    cpus: 1\n    size: 4G\n    image:\n      url: file://{}\n      sha256: {}\n",
            image.display(),
            sha256_file(&image)
        ),
    )
    .unwrap();
}

/// Where the reprovision script reads its settings: the only way to give it any.
const SCRIPT_SETTINGS: &str = "/etc/trog/reprovision.conf";

/// The script's settings file for this test, removed (and any earlier one put back) when dropped.
struct ScriptSettings {
    earlier: Option<Vec<u8>>,
}

impl ScriptSettings {
    fn write(installation: &Path, credentials: &Path) -> ScriptSettings {
        let earlier = std::fs::read(SCRIPT_SETTINGS).ok();
        std::fs::create_dir_all("/etc/trog").unwrap();
        std::fs::write(
            SCRIPT_SETTINGS,
            format!(
                "# tests/installed\ninstallation = {}\ncredentials = {}\ntrog = {INSTALLED_TROG}\ncache = {}\n",
                installation.display(),
                credentials.display(),
                installation.join("cache").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(SCRIPT_SETTINGS, std::fs::Permissions::from_mode(0o644)).unwrap();
        ScriptSettings { earlier }
    }
}

impl Drop for ScriptSettings {
    fn drop(&mut self) {
        match &self.earlier {
            Some(bytes) => std::fs::write(SCRIPT_SETTINGS, bytes).unwrap(),
            None => {
                let _ = std::fs::remove_file(SCRIPT_SETTINGS);
                let _ = std::fs::remove_dir("/etc/trog");
            }
        }
    }
}

/// Runs the installed reprovision script from `cwd`, as a web application whose environment names
/// another trog and another installation would: the script takes neither. Its JSON lines and exit
/// status.
fn reprovision(cwd: &Path, domain: &str) -> (Vec<serde_json::Value>, Option<i32>, String) {
    // A `trog` first on the caller's PATH that fails: the script must not run it either.
    let decoy = tempfile::tempdir().unwrap();
    let decoy_trog = decoy.path().join("trog");
    std::fs::write(&decoy_trog, "#!/bin/sh\nexit 99\n").unwrap();
    std::fs::set_permissions(&decoy_trog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = Command::new(INSTALLED_SCRIPT)
        .arg(domain)
        .current_dir(cwd)
        .env_remove("TROG_RECIPES")
        .env("TROG", "/bin/false")
        .env("TROG_PROVISIONER_CONFIG", "/nonexistent/installation")
        .env("TROG_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", decoy.path().display()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let events = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line:?}")))
        .collect();
    (events, output.status.code(), text(&output.stderr))
}

fn outcome(events: &[serde_json::Value]) -> &serde_json::Value {
    let last = events.last().expect("the script printed nothing");
    assert_eq!(last["event"], "outcome", "{events:?}");
    last
}

#[test]
fn the_installed_package_provisions_through_the_reprovision_script() {
    // 1. Build the package from this build's binary, and install it.
    let out = tempfile::tempdir().unwrap();
    // Uncompressed (dpkg-deb reads its compressor from the environment): xz on this build's
    // unoptimised binary is half a minute of a core that the guests want, and dpkg installs
    // either alike.
    let built = run(Command::new(checkout().join("packaging/build-deb"))
        .arg(env!("CARGO_BIN_EXE_trog"))
        .arg(out.path())
        .env("DPKG_DEB_COMPRESSOR_TYPE", "none"));
    let deb = PathBuf::from(text(&built.stdout).trim());
    let fields = text(
        &run(Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb)
            .arg("Depends"))
        .stdout,
    );
    for needed in ["libvirt0", "libc6", "openssh-client"] {
        assert!(fields.contains(needed), "Depends: {fields}");
    }
    // The example web button installed beside trog is a Python 3 script.
    let recommends = text(
        &run(Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb)
            .arg("Recommends"))
        .stdout,
    );
    assert!(
        recommends.split(',').any(|name| name.trim() == "python3"),
        "Recommends: {recommends}"
    );
    let before = programs_in_place();
    let package = InstalledPackage::divert(&deb);
    run(Command::new("dpkg").arg("-i").arg(&deb));
    // The package's programs went beside the ones in use, byte for byte the same build's.
    for program in &package.diverted {
        let packaged = std::fs::read(format!("{program}{DIVERTED}")).unwrap();
        assert!(!packaged.is_empty(), "{program}");
    }
    assert_eq!(programs_in_place(), before);

    // 2. What it installed: a man page per verb, completions that know every verb, the recipes.
    let help = text(&run(Command::new(INSTALLED_TROG).arg("--help")).stdout);
    let verbs: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|verb| *verb != "help")
        .collect();
    assert!(verbs.len() >= 15, "{help}");
    let bash = std::fs::read_to_string("/usr/share/bash-completion/completions/trog").unwrap();
    for verb in &verbs {
        let page = format!("/usr/share/man/man1/trog-{verb}.1.gz");
        assert!(Path::new(&page).is_file(), "no man page {page}");
        assert!(bash.contains(verb), "bash completion lacks {verb}");
    }
    assert!(Path::new("/usr/share/man/man1/trog.1.gz").is_file());
    assert!(Path::new("/usr/share/zsh/vendor-completions/_trog").is_file());
    assert!(Path::new("/usr/share/trog/recipes/debian/recipe.yaml").is_file());
    assert!(Path::new("/usr/share/trog/templates/domain.xml.j2").is_file());

    // The installed binary lists the installed recipes from anywhere; a copy of it elsewhere,
    // with no recipes beside it, says where it looked.
    let elsewhere = tempfile::tempdir().unwrap();
    let listed = run(Command::new(INSTALLED_TROG)
        .arg("recipes")
        .current_dir(elsewhere.path())
        .env_remove("TROG_RECIPES"));
    assert!(
        text(&listed.stdout).contains("nginx"),
        "{}",
        text(&listed.stdout)
    );
    let stray = elsewhere.path().join("bin/trog");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::copy(INSTALLED_TROG, &stray).unwrap();
    let lost = Command::new(&stray)
        .arg("recipes")
        .env_remove("TROG_RECIPES")
        .output()
        .unwrap();
    let said = text(&lost.stderr);
    assert_eq!(lost.status.code(), Some(3), "{said}");
    let looked = elsewhere.path().join("share/trog/recipes");
    assert!(said.contains(&looked.display().to_string()), "{said}");
    assert!(said.contains("hint: install trog's package"), "{said}");

    // 3. The web button: one real provision through the installed script and binary.
    let mirror_root = tempfile::tempdir().unwrap();
    write_empty_archive(mirror_root.path());
    let mirror = MirrorServer::start(
        mirror_root.path(),
        19000 + (std::process::id() % 1000) as u16,
    );
    let installation = tempfile::Builder::new()
        .prefix("trog-installed-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let config = installation.path();
    // qemu runs as its own user and must reach the pool's directory.
    std::fs::set_permissions(config, std::fs::Permissions::from_mode(0o755)).unwrap();
    let unique = std::process::id();
    let domain = format!("installed-{unique}.test");
    let pool = format!("trog-installed-{unique}");
    let _leftovers = LibvirtLeftovers {
        domain: domain.clone(),
        pool: pool.clone(),
    };
    write_installation(config, &domain, &pool, &mirror.url);
    let credentials = config.join("credentials");
    std::fs::write(&credentials, format!("keepass: {PASSPHRASE}\n\n")).unwrap();
    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();

    let settings = ScriptSettings::write(config, &credentials);
    let (events, status, stderr) = reprovision(elsewhere.path(), &domain);
    assert_eq!(status, Some(0), "{events:#?}\n{stderr}");
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(names.contains(&"plan"), "{names:?}");
    assert!(names.contains(&"step_started"), "{names:?}");
    assert!(names.contains(&"step_finished"), "{names:?}");
    let done = events
        .iter()
        .find(|event| event["event"] == "done")
        .expect("a done event");
    assert_eq!(done["report"]["guest"], domain.as_str());
    assert!(events[..events.len() - 1]
        .iter()
        .all(|event| event["schema"] == 1));
    let outcome_seen = outcome(&events);
    assert_eq!(outcome_seen["outcome"], "succeeded", "{outcome_seen}");
    assert_eq!(outcome_seen["exit_status"], 0);
    assert_eq!(outcome_seen["retry"], false);
    let address = done["report"]["address"].as_str().unwrap();
    assert!(
        outcome_seen["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("{domain} on local at {address}")),
        "{outcome_seen}"
    );

    // A guest the installation does not declare: an error event, and an outcome that sends the
    // user to an administrator rather than to the button again.
    let (events, status, _) = reprovision(elsewhere.path(), &format!("missing-{unique}.test"));
    assert_eq!(status, Some(3), "{events:#?}");
    assert!(
        events.iter().any(|event| event["event"] == "error"),
        "{events:#?}"
    );
    let outcome_seen = outcome(&events);
    assert_eq!(outcome_seen["outcome"], "configuration", "{outcome_seen}");
    assert_eq!(outcome_seen["retry"], false);
    assert!(
        outcome_seen["detail"].as_str().unwrap().contains("hint:"),
        "{outcome_seen}"
    );

    // A name that is not a guest's never reaches trog; settings another user could write are
    // refused.
    let (_, status, stderr) = reprovision(elsewhere.path(), "--help");
    assert_eq!(status, Some(2), "{stderr}");
    std::fs::set_permissions(SCRIPT_SETTINGS, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (events, status, _) = reprovision(elsewhere.path(), &domain);
    assert_eq!(status, Some(2), "{events:#?}");
    assert_eq!(outcome(&events)["outcome"], "internal_error");
    drop(settings);

    // 4. The installed trog destroys the guest; then the package goes, leaving the root
    // programs other runs use as they were.
    let destroyed = Command::new(INSTALLED_TROG)
        .args(["--credentials", "destroy", "--purge", "--yes", &domain])
        .current_dir(elsewhere.path())
        .env_remove("TROG_RECIPES")
        .env("TROG_PROVISIONER_CONFIG", config)
        .stdin(std::fs::File::open(&credentials).unwrap())
        .output()
        .unwrap();
    assert!(destroyed.status.success(), "{}", text(&destroyed.stderr));
    drop(mirror);
    drop(package);
    assert_eq!(programs_in_place(), before);
    assert!(!Path::new(INSTALLED_TROG).exists());
}
