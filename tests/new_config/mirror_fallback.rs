//! A guest's mirror that fails requests is fallen back from, by the real apt: the Makefile's
//! `debian-sources` target, from `trog new_config`, runs in a mount namespace of its own (this
//! machine's /etc/apt and apt's lists hidden behind empty ones), then `apt-get update` runs
//! against a mirror that fails its first requests, with the test services' apt proxy as the
//! fallback. Without the fallback the same broken mirror fails the update: the check can fail.

use crate::harness::{self, read};
use crate::local_services::apt_proxy_url;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A mirror that answers `failures` requests with 503, then sends apt on to `real` (a redirect,
/// which apt follows), counting what it was asked.
struct FlakyMirror {
    url: String,
    asked: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
}

fn flaky_mirror(failures: usize, real: String) -> FlakyMirror {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/debian", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (asked_here, failed_here) = (asked.clone(), failed.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request_line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The rest of the request's head, up to its blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
            let number = asked_here.fetch_add(1, Ordering::SeqCst);
            let answer = if number < failures {
                failed_here.fetch_add(1, Ordering::SeqCst);
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string()
            } else {
                let rest = path.strip_prefix("/debian").unwrap_or(&path);
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: {real}{rest}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    FlakyMirror { url, asked, failed }
}

/// Runs the payload's `debian-sources`, then `apt-get update`, with this machine's apt
/// configuration and lists hidden: returns apt's exit status and what it printed.
fn sources_then_update(payload: &Path) -> (i32, String) {
    sources_then(
        payload,
        "apt-get -q -o Acquire::Retries=0 -o APT::Sandbox::User=root update 2>&1",
    )
}

/// Runs the payload's `debian-sources`, then `update` (a shell command line), as
/// [`sources_then_update`] does.
fn sources_then(payload: &Path, update: &str) -> (i32, String) {
    let script = format!(
        "set -e\n\
         for dir in /etc/apt /var/lib/apt/lists /var/cache/apt; do mount -t tmpfs tmpfs \"$dir\"; done\n\
         mkdir -p /etc/apt/sources.list.d /etc/apt/apt.conf.d /etc/apt/preferences.d /etc/apt/trusted.gpg.d /var/lib/apt/lists/partial\n\
         make -s -C {} debian-sources\n\
         echo '--- mirror list'; cat /etc/apt/mirrors/trog-debian.list 2>/dev/null || true\n\
         set +e\n\
         {update}\n\
         echo \"apt-get status $?\"\n",
        payload.display()
    );
    let (_, text) = harness::in_own_mount_namespace(&script);
    let status = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("apt-get status "))
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("apt-get did not run:\n{text}"));
    (status, text)
}

fn payload_of(yaml: &str) -> (harness::Installation, std::path::PathBuf) {
    let installation = harness::Installation::example();
    installation.write_guest("mirrors.example.test", yaml);
    let out = installation.out("mirrors");
    installation.new_config("mirrors.example.test", &out);
    (installation, out)
}

#[test]
fn a_failing_mirror_is_fallen_back_from_by_apt_itself() {
    let proxy = apt_proxy_url();
    let flaky = flaky_mirror(3, proxy.clone());
    let (_installation, out) = payload_of(&format!(
        "mirrors.example.test:\n  _global:\n    memory: 1024\n    cpus: 1\n    size: 4G\n    \
         mirror: {}\n    fallback_mirrors: [{proxy}]\n    security_mirror: {proxy}-security\n",
        flaky.url
    ));
    let user_data = read(&out.join("seed/user-data"));
    assert!(
        user_data.contains("uri: mirror+file:/etc/apt/mirrors/trog-debian.list"),
        "{user_data}"
    );
    let verdict = harness::oracle(
        "cloud-init",
        &["schema", "-c", out.join("seed/user-data").to_str().unwrap()],
    );
    assert!(verdict.contains("Valid cloud-config"), "{verdict}");

    let (status, said) = sources_then_update(&out.join("payload"));
    assert_eq!(status, 0, "{said}");
    assert!(
        said.contains(&format!("{}\tpriority:1\n{proxy}\tpriority:2\n", flaky.url)),
        "the list names the mirror, then its fallback, in that order:\n{said}"
    );
    assert!(
        flaky.failed.load(Ordering::SeqCst) >= 1,
        "the flaky mirror was asked first and failed ({} asked):\n{said}",
        flaky.asked.load(Ordering::SeqCst)
    );
}

#[test]
fn without_a_fallback_the_same_failing_mirror_fails_the_update() {
    let proxy = apt_proxy_url();
    let broken = flaky_mirror(usize::MAX, proxy.clone());
    let (_installation, out) = payload_of(&format!(
        "mirrors.example.test:\n  _global:\n    memory: 1024\n    cpus: 1\n    size: 4G\n    \
         mirror: {}\n    security_mirror: {proxy}-security\n",
        broken.url
    ));
    let (status, said) = sources_then_update(&out.join("payload"));
    assert_ne!(status, 0, "{said}");
    assert!(broken.failed.load(Ordering::SeqCst) >= 1, "{said}");
}

#[test]
fn the_finish_runs_apt_again_when_the_mirror_fails_and_there_is_no_fallback() {
    let proxy = apt_proxy_url();
    // Both suites' InRelease and Release: the first update fails as a whole.
    let flaky = flaky_mirror(4, proxy.clone());
    let (_installation, out) = payload_of(&format!(
        "mirrors.example.test:\n  _global:\n    memory: 1024\n    cpus: 1\n    size: 4G\n    \
         mirror: {}\n    security_mirror: {proxy}-security\n",
        flaky.url
    ));
    // The update as the Makefile's distro target runs it: through its own APT_AGAIN.
    let payload = out.join("payload");
    let again = payload.join("update-again.mk");
    std::fs::write(
        &again,
        "update-again:\n\t$(APT_AGAIN) apt-get -q -o Acquire::Retries=0 -o APT::Sandbox::User=root update\n",
    )
    .unwrap();
    let (status, said) = sources_then(
        &payload,
        &format!(
            "make -s -C {} -f Makefile -f update-again.mk update-again 2>&1",
            payload.display()
        ),
    );
    assert_eq!(status, 0, "{said}");
    assert_eq!(flaky.failed.load(Ordering::SeqCst), 4, "{said}");
    assert!(
        said.contains("apt failed; trying again in 10 s"),
        "the first update did not fail, so nothing was run again:\n{said}"
    );
}

/// cloud-init runs the seed's bootcmd on every boot, not only the first: what the Makefile's
/// `debian-sources` wrote must still be apt's sources after it, as on a guest's later boot (the
/// bootcmd once removed the very file the Makefile wrote, and a rebooted guest had no sources).
#[test]
fn the_sources_the_makefile_writes_outlive_the_bootcmd_of_a_later_boot() {
    let proxy = apt_proxy_url();
    let (_installation, out) = payload_of(&format!(
        "mirrors.example.test:\n  _global:\n    memory: 1024\n    cpus: 1\n    size: 4G\n    \
         mirror: {proxy}\n    fallback_mirrors: [http://deb.debian.org/debian]\n"
    ));
    let user_data: serde_json::Value =
        serde_saphyr::from_str(&read(&out.join("seed/user-data"))).unwrap();
    let bootcmd = user_data["bootcmd"]
        .as_array()
        .expect("the seed has a bootcmd");
    // Each command is a list of words, run without a shell: quoted here for one.
    let later_boot: Vec<String> = bootcmd
        .iter()
        .map(|command| {
            command
                .as_array()
                .unwrap()
                .iter()
                .map(|word| format!("'{}'", word.as_str().unwrap().replace('\'', "'\\''")))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(
        later_boot[0].contains("'rm'"),
        "the bootcmd removes the image's sources first: {later_boot:?}"
    );
    let (status, said) = sources_then(
        &out.join("payload"),
        &format!(
            "{} && apt-get indextargets --no-release-info --format '$(SITE)' | sort -u",
            later_boot.join(" && ")
        ),
    );
    assert_eq!(status, 0, "{said}");
    assert!(
        said.contains("\nmirror+file:/etc/apt/mirrors/trog-debian.list\n"),
        "apt has no sources after the bootcmd ran again:\n{said}"
    );
}
