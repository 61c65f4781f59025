//! `bake_packages` in plans, through the real binary over test-driver hypervisors and a small
//! Debian mirror on loopback (`support/apt_mirror.rs`) that the packages' versions are read from:
//! which image a plan names and why, that the key follows a listed package's version and nothing
//! else of the archive, and what a plan, `status`, `image prune` and a run do when the mirror
//! cannot be read. Neither a dry run nor `status` builds an image.

use crate::apt_mirror::{AptMirror, Published};
use crate::fixtures::*;
use crate::{installation, report, three_hypervisors};
use std::path::Path;
use std::process::Output;

/// A mirror of bookworm with nginx at its release's version and a security update of it.
fn bookworm_mirror() -> AptMirror {
    let mirror = AptMirror::start();
    mirror.publish_bookworm(
        &[
            ("nginx", "1.22.1-9"),
            ("make", "4.3-4.1"),
            ("libc6", "2.36-9"),
        ],
        &[("nginx", "1.22.1-9+deb12u1")],
    );
    mirror
}

/// The example installation with web.example.test asking for a baked image, its packages'
/// versions read from `mirror`.
fn baked_installation(fleet: &TestFleet, mirror: &AptMirror) -> tempfile::TempDir {
    installation(
        fleet,
        "web.example.test",
        &format!(
            "    memory: 1024\n    bake_packages: true\n    mirror: {0}\n    security_mirror: {0}\n",
            mirror.url
        ),
    )
}

/// The keys of the baked images the installation's guests resolve to now, as prune and
/// provision compute them.
fn keys_in_use(installation: &Path) -> std::collections::BTreeSet<String> {
    let paths = trog::config::paths::InstallationPaths::resolve(
        Some(installation.to_str().unwrap()),
        None,
        None,
    );
    trog::workflow::baked_images::keys_in_use(
        &paths,
        &trog::images::package_versions::PackageVersions::default(),
    )
    .unwrap()
}

/// Runs `trog ARGS…` on the installation with `cache` as its XDG cache directory, the store's
/// answers on stdin (read with `--credentials`).
fn trog_with_cache(installation: &Path, cache: &Path, args: &[&str]) -> Output {
    crate::run_trog(installation, args, Some(cache))
}

/// `provision --dry-run --hypervisor hv2 web.example.test` with `cache` as the image cache's home.
fn dry_run_on_hv2(installation: &Path, cache: &Path) -> Output {
    trog_with_cache(
        installation,
        cache,
        &[
            "--credentials",
            "provision",
            "--dry-run",
            "--hypervisor",
            "hv2",
            "web.example.test",
        ],
    )
}

/// The files under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = walk(dir)
        .into_iter()
        .map(|path| path.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    names.sort();
    names
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flat_map(|entry| {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// `bake_packages`: the plan says which image the new root disk is made over and why: none yet,
/// one within the age bound (whose volume the upload then names), one past it. Neither a dry
/// run nor `status` builds one, and `image prune --dry-run` names one no guest uses and removes
/// nothing.
#[test]
fn the_plan_names_the_baked_image_and_a_dry_run_or_status_builds_none() {
    let fleet = three_hypervisors();
    let mirror = bookworm_mirror();
    let dir = baked_installation(&fleet, &mirror);
    let cache = tempfile::tempdir().unwrap();
    let images = cache.path().join("trog/images");
    let dry_run = |what: &str| {
        let output = dry_run_on_hv2(dir.path(), cache.path());
        let text = report(&fleet, dir.path(), &output);
        assert_eq!(output.status.code(), Some(0), "{what}: {text}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };

    let none = dry_run("no baked image yet");
    assert!(
        none.contains("web.example.test: base image: building a baked image ")
            && none.contains("first: none for this package set ("),
        "{none}"
    );
    let status = trog_with_cache(dir.path(), cache.path(), &["status", "web.example.test"]);
    assert!(
        files_under(cache.path()).is_empty(),
        "a dry run or status built something: {:?}\n{}",
        files_under(cache.path()),
        String::from_utf8_lossy(&status.stderr)
    );

    // What provision would find: the guest's key, as prune computes it from the configuration.
    let keys = keys_in_use(dir.path());
    assert_eq!(keys.len(), 1);
    let key = keys.first().unwrap().clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let image_sha = "5".repeat(64);
    let write_record_of = |key: &str, built_at: u64, image_sha: &str| {
        std::fs::create_dir_all(&images).unwrap();
        std::fs::write(
            images.join(format!("baked-{key}.json")),
            format!(
                r#"{{"key":"{key}","built_at":{built_at},"distro":"debian","release":"bookworm","mirror":"http://deb.debian.org/debian","security_mirror":"http://deb.debian.org/debian-security","packages":["make","nginx"],"builder":"b","image_sha256":"{image_sha}"}}"#
            ),
        )
        .unwrap();
        std::fs::write(images.join(format!("sha256-{image_sha}.img")), b"baked").unwrap();
    };
    let write_record = |key: &str, built_at: u64| write_record_of(key, built_at, &image_sha);

    write_record(&key, now - 2 * 86_400);
    let fresh = dry_run("a baked image two days old");
    assert!(
        fresh.contains(&format!(
            "web.example.test: base image: baked image {} built ",
            &key[..12]
        )) && fresh.contains("holds 2 packages of its recipes"),
        "{fresh}"
    );
    assert!(
        fresh.contains(&format!(
            "upload base image trog-base-{}.qcow2 from file://{}",
            &image_sha[..16],
            images.join(format!("sha256-{image_sha}.img")).display()
        )),
        "the root disk is made over the baked image: {fresh}"
    );

    write_record(&key, now - 9 * 86_400);
    let before = files_under(cache.path());
    let stale = dry_run("a baked image nine days old");
    assert!(
        stale.contains("is 9 days old, older than 7d (baked_image_max_age_days)"),
        "{stale}"
    );
    assert_eq!(files_under(cache.path()), before, "a dry run built nothing");

    // One no guest resolves to is named by prune; --dry-run removes nothing. hv3 cannot be
    // asked whether its pool holds a copy: the record stays for a later prune.
    let unused_sha = "6".repeat(64);
    let unused_image = images.join(format!("sha256-{unused_sha}.img"));
    write_record_of(&"0".repeat(64), now, &unused_sha);
    let unused_record = images.join(format!("baked-{}.json", "0".repeat(64)));
    let prune = trog_with_cache(dir.path(), cache.path(), &["image", "prune", "--dry-run"]);
    let listed = fleet.redact(&String::from_utf8_lossy(&prune.stdout));
    assert_eq!(prune.status.code(), Some(0), "{listed}");
    let lines = |verb: &str, keep: &str| {
        vec![
            format!(
                "{verb} baked image 000000000000 (debian bookworm, 2 packages, built {}): {}",
                trog::lock::utc_timestamp(now),
                unused_image.display()
            ),
            "  left its copy in pool trog on hv3, if there is one: cannot connect to test://[TMP]/hv3-missing.xml: Failed to open file '[TMP]/hv3-missing.xml': No such file or directory".to_string(),
            format!(
                "  {keep} its record baked-{}.json, for a later prune to remove the copies left",
                "0".repeat(64)
            ),
        ]
    };
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        lines("would remove", "would keep"),
        "only the image no guest uses"
    );
    assert!(unused_record.exists() && unused_image.exists());
    let prune = trog_with_cache(dir.path(), cache.path(), &["image", "prune"]);
    let listed = fleet.redact(&String::from_utf8_lossy(&prune.stdout));
    assert_eq!(prune.status.code(), Some(0), "{listed}");
    assert_eq!(listed.lines().collect::<Vec<_>>(), lines("removed", "kept"));
    assert!(!unused_image.exists(), "its image went");
    assert!(
        unused_record.exists(),
        "its record stays while hv3 cannot be asked"
    );
    assert!(
        images.join(format!("baked-{key}.json")).exists()
            && images.join(format!("sha256-{image_sha}.img")).exists(),
        "the guest's stays"
    );
}

/// A plan's `base image:` line, from a dry run's standard output.
fn base_image_line(stdout: &str) -> String {
    stdout
        .lines()
        .find(|line| line.starts_with("web.example.test: base image: "))
        .unwrap_or_else(|| panic!("no base image line:\n{stdout}"))
        .to_string()
}

/// The key holds each listed package's version on the mirror: a new point release of nginx in
/// the security suite makes a new key (the plan then builds, saying there is none for the
/// set), while a change to a package the guest does not list, or to the release's own nginx
/// below the security update, leaves it as it was.
#[test]
fn the_key_follows_a_listed_packages_version_and_nothing_else() {
    let fleet = three_hypervisors();
    let mirror = bookworm_mirror();
    let dir = baked_installation(&fleet, &mirror);
    let first = keys_in_use(dir.path());
    assert_eq!(first.len(), 1);

    // Unrelated to the image: a package it does not list, an older nginx in a suite.
    mirror.publish_bookworm(
        &[
            ("nginx", "1.22.1-9"),
            ("make", "4.3-4.1"),
            ("libc6", "2.36-9+deb12u13"),
            ("unrelated", "1.0-1"),
        ],
        &[("nginx", "1.22.1-9+deb12u1")],
    );
    mirror.publish(
        "bookworm-updates",
        &[("nginx", "1.22.1-9~bpo11+1")],
        Published::Xz,
    );
    assert_eq!(
        keys_in_use(dir.path()),
        first,
        "nothing the image holds moved"
    );

    // A point release of nginx: another image.
    mirror.publish(
        "bookworm-security",
        &[("nginx", "1.22.1-9+deb12u2")],
        Published::Xz,
    );
    let second = keys_in_use(dir.path());
    assert_eq!(second.len(), 1);
    assert_ne!(second, first, "a new version of nginx makes a new key");

    // What the plan says: the image of the old key, recorded with its versions, is not the
    // guest's any more, and the plan says which package moved.
    let cache = tempfile::tempdir().unwrap();
    let images = cache.path().join("trog/images");
    std::fs::create_dir_all(&images).unwrap();
    let paths = trog::config::paths::InstallationPaths::resolve(
        Some(dir.path().to_str().unwrap()),
        None,
        None,
    );
    let now_resolved = trog::workflow::baked_images::resolved_inputs(
        &paths,
        &trog::images::package_versions::PackageVersions::default(),
    )
    .unwrap()
    .remove(0);
    assert_eq!(now_resolved.versions["nginx"], "1.22.1-9+deb12u2");
    let mut before = now_resolved.versions.clone();
    before.insert("nginx".into(), "1.22.1-9+deb12u1".into());
    let first_key = first.first().unwrap();
    let record = serde_json::json!({
        "key": first_key,
        "built_at": 1_780_000_000u64,
        "distro": "debian",
        "release": "bookworm",
        "mirror": mirror.url,
        "security_mirror": mirror.url,
        "packages": now_resolved.inputs.packages,
        "versions": before,
        "builder": trog::images::build::builder_digest(),
        "image_sha256": "5".repeat(64),
    });
    std::fs::write(
        images.join(format!("baked-{first_key}.json")),
        record.to_string(),
    )
    .unwrap();
    std::fs::write(
        images.join(format!("sha256-{}.img", "5".repeat(64))),
        b"baked",
    )
    .unwrap();
    let output = dry_run_on_hv2(dir.path(), cache.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        report(&fleet, dir.path(), &output)
    );
    let second_key = second.first().unwrap();
    assert_eq!(
        base_image_line(&stdout),
        format!(
            "web.example.test: base image: building a baked image {} first: the mirror has new versions of its packages since the one built {}: nginx 1.22.1-9+deb12u2 (was 1.22.1-9+deb12u1)",
            &second_key[..12],
            trog::lock::utc_timestamp(1_780_000_000)
        ),
    );
}

/// A mirror that cannot be read: the plan of a dry run still shows (the declared image in its
/// upload step, and why the baked one is unknown), `status` and `image prune` build and remove
/// nothing, and a run is refused before it changes anything.
#[test]
fn a_mirror_that_cannot_be_read_builds_nothing_and_a_run_changes_nothing() {
    let fleet = three_hypervisors();
    let mirror = bookworm_mirror();
    let dir = baked_installation(&fleet, &mirror);
    let cache = tempfile::tempdir().unwrap();
    let images = cache.path().join("trog/images");
    // An image no guest would resolve to, for prune to leave.
    std::fs::create_dir_all(&images).unwrap();
    let record = images.join(format!("baked-{}.json", "0".repeat(64)));
    std::fs::write(
        &record,
        format!(
            r#"{{"key":"{}","built_at":1,"distro":"debian","release":"bookworm","mirror":"m","security_mirror":"s","packages":["nginx"],"builder":"b","image_sha256":"{}"}}"#,
            "0".repeat(64),
            "5".repeat(64)
        ),
    )
    .unwrap();
    std::fs::write(
        images.join(format!("sha256-{}.img", "5".repeat(64))),
        b"baked",
    )
    .unwrap();
    // An answer that will not change: trog does not pause to ask again (a 503 would be asked
    // again after 10 s and 30 s, tested in package_versions_tests.rs).
    mirror.answer_every_request_with(Some(404));
    let cache_before = files_under(cache.path());
    let installation_before = files_under(dir.path());

    let dry_run = dry_run_on_hv2(dir.path(), cache.path());
    let text = report(&fleet, dir.path(), &dry_run);
    assert_eq!(dry_run.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&dry_run.stdout);
    assert_eq!(
        base_image_line(&stdout),
        format!(
            "web.example.test: base image: unknown, cannot tell which versions a baked image would hold: no mirror gave the index of bookworm ({}/dists/bookworm/Release answered HTTP 404); a provision stops here and changes nothing",
            mirror.url
        )
    );
    assert!(
        stdout.contains("upload base image trog-base-") && !stdout.contains("trog-base-5555"),
        "the declared image is uploaded in the plan shown: {stdout}"
    );

    let status = trog_with_cache(dir.path(), cache.path(), &["status", "web.example.test"]);
    assert_eq!(
        status.status.code(),
        Some(1),
        "{}",
        report(&fleet, dir.path(), &status)
    );

    let prune = trog_with_cache(dir.path(), cache.path(), &["image", "prune"]);
    let text = report(&fleet, dir.path(), &prune);
    assert_ne!(prune.status.code(), Some(0), "{text}");
    assert!(
        text.contains("cannot tell which versions a baked image would hold")
            && text.contains("hint: nothing was changed"),
        "{text}"
    );
    assert!(record.exists(), "prune removed nothing");

    let run = trog_with_cache(
        dir.path(),
        cache.path(),
        &[
            "--credentials",
            "provision",
            "--new-secret-store",
            "--hypervisor",
            "hv2",
            "web.example.test",
        ],
    );
    let text = report(&fleet, dir.path(), &run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(
        text.contains("base image: unknown, cannot tell which versions")
            && text.contains("hint: nothing was changed"),
        "{text}"
    );
    assert_eq!(files_under(cache.path()), cache_before, "nothing was built");
    // The store it made is taken back; what remains is the run's locks and the installation's
    // identity, which any run that may write settles first.
    let left: Vec<String> = files_under(dir.path())
        .into_iter()
        .filter(|path| !path.starts_with("locks/") && path != "installation-id")
        .collect();
    assert_eq!(left, installation_before, "the refused run changed nothing");
}

/// `status` of a guest whose plan makes a root disk names the baked image provision would use,
/// and its upload step is that image's, as provision's plan shows it; it builds nothing.
#[test]
fn status_shows_the_baked_image_a_new_root_disk_would_be_made_over() {
    let mirror = bookworm_mirror();
    // web.example.test is on hv1, tagged as trog's, without its root disk: a provision makes one.
    let fleet = TestFleet::new().hypervisor("hv1", node(16384, 4), "");
    let dir = baked_installation(&fleet, &mirror);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let made = trog_with_cache(
        dir.path(),
        cache.path(),
        &[
            "--credentials",
            "new_config",
            "--new-secret-store",
            "web.example.test",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(
        made.status.code(),
        Some(0),
        "{}",
        report(&fleet, dir.path(), &made)
    );
    let installation_id = std::fs::read_to_string(dir.path().join("installation-id")).unwrap();
    let node_file = fleet.dir.path().join("hv1.xml");
    let node_xml = std::fs::read_to_string(&node_file).unwrap().replace(
        "<memory>",
        &format!(
            "<domain type='test'><name>web.example.test</name><memory unit='MiB'>1024</memory><vcpu>1</vcpu><os><type>hvm</type></os>\
             <metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='web.example.test' boot='b' shape='s' payload='' installation='{}'/></metadata></domain>\n  <memory>",
            installation_id.trim()
        ),
    );
    std::fs::write(&node_file, node_xml).unwrap();

    let status = |what: &str| {
        let output = trog_with_cache(
            dir.path(),
            cache.path(),
            &["--credentials", "status", "web.example.test"],
        );
        let text = report(&fleet, dir.path(), &output);
        assert_eq!(output.status.code(), Some(1), "{what}: {text}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let none = status("no baked image yet");
    let key = keys_in_use(dir.path()).first().unwrap().clone();
    assert!(
        none.contains(&format!(
            "  base image: building a baked image {} first: none for this package set",
            &key[..12]
        )),
        "{none}"
    );
    assert!(files_under(cache.path()).is_empty(), "status built nothing");

    // A baked image for the guest's packages, a day old: the steps are made over it.
    let images = cache.path().join("trog/images");
    std::fs::create_dir_all(&images).unwrap();
    let image_sha = "5".repeat(64);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::fs::write(
        images.join(format!("baked-{key}.json")),
        format!(
            r#"{{"key":"{key}","built_at":{},"distro":"debian","release":"bookworm","mirror":"{1}","security_mirror":"{1}","packages":["make","nginx"],"builder":"b","image_sha256":"{image_sha}"}}"#,
            now - 86_400,
            mirror.url
        ),
    )
    .unwrap();
    std::fs::write(images.join(format!("sha256-{image_sha}.img")), b"baked").unwrap();
    let fresh = status("a baked image a day old");
    assert!(
        fresh.contains(&format!(
            "  base image: baked image {} built {}",
            &key[..12],
            trog::lock::utc_timestamp(now - 86_400)
        )),
        "{fresh}"
    );
    assert!(
        fresh.contains(&format!(
            "upload base image trog-base-{}.qcow2 from file://{}",
            &image_sha[..16],
            images.join(format!("sha256-{image_sha}.img")).display()
        )) && fresh.contains(&format!(
            "create root disk web.example.test-root.qcow2 of 10GB over trog-base-{}.qcow2",
            &image_sha[..16]
        )),
        "the steps are the baked image's: {fresh}"
    );
    assert_eq!(
        files_under(cache.path()).len(),
        2,
        "status built nothing: {:?}",
        files_under(cache.path())
    );
}
