//! The fleet's guest carrying every shipped recipe, with real Debian packages from the caching
//! apt proxy on the libvirt bridge (tests/services/apt-proxy.sh), over a baked image built by its
//! own provision: the payload's Makefile runs, then every recipe's own `tests:` on the guest,
//! whose report (`ok   recipe: test`) trog prints. Beside the shipped recipes the guest carries a
//! fixture recipe whose one test fails: the run must fail with the guest's exit status, naming
//! that test beside its output, after every shipped recipe's tests passed. The checks here then
//! look from outside at what those tests cannot see; `sites.rs` makes the same guest the machine
//! of other domains, at the fleet's end.
//!
//! Grouping: the guest carries debian, vm, adminconfig, nginx, mariadb, postgres, ufw, cron,
//! mounts, data and the failing fixture (`ubuntu`, the other distro recipe, needs an Ubuntu image
//! the tests do not build). None of them conflicts with another (mariadb and postgres listen on
//! different ports, nginx alone on 80), and a guest boots in about a minute under software
//! emulation while its packages install in several more, so one guest and one run keep CI short:
//! the failing fixture runs last, after the Makefile has built everything, so the guest the
//! failed run leaves is complete. It also proves the combination a web site actually uses: the
//! data recipe restores the site's archive after the databases exist, and its Makefile loads rows
//! into both, which the database users then read with passwords taken from the secret store.
//!
//! Its provision starts with the fleet's five, as a sixth process: its baked image is built while
//! they boot, and its filters are defined before the isolation probes start.

pub mod sites;

use crate::fleet::{Fixture, Fleet};
use crate::support::*;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use trog::exit_status::ExitStatus;
use trog::model::names::DomainName;
use trog::secrets::{guest_keypair, PrivateKeyFile};

/// The cron job runs every minute: two minutes and a margin see it run at least once.
const CRON_RUN_TIMEOUT: Duration = Duration::from_secs(150);
/// A port ufw blocks drops the connection attempt: a few seconds without an answer is the proof.
const BLOCKED_CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// What the site's page carries, so the request is known to reach the restored site.
pub const PAGE_MARK: &str = "served from the restored site";
/// What the fixture recipe's test prints, so its output is known to reach the report.
const FAILING_TEST_SAYS: &str = "the reason the check gives";

/// The shipped recipes whose tests must all pass on the guest.
const SHIPPED: [&str; 10] = [
    "debian",
    "vm",
    "adminconfig",
    "nginx",
    "mariadb",
    "postgres",
    "ufw",
    "cron",
    "mounts",
    "data",
];

/// The shipped recipes copied to `recipes`, plus a fixture recipe whose one test fails. Every
/// run of the fleet's installation reads these (`TROG_RECIPES`): the guest's file names the
/// fixture, and a recipe no folder holds would stop any run that reads the installation.
pub fn recipes_with_a_failing_fixture(recipes: &Path) {
    let copied = Command::new("cp")
        .arg("-a")
        .arg(checkout().join("recipes"))
        .arg(recipes)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::create_dir_all(recipes.join("failing")).unwrap();
    std::fs::write(
        recipes.join("failing/recipe.yaml"),
        format!(
            "description: A recipe whose test fails\nkind: guest\nbackup: []\ntests:\n  - name: this check fails\n    run: \"echo '{FAILING_TEST_SAYS}'; exit 3\"\n"
        ),
    )
    .unwrap();
}

/// The guest's `_global` lines and recipes: Debian's packages through `host_mirror` (this
/// machine's caching apt proxy), a baked image, a data volume for `mounts`.
pub fn every_recipe_lines(host_mirror: &str) -> (String, String) {
    (
        format!(
            "    data_volume_size: 1G\n    bake_packages: true\n    mirror: {host_mirror}\n    security_mirror: {host_mirror}-security\n"
        ),
        "  adminconfig: {}
  mariadb:
    root_pw: secret:Databases/mariadb-root/Password
    bind_address: 0.0.0.0
    databases:
      - {name: shop, user: shop, password: 'secret:Databases/shop/Password'}
  postgres:
    listen_addresses: '*'
    databases:
      - {name: blog, owner: blog, password: 'secret:Databases/blog/Password'}
  ufw: {}
  cron:
    jobs:
      - {name: heartbeat, schedule: '* * * * *', command: 'date +%s >> /var/lib/trog-heartbeat'}
  mounts:
    entries: ['LABEL=trog-data /srv/mounted']
  nginx:
    root: /srv/site/www
  data: {}
  failing: {}
"
        .to_string(),
    )
}

/// The site's archive, beside the guest's file: a page for nginx and a Makefile that loads a row
/// into each database.
pub fn write_site_archive(fleet: &Fleet) {
    let dir = fleet
        .config()
        .join("recipes.d")
        .join(fleet.every_recipe.as_str());
    std::fs::create_dir_all(&dir).unwrap();
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("www")).unwrap();
    std::fs::write(
        site.path().join("www/index.html"),
        format!("<p>{PAGE_MARK}</p>\n"),
    )
    .unwrap();
    std::fs::write(
        site.path().join("Makefile"),
        "all:\n\
         \tmysql shop -e \"CREATE TABLE IF NOT EXISTS notes (body TEXT); INSERT INTO notes VALUES ('restored into mariadb')\"\n\
         \tcd / && runuser -u postgres -- psql -v ON_ERROR_STOP=1 -d blog -c \"SET ROLE blog; CREATE TABLE IF NOT EXISTS notes (body text); INSERT INTO notes VALUES ('restored into postgres')\"\n",
    )
    .unwrap();
    let status = Command::new("tar")
        .arg("-czf")
        .arg(dir.join("data.tar.gz"))
        .arg("-C")
        .arg(site.path())
        .args(["Makefile", "www"])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The databases' passwords in the fleet's store (which the five's provisions made), before any
/// run that could write it is started again.
pub fn put_the_databases_passwords(fleet: &Fleet) {
    for (entry, password) in [
        ("mariadb-root", "root-pw-from-the-store"),
        ("shop", "shop-pw-from-the-store"),
        ("blog", "blog-pw-from-the-store"),
    ] {
        fleet.put_secret("Databases", entry, password);
    }
}

/// Its provision, started: the baked image is built first.
pub fn start_provision(fleet: &Fleet) -> Child {
    spawn_verb("provision", fleet.config(), &[fleet.every_recipe.as_str()])
}

/// Waits for the provision and records the guest as ready when it failed as it must: with the
/// guest's exit status, on the fixture's test.
pub fn provision_ends_on_the_fixtures_test(fleet: &Fleet, provision: Child, started: Instant) {
    let guest = &fleet.every_recipe;
    let run = root_warning::output_without_root_warning(provision.wait_with_output().unwrap());
    eprintln!(
        "[verb] provision {guest} (its baked image built first): exit {:?} after {:.0?}",
        run.status.code(),
        started.elapsed()
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    record_printed(&format!("stdout of provision {guest}"), &stdout);
    record_printed(&format!("stderr of provision {guest}"), &stderr);
    let address = address_from(&stderr);
    let as_it_must = run.status.code() == Some(ExitStatus::Guest.code())
        && stderr.contains("the recipes' tests failed on");
    match address {
        Some(address) if as_it_must => fleet.record_fixture(
            guest,
            Fixture::Ready {
                address,
                said: format!("{stdout}\n{stderr}"),
            },
        ),
        _ => {
            // What the guest's own logs say is what explains a failed package install or finish.
            let logs = address.map(|address| {
                on_guest(
                    fleet,
                    &address,
                    "sudo tail -n 40 /var/log/cloud-init-output.log; sudo tail -n 40 /var/lib/trog/finish.log",
                    "",
                )
                .1
            });
            let why = format!(
                "provision did not fail on the fixture's test with the guest's exit status ({:?}):\n{stdout}\n{stderr}\nthe guest's logs:\n{}",
                run.status.code(),
                logs.unwrap_or_default()
            );
            fleet.record_fixture(guest, Fixture::Failed(why.clone()));
            panic!("{why}");
        }
    }
}

/// The report: every shipped recipe's tests passed, the fixture's failed, named beside its
/// output; the plan named the baked image this run built.
pub fn every_shipped_recipe_passes_its_tests(fleet: &Fleet) {
    let guest = &fleet.every_recipe;
    let said = fleet.said(guest);
    assert!(
        said.contains(&format!("{guest}: base image: baked image "))
            && said.contains("built by this run: there was none for this package set"),
        "the plan does not name a baked image built for the guest:\n{said}"
    );
    let lines: Vec<&str> = said.lines().map(str::trim).collect();
    for recipe in SHIPPED {
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("ok   {recipe}: "))),
            "no passing test of {recipe} reported:\n{said}"
        );
        assert!(
            !lines
                .iter()
                .any(|line| line.starts_with(&format!("FAIL {recipe}: "))),
            "a test of {recipe} failed:\n{said}"
        );
    }
    let named = lines
        .iter()
        .position(|line| *line == "FAIL failing: this check fails (exit status 3)")
        .unwrap_or_else(|| panic!("the failed test is not named:\n{said}"));
    assert_eq!(
        lines.get(named + 1).copied(),
        Some(FAILING_TEST_SAYS),
        "the failed test's output does not follow its name:\n{said}"
    );
}

/// The packages the baked image's record lists are installed on the guest, and its dpkg log
/// (which the image builder leaves empty) shows no unpack of any of them: cloud-init and the
/// finish found them in the image.
pub fn baked_packages_are_not_unpacked_again(fleet: &Fleet) {
    let (_, address) = fleet.ready(&fleet.every_recipe);
    let images = fleet.config().join("cache/trog/images");
    let records: Vec<serde_json::Value> = std::fs::read_dir(&images)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("baked-")
                && path.extension().is_some_and(|ext| ext == "json")
        })
        .map(|path| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 1, "one baked image for the one guest");
    let packages: Vec<String> = records[0]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap().to_string())
        .collect();
    for expected in ["nginx", "mariadb-server", "ufw"] {
        assert!(
            packages.iter().any(|name| name == expected),
            "{expected} is not among the baked packages: {packages:?}"
        );
    }
    let installed = must(
        fleet,
        &address,
        &format!(
            "dpkg-query -W -f '${{Package}} ${{db:Status-Abbrev}}\\n' {}",
            packages.join(" ")
        ),
        "",
    );
    for package in &packages {
        assert!(
            installed
                .lines()
                .any(|line| line.starts_with(&format!("{package} ii"))),
            "{package} is not installed on the guest:\n{installed}"
        );
    }
    let unpacked = must(
        fleet,
        &address,
        "sudo sh -c 'cat /var/log/dpkg.log 2>/dev/null' | awk '$3 == \"unpack\" {print $4}'",
        "",
    );
    let again: Vec<&str> = unpacked
        .lines()
        .map(|line| line.split(':').next().unwrap_or(line))
        .filter(|name| packages.iter().any(|package| package == name))
        .collect();
    assert!(
        again.is_empty(),
        "the guest unpacked baked packages again: {again:?}"
    );
}

/// nginx serves the restored site's page to a request from this machine (ufw lets 80 in).
pub fn nginx_serves_the_restored_site(fleet: &Fleet) {
    let (guest, address) = fleet.ready(&fleet.every_recipe);
    let page = http_get(&address, guest.as_str());
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains(PAGE_MARK), "{page}");
}

/// The databases take a login with the password from the secret store and hold the rows the
/// site's Makefile (run by the data recipe) loaded; a wrong password is refused.
pub fn the_databases_hold_the_sites_rows(fleet: &Fleet) {
    let (_, address) = fleet.ready(&fleet.every_recipe);
    let shop = must(
        fleet,
        &address,
        "f=$(mktemp) && cat > \"$f\" && mysql --defaults-extra-file=\"$f\" -u shop shop -Nse 'SELECT body FROM notes'; s=$?; rm -f \"$f\"; exit $s",
        &format!("[client]\npassword={}\n", fleet.secret("Databases", "shop")),
    );
    assert_eq!(shop.trim(), "restored into mariadb");
    let blog = must(
        fleet,
        &address,
        "f=$(mktemp) && cat > \"$f\" && PGPASSFILE=\"$f\" psql -w -h 127.0.0.1 -U blog -d blog -tAc 'SELECT body FROM notes'; s=$?; rm -f \"$f\"; exit $s",
        &format!(
            "127.0.0.1:5432:blog:blog:{}\n",
            fleet.secret("Databases", "blog")
        ),
    );
    assert_eq!(blog.trim(), "restored into postgres");
    let (refused, said) = on_guest(
        fleet,
        &address,
        "f=$(mktemp) && cat > \"$f\" && mysql --defaults-extra-file=\"$f\" -u shop shop -Nse 'SELECT 1'; s=$?; rm -f \"$f\"; exit $s",
        "[client]\npassword=not-the-stored-one\n",
    );
    assert!(!refused, "mariadb took a wrong password: {said}");
}

/// ufw is active with the recipes' rules, and drops a port it should: both databases listen on
/// every address, yet neither answers from here. The mounts entry is mounted where it says, and
/// the cron job runs.
pub fn ufw_mounts_and_cron_did_their_work(fleet: &Fleet) {
    let (_, address) = fleet.ready(&fleet.every_recipe);
    let rules = must(fleet, &address, "sudo ufw status", "");
    for rule in ["22/tcp", "80/tcp", "443/tcp"] {
        assert!(rules.contains(rule), "ufw lacks {rule}:\n{rules}");
    }
    let listening = must(fleet, &address, "ss -ltnH", "");
    for port in [3306, 5432] {
        assert!(
            listening.contains(&format!("0.0.0.0:{port}")),
            "nothing listens on every address at {port}:\n{listening}"
        );
        let socket: SocketAddr = format!("{address}:{port}").parse().unwrap();
        assert!(
            TcpStream::connect_timeout(&socket, BLOCKED_CONNECT_TIMEOUT).is_err(),
            "port {port} answered from outside despite ufw"
        );
    }

    let mounted = must(
        fleet,
        &address,
        "findmnt -n -o SOURCE,FSTYPE /srv/mounted",
        "",
    );
    assert!(mounted.contains("ext4"), "{mounted}");

    // By now the guest has been up for minutes: the wait is a bound, not a pause.
    let deadline = Instant::now() + CRON_RUN_TIMEOUT;
    while !on_guest(fleet, &address, "test -s /var/lib/trog-heartbeat", "").0 {
        assert!(
            Instant::now() < deadline,
            "the cron job did not run within {CRON_RUN_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_secs(10));
    }
}

/// The guest's address, from the `trogadmin@ADDRESS` a finish step's error names.
fn address_from(stderr: &str) -> Option<String> {
    stderr
        .split("trogadmin@")
        .nth(1)
        .and_then(|rest| rest.split([':', ' ']).next())
        .map(str::to_string)
}

/// Runs a shell command on the guest as its admin, `input` on its standard input (how a password
/// reaches it: never on a command line); returns whether it succeeded and what it printed.
pub fn on_guest(fleet: &Fleet, address: &str, command: &str, input: &str) -> (bool, String) {
    let guest: &DomainName = &fleet.every_recipe;
    let keypair = guest_keypair(&mut fleet.store(), guest, &mut rand::rngs::OsRng).unwrap();
    let key = PrivateKeyFile::write(&keypair).unwrap();
    let mut child = Command::new("ssh")
        .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"])
        .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
        .args(["-o", "ConnectTimeout=20", "-i"])
        .arg(key.path())
        .arg(format!("trogadmin@{address}"))
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        format!("{}{}", text(&output.stdout), text(&output.stderr)),
    )
}

/// [`on_guest`], which must succeed; what it printed.
pub fn must(fleet: &Fleet, address: &str, command: &str, input: &str) -> String {
    let (ok, said) = on_guest(fleet, address, command, input);
    assert!(ok, "`{command}` on the guest failed:\n{said}");
    said
}

/// An HTTP GET from this machine to the guest, with `host` as the Host header.
pub fn http_get(address: &str, host: &str) -> String {
    use std::io::Read;
    let socket: SocketAddr = format!("{address}:80").parse().unwrap();
    let mut stream = TcpStream::connect_timeout(&socket, Duration::from_secs(10))
        .unwrap_or_else(|error| panic!("nginx on {address}:80 is not reachable: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET / HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}
