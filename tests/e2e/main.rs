//! End to end, for real: `bin/provision` builds a guest from the offline test image on this
//! machine's libvirtd (software emulation), cloud-init applies the seed, the payload's Makefile
//! runs over SSH (its mirror failing the first requests of a finish, which apt on the guest takes
//! from the installation's fallback mirror); runs killed with SIGKILL at every step of the guest's plan are rerun and the
//! last converges (the kill points are listed in kill_chain.rs); a guest whose QEMU is killed
//! during boot is reported at once with libvirt's reason; a run killed while it waits is rerun
//! and converges without duplicates, while a second
//! run of the same guest waits for its lock and then finds it converged; a third
//! run finds nothing to do and `bin/status` says converged; `bin/destroy` leaves nothing of the
//! guest behind but its data volume, which `--purge` removes too; the guest answers with the host
//! key trog made, and another key at its address gets nothing (host_keys.rs); nothing any of it printed,
//! logged or planned holds a secret (secret_scan.rs). The `--json` events of a real provision
//! and of the destroy are pinned by snapshots (json_pins.rs). Every verb runs as an ordinary
//! account in group libvirt, allowed through sudo only the root programs trog prints, which owns
//! the installation; another local user can neither hold, forge nor redirect its locks
//! (accounts.rs).

mod accounts;
mod backups;
mod extra_disk;
mod host_keys;
mod json_pins;
mod kill_chain;
#[path = "../support/local_services.rs"]
mod local_services;
mod machine_change;
mod retired_seed;
mod secret_scan;
mod snapshots;
mod support;

use local_services::local_hypervisors_conf;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use support::*;
use trog::model::names::DomainName;

/// How soon a run must report that its guest's QEMU died while it waited for the guest.
const CRASH_REPORTED_WITHIN: Duration = Duration::from_secs(15);
/// How long a killed run is given to reach the step it is killed in. The wait ends at once when
/// the run ends; a step after the guest's boot is minutes away on a loaded emulated host.
const REACH_STEP_TIMEOUT: Duration = Duration::from_secs(900);

struct Installation {
    dir: tempfile::TempDir,
    domain: DomainName,
    pool: String,
    pool_path: PathBuf,
}

use std::path::PathBuf;

/// The test installation; its guest asks `mirror_url` first and `fallback_mirror_url` when that
/// fails a request.
fn installation(mirror_url: &str, fallback_mirror_url: &str) -> Installation {
    let dir = tempfile::Builder::new()
        .prefix("trog-e2e-")
        .tempdir_in("/var/tmp")
        .unwrap();
    // qemu runs as its own user and must reach the pool's directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let unique = std::process::id();
    let domain = DomainName::parse(&format!("e2e-{unique}.test")).unwrap();
    let pool = format!("trog-e2e-{unique}");
    let pool_path = dir.path().join("pool");
    let image = test_image();
    std::fs::write(
        dir.path().join("hypervisors.conf"),
        local_hypervisors_conf(&pool, &pool_path),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("recipes.yaml"),
        format!(
            "_base:\n  _global:\n    admin_user: trogadmin\n    contact_email: ops@example.test\n    distro: debian\n    release: bookworm\n    mirror: {mirror_url}\n    fallback_mirrors: [{fallback_mirror_url}]\n    upgrade: false\n"
        ),
    )
    .unwrap();
    let recipes_d = dir.path().join("recipes.d");
    std::fs::create_dir_all(recipes_d.join(domain.as_str())).unwrap();
    std::fs::write(
        recipes_d.join(format!("{domain}.yaml")),
        format!(
            "{domain}:\n  _global:\n    memory: 768\n    cpus: 1\n    size: 4G\n    data_volume_size: 1G\n    image:\n      url: file://{}\n      sha256: {}\n  data: {{}}\n",
            image.display(),
            sha256_file(&image)
        ),
    )
    .unwrap();
    // The site: a Makefile whose default target leaves a mark the test looks for, and the
    // digest of the `secret:` value it is given (secret_scan.rs), silently: never the value.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        site.path().join("Makefile"),
        "all:\n\techo \"made by the site's Makefile\" > /srv/site-made.txt\n\
         \t@printf '%s' '$(E2E_TOKEN)' | sha256sum | cut -c1-64 > /srv/site-token.sha256\n",
    )
    .unwrap();
    let status = std::process::Command::new("tar")
        .args(["-czf"])
        .arg(recipes_d.join(domain.as_str()).join("data.tar.gz"))
        .args(["-C"])
        .arg(site.path())
        .arg("Makefile")
        .status()
        .unwrap();
    assert!(status.success());
    Installation {
        dir,
        domain,
        pool,
        pool_path,
    }
}

/// Runs a command on the guest as its admin, with its key from the secret store.
fn on_guest(installation: &Installation, address: &str, command: &str) -> String {
    try_on_guest(installation, address, command)
        .unwrap_or_else(|stderr| panic!("`{command}` on the guest: {stderr}"))
}

/// Runs a command on the guest; `Err` carries its stderr.
fn try_on_guest(
    installation: &Installation,
    address: &str,
    command: &str,
) -> Result<String, String> {
    ssh_as_admin(
        installation.dir.path(),
        &installation.domain,
        address,
        command,
    )
}

fn volumes(pool: &str) -> Vec<String> {
    virt::error::clear_error_callback();
    let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
    let Ok(pool) = connection.lookup_storage_pool_by_name(pool) else {
        return Vec::new();
    };
    pool.refresh(0).unwrap();
    let mut names = pool.list_volumes().unwrap();
    names.sort();
    names
}

/// A `bin/provision` running in the background, its output collected as it comes.
struct RunningProvision {
    child: std::process::Child,
    stdout: std::sync::Arc<std::sync::Mutex<String>>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn collect(
    mut pipe: impl Read + Send + 'static,
) -> (
    std::sync::Arc<std::sync::Mutex<String>>,
    std::thread::JoinHandle<()>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let collected = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(count) = pipe.read(&mut buffer) {
            if count == 0 {
                break;
            }
            collected
                .lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buffer[..count]));
        }
    });
    (seen, reader)
}

impl RunningProvision {
    fn start(installation: &Installation) -> RunningProvision {
        let mut child = spawn_verb(
            "provision",
            installation.dir.path(),
            &[installation.domain.as_str()],
        );
        let (stdout, out_reader) = collect(child.stdout.take().unwrap());
        let (stderr, err_reader) = collect(child.stderr.take().unwrap());
        RunningProvision {
            child,
            stdout,
            stderr,
            readers: vec![out_reader, err_reader],
        }
    }

    /// Waits until the run's progress shows `step` (honestly reached: the run says it started it).
    fn reach(&mut self, step: &str) {
        let deadline = Instant::now() + REACH_STEP_TIMEOUT;
        while !self.stderr.lock().unwrap().contains(step) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "provision ended ({status}) before reaching `{step}`:\n{}",
                    self.stderr.lock().unwrap()
                );
            }
            assert!(
                Instant::now() < deadline,
                "provision did not reach `{step}` within {REACH_STEP_TIMEOUT:?}:\n{}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the run to end: its exit code, stdout and stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let status = self.child.wait().unwrap();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        let stdout = self.stdout.lock().unwrap().clone();
        let stderr = self.stderr.lock().unwrap().clone();
        record_printed("stdout of a background provision", &stdout);
        record_printed("stderr of a background provision", &stderr);
        (status.code(), stdout, stderr)
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        let _ = self.finish();
    }
}

/// Starts `bin/provision` and kills it once its progress shows `step`.
fn provision_killed_at(installation: &Installation, step: &str) {
    let mut run = RunningProvision::start(installation);
    run.reach(step);
    run.kill();
}

/// A guest given the least memory trog accepts, 128 MiB, too little for the test image's kernel
/// and its 50 MB initramfs: the kernel panics on the first boot ("System is deadlocked on
/// memory", about 3 s in, whether the initramfs is kept compressed or not), a real panic. The
/// domain runs on (the kernel spins), so libvirt never says it stopped; the wait reads the console
/// and ends at its next look, instead of after five minutes of a silent console. Then the guest
/// goes.
fn panicking_guest_is_reported_at_its_next_console_look(installation: &Installation) {
    let config = installation.dir.path();
    let panicking = format!("panic-{}.test", std::process::id());
    // Its volumes are in the installation's pool, which the test's own guard removes at the end.
    let _leftovers = LibvirtLeftovers {
        domain: panicking.clone(),
        pool: String::new(),
    };
    let image = test_image();
    std::fs::write(
        config.join("recipes.d").join(format!("{panicking}.yaml")),
        format!(
            "{panicking}:\n  _global:\n    memory: 128\n    cpus: 1\n    size: 4G\n    image:\n      url: file://{}\n      sha256: {}\n",
            image.display(),
            sha256_file(&image)
        ),
    )
    .unwrap();
    let started = Instant::now();
    let run = run_verb("provision", config, &[&panicking]);
    let took = started.elapsed();
    let stderr = text(&run.stderr);
    record_printed(
        "stderr of a provision whose guest's kernel panicked",
        &stderr,
    );
    assert_eq!(run.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{panicking} will not answer: the kernel panicked, seen "
        )) && stderr.contains("Kernel panic - not syncing: System is deadlocked on memory")
            && stderr.contains("last lines of its serial console")
            && stderr.contains(&format!("trog debug_boot {panicking} --console")),
        "{stderr}"
    );
    // The boot, the kernel's few seconds and the wait's next look at the console (every ten
    // seconds): well short of the five quiet minutes the wait would otherwise have taken.
    assert!(
        took < Duration::from_secs(150),
        "the run took {took:?}:\n{stderr}"
    );
    eprintln!("a guest's kernel panic ended its provision after {took:.0?}");
    let destroyed = run_verb("destroy", config, &[&panicking, "--purge", "--yes"]);
    assert!(destroyed.status.success(), "{}", text(&destroyed.stderr));
    std::fs::remove_file(config.join("recipes.d").join(format!("{panicking}.yaml"))).unwrap();
}

/// How many requests the mirror fails in the finish of step 2: apt-get update's first (the
/// InRelease of each of the three suites).
const MIRROR_FAILURES: usize = 3;

/// The mirror really failed [`MIRROR_FAILURES`] requests, and the fallback was asked for each
/// of those files after it (since `fallback_asked_before`): apt on the guest asked the mirrors
/// in the installation's order and turned to the next one on a failure.
fn mirror_failures_were_fallen_back_from(
    mirror: &MirrorServer,
    fallback: &MirrorServer,
    fallback_asked_before: usize,
) {
    let failed: Vec<String> = mirror
        .asked()
        .into_iter()
        .filter(|(_, failed)| *failed)
        .map(|(path, _)| path)
        .collect();
    assert_eq!(
        failed.len(),
        MIRROR_FAILURES,
        "the mirror failed {failed:?}; asked: {:?}",
        mirror.asked()
    );
    let asked_of_fallback: Vec<String> = fallback.asked()[fallback_asked_before..]
        .iter()
        .map(|(path, _)| path.clone())
        .collect();
    for path in &failed {
        assert!(
            asked_of_fallback.contains(path),
            "{path} failed on the mirror and was not asked of the fallback, which was asked {asked_of_fallback:?}"
        );
    }
    eprintln!("the mirror failed {failed:?}; apt on the guest took each from the fallback");
}

/// SIGKILLs the QEMU process of the running domain `name`, as a crash would end it.
fn kill_qemu_of(name: &str) {
    let pid_file = format!("/run/libvirt/qemu/{name}.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|error| panic!("{pid_file}: {error}"))
        .trim()
        .parse()
        .unwrap();
    // SAFETY: a plain signal to a process id read from libvirt's own pid file.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
}

#[test]
fn provision_converge_and_destroy_a_real_guest() {
    run_verbs_as(TestAccount::ensure(accounts::ACCOUNT));
    let mirror_root = tempfile::tempdir().unwrap();
    write_empty_archive(mirror_root.path());
    let mirror_port = 18000 + (std::process::id() % 1000) as u16;
    let mirror = MirrorServer::start(mirror_root.path(), mirror_port);
    // The archive behind the installation's mirror, in the list after it (`fallback_mirrors`).
    let fallback_mirror = MirrorServer::start(mirror_root.path(), mirror_port + 1000);
    let installation = installation(&mirror.url, &fallback_mirror.url);
    let planted = secret_scan::plant(installation.dir.path(), &installation.domain);
    verbs_run_as().unwrap().hand_over(installation.dir.path());
    let _leftovers = LibvirtLeftovers {
        domain: installation.domain.to_string(),
        pool: installation.pool.clone(),
    };
    let config = installation.dir.path();
    let domain = installation.domain.as_str();

    // Killed with SIGKILL at every step before the wait, each rerun at the next (kill_chain.rs
    // lists them); the last may leave the guest started. It is switched off then: its first
    // boot would take a core for minutes while the checks below wait on other things, and the
    // next run starts it again itself.
    let chain_started = Instant::now();
    for point in &kill_chain::BEFORE_THE_WAIT {
        kill_chain::provision_killed(&installation, point);
    }
    eprintln!(
        "kill chain: {} runs killed before the wait, in {:.0?}",
        kill_chain::BEFORE_THE_WAIT.len(),
        chain_started.elapsed()
    );
    force_off(domain);
    panicking_guest_is_reported_at_its_next_console_look(&installation);

    // libvirtd still answers after every kill.
    let answers = std::process::Command::new("timeout")
        .args(["10", "virsh", "-c", "qemu:///system", "list", "--name"])
        .output()
        .unwrap();
    assert!(
        answers.status.success(),
        "libvirtd does not answer after the kills: {}",
        text(&answers.stderr)
    );

    // 0. The guest's QEMU dies while trog waits for it. The first time (libvirt's reason:
    //    crashed) the guest is started again and the run says so; the second time the wait
    //    ends within seconds (not after its five minutes, nor after a login attempt's minute),
    //    with libvirt's state and reason and the hypervisor's QEMU log.
    let mut crashing = RunningProvision::start(&installation);
    crashing.reach("wait for the guest's address and SSH");
    kill_qemu_of(domain);
    crashing.reach("started the guest again");
    let killed_at = Instant::now();
    kill_qemu_of(domain);
    let (code, _, stderr) = crashing.finish();
    assert!(
        stderr.contains(&format!("{domain}: its emulator crashed "))
            && stderr.contains(
                "before SSH answered (libvirt: shut off (crashed)); started the guest again"
            ),
        "{stderr}"
    );
    assert!(
        stderr.contains("(it had been started again once, after its emulator crashed)"),
        "{stderr}"
    );
    let noticed_after = killed_at.elapsed();
    eprintln!("the QEMU kill was reported {noticed_after:.1?} after it");
    assert_eq!(code, Some(8), "{stderr}");
    // The wait asks libvirt every half second, also during a login; the rest is reading the
    // QEMU log and the console on the hypervisor, and the run's exit, on a loaded host.
    assert!(
        noticed_after < CRASH_REPORTED_WITHIN,
        "the stop was reported only after {noticed_after:?}:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{domain} stopped while it was waited for: libvirt says it is shut off ("
        )) && stderr.contains("last lines of its QEMU log on the hypervisor"),
        "{stderr}"
    );

    // 1. Killed while it waits for the guest: the domain and its disks exist, unfinished.
    provision_killed_at(&installation, "wait for the guest's address and SSH");
    assert!(domain_exists(domain));
    // Killed while it finishes the guest over SSH (the guest booted): the guest is not recorded
    // as finished, so the rerun finishes it again.
    kill_chain::provision_killed_at(&installation, "finish");

    // 2. Rerun: converges from there, no duplicates, the guest finished. A second run of the
    //    same guest started meanwhile waits for the first's guest lock, then finds it converged.
    //    The mirror fails the first requests of this run's finish (503, as a cache whose
    //    upstream hiccups): apt on the guest asks the fallback for each, and the finish passes.
    mirror.fail_next(MIRROR_FAILURES);
    let fallback_asked_before = fallback_mirror.asked().len();
    let mut first = RunningProvision::start(&installation);
    first.reach("wait for the guest's address and SSH");
    accounts::the_run_is_the_accounts(&installation, first.child.id());
    accounts::another_user_cannot_hold_forge_or_redirect_the_locks(&installation);
    let same_guest = run_verb("provision", config, &[domain]);
    let (code, stdout, stderr) = first.finish();
    let (waited_out, waited_err) = (text(&same_guest.stdout), text(&same_guest.stderr));
    assert!(same_guest.status.success(), "{waited_out}\n{waited_err}");
    assert!(
        waited_err.contains(&format!(
            "for the guest {domain}: `trog provision` (process"
        )),
        "the second run did not wait for the first:\n{waited_err}"
    );
    assert!(
        waited_out.contains(&format!("{domain}: converged, nothing to do")),
        "{waited_out}"
    );
    assert_eq!(code, Some(0), "provision failed:\n{stdout}\n{stderr}");
    mirror_failures_were_fallen_back_from(&mirror, &fallback_mirror, fallback_asked_before);
    assert!(
        !stdout.contains("define the domain"),
        "the rerun defined the domain again:\n{stdout}"
    );
    let address = stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{domain} is on local at ")))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no address in:\n{stdout}"))
        .to_string();
    let base = trog::plan::resource_names::base_image_volume(&sha256_file(&test_image()));
    let data = format!("{domain}-data.qcow2");
    // No seed: retired once the guest's first boot was over (retired_seed.rs).
    let mut expected_volumes = vec![format!("{domain}-root.qcow2"), data.clone(), base.clone()];
    expected_volumes.sort();
    // The files read out of the base image for first boots (`<base>.kernel`, …) are there once
    // a guest of this pool had a first boot (the panicking one's did): they are checked below.
    let boot_file_prefix = format!("{base}.");
    let mut found_volumes = volumes(&installation.pool);
    found_volumes.retain(|volume| !volume.starts_with(&boot_file_prefix));
    assert_eq!(found_volumes, expected_volumes);

    // cloud-init applied the seed; the site's Makefile ran.
    assert!(on_guest(&installation, &address, "cloud-init status --wait").contains("status: done"));
    assert_eq!(
        on_guest(&installation, &address, "hostname -f").trim(),
        domain
    );
    assert_eq!(
        on_guest(&installation, &address, "cat /etc/aliases").trim(),
        "root: ops@example.test"
    );
    assert_eq!(
        on_guest(&installation, &address, "cat /srv/site-made.txt").trim(),
        "made by the site's Makefile"
    );
    planted.reached_the_guest(&|command| on_guest(&installation, &address, command));
    // Logins by key only, from sshd's first start on (the seed's drop-in), and the emulated
    // processor without the nested virtualization whose modules the kernel would load.
    let sshd = on_guest(&installation, &address, "sudo sshd -T");
    for setting in [
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
    ] {
        assert!(
            sshd.lines().any(|line| line == setting),
            "{setting}: {sshd}"
        );
    }
    assert_eq!(
        on_guest(
            &installation,
            &address,
            "grep -cw svm /proc/cpuinfo || true"
        )
        .trim(),
        "0"
    );
    // The data volume is formatted and mounted by the vm recipe.
    let mounted = on_guest(&installation, &address, "findmnt -n -o FSTYPE /srv/data");
    assert_eq!(mounted.trim(), "ext4");
    let booted = on_guest(&installation, &address, "uptime -s");

    // 3. Converged: nothing done, nothing restarted.
    let third = run_verb("provision", config, &[domain]);
    assert!(third.status.success(), "{}", text(&third.stderr));
    assert!(
        text(&third.stdout).contains(&format!("{domain}: converged, nothing to do")),
        "{}",
        text(&third.stdout)
    );
    assert_eq!(on_guest(&installation, &address, "uptime -s"), booted);

    let status = run_verb("status", config, &[domain]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert_eq!(
        text(&status.stdout),
        format!("{domain}: on local, converged\n")
    );

    // 3a. An extra disk added to the running guest's file: plugged in, formatted, mounted.
    extra_disk::added_to_the_running_guest(&installation, &address);

    // 3b. The guest is trusted by the host key trog gave it, and nothing else is.
    host_keys::only_the_guests_own_host_key_is_trusted(&installation, &address);

    // 3c. Backed up, destroyed and built again: the backup is back on the new root disk.
    let address = backups::survive_destroy(&installation, &address);
    extra_disk::survived_the_rebuild(&installation, &address);
    // That build was a first boot from start to end: the base image's own kernel, started
    // directly with its GRUB menu's command line, read out of the image and kept beside it;
    // the definition the guest keeps boots from its disk.
    let cmdline = on_guest(&installation, &address, "cat /proc/cmdline");
    assert!(
        !cmdline.contains("BOOT_IMAGE=") && cmdline.contains("root=LABEL=trog-root"),
        "not started directly: {cmdline}"
    );
    // Without cloud-init's network stage, which the seed's local mode leaves nothing to do, and
    // without its config stage, whose modules the local stage ran; cloud-init still ended, and
    // well.
    for unit in ["cloud-init.service", "cloud-config.service"] {
        assert!(
            cmdline.contains(&format!("systemd.mask={unit}")),
            "{cmdline}"
        );
        assert_eq!(
            on_guest(
                &installation,
                &address,
                &format!("systemctl is-active {unit} || true")
            )
            .trim(),
            "inactive"
        );
    }
    // Its seed installs packages, in the final stage: that stage ran on the boot, waited for.
    assert!(
        !cmdline.contains("systemd.mask=cloud-final.service"),
        "{cmdline}"
    );
    assert!(on_guest(&installation, &address, "cloud-init status --long").contains("status: done"));
    // The config stage's modules ran all the same (each leaves its once-per-instance mark), in
    // the local stage: the config stage never started.
    let config_modules_ran = on_guest(
        &installation,
        &address,
        "sudo ls /var/lib/cloud/instance/sem/ && \
         sudo python3 -c 'import json; print(json.load(open(\"/run/cloud-init/status.json\"))[\"v1\"][\"modules-config\"][\"start\"])'",
    );
    for mark in ["config_locale", "config_timezone"] {
        assert!(config_modules_ran.contains(mark), "{config_modules_ran}");
    }
    // The first-boot commands are no longer cloud-init's runcmd: trog's wait ran them, once,
    // after cloud-init's last stage, and kept their status.
    assert!(
        !config_modules_ran.contains("config_runcmd"),
        "{config_modules_ran}"
    );
    assert_eq!(
        on_guest(
            &installation,
            &address,
            "sudo cat /var/lib/trog/first-boot-commands.status"
        ),
        "0\n"
    );
    assert!(
        config_modules_ran.trim_end().ends_with("None"),
        "{config_modules_ran}"
    );
    let boot_files = [
        base.clone(),
        format!("{base}.cmdline"),
        format!("{base}.initrd"),
        format!("{base}.kernel"),
        format!("{base}.network-stage"),
    ];
    assert!(
        boot_files
            .iter()
            .all(|file| volumes(&installation.pool).contains(file)),
        "{:?}",
        volumes(&installation.pool)
    );
    // Kept uncompressed (the test image's is gzip): the guest's kernel copies it, no inflating.
    let initrd = std::fs::read(installation.pool_path.join(format!("{base}.initrd"))).unwrap();
    assert_eq!(
        &initrd[..6],
        b"070701",
        "the kept initramfs is a cpio archive"
    );
    let definitions = |flags: u32| {
        virt::error::clear_error_callback();
        let connection = virt::connect::Connect::open(Some("qemu:///system")).unwrap();
        let guest = connection.lookup_domain_by_name(domain).unwrap();
        guest.xml_desc(flags).unwrap()
    };
    assert!(definitions(0).contains(&format!(
        "<kernel>{}/{base}.kernel</kernel>",
        installation.pool_path.display()
    )));
    assert!(
        !definitions(virt::sys::VIR_DOMAIN_XML_INACTIVE).contains("<kernel>"),
        "the kept definition boots from the disk"
    );

    // 4. Snapshots of the running and the shut-off guest, restored; the guest is left running
    //    with two snapshots.
    snapshots::snapshot_and_restore(&installation, &address);

    planted.read_from_guest(&|command| on_guest(&installation, &address, command));

    // 4a. Its seed is gone from the domain and the pool (retired after the rebuild's first
    //     boot too). Its disk bus and machine type changed: redefined and restarted without the
    //     seed, its disks intact, the same instance of cloud-init and the same pinned host key.
    let before_the_restart = retired_seed::gone_before_a_restart(&installation, &address);
    let address = machine_change::bus_and_machine_changed(
        &installation,
        &address,
        &[(extra_disk::KEPT_FILE, extra_disk::KEPT_TEXT)],
    );
    retired_seed::kept_across_the_restart(&installation, &address, &before_the_restart);

    // 5. Destroyed: no domain, no disk, no snapshot, no seed; the data volume and the shared base
    //    image stay until --purge, which takes the data volume too.
    //    Its events in JSON, pinned.
    let destroy = run_verb("destroy", config, &["--json", domain]);
    let said = format!("{}\n{}", text(&destroy.stdout), text(&destroy.stderr));
    assert!(destroy.status.success(), "{said}");
    let events = json_pins::events(&destroy);
    let outcome = &json_pins::first(&events, "destroyed")["outcome"];
    // Whether an entry of the outcome's `list` begins with `what` (a kept volume's entry goes on
    // to say what would delete it).
    let listed = |list: &str, what: &str| {
        outcome[list]
            .as_array()
            .unwrap_or_else(|| panic!("no `{list}` in {outcome}"))
            .iter()
            .any(|item| item.as_str().is_some_and(|item| item.starts_with(what)))
    };
    for snapshot in ["running-1", "off-1"] {
        assert!(listed("removed", &format!("snapshot {snapshot}")), "{said}");
    }
    assert!(listed("kept", &format!("data volume {data}")), "{said}");
    let extra = extra_disk::volume(&installation);
    assert!(listed("kept", &format!("disk volume {extra}")), "{said}");
    json_pins::pin("destroy", &installation, destroy.status.code(), &events);
    assert!(!domain_exists(domain));
    let mut kept = vec![data.clone(), extra];
    kept.extend(boot_files.clone());
    kept.sort();
    assert_eq!(volumes(&installation.pool), kept);
    let purge = run_verb("destroy", config, &["--purge", "--yes", domain]);
    let said = format!("{}\n{}", text(&purge.stdout), text(&purge.stderr));
    assert!(purge.status.success(), "{said}");
    assert_eq!(volumes(&installation.pool), boot_files);
    assert!(installation.pool_path.exists());
    let status = run_verb("status", config, &[domain]);
    assert_eq!(status.status.code(), Some(1));
    assert_eq!(
        text(&status.stdout),
        format!("{domain}: on no hypervisor\n")
    );

    // 6. Nothing it printed, logged or planned holds a secret.
    planted.assert_nothing_leaked();
}
