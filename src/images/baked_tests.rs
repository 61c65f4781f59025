use super::*;
use crate::images::fake_builder::{BuildArgs, FakeBuild, FakeBuilder};

fn inputs(packages: &[&str]) -> BakeInputs {
    let packages: Vec<String> = packages.iter().map(|name| name.to_string()).collect();
    BakeInputs::new(
        "debian",
        "bookworm",
        "http://mirror.example.test/debian",
        "http://mirror.example.test/debian-security",
        &packages,
    )
}

/// `inputs` with every package at version 1.0-1.
fn resolved(inputs: BakeInputs) -> ResolvedBake {
    let versions = inputs
        .packages
        .iter()
        .map(|name| (name.clone(), "1.0-1".to_string()))
        .collect();
    inputs.resolved(versions)
}

#[test]
fn the_key_changes_exactly_when_an_input_changes() {
    let base = resolved(inputs(&["nginx", "ufw"]));
    let key = base.key_with_builder("builder-1");
    // The same set in another order, repeated, or with a trailing slash on a mirror: same image.
    assert_eq!(
        resolved(inputs(&["ufw", "nginx", "ufw"])).key_with_builder("builder-1"),
        key
    );
    let mut slashed = inputs(&["nginx", "ufw"]);
    slashed.mirror.push('/');
    let slashed = BakeInputs::new(
        &slashed.distro,
        &slashed.release,
        &slashed.mirror,
        &slashed.security_mirror,
        &slashed.packages,
    );
    assert_eq!(resolved(slashed).key_with_builder("builder-1"), key);
    // The fallback mirrors serve the same archive: not part of the key.
    let mut fallen_back = base.clone();
    fallen_back.inputs.fallback_mirrors = vec!["http://deb.debian.org/debian".into()];
    assert_eq!(fallen_back.key_with_builder("builder-1"), key);
    // Each input moves it.
    let changed: Vec<(&str, ResolvedBake)> = vec![
        (
            "a package more",
            resolved(inputs(&["nginx", "ufw", "cron"])),
        ),
        ("a package less", resolved(inputs(&["nginx"]))),
        ("a new version of a listed package", {
            let mut other = base.clone();
            other
                .versions
                .insert("nginx".into(), "1.0-1+deb12u1".into());
            other
        }),
        ("a listed package the mirror no longer has", {
            let mut other = base.clone();
            other.versions.remove("ufw");
            other
        }),
        ("another release", {
            let mut other = base.clone();
            other.inputs.release = "trixie".into();
            other
        }),
        ("another mirror", {
            let mut other = base.clone();
            other.inputs.mirror = "http://other.example.test/debian".into();
            other
        }),
        ("another security mirror", {
            let mut other = base.clone();
            other.inputs.security_mirror = "http://other.example.test/debian-security".into();
            other
        }),
        ("another distro", {
            let mut other = base.clone();
            other.inputs.distro = "ubuntu".into();
            other
        }),
    ];
    for (what, other) in changed {
        assert_ne!(other.key_with_builder("builder-1"), key, "{what}");
    }
    assert_ne!(base.key_with_builder("builder-2"), key, "another builder");
    // Versions of packages the image does not list (the rest of the archive) are not asked for,
    // so they cannot move it: only the listed packages' versions are part of the key.
    let mut unrelated = base.clone();
    unrelated
        .versions
        .insert("libc6".into(), "2.36-9+deb12u99".into());
    assert_eq!(
        unrelated.key_with_builder("builder-1"),
        key,
        "a version of a package the image does not list"
    );
    // Values cannot run into each other: "ab"+"c" is not "a"+"bc".
    assert_ne!(
        resolved(inputs(&["ab", "c"])).key_with_builder("b"),
        resolved(inputs(&["a", "bc"])).key_with_builder("b")
    );
}

#[test]
fn the_builder_digest_is_part_of_the_key() {
    assert_eq!(builder_digest().len(), 64);
    assert_eq!(
        resolved(inputs(&["nginx"])).key(),
        resolved(inputs(&["nginx"])).key_with_builder(&builder_digest())
    );
}

fn record(key: &str, built_at: u64, packages: usize) -> BakedRecord {
    BakedRecord {
        key: key.into(),
        built_at,
        distro: "debian".into(),
        release: "bookworm".into(),
        mirror: "http://mirror.example.test/debian".into(),
        security_mirror: "http://mirror.example.test/debian-security".into(),
        packages: (0..packages).map(|n| format!("package{n}")).collect(),
        versions: BTreeMap::new(),
        builder: "b".into(),
        image_sha256: "ab".repeat(32),
    }
}

const NOW: u64 = 1_780_000_000;

#[test]
fn an_image_past_the_age_bound_is_built_again_and_the_plan_line_says_why() {
    let wanted = inputs(&["nginx", "ufw"]);
    let key = "k".repeat(64);
    let missing = choose(&wanted, &key, None, NOW, 7);
    assert!(missing.needs_build());
    assert_eq!(
        missing.to_string(),
        "building a baked image kkkkkkkkkkkk first: none for this package set (2 packages)"
    );

    let six_days = record(&key, NOW - 6 * DAY, 2);
    let fresh = choose(&wanted, &key, Some(six_days.clone()), NOW, 7);
    assert!(!fresh.needs_build());
    assert_eq!(fresh.fresh(), Some(&six_days));
    assert_eq!(
        fresh.to_string(),
        format!(
            "baked image kkkkkkkkkkkk built {}, holds 2 packages of its recipes",
            crate::lock::utc_timestamp(NOW - 6 * DAY)
        )
    );

    let eight_days = record(&key, NOW - 8 * DAY, 2);
    let stale = choose(&wanted, &key, Some(eight_days), NOW, 7);
    assert!(stale.needs_build());
    assert_eq!(stale.fresh(), None);
    assert!(
        stale
            .to_string()
            .contains("is 8 days old, older than 7d (baked_image_max_age_days)"),
        "{stale}"
    );
    // The bound is the setting's: a longer one keeps the same image.
    let eight_days = record(&key, NOW - 8 * DAY, 2);
    assert!(!choose(&wanted, &key, Some(eight_days), NOW, 30).needs_build());

    let mut ubuntu = wanted.clone();
    ubuntu.distro = "ubuntu".into();
    let unbuildable = choose(&ubuntu, &key, None, NOW, 7);
    assert!(!unbuildable.needs_build() && unbuildable.fresh().is_none());
    assert!(unbuildable.to_string().contains("not of ubuntu"));
}

#[test]
fn a_record_without_its_image_counts_as_none_and_a_broken_one_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let kept = record(&"a".repeat(64), NOW, 1);
    write_record(cache.path(), &kept).unwrap();
    assert_eq!(read_record(cache.path(), &kept.key).unwrap(), None);
    std::fs::write(kept.image_path(cache.path()), b"image").unwrap();
    assert_eq!(read_record(cache.path(), &kept.key).unwrap(), Some(kept));
    assert_eq!(read_record(cache.path(), &"b".repeat(64)).unwrap(), None);
    std::fs::write(
        cache.path().join(format!("baked-{}.json", "c".repeat(64))),
        "{",
    )
    .unwrap();
    assert!(matches!(
        read_record(cache.path(), &"c".repeat(64)),
        Err(BakedError::Read { .. })
    ));
}

#[test]
fn prune_takes_exactly_the_images_no_guest_resolves_to() {
    let cache = tempfile::tempdir().unwrap();
    let mut used = record(&"a".repeat(64), NOW, 2);
    used.image_sha256 = "1".repeat(64);
    let mut unused = record(&"b".repeat(64), NOW - 100 * DAY, 3);
    unused.image_sha256 = "2".repeat(64);
    for kept in [&used, &unused] {
        write_record(cache.path(), kept).unwrap();
        std::fs::write(kept.image_path(cache.path()), b"image").unwrap();
    }
    // A downloaded base image beside them is none of prune's business.
    std::fs::write(
        cache.path().join(format!("sha256-{}.img", "3".repeat(64))),
        b"x",
    )
    .unwrap();
    let records = all_records(cache.path()).unwrap();
    assert_eq!(records, vec![used.clone(), unused.clone()]);
    let in_use: BTreeSet<String> = [used.key.clone()].into();
    let chosen = prunable(&records, &in_use);
    assert_eq!(chosen, vec![&unused]);
    remove(cache.path(), chosen[0]).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            format!("baked-{}.json", "a".repeat(64)),
            format!("sha256-{}.img", "1".repeat(64)),
            format!("sha256-{}.img", "3".repeat(64)),
        ]
    );
    // Every guest in use: nothing to prune.
    let all: BTreeSet<String> = [used.key.clone(), unused.key.clone()].into();
    assert!(prunable(&records, &all).is_empty());
}

/// A builder whose image bytes are the build's count, so each build has its own digest.
fn counting_builder() -> FakeBuilder<impl Fn(&BuildArgs) -> FakeBuild> {
    let builds = std::sync::atomic::AtomicUsize::new(0);
    FakeBuilder(move |args: &BuildArgs| {
        assert!(args.packages.ends_with(",nginx,ufw"));
        let count = builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        FakeBuild::Built {
            image: format!("image {count}").into_bytes(),
            packages: "nginx 1\n".into(),
        }
    })
}

#[test]
fn a_bake_records_its_image_and_a_rebuild_replaces_the_old_one() {
    let cache = tempfile::tempdir().unwrap();
    let builder = counting_builder();
    let resolved_inputs = resolved(inputs(&["ufw", "nginx"]));
    let wanted = resolved_inputs.inputs.clone();
    let first = bake(&builder, &resolved_inputs, cache.path(), NOW - 10 * DAY, 7).unwrap();
    assert_eq!(first.key, resolved_inputs.key());
    assert_eq!(first.packages, ["nginx", "ufw"]);
    assert_eq!(
        first.versions, resolved_inputs.versions,
        "recorded with the image"
    );
    assert_eq!(first.built_at, NOW - 10 * DAY);
    assert_eq!(
        read_record(cache.path(), &first.key).unwrap(),
        Some(first.clone())
    );
    assert!(choose(&wanted, &first.key, Some(first.clone()), NOW, 7).needs_build());

    // Within the bound, a bake takes the image there is (a run that waited for another's build).
    let again = bake(&builder, &resolved_inputs, cache.path(), NOW - 9 * DAY, 7).unwrap();
    assert_eq!(again, first);
    let second = bake(&builder, &resolved_inputs, cache.path(), NOW, 7).unwrap();
    assert_ne!(second.image_sha256, first.image_sha256);
    assert!(
        !first.image_path(cache.path()).exists(),
        "the old image went"
    );
    assert!(second.image_path(cache.path()).exists());
    let fresh = choose(
        &wanted,
        &second.key,
        read_record(cache.path(), &second.key).unwrap(),
        NOW,
        7,
    );
    assert_eq!(fresh.fresh(), Some(&second));
}

#[test]
fn an_image_of_earlier_versions_says_which_package_moved() {
    let now = resolved(inputs(&["nginx", "ufw"]));
    let mut newer = now.clone();
    newer
        .versions
        .insert("nginx".into(), "1.0-1+deb12u1".into());
    newer.versions.remove("ufw");
    let of = |resolved: &ResolvedBake, built_at: u64, builder: &str| BakedRecord {
        key: resolved.key_with_builder(builder),
        built_at,
        distro: "debian".into(),
        release: "bookworm".into(),
        mirror: resolved.inputs.mirror.clone(),
        security_mirror: resolved.inputs.security_mirror.clone(),
        packages: resolved.inputs.packages.clone(),
        versions: resolved.versions.clone(),
        builder: builder.into(),
        image_sha256: "ab".repeat(32),
    };
    let older = of(&now, NOW - DAY, "b");
    let oldest = of(&now, NOW - 3 * DAY, "b");
    let (previous, changed) =
        superseded(&newer, "b", &[oldest, older.clone(), record("k", NOW, 2)]).unwrap();
    assert_eq!(previous, older, "the newest of the same inputs");
    let change = |package: &str, was: &str, now: &str| VersionChange {
        package: package.into(),
        was: was.into(),
        now: now.into(),
    };
    assert_eq!(
        changed,
        [
            change("nginx", "1.0-1", "1.0-1+deb12u1"),
            change("ufw", "1.0-1", "none"),
        ]
    );
    let choice = BakeChoice::Outdated {
        key: newer.key_with_builder("b"),
        previous,
        changed,
    };
    assert!(choice.needs_build() && choice.fresh().is_none());
    assert!(
        choice.to_string().ends_with(&format!(
            "first: the mirror has new versions of its packages since the one built {}: nginx 1.0-1+deb12u1 (was 1.0-1), ufw none (was 1.0-1)",
            crate::lock::utc_timestamp(NOW - DAY)
        )),
        "{choice}"
    );
    assert_eq!(
        choice.why_built().unwrap(),
        "the mirror has new versions: nginx 1.0-1+deb12u1 (was 1.0-1), ufw none (was 1.0-1)"
    );
    // Another builder, another package set, or the same versions: nothing superseded.
    assert!(superseded(&newer, "other builder", &[of(&now, NOW, "b")]).is_none());
    assert!(superseded(&now, "b", &[of(&now, NOW, "b")]).is_none());
    assert!(superseded(&resolved(inputs(&["nginx"])), "b", &[of(&now, NOW, "b")]).is_none());
}
