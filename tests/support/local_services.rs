//! What the test binaries share about this machine's test services (tests/services): the caching
//! apt proxy on the libvirt bridge, and a hypervisors.conf naming this machine's libvirtd.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The mirror URL of the caching apt proxy the test services run on the bridge, which fetches
/// from Debian (tests/services/apt-proxy.sh); started again when it is not answering (its `start`
/// keeps an instance that answers).
pub fn apt_proxy_url() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/apt-proxy.sh");
    let output = Command::new(&script).arg("start").output().unwrap();
    assert!(
        output.status.success(),
        "the caching apt proxy does not answer and cannot be started ({} start):\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The caching apt proxy itself (`http://HOST:PORT`) of a mirror URL through it, as an
/// aptmirror's `upstream` names it.
pub fn apt_proxy_origin(mirror_url: &str) -> String {
    mirror_url.split('/').take(3).collect::<Vec<_>>().join("/")
}

/// A hypervisors.conf of one hypervisor, `local`: this machine's libvirtd under software
/// emulation (KVM does not work here), its pool `pool` at `pool_path`. Other work on the
/// libvirtd may hold many defined guests: overcommitting CPUs keeps a test's guests placeable.
pub fn local_hypervisors_conf(pool: &str, pool_path: &Path) -> String {
    hypervisors_conf("local", "qemu:///system", pool, pool_path)
}

/// A hypervisors.conf of one hypervisor, `name`, reached at `uri`: the same machine as
/// [`local_hypervisors_conf`]'s, however it is reached (over SSH, say).
pub fn hypervisors_conf(name: &str, uri: &str, pool: &str, pool_path: &Path) -> String {
    format!(
        "[{name}]\nlibvirt_uri = {uri}\ndomain_type = qemu\npool_name = {pool}\npool_path = {}\nreserve_memory = 512\nreserve_disk = 1G\ncpu_overcommit = 100\n",
        pool_path.display()
    )
}
