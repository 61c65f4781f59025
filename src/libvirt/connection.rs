//! Opening a libvirt connection without anything printed and without anything asked.

use crate::libvirt::error::LibvirtError;
use crate::machine::ssh_masters::SharedMasters;
use crate::model::hypervisor::{LibvirtUri, Transport};
use std::path::{Path, PathBuf};
use std::sync::Once;
use virt::connect::Connect;

static QUIET: Once = Once::new();

/// Opens a read-write connection. libvirt's own handler would print every error on stderr, so
/// it is silenced once; errors are reported through trog's messages instead. Over `qemu+ssh`,
/// `no_tty=1` makes ssh fail rather than ask for a password nobody may be there to type, and the
/// transport rides the login's shared master connection where this user has a place for it.
pub fn connect(uri: &LibvirtUri) -> Result<Connect, LibvirtError> {
    QUIET.call_once(virt::error::clear_error_callback);
    let wrapper = shared_master_command(uri);
    let address = connection_address(uri, wrapper.as_deref());
    Connect::open(Some(&address)).map_err(|error| LibvirtError::Connect {
        uri: uri.uri.clone(),
        message: error.message().to_string(),
    })
}

/// Whether libvirt reaches `uri` by running the system's ssh (not libssh or libssh2).
fn plain_ssh(uri: &LibvirtUri) -> bool {
    matches!(uri.transport, Transport::Ssh { .. })
        && uri
            .uri
            .split("://")
            .next()
            .is_some_and(|scheme| scheme.ends_with("+ssh"))
}

/// The wrapper of ssh (or of the URI's own `command`) through the shared master; none for other
/// transports, or where this user has no private folder for masters (libvirt then opens a
/// connection of its own, as it always did).
fn shared_master_command(uri: &LibvirtUri) -> Option<PathBuf> {
    if !plain_ssh(uri) {
        return None;
    }
    let inner = uri
        .query_param("command")
        .unwrap_or_else(|| "ssh".to_string());
    SharedMasters::for_this_user()
        .ok()?
        .libvirt_ssh_command(&inner)
        .ok()
}

/// The URI libvirt is given: the configured one, for the ssh transport with `no_tty=1` added and,
/// given a `wrapper`, its `command` replaced by it.
pub fn connection_address(uri: &LibvirtUri, wrapper: Option<&Path>) -> String {
    if !plain_ssh(uri) {
        return uri.uri.clone();
    }
    let (base, query) = uri.uri.split_once('?').unwrap_or((&uri.uri, ""));
    let mut parameters: Vec<String> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| wrapper.is_none() || !pair.starts_with("command="))
        .map(str::to_string)
        .collect();
    if !parameters.iter().any(|pair| pair.starts_with("no_tty=")) {
        parameters.push("no_tty=1".into());
    }
    if let Some(wrapper) = wrapper {
        parameters.push(format!(
            "command={}",
            percent_encode(&wrapper.to_string_lossy())
        ));
    }
    format!("{base}?{}", parameters.join("&"))
}

/// A path as a URI query value: everything but letters, digits and `/._-~` escaped.
fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'-' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_never_asks_for_a_password() {
        let address = |uri: &str| connection_address(&LibvirtUri::parse(uri).unwrap(), None);
        assert_eq!(
            address("qemu+ssh://root@hv1/system"),
            "qemu+ssh://root@hv1/system?no_tty=1"
        );
        assert_eq!(
            address("qemu+ssh://hv1/system?keyfile=/k"),
            "qemu+ssh://hv1/system?keyfile=/k&no_tty=1"
        );
        assert_eq!(
            address("qemu+ssh://hv1/system?no_tty=0"),
            "qemu+ssh://hv1/system?no_tty=0"
        );
        assert_eq!(address("qemu:///system"), "qemu:///system");
        assert_eq!(
            address("qemu+libssh2://hv1/system"),
            "qemu+libssh2://hv1/system"
        );
    }

    #[test]
    fn the_shared_masters_wrapper_replaces_the_ssh_command() {
        let wrapper = Path::new("/home/a b/.cache/trog/ssh/libvirt-ssh-0a");
        let address =
            |uri: &str| connection_address(&LibvirtUri::parse(uri).unwrap(), Some(wrapper));
        assert_eq!(
            address("qemu+ssh://root@hv1/system"),
            "qemu+ssh://root@hv1/system?no_tty=1&command=/home/a%20b/.cache/trog/ssh/libvirt-ssh-0a"
        );
        assert_eq!(
            address("qemu+ssh://hv1:2222/system?command=/opt/myssh&keyfile=/k"),
            "qemu+ssh://hv1:2222/system?keyfile=/k&no_tty=1&command=/home/a%20b/.cache/trog/ssh/libvirt-ssh-0a"
        );
        assert_eq!(
            address("qemu+libssh://hv1/system"),
            "qemu+libssh://hv1/system"
        );
        assert_eq!(address("qemu:///system"), "qemu:///system");
    }

    #[test]
    fn the_wrapper_path_is_escaped_for_the_uri() {
        assert_eq!(percent_encode("/h/x y%z'"), "/h/x%20y%25z%27");
        let uri = LibvirtUri::parse(&format!(
            "qemu+ssh://hv1/system?command={}",
            percent_encode("/h/x y%z'")
        ))
        .unwrap();
        assert_eq!(uri.query_param("command").as_deref(), Some("/h/x y%z'"));
    }
}
