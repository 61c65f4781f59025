//! `--vnc` through a remote hypervisor: tests/services/remote-host.sh's network namespace, whose
//! sshd fronts this machine's libvirtd over `qemu+ssh`. trog asks libvirt (through SSH) where the
//! guest's display listens — the hypervisor's loopback — and tunnels to it through the
//! hypervisor's sshd, which connects to that address in its own network stack.
//!
//! On a real hypervisor QEMU and sshd share one loopback. Here they do not: QEMU was started by
//! this machine's libvirtd and listens on this machine's loopback, while the namespace's sshd sees
//! the namespace's. [`LoopbackBridge`] joins the two at the display's port (a listener on the
//! namespace's loopback, each connection passed on to the same port of this machine's), so the
//! namespace host sees the display where a real hypervisor would; what answers at the end is the
//! guest's own VNC server.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::remote_host::RemoteHost;
use crate::support::*;

/// Runs `then` with this thread in the network namespace `namespace`, then brings it back.
fn in_namespace<T>(namespace: &str, then: impl FnOnce() -> T) -> T {
    let own = File::open("/proc/thread-self/ns/net").unwrap();
    let other = File::open(Path::new("/run/netns").join(namespace)).unwrap();
    // SAFETY: setns on descriptors this function holds open; it moves the calling thread only.
    let entered = unsafe { libc::setns(other.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(entered, 0, "{}", std::io::Error::last_os_error());
    let result = then();
    let back = unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(back, 0, "{}", std::io::Error::last_os_error());
    result
}

/// The namespace's `127.0.0.1:port`, passed on to this machine's (see the module's comment). Its
/// listener lives as long as the test process.
pub struct LoopbackBridge;

impl LoopbackBridge {
    pub fn start(host: &RemoteHost, port: u16) -> LoopbackBridge {
        let namespace = host.namespace.clone();
        let (ready, listening) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let listener = in_namespace(&namespace, || {
                TcpListener::bind(("127.0.0.1", port)).unwrap()
            });
            ready.send(()).unwrap();
            for incoming in listener.incoming() {
                let Ok(from_namespace) = incoming else {
                    continue;
                };
                let Ok(to_display) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                pass_on(from_namespace, to_display);
            }
        });
        listening.recv_timeout(Duration::from_secs(10)).unwrap();
        LoopbackBridge
    }
}

/// Copies each way until either side closes.
fn pass_on(a: TcpStream, b: TcpStream) {
    for (mut from, mut to) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(std::net::Shutdown::Both);
        });
    }
}

/// A run that holds until interrupted, ended when the test fails before it interrupts it.
struct Interrupted(std::process::Child);

impl Drop for Interrupted {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `debug_boot --vnc` on the remote hypervisor: it prints this machine's end of a tunnel, where
/// the guest's VNC server greets, and holds the tunnel until interrupted; afterwards the address
/// answers no more.
pub fn vnc_through_the_remote_host(installation: &Path, domain: &str, display_port: u16) {
    let host = RemoteHost::set_up();
    let _bridge = LoopbackBridge::start(&host, display_port);
    let dir = tempfile::Builder::new()
        .prefix("trog-dbg-remote-")
        .tempdir_in("/var/tmp")
        .unwrap();
    super::remote_installation(dir.path(), installation, domain);
    std::fs::write(
        dir.path().join("hypervisors.conf"),
        format!(
            "# This machine's libvirtd behind the sshd of a network namespace.\n[remote]\nlibvirt_uri = {}\ndomain_type = qemu\npool_name = unused-pool\npool_path = {}\n",
            host.uri(&host.user_nopasswd, "/system"),
            dir.path().join("pool").display()
        ),
    )
    .unwrap();

    // Scripts start their background jobs (CI's test lanes are such jobs) with SIGINT ignored,
    // and every program started from them inherits that; a person's trog at a terminal has the
    // default (SIGINT ends the run), which is what this check is about. Children inherit it.
    // SAFETY: sets a signal's disposition to its default; no handler is installed.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let mut run = Interrupted(spawn_verb("debug_boot", dir.path(), &[domain, "--vnc"]));
    let run = &mut run.0;
    let said = first_line(run, Duration::from_secs(FIRST_LINE_WITHIN_S));
    assert!(
        said.contains("an SSH tunnel to remote, open until interrupted"),
        "{said}"
    );
    let address = said.split(": ").next().unwrap().to_string();
    assert!(address.starts_with("127.0.0.1:"), "{said}");
    let mut vnc = TcpStream::connect(&address).unwrap();
    vnc.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut greeting = [0u8; 12];
    vnc.read_exact(&mut greeting).unwrap();
    assert!(greeting.starts_with(b"RFB 003."), "{greeting:?}");
    drop(vnc);
    assert!(run.try_wait().unwrap().is_none(), "the tunnel is held");

    // Interrupted (Ctrl-C), the run ends, and its tunnel with it.
    // SAFETY: a signal to the child this test started and has not yet reaped.
    unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(ENDS_WITHIN_S);
    while run.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the run did not end within {ENDS_WITHIN_S}s of SIGINT:\n{}",
            processes_of(run.id())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&address).is_ok() {
        assert!(
            Instant::now() < deadline,
            "{address} still answers after the run ended"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How long the run may take to print its address: locating the guest and opening the tunnel
/// take seconds; its SSH connections give up after 15.
const FIRST_LINE_WITHIN_S: u64 = 90;
/// How long an interrupted run may take to end.
const ENDS_WITHIN_S: u64 = 10;

/// The run's first line on stdout, read on a thread of its own so that the wait is bounded;
/// when none comes in time, or the run ends without one, the failure shows its stderr and what
/// it and its children were doing.
fn first_line(run: &mut std::process::Child, within: Duration) -> String {
    let stdout = run.stdout.take().unwrap();
    let (line_read, first) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = line_read.send(line);
    });
    match first.recv_timeout(within) {
        Ok(line) if !line.is_empty() => line,
        outcome => {
            let doing = processes_of(run.id());
            let _ = run.kill();
            let _ = run.wait();
            let mut stderr = String::new();
            let _ = run.stderr.take().unwrap().read_to_string(&mut stderr);
            let what = if outcome.is_ok() {
                "ended without a line".to_string()
            } else {
                format!("printed no line within {}s", within.as_secs())
            };
            panic!("debug_boot --vnc {what}\nstderr:\n{stderr}\nprocesses:\n{doing}");
        }
    }
}

/// The run and its descendants, with the kernel function each waits in.
fn processes_of(pid: u32) -> String {
    let output = Command::new("ps")
        .args(["-e", "--forest", "-o", "pid,ppid,stat,wchan:24,etimes,args"])
        .output()
        .unwrap();
    let listing = text(&output.stdout);
    let mut family = vec![pid.to_string()];
    let mut lines = vec![listing.lines().next().unwrap_or_default().to_string()];
    for line in listing.lines().skip(1) {
        let mut fields = line.split_whitespace();
        let (Some(own), Some(parent)) = (fields.next(), fields.next()) else {
            continue;
        };
        if family
            .iter()
            .any(|member| member == own || member == parent)
        {
            if !family.iter().any(|member| member == own) {
                family.push(own.to_string());
            }
            lines.push(line.to_string());
        }
    }
    lines.join("\n")
}
