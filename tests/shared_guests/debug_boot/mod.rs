//! `debug_boot` on a guest of the fleet (this machine's libvirtd, software emulation), one check
//! carrying every step in order: its console from the firmware to the login prompt, the same
//! capture fetched without a restart and as JSON events, its screen as a PNG of the display's
//! size, its display reached locally and through a tunnel to a remote hypervisor (the network
//! namespace of tests/services/remote-host.sh), the boot menu held, opened with a key, seen on the
//! console and on the screen, and left with a digit for the network's entry, and a restore that
//! gives back the domain's definition byte for byte with `status` saying converged; a restart that
//! fails after a change leaves the definition byte for byte as it was and the guest running; then,
//! made unbootable, its kernel's panic on the console streamed as JSON events, its disk read
//! without booting it, rescue mode through --single, and a restore of the definition and the GRUB
//! configuration byte for byte. A domain trog did not make is refused, and an unknown key name
//! lists the valid ones.
//!
//! The guest is left shut off, its definition and GRUB configuration as its provision made them;
//! what comes after it in the fleet only destroys it.

mod remote_vnc;
mod screen;
mod unbootable;

use crate::support::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the console may stand still before a wait for a line on it gives up: a boot on a
/// loaded emulated host prints something every few seconds, however slow it is.
const CONSOLE_QUIET: Duration = Duration::from_secs(180);
/// The most a wait for a line on the console takes, whatever it prints.
const CONSOLE_LIMIT: Duration = Duration::from_secs(900);

/// A second installation declaring `domain` as the one in `from` does, in `dir`: what the
/// remote display check reaches the guest through (its hypervisors.conf is written after).
fn remote_installation(dir: &Path, from: &Path, domain: &str) {
    let guest_file = format!("recipes.d/{domain}.yaml");
    std::fs::create_dir_all(dir.join("recipes.d")).unwrap();
    for file in ["recipes.yaml", guest_file.as_str()] {
        std::fs::copy(from.join(file), dir.join(file)).unwrap();
    }
}

fn connection() -> virt::connect::Connect {
    virt::error::clear_error_callback();
    virt::connect::Connect::open(Some("qemu:///system")).unwrap()
}

fn definition(domain: &str) -> String {
    connection()
        .lookup_domain_by_name(domain)
        .unwrap()
        .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)
        .unwrap()
}

fn run_id(domain: &str) -> Option<u32> {
    connection().lookup_domain_by_name(domain).unwrap().id()
}

/// The display's size as libvirt's own screenshot says, the oracle for --shot.
fn display_size(domain: &str) -> (u32, u32) {
    let connection = connection();
    let domain = connection.lookup_domain_by_name(domain).unwrap();
    let stream = virt::stream::Stream::new(&connection, 0).unwrap();
    domain.screenshot(&stream, 0, 0).unwrap();
    let mut bytes = Vec::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let count = stream.recv(&mut buffer).unwrap();
        if count <= 0 {
            break;
        }
        bytes.extend_from_slice(&buffer[..count as usize]);
    }
    stream.finish().unwrap();
    // QEMU hands over a PPM, or in newer versions a PNG.
    if bytes.starts_with(b"\x89PNG") {
        let reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap();
        return (reader.info().width, reader.info().height);
    }
    let header = String::from_utf8_lossy(&bytes[..32.min(bytes.len())]).into_owned();
    let words: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(words[0], "P6", "{header:?}");
    (words[1].parse().unwrap(), words[2].parse().unwrap())
}

fn debug_boot(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = run_verb("debug_boot", dir, args);
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// Fetches the capture until it shows `wanted`, for as long as the console keeps changing.
fn fetch_until(dir: &Path, domain: &str, wanted: &str) -> String {
    fetch_until_shown(dir, domain, wanted, |console| console.contains(wanted))
}

/// Fetches the capture until `shown` holds for it (`wanted` describes what it waits for), for as
/// long as the console keeps changing.
fn fetch_until_shown(
    dir: &Path,
    domain: &str,
    wanted: &str,
    shown: impl Fn(&str) -> bool,
) -> String {
    let started = Instant::now();
    let mut last = String::new();
    let mut last_changed = started;
    loop {
        let (status, stdout, stderr) = debug_boot(dir, &[domain, "--fetch"]);
        assert_eq!(status, Some(0), "{stderr}");
        if shown(&stdout) {
            return stdout;
        }
        if stdout != last {
            last_changed = Instant::now();
            last.clone_from(&stdout);
        }
        assert!(
            last_changed.elapsed() < CONSOLE_QUIET && started.elapsed() < CONSOLE_LIMIT,
            "the console did not show {wanted:?} (unchanged for {:?}, {:?} in all):\n{stdout}",
            last_changed.elapsed(),
            started.elapsed()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The boot menu, opened and waiting for a key: `--shot` shows it (the menu's lines as the
/// console shows them are on the screen; the login prompt's screen had none of them), and a digit
/// sent with `--keys` boots the entry it numbers: the network's (iPXE), which the firmware never
/// boots by itself (the disk comes first).
fn boot_menu_on_the_screen_and_a_key_moving_in_it(
    dir: &Path,
    domain: &str,
    held: &str,
    login_screen: &screen::Screen,
) {
    let menu: Vec<&str> = held
        .lines()
        .skip_while(|line| !line.starts_with("Select boot device"))
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    let network = menu
        .iter()
        .find(|line| line.contains(". iPXE"))
        .unwrap_or_else(|| panic!("no network entry in the menu:\n{held}"));
    let shot = dir.join("menu.png");
    let (status, _, stderr) = debug_boot(dir, &[domain, "--shot", shot.to_str().unwrap()]);
    assert_eq!(status, Some(0), "{stderr}");
    let menu_screen = screen::Screen::decode(&std::fs::read(&shot).unwrap());
    assert!(menu_screen.shows(&menu), "{menu:?} is not on the screen");
    assert!(
        !login_screen.shows(&menu[..1]),
        "{:?} was there before",
        menu[0]
    );

    // The menu waits (no timeout once opened) until a key chooses.
    let waiting = fetch_until(dir, domain, "Select boot device");
    assert!(!waiting.contains("Booting from"), "{waiting}");
    let (number, _) = network.split_once(". ").unwrap();
    let (status, _, stderr) = debug_boot(dir, &[domain, "--keys", number]);
    assert_eq!(status, Some(0), "{stderr}");
    let booting = fetch_until(dir, domain, "iPXE initialising devices");
    let chosen = booting.split("Select boot device").nth(1).unwrap();
    assert!(chosen.contains("Booting from ROM"), "{chosen}");
    assert!(!chosen.contains("Booting from Hard Disk"), "{chosen}");
}

/// The check: `domain`, a running guest of the installation in `dir` (converged, nobody else
/// using it meanwhile), taken through every action of `debug_boot` and put back; `unique` names
/// the foreign domain it defines.
pub fn reads_a_real_guest_and_puts_it_back(dir: &Path, domain: &str, unique: u32) {
    let domain = domain.to_string();
    let foreign = format!("dbg-foreign-{unique}.test");
    let _foreign_leftovers = LibvirtLeftovers {
        domain: foreign.clone(),
        pool: format!("trog-dbg-none-{unique}"),
    };
    let provisioned = definition(&domain);

    // A domain trog did not make is refused, and nothing of it changes.
    connection()
        .define_domain_xml(&format!(
            "<domain type='qemu'><name>{foreign}</name><memory unit='MiB'>64</memory><os><type arch='x86_64'>hvm</type></os></domain>"
        ))
        .unwrap();
    let (status, _, stderr) = debug_boot(dir, &[&foreign, "--hold"]);
    assert_eq!(status, Some(7), "{stderr}");
    assert!(stderr.contains("not created by trog"), "{stderr}");
    assert!(!definition(&foreign).contains("bootmenu"));

    // An unknown key is named, with the valid ones, before anything is sent.
    let (status, _, stderr) = debug_boot(dir, &[&domain, "--keys", "esc", "escape"]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown key `escape`") && stderr.contains("pagedown"),
        "{stderr}"
    );

    // --console: from the firmware's first line through the kernel and systemd to the login prompt.
    let (status, console, stderr) = debug_boot(dir, &[&domain, "--console"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stderr.contains("reached a login prompt"), "{stderr}");
    assert!(stderr.contains("--restore"), "{stderr}");
    for expected in ["SeaBIOS", "Linux version", "systemd", "login:"] {
        assert!(console.contains(expected), "no {expected:?} in:\n{console}");
    }
    // The capture ends at getty's prompt (the guest's next console output may follow it on its
    // line, as getty ends the prompt with no newline).
    let last_line = console.trim_end().lines().last().unwrap_or_default();
    assert_eq!(
        last_line.split_whitespace().nth(1),
        Some("login:"),
        "{console}"
    );

    // --fetch: the same capture, and the guest was not restarted for it.
    let started = run_id(&domain);
    let (status, fetched, stderr) = debug_boot(dir, &[&domain, "--fetch"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(
        fetched.starts_with(console.trim_end()),
        "{fetched}\n---\n{console}"
    );
    assert_eq!(run_id(&domain), started);

    // --json: the capture as console_line events, then one debug_boot event with the same lines.
    let (status, events, stderr) = debug_boot(dir, &["--json", &domain, "--fetch"]);
    assert_eq!(status, Some(0), "{stderr}");
    let events: Vec<serde_json::Value> = events
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let (summary, console_lines) = events.split_last().unwrap();
    assert_eq!(summary["event"], "debug_boot", "{summary}");
    assert_eq!(summary["action"], "fetch", "{summary}");
    let texts: Vec<&str> = console_lines
        .iter()
        .map(|event| {
            assert_eq!(event["event"], "console_line", "{event}");
            event["text"].as_str().unwrap()
        })
        .collect();
    assert!(
        texts.join("\n").starts_with(fetched.trim_end()),
        "{texts:?}\n---\n{fetched}"
    );
    assert_eq!(summary["lines"].as_array().unwrap().len(), texts.len());
    assert_eq!(run_id(&domain), started);

    // --shot: a PNG a decoder reads, of the display's size.
    let shot = dir.join("screen.png");
    let (status, _, stderr) = debug_boot(dir, &[&domain, "--shot", shot.to_str().unwrap()]);
    assert_eq!(status, Some(0), "{stderr}");
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let reader = decoder.read_info().unwrap();
    let info = reader.info();
    assert_eq!((info.width, info.height), display_size(&domain));
    let login_screen = screen::Screen::decode(&std::fs::read(&shot).unwrap());

    // --vnc, locally: the address of the display, where a VNC server greets.
    let (status, stdout, stderr) = debug_boot(dir, &[&domain, "--vnc"]);
    assert_eq!(status, Some(0), "{stderr}");
    let address = stdout.split(": ").next().unwrap();
    let mut vnc = std::net::TcpStream::connect(address).unwrap();
    vnc.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut greeting = [0u8; 12];
    std::io::Read::read_exact(&mut vnc, &mut greeting).unwrap();
    assert!(greeting.starts_with(b"RFB 003."), "{greeting:?}");
    drop(vnc);
    // --vnc through a remote hypervisor: this machine's end of an SSH tunnel to the display.
    let display_port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
    remote_vnc::vnc_through_the_remote_host(dir, &domain, display_port);

    // --hold: the firmware waits in its boot menu; --keys opens it, as the console shows.
    let (status, stdout, stderr) = debug_boot(dir, &[&domain, "--hold"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("--restore"), "{stdout}");
    assert_ne!(run_id(&domain), started, "--hold restarts the guest");
    fetch_until(dir, &domain, "Press ESC for boot menu");
    let (status, _, stderr) = debug_boot(dir, &[&domain, "--keys", "esc"]);
    assert_eq!(status, Some(0), "{stderr}");
    // The firmware prints its menu a line at a time over the serial console (slowly, under
    // TCG): the capture is read once the network's entry, the menu's last, is there whole.
    let held = fetch_until_shown(dir, &domain, "the boot menu's network entry", |console| {
        console
            .split_once("Select boot device")
            .is_some_and(|(_, menu)| {
                menu.split_inclusive('\n')
                    .any(|line| line.contains(". iPXE") && line.ends_with('\n'))
            })
    });
    boot_menu_on_the_screen_and_a_key_moving_in_it(dir, &domain, &held, &login_screen);

    // --restore: the definition is what provision made, byte for byte; status says converged.
    let (status, stdout, stderr) = debug_boot(dir, &[&domain, "--restore"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("undone"), "{stdout}");
    assert_eq!(definition(&domain), provisioned);
    let status = run_verb("status", dir, &[&domain]);
    assert_eq!(
        text(&status.stdout),
        format!("{domain}: on local, converged\n"),
        "{}",
        text(&status.stderr)
    );

    // A failure restores what it changed: with a directory where --console's capture file goes,
    // the restart after the change fails; the definition is back, byte for byte, and the guest,
    // running before, runs again.
    let capture = format!("/var/log/libvirt/qemu/{domain}-debug-console.log");
    std::fs::remove_file(&capture).unwrap();
    std::fs::create_dir(&capture).unwrap();
    let (status, _, stderr) = debug_boot(dir, &[&domain, "--console"]);
    std::fs::remove_dir(&capture).unwrap();
    assert_eq!(status, Some(6), "{stderr}");
    assert!(
        stderr.contains("did not start with the change for debugging; the change was taken back: its definition is as it was, and the guest runs again from it")
            && stderr.contains("cannot start"),
        "{stderr}"
    );
    assert_eq!(definition(&domain), provisioned);
    assert!(run_id(&domain).is_some(), "the guest runs again");

    unbootable::disk_actions_on_an_unbootable_guest(dir, &domain, &provisioned);
}
