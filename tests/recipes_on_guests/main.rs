//! Every shipped guest recipe on a real guest: `bin/provision` builds one guest on this machine's
//! libvirtd over a baked image (`bake_packages`: the image builder's, with every recipe's package
//! in it, built by the run from the caching apt proxy on the libvirt bridge,
//! tests/services/apt-proxy.sh), with real Debian packages, runs the payload's Makefile, then every
//! recipe's own `tests:` on the guest, whose report (`ok   recipe: test`) trog prints. Beside the
//! shipped recipes the guest carries a fixture recipe whose one test fails: the run must fail with
//! the guest's exit status, naming that test beside its output, after every shipped recipe's tests
//! passed. This test then checks from outside what those tests cannot see.
//!
//! Grouping: one guest carries debian, vm, adminconfig, nginx, mariadb, postgres, ufw, cron,
//! mounts, data, aptmirror (a service behind the firewall: the port it serves is allowed) and the
//! failing fixture (`ubuntu`, the other distro recipe, needs an Ubuntu image
//! the tests do not build). None of them conflicts with another (mariadb and postgres listen on
//! different ports, nginx alone on 80), and a guest boots in about a minute under software
//! emulation while its packages install in several more, so one guest and one run instead of two
//! or more keeps CI short: the failing fixture runs last, after the Makefile has built everything,
//! so the guest the failed run leaves is complete. It also proves the combination a web site
//! actually uses: the data recipe restores the site's archive after the databases exist, and its
//! Makefile loads rows into both, which the database users then read with passwords taken from the
//! secret store.
//!
//! Its guest needs no test image, so tests/run would not know it boots one: it boots real guests.

#[path = "../support/local_services.rs"]
mod local_services;
mod sites;
#[path = "../e2e/support.rs"]
#[allow(dead_code)]
mod support;

use local_services::{apt_proxy_origin, apt_proxy_url, local_hypervisors_conf};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{
    guest_keypair, EntryPath, FieldName, PrivateKeyFile, Protection, SecretStore, StoreKdf,
};

/// The cron job runs every minute: two minutes and a margin see it run at least once.
const CRON_RUN_TIMEOUT: Duration = Duration::from_secs(150);
/// A port ufw blocks drops the connection attempt: a few seconds without an answer is the proof.
const BLOCKED_CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// A key the admin's file lists beside the guest's own, until a converge drops it.
pub const EXTRA_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExtraKeyOfTheRecipesGuestTestOnly extra@recipes.test";
/// What the site's page carries, so the request is known to reach the restored site.
const PAGE_MARK: &str = "served from the restored site";

struct Installation {
    dir: tempfile::TempDir,
    domain: DomainName,
    pool: String,
}

/// The site's archive: a page for nginx and a Makefile that loads a row into each database.
fn site_archive(path: &Path) {
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
        .arg(path)
        .arg("-C")
        .arg(site.path())
        .args(["Makefile", "www"])
        .status()
        .unwrap();
    assert!(status.success());
}

fn installation(mirror_url: &str) -> Installation {
    // aptmirror fetches through this machine's caching apt proxy (the guest reaches no archive).
    let upstream = apt_proxy_origin(mirror_url);
    let dir = tempfile::Builder::new()
        .prefix("trog-recipes-")
        .tempdir_in("/var/tmp")
        .unwrap();
    // qemu runs as its own user and must reach the pool's directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let unique = std::process::id();
    let domain = DomainName::parse(&format!("recipes-{unique}.test")).unwrap();
    let pool = format!("trog-recipes-{unique}");
    std::fs::write(
        dir.path().join("hypervisors.conf"),
        local_hypervisors_conf(&pool, &dir.path().join("pool")),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror_url}\n    security_mirror: {mirror_url}-security\n    upgrade: false\n"
        ),
    )
    .unwrap();
    let recipes_d = dir.path().join("recipes.d");
    std::fs::create_dir_all(recipes_d.join(domain.as_str())).unwrap();
    std::fs::write(
        recipes_d.join(format!("{domain}.yaml")),
        format!(
            "{domain}:
  _global:
    memory: 1536
    cpus: 1
    size: 6G
    data_volume_size: 1G
    bake_packages: true
  adminconfig:
    authorized_keys: ['{EXTRA_KEY}']
  mariadb:
    root_pw: secret:Databases/mariadb-root/Password
    bind_address: 0.0.0.0
    databases:
      - {{name: shop, user: shop, password: 'secret:Databases/shop/Password'}}
  postgres:
    listen_addresses: '*'
    databases:
      - {{name: blog, owner: blog, password: 'secret:Databases/blog/Password'}}
  ufw:
    logging: medium
    allow: ['from 10.0.0.0/8 to any port 8080']
  cron:
    jobs:
      - {{name: heartbeat, schedule: '* * * * *', command: 'date +%s >> /var/lib/trog-heartbeat'}}
  mounts:
    entries: ['LABEL=trog-data /srv/mounted']
  nginx:
    root: /srv/site/www
  data: {{}}
  aptmirror:
    upstream: {upstream}
  failing: {{}}
",
        ),
    )
    .unwrap();
    site_archive(&recipes_d.join(domain.as_str()).join("data.tar.gz"));
    recipes_with_a_failing_fixture(&dir.path().join("recipes"));

    let mut store = SecretStore::create(
        &dir.path().join("secrets.kdbx"),
        &Secret::new(PASSPHRASE),
        StoreKdf::RECOMMENDED,
    )
    .unwrap();
    for (entry, password) in [
        ("mariadb-root", "root-pw-from-the-store"),
        ("shop", "shop-pw-from-the-store"),
        ("blog", "blog-pw-from-the-store"),
    ] {
        store
            .put(
                &EntryPath::new(["Databases"], entry),
                &FieldName::Password,
                &Secret::new(password),
                Protection::Protected,
            )
            .unwrap();
    }
    store.save().unwrap();
    Installation { dir, domain, pool }
}

impl Installation {
    fn store(&self) -> SecretStore {
        SecretStore::open(
            &self.dir.path().join("secrets.kdbx"),
            &Secret::new(PASSPHRASE),
        )
        .unwrap()
    }

    fn password(&self, entry: &str) -> String {
        self.store()
            .get(&EntryPath::new(["Databases"], entry), &FieldName::Password)
            .unwrap()
            .expose()
            .to_string()
    }

    /// Runs a shell command on the guest as its admin, `input` on its standard input (how a
    /// password reaches it: never on a command line); returns its status and output.
    fn on_guest(&self, address: &str, command: &str, input: &str) -> (bool, String) {
        let keypair =
            guest_keypair(&mut self.store(), &self.domain, &mut rand::rngs::OsRng).unwrap();
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

    fn must(&self, address: &str, command: &str, input: &str) -> String {
        let (ok, said) = self.on_guest(address, command, input);
        assert!(ok, "`{command}` on the guest failed:\n{said}");
        said
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

/// What the fixture recipe's test prints, so its output is known to reach the report.
const FAILING_TEST_SAYS: &str = "the reason the check gives";

/// The shipped recipes copied to `recipes`, plus a fixture recipe whose one test fails.
fn recipes_with_a_failing_fixture(recipes: &Path) {
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

/// An HTTP GET from this machine to the guest, with the guest's name as Host.
fn http_get(address: &str, host: &str) -> String {
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

/// The packages the baked image's record lists are installed on the guest, and its dpkg log
/// (which the image builder leaves empty) shows no unpack of any of them: cloud-init and the
/// finish found them in the image.
fn baked_packages_are_not_unpacked_again(installation: &Installation, address: &str) {
    let images = installation.dir.path().join("cache/trog/images");
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
    let installed = installation.must(
        address,
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
    let unpacked = installation.must(
        address,
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
    // Nor did its apt parse the package lists again: the source cache made with the image, from
    // the same lists, is older than the guest's boot (made again, it would be younger).
    let ages = installation.must(
        address,
        "echo $(stat -c %Y /var/cache/apt/srcpkgcache.bin) $(date -d \"$(uptime -s)\" +%s)",
        "",
    );
    let [cache_made, booted] = ages
        .split_whitespace()
        .map(|word| word.parse::<u64>().unwrap())
        .collect::<Vec<_>>()[..]
    else {
        panic!("no times in {ages:?}");
    };
    assert!(
        cache_made < booted,
        "apt's source cache was made again on the guest ({cache_made}, booted {booted})"
    );
}

/// A seed over a baked image installs nothing, so its first boot (started directly, as every
/// BIOS guest's is) masked cloud-init's final stage: the wait took the local stage's end for the
/// end of cloud-init, ran the distro recipe's first-boot commands once itself, and started the
/// final stage afterwards at idle priority, which completed cloud-init's record of the boot.
fn first_boot_left_the_final_stage_for_after(installation: &Installation, address: &str) {
    let cmdline = installation.must(address, "cat /proc/cmdline", "");
    assert!(
        cmdline.contains("systemd.mask=cloud-final.service"),
        "the final stage was not deferred: {cmdline}"
    );
    let commands = installation.must(
        address,
        "sudo sh -c 'cat /var/lib/trog/first-boot-commands.status; ls /var/lib/trog'",
        "",
    );
    assert!(commands.starts_with("0\n"), "{commands}");
    assert!(
        commands
            .lines()
            .any(|line| line == "first-boot-commands.started")
            && !commands.lines().any(|line| line == "first-boot-commands"),
        "{commands}"
    );
    // What they do (the debian recipe's: atd enabled and running, the guest agent running).
    installation.must(
        address,
        "systemctl is-enabled --quiet atd && systemctl is-active --quiet atd qemu-guest-agent",
        "",
    );
    let status = installation.must(address, "timeout 120 cloud-init status --wait --long", "");
    assert!(status.contains("status: done"), "{status}");
    let final_stage = installation.must(
        address,
        "systemctl is-active cloud-final.service || true; \
         sudo journalctl -b -u trog-cloud-final -o cat | grep -c 'running .modules:final' || true",
        "",
    );
    assert_eq!(final_stage, "inactive\n1\n", "{final_stage}");
}

/// The shipped recipes whose tests must all pass on the guest.
const SHIPPED: [&str; 11] = [
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
    "aptmirror",
];

#[test]
fn every_shipped_recipe_runs_and_passes_its_tests_on_a_real_guest() {
    let installation = installation(&apt_proxy_url());
    let _leftovers = LibvirtLeftovers {
        domain: installation.domain.to_string(),
        pool: installation.pool.clone(),
    };
    let domain = installation.domain.as_str();

    let started = Instant::now();
    let mut child = Command::new(checkout().join("bin/provision"))
        .arg("--credentials")
        .arg(domain)
        .env("TROG_BIN", env!("CARGO_BIN_EXE_trog"))
        .env("TROG_RUN_AS_CALLER", "1")
        .env("TROG_PROVISIONER_CONFIG", installation.dir.path())
        .env("XDG_CACHE_HOME", installation.dir.path().join("cache"))
        .env("TROG_RECIPES", installation.dir.path().join("recipes"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "keepass: {PASSPHRASE}\n").unwrap();
    let run = child.wait_with_output().unwrap();
    eprintln!(
        "[verb] provision {domain} (its baked image built first): exit {:?} after {:.0?}",
        run.status.code(),
        started.elapsed()
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    let address = address_from(&stderr);
    let tests_failed = stderr.contains("the recipes' tests failed on");
    if run.status.code() != Some(trog::exit_status::ExitStatus::Guest.code()) || !tests_failed {
        // What the guest's own logs say is what explains a failed package install or finish.
        let logs = address.map(|address| {
            installation
                .on_guest(
                    &address,
                    "sudo tail -n 40 /var/log/cloud-init-output.log; sudo tail -n 40 /var/lib/trog/finish.log",
                    "",
                )
                .1
        });
        panic!(
            "provision did not fail on the fixture's test with the guest's exit status ({:?}):\n{stdout}\n{stderr}\nthe guest's logs:\n{}",
            run.status.code(),
            logs.unwrap_or_default()
        );
    }

    // The root disk was made over a baked image built by this run from the proxy's mirror, with
    // every package the recipes install: the guest unpacked none of them again.
    assert!(
        stdout.contains(&format!("{domain}: base image: baked image "))
            && stdout.contains("built by this run: there was none for this package set"),
        "the plan does not name a baked image built for the guest:\n{stdout}"
    );
    baked_packages_are_not_unpacked_again(&installation, address.as_deref().unwrap_or_default());
    first_boot_left_the_final_stage_for_after(
        &installation,
        address.as_deref().unwrap_or_default(),
    );

    // The report: every shipped recipe's tests passed, the fixture's failed, named beside its
    // output.
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    for recipe in SHIPPED {
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("ok   {recipe}: "))),
            "no passing test of {recipe} reported:\n{stderr}"
        );
        assert!(
            !lines
                .iter()
                .any(|line| line.starts_with(&format!("FAIL {recipe}: "))),
            "a test of {recipe} failed:\n{stderr}"
        );
    }
    let named = lines
        .iter()
        .position(|line| *line == "FAIL failing: this check fails (exit status 3)")
        .unwrap_or_else(|| panic!("the failed test is not named:\n{stderr}"));
    assert_eq!(
        lines.get(named + 1).copied(),
        Some(FAILING_TEST_SAYS),
        "the failed test's output does not follow its name:\n{stderr}"
    );
    let address = address.unwrap_or_else(|| panic!("no address in:\n{stderr}"));

    // nginx serves the restored site's page to a request from this machine (ufw lets 80 in).
    let page = http_get(&address, domain);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains(PAGE_MARK), "{page}");

    // The databases take a login with the password from the secret store and hold the
    // rows the site's Makefile (run by the data recipe) loaded.
    let shop = installation.must(
        &address,
        "f=$(mktemp) && cat > \"$f\" && mysql --defaults-extra-file=\"$f\" -u shop shop -Nse 'SELECT body FROM notes'; s=$?; rm -f \"$f\"; exit $s",
        &format!("[client]\npassword={}\n", installation.password("shop")),
    );
    assert_eq!(shop.trim(), "restored into mariadb");
    let blog = installation.must(
        &address,
        "f=$(mktemp) && cat > \"$f\" && PGPASSFILE=\"$f\" psql -w -h 127.0.0.1 -U blog -d blog -tAc 'SELECT body FROM notes'; s=$?; rm -f \"$f\"; exit $s",
        &format!("127.0.0.1:5432:blog:blog:{}\n", installation.password("blog")),
    );
    assert_eq!(blog.trim(), "restored into postgres");
    let (refused, said) = installation.on_guest(
        &address,
        "f=$(mktemp) && cat > \"$f\" && mysql --defaults-extra-file=\"$f\" -u shop shop -Nse 'SELECT 1'; s=$?; rm -f \"$f\"; exit $s",
        "[client]\npassword=not-the-stored-one\n",
    );
    assert!(!refused, "mariadb took a wrong password: {said}");

    // ufw is active with the recipes' rules, its defaults and the logging level asked for (the
    // fragment sets only what ufw's files do not hold yet: the defaults are the package's, the
    // level is not), and drops a port it should: both databases listen on every address, yet
    // neither answers from here.
    let rules = installation.must(&address, "sudo ufw status verbose", "");
    for expected in [
        "22/tcp",
        "80/tcp",
        "443/tcp",
        "Default: deny (incoming), allow (outgoing)",
        "Logging: on (medium)",
    ] {
        assert!(rules.contains(expected), "ufw lacks {expected}:\n{rules}");
    }
    // A rule of several words reached ufw as its words.
    assert!(
        rules.lines().any(|line| line.starts_with("8080 ")
            && line.contains("ALLOW IN")
            && line.trim_end().ends_with("10.0.0.0/8")),
        "ufw lacks the rule for 8080 from 10.0.0.0/8:\n{rules}"
    );
    // The port aptmirror serves on is allowed (its manifest's `serves`): it answers from outside.
    let served: SocketAddr = format!("{address}:3142").parse().unwrap();
    assert!(
        TcpStream::connect_timeout(&served, BLOCKED_CONNECT_TIMEOUT).is_ok(),
        "aptmirror's port 3142 did not answer from outside: ufw does not allow it\n{rules}"
    );
    let listening = installation.must(&address, "ss -ltnH", "");
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

    // mounts: the entry is mounted where it says.
    let mounted = installation.must(&address, "findmnt -n -o SOURCE,FSTYPE /srv/mounted", "");
    assert!(mounted.contains("ext4"), "{mounted}");

    // The cron job runs (by now the guest has been up for minutes: the wait is a bound, not a
    // pause).
    let deadline = Instant::now() + CRON_RUN_TIMEOUT;
    while !installation
        .on_guest(&address, "test -s /var/lib/trog-heartbeat", "")
        .0
    {
        assert!(
            Instant::now() < deadline,
            "the cron job did not run within {CRON_RUN_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_secs(10));
    }

    eprintln!(
        "[step] the recipes' work checked from outside, {:.0?} after the provision began",
        started.elapsed()
    );
    // The same guest, without another boot, as the machine of a second site of this
    // installation, and as an existing host of another installation.
    sites::a_dependent_site_is_served_beside_the_first(&installation, &address);
    sites::a_second_installation_finishes_it_as_an_existing_host(&installation, &address);
}
