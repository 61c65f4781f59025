//! A hypervisor as `hypervisors.conf` describes it, in typed values with units.
//!
//! The parser of the file lives in `config::hypervisors_conf`; this is what it produces, and what
//! placement, the libvirt backend and preflight consume.

use crate::model::names::HypervisorName;
use crate::model::units::{Bytes, MiB};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// Memory kept back for the hypervisor's own system and qemu's per-guest overhead, which libvirt
/// does not count against any guest. 2 GiB keeps a small host out of swap with a dozen guests.
pub const DEFAULT_RESERVE_MEMORY: MiB = MiB(2048);
/// Pool space kept free for what grows outside trog's accounting: qcow2 overlays filling up,
/// snapshots, serial logs. 10 GiB is a few guests' worth of growth.
pub const DEFAULT_RESERVE_DISK: Bytes = Bytes(10 * 1024 * 1024 * 1024);
/// Virtual CPUs promised per physical CPU. Guests of small sites idle most of the time, so four
/// to one is the usual starting point; memory, by contrast, is never overcommitted.
pub const DEFAULT_CPU_OVERCOMMIT: f64 = 4.0;
/// The storage pool trog keeps images, disks and seeds in, and where it lives on the hypervisor
/// (the specification's `/vms`).
pub const DEFAULT_POOL_NAME: &str = "trog";
pub const DEFAULT_POOL_PATH: &str = "/vms";
/// The name of the implicit hypervisor when there is no fleet file: this machine.
pub const LOCAL_HYPERVISOR_NAME: &str = "localhost";
/// This machine's system libvirt, used when there is no fleet file.
pub const LOCAL_LIBVIRT_URI: &str = "qemu:///system";

/// The libvirt domain type guests are created with. Chosen per hypervisor, never detected alone:
/// a host may offer `kvm` that does not actually work (nested or software-paging KVM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DomainType {
    /// Hardware virtualisation; the default.
    Kvm,
    /// Software emulation (TCG): slow, but runs anywhere.
    Qemu,
}

impl DomainType {
    pub fn as_str(self) -> &'static str {
        match self {
            DomainType::Kvm => "kvm",
            DomainType::Qemu => "qemu",
        }
    }
}

/// How trog reaches a hypervisor, read from its libvirt URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Transport {
    /// This machine (`qemu:///system`, `qemu+unix://…`): commands run as local processes.
    Local,
    /// Another machine over SSH (`qemu+ssh`, `qemu+libssh`, `qemu+libssh2`): libvirt goes
    /// through the URI, every other command through one SSH connection to the same login.
    Ssh {
        user: Option<String>,
        host: String,
        port: Option<u16>,
    },
    /// libvirt's built-in test driver (`test:///…`): in-process, for dry runs and tests.
    Test,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    #[error("`{uri}` is not a libvirt URI")]
    Malformed { uri: String },
    #[error("`{uri}` uses the `{transport}` transport, which gives libvirt but no shell on the hypervisor")]
    NoShell { uri: String, transport: String },
    #[error("`{uri}` uses the transport `{transport}`, which trog does not know")]
    UnknownTransport { uri: String, transport: String },
    #[error("`{uri}` names no host to reach over SSH")]
    NoHost { uri: String },
    #[error("`{uri}` holds a space or a control character, which no URI does")]
    Blank { uri: String },
    #[error(
        "`{uri}` names the {part} `{value}`, which starts with `-`: ssh would read it as an option"
    )]
    LikeAnOption {
        uri: String,
        /// `login` or `host`.
        part: &'static str,
        value: String,
    },
}

/// A libvirt connection URI that trog accepts: local, over SSH, or the test driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LibvirtUri {
    pub uri: String,
    pub transport: Transport,
}

impl LibvirtUri {
    pub fn parse(uri: &str) -> Result<LibvirtUri, UriError> {
        let malformed = || UriError::Malformed {
            uri: uri.to_string(),
        };
        if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(UriError::Blank {
                uri: uri.to_string(),
            });
        }
        let (scheme, rest) = uri.split_once("://").ok_or_else(malformed)?;
        let (driver, transport_name) = match scheme.split_once('+') {
            Some((driver, transport)) => (driver, Some(transport)),
            None => (scheme, None),
        };
        if driver.is_empty() || !driver.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(malformed());
        }
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let transport = match (driver, transport_name) {
            ("test", None) => Transport::Test,
            (_, None) | (_, Some("unix")) if authority.is_empty() => Transport::Local,
            (_, Some("tcp" | "tls")) | (_, None) => {
                return Err(UriError::NoShell {
                    uri: uri.to_string(),
                    transport: transport_name.unwrap_or("tls").to_string(),
                })
            }
            (_, Some("ssh" | "libssh" | "libssh2")) => {
                let (user, host_port) = match authority.rsplit_once('@') {
                    Some((user, host_port)) => (Some(user.to_string()), host_port),
                    None => (None, authority),
                };
                let (host, port) = match host_port.rsplit_once(':') {
                    Some((host, port)) => {
                        (host, Some(port.parse::<u16>().map_err(|_| malformed())?))
                    }
                    None => (host_port, None),
                };
                if host.is_empty() {
                    return Err(UriError::NoHost {
                        uri: uri.to_string(),
                    });
                }
                // trog's own ssh takes the login as an argument: one that starts with `-` would
                // be an option (`-oProxyCommand=…`) rather than where to connect.
                for (part, value) in [("login", user.as_deref()), ("host", Some(host))] {
                    if let Some(value) = value.filter(|value| value.starts_with('-')) {
                        return Err(UriError::LikeAnOption {
                            uri: uri.to_string(),
                            part,
                            value: value.to_string(),
                        });
                    }
                }
                Transport::Ssh {
                    user,
                    host: host.to_string(),
                    port,
                }
            }
            (_, Some(other)) => {
                return Err(UriError::UnknownTransport {
                    uri: uri.to_string(),
                    transport: other.to_string(),
                })
            }
        };
        Ok(LibvirtUri {
            uri: uri.to_string(),
            transport,
        })
    }
}

impl LibvirtUri {
    /// The value of the query parameter `name` (`keyfile` in `qemu+ssh://hv1/system?keyfile=/k`),
    /// as libvirt reads it: `%XX` escapes decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        let (_, query) = self.uri.split_once('?')?;
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| percent_decode(value))
    }
}

/// A URI query value with its `%XX` escapes decoded; a `%` without two hex digits stays.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

impl fmt::Display for LibvirtUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.uri)
    }
}

/// One `[block]` of `hypervisors.conf`, with every default applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypervisorConfig {
    pub name: HypervisorName,
    pub libvirt_uri: LibvirtUri,
    pub reserve_memory: MiB,
    pub reserve_disk: Bytes,
    /// `None`: no limit on the number of guests.
    pub max_guests: Option<u32>,
    pub cpu_overcommit: f64,
    pub pool_name: String,
    pub pool_path: PathBuf,
    /// The cgroup partition (`/machine/NAME`) guests are started in, when one is set.
    pub partition: Option<String>,
    pub domain_type: DomainType,
}

impl HypervisorConfig {
    /// A hypervisor with every setting at its default, reached at `libvirt_uri`.
    pub fn with_defaults(name: HypervisorName, libvirt_uri: LibvirtUri) -> HypervisorConfig {
        HypervisorConfig {
            name,
            libvirt_uri,
            reserve_memory: DEFAULT_RESERVE_MEMORY,
            reserve_disk: DEFAULT_RESERVE_DISK,
            max_guests: None,
            cpu_overcommit: DEFAULT_CPU_OVERCOMMIT,
            pool_name: DEFAULT_POOL_NAME.to_string(),
            pool_path: PathBuf::from(DEFAULT_POOL_PATH),
            partition: None,
            domain_type: DomainType::Kvm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_decoded_as_libvirt_decodes_them() {
        let uri =
            LibvirtUri::parse("qemu+ssh://hv1/system?command=/opt/my%20ssh&k=100%&j=%2fa").unwrap();
        assert_eq!(uri.query_param("command").as_deref(), Some("/opt/my ssh"));
        assert_eq!(uri.query_param("k").as_deref(), Some("100%"));
        assert_eq!(uri.query_param("j").as_deref(), Some("/a"));
    }

    #[test]
    fn query_parameters_are_read_from_the_uri() {
        let uri = LibvirtUri::parse("qemu+ssh://a@hv1/system?keyfile=/k/id&no_tty=1").unwrap();
        assert_eq!(uri.query_param("keyfile").as_deref(), Some("/k/id"));
        assert_eq!(uri.query_param("no_tty").as_deref(), Some("1"));
        assert_eq!(uri.query_param("key"), None);
        assert_eq!(
            LibvirtUri::parse("qemu:///system")
                .unwrap()
                .query_param("keyfile"),
            None
        );
    }

    #[test]
    fn transports_are_read_from_the_uri() {
        assert_eq!(
            LibvirtUri::parse("qemu:///system").unwrap().transport,
            Transport::Local
        );
        assert_eq!(
            LibvirtUri::parse("test:///default").unwrap().transport,
            Transport::Test
        );
        assert_eq!(
            LibvirtUri::parse("qemu+ssh://root@hv1.example.test:2222/system?keyfile=/k")
                .unwrap()
                .transport,
            Transport::Ssh {
                user: Some("root".into()),
                host: "hv1.example.test".into(),
                port: Some(2222)
            }
        );
        assert!(matches!(
            LibvirtUri::parse("qemu+libssh2://hv2/system")
                .unwrap()
                .transport,
            Transport::Ssh { user: None, .. }
        ));
    }

    #[test]
    fn transports_without_a_shell_are_refused() {
        for uri in [
            "qemu+tcp://hv1/system",
            "qemu+tls://hv1/system",
            "qemu://hv1/system",
        ] {
            assert!(
                matches!(LibvirtUri::parse(uri), Err(UriError::NoShell { .. })),
                "{uri}"
            );
        }
        assert!(matches!(
            LibvirtUri::parse("qemu+ftp://hv1/system"),
            Err(UriError::UnknownTransport { .. })
        ));
        assert!(matches!(
            LibvirtUri::parse("hv1"),
            Err(UriError::Malformed { .. })
        ));
        assert!(matches!(
            LibvirtUri::parse("qemu+ssh:///system"),
            Err(UriError::NoHost { .. })
        ));
    }

    #[test]
    fn a_login_or_host_ssh_would_take_for_an_option_is_refused() {
        for (uri, part) in [
            ("qemu+ssh://-oProxyCommand=x/system", "host"),
            ("qemu+ssh://-oProxyCommand=x@hv1/system", "login"),
            ("qemu+libssh2://root@-p2222/system", "host"),
        ] {
            match LibvirtUri::parse(uri) {
                Err(UriError::LikeAnOption { part: found, .. }) => assert_eq!(found, part, "{uri}"),
                other => panic!("{uri}: {other:?}"),
            }
        }
        assert!(LibvirtUri::parse("qemu+ssh://ad-min@hv-1/system").is_ok());
    }

    #[test]
    fn a_space_or_control_character_is_refused() {
        for uri in [
            "qemu+ssh://ro ot@hv1/system",
            "test:///default ; comment",
            "qemu+ssh://hv1/system\tx",
            "qemu:///system\u{7f}",
        ] {
            assert!(
                matches!(LibvirtUri::parse(uri), Err(UriError::Blank { .. })),
                "{uri}"
            );
        }
    }
}
