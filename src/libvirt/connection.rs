//! Opening a libvirt connection without anything printed and without anything asked.

use crate::libvirt::error::LibvirtError;
use crate::model::hypervisor::{LibvirtUri, Transport};
use std::sync::Once;
use virt::connect::Connect;

static QUIET: Once = Once::new();

/// Opens a read-write connection. libvirt's own handler would print every error on stderr, so
/// it is silenced once; errors are reported through trog's messages instead. Over `qemu+ssh`,
/// `no_tty=1` makes ssh fail rather than ask for a password nobody may be there to type.
pub fn connect(uri: &LibvirtUri) -> Result<Connect, LibvirtError> {
    QUIET.call_once(virt::error::clear_error_callback);
    let address = connection_address(uri);
    Connect::open(Some(&address)).map_err(|error| LibvirtError::Connect {
        uri: uri.uri.clone(),
        message: error.message().to_string(),
    })
}

/// The URI libvirt is given: the configured one, with `no_tty=1` added for the ssh transport.
pub fn connection_address(uri: &LibvirtUri) -> String {
    let plain_ssh = uri
        .uri
        .split("://")
        .next()
        .is_some_and(|scheme| scheme.ends_with("+ssh"));
    if !matches!(uri.transport, Transport::Ssh { .. }) || !plain_ssh || uri.uri.contains("no_tty=")
    {
        return uri.uri.clone();
    }
    let separator = if uri.uri.contains('?') { '&' } else { '?' };
    format!("{}{separator}no_tty=1", uri.uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_never_asks_for_a_password() {
        let address = |uri: &str| connection_address(&LibvirtUri::parse(uri).unwrap());
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
}
