use super::*;

#[path = "../../tests/support/apt_mirror.rs"]
mod apt_mirror;

use apt_mirror::{AptMirror, Published};

fn inputs(mirror: &str, packages: &[&str]) -> BakeInputs {
    let packages: Vec<String> = packages.iter().map(|name| name.to_string()).collect();
    BakeInputs::new("debian", "bookworm", mirror, mirror, &packages)
}

#[test]
fn each_listed_package_gets_its_highest_version_across_the_builders_suites() {
    let mirror = AptMirror::start();
    mirror.publish_bookworm(
        &[
            ("nginx", "1.22.1-9"),
            ("sudo", "1.9.13p3-1+deb12u1"),
            ("unlisted", "1.0"),
        ],
        &[("nginx", "1.22.1-9+deb12u1"), ("sudo", "1.9.13p3-1")],
    );
    mirror.publish(
        "bookworm-updates",
        &[("tzdata", "2025b-0+deb12u1")],
        Published::Xz,
    );
    let versions = PackageVersions::default()
        .resolve(&inputs(
            &mirror.url,
            &["nginx", "sudo", "tzdata", "no-such-package"],
        ))
        .unwrap();
    assert_eq!(
        versions,
        BTreeMap::from([
            ("nginx".to_string(), "1.22.1-9+deb12u1".to_string()),
            ("sudo".to_string(), "1.9.13p3-1+deb12u1".to_string()),
            ("tzdata".to_string(), "2025b-0+deb12u1".to_string()),
        ]),
        "the unlisted package is not asked for; one no index holds is left out"
    );
}

#[test]
fn a_run_reads_each_suite_once_whatever_the_number_of_guests() {
    let mirror = AptMirror::start();
    mirror.publish_bookworm(&[("nginx", "1.22.1-9")], &[]);
    let run = PackageVersions::default();
    for packages in [
        &["nginx"][..],
        &["nginx", "ufw"],
        &["nginx"],
        &["sudo"],
        &["nginx"],
    ] {
        run.resolve(&inputs(&mirror.url, packages)).unwrap();
    }
    // InRelease and the index of each of the three suites, once.
    assert_eq!(mirror.requests().len(), 6, "{:?}", mirror.requests());
}

/// Bounds for a test: short requests, and pauses of a second before asking again.
const QUICK: FetchBounds = FetchBounds {
    connect: Duration::from_secs(5),
    whole: Duration::from_secs(10),
    retry_pauses: &[Duration::from_secs(1), Duration::from_secs(1)],
};

#[test]
fn a_failing_mirror_is_fallen_back_from_and_a_dead_one_is_waited_for_once() {
    let broken = AptMirror::start();
    broken.fail(true);
    let good = AptMirror::start();
    good.publish_bookworm(&[("nginx", "1.22.1-9")], &[]);
    let mut listed = inputs(&broken.url, &["nginx"]);
    listed.fallback_mirrors = vec![good.url.clone()];
    listed.fallback_security_mirrors = vec![good.url.clone()];
    let versions = PackageVersions::with_bounds(QUICK)
        .resolve(&listed)
        .unwrap();
    assert_eq!(versions["nginx"], "1.22.1-9");
    assert_eq!(
        broken.requests().len(),
        3,
        "the fallback answered at once: nobody waited to ask the broken mirror again"
    );

    // No mirror answers, with an error that may pass: asked three times, then the error names
    // the suite, the tries, each mirror's answer, and what to do.
    let run = PackageVersions::with_bounds(QUICK);
    let error = run.resolve(&inputs(&broken.url, &["nginx"])).unwrap_err();
    assert_eq!(error.suite, "bookworm");
    assert_eq!(
        error.to_string(),
        format!(
            "cannot tell which versions a baked image would hold: no mirror gave the index of bookworm in 3 tries over 2s ({}/dists/bookworm/InRelease answered HTTP 503)",
            broken.url
        )
    );
    let hint = crate::diagnose::Diagnose::hint(&error).unwrap();
    assert!(
        hint.contains(&format!("{}/dists/bookworm/InRelease", broken.url))
            && hint.contains("bake_packages: false"),
        "{hint}"
    );
    // The failure is kept for the run: a second guest does not ask again.
    let asked = broken.requests().len();
    assert!(run.resolve(&inputs(&broken.url, &["sudo"])).is_err());
    assert_eq!(broken.requests().len(), asked);
}

#[test]
fn a_cut_connection_is_asked_again_after_a_pause_and_the_plan_goes_on() {
    // A cache whose upstream hiccuped: the first requests' connections close without an answer.
    let mirror = AptMirror::start();
    mirror.publish_bookworm(&[("nginx", "1.22.1-9")], &[("nginx", "1.22.1-9+deb12u1")]);
    mirror.cut_next(2);
    let versions = PackageVersions::with_bounds(QUICK)
        .resolve(&inputs(&mirror.url, &["nginx"]))
        .unwrap();
    assert_eq!(versions["nginx"], "1.22.1-9+deb12u1");
    let asked_for_release = mirror
        .requests()
        .iter()
        .filter(|path| path.as_str() == "/debian/dists/bookworm/InRelease")
        .count();
    assert_eq!(
        asked_for_release,
        3,
        "cut, cut, then read: {:?}",
        mirror.requests()
    );
}

#[test]
fn an_answer_that_will_not_change_is_not_asked_again() {
    let mirror = AptMirror::start();
    mirror.answer_every_request_with(Some(404));
    let started = std::time::Instant::now();
    let error = PackageVersions::with_bounds(QUICK)
        .resolve(&inputs(&mirror.url, &["nginx"]))
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "no pause");
    assert_eq!(
        error.to_string(),
        format!(
            "cannot tell which versions a baked image would hold: no mirror gave the index of bookworm ({}/dists/bookworm/Release answered HTTP 404)",
            mirror.url
        ),
        "InRelease, then Release, once"
    );
    assert_eq!(mirror.requests().len(), 2, "{:?}", mirror.requests());
}

#[test]
fn a_mirror_that_never_answers_is_given_up_on_after_the_named_bound() {
    // Accepts the connection, reads the request, and says nothing.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/debian", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let run = PackageVersions::with_bounds(FetchBounds {
        connect: Duration::from_secs(5),
        whole: Duration::from_secs(1),
        retry_pauses: &[],
    });
    let started = std::time::Instant::now();
    let error = run.resolve(&inputs(&url, &["nginx"])).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error.failures,
        [IndexFetchError::TooSlow {
            url: format!("{url}/dists/bookworm/InRelease"),
            seconds: 1
        }]
    );
    assert!(
        error.to_string().contains("was not read whole within 1s"),
        "{error}"
    );
}

#[test]
fn an_index_that_is_not_the_one_its_release_lists_is_refused() {
    let mirror = AptMirror::start();
    mirror.publish_bookworm(&[("nginx", "1.22.1-9")], &[]);
    mirror.replace(
        "/debian/dists/bookworm/main/binary-amd64/Packages.gz",
        b"not the index".to_vec(),
    );
    let error = PackageVersions::with_bounds(QUICK)
        .resolve(&inputs(&mirror.url, &["nginx"]))
        .unwrap_err();
    assert!(
        matches!(
            &error.failures[..],
            [IndexFetchError::NotAsListed { url, .. }] if url.ends_with("/dists/bookworm/main/binary-amd64/Packages.gz")
        ),
        "{error}"
    );
}
