//! The verbs of the whole site through the real binary, on an installation whose fleet is one
//! libvirt test-driver node and whose secret store holds two guests' keys: `inventory`
//! (`inventory.rs`) and `status --all` (`status_all.rs`).

#[path = "../support/root_warning.rs"]
mod root_warning;

mod inventory;
mod provision_all;
mod status_all;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use trog::credentials::Secret;
use trog::model::names::DomainName;
use trog::secrets::{guest_keypair, GuestKeypair, SecretStore, StoreKdf};

pub const PASSPHRASE: &str = "inventory passphrase";
/// The installation's identity, in its `installation-id`: what its guests' tags name.
pub const THIS_INSTALLATION: &str = "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10";
/// Another installation sharing the hypervisor.
pub const OTHER_INSTALLATION: &str = "7f3c9e2a-1d4b-4c8e-a5f6-0e9d8c7b6a59";

/// Who made a domain of the test node, as its metadata says.
#[derive(Clone, Copy)]
pub enum Made {
    /// No trog tag.
    NotTrog,
    /// trog's tag naming no installation: written before tags named theirs.
    Unrecorded,
    /// trog's tag naming this installation.
    Here,
    /// trog's tag naming another installation.
    Elsewhere,
}

/// Guests of recipes.d: `www` (a static address, on hv1), `db` (tenant `blue`, address from
/// ips.db's records is not needed: a static one too), `foreign` (a same-named domain on hv1 that
/// trog did not make), `new` (never built: no key, no domain).
const GUESTS: [(&str, &str); 4] = [
    (
        "www.site.test",
        "    ips: [192.0.2.10/24]\n    gateway: 192.0.2.1\n",
    ),
    (
        "db.site.test",
        "    ips: [192.0.2.11/24]\n    gateway: 192.0.2.1\n    tenant: blue\n",
    ),
    (
        "foreign.site.test",
        "    ips: [192.0.2.12/24]\n    gateway: 192.0.2.1\n",
    ),
    ("new.site.test", ""),
];

pub struct Site {
    pub root: tempfile::TempDir,
    pub www: GuestKeypair,
    pub db: GuestKeypair,
}

impl Site {
    pub fn with_two_built_guests() -> Site {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
        std::fs::write(
            root.path().join("node.xml"),
            node(&[
                ("www.site.test", Made::Here),
                ("db.site.test", Made::Here),
                ("foreign.site.test", Made::NotTrog),
            ]),
        )
        .unwrap();
        std::fs::write(
            etc.join("hypervisors.conf"),
            format!(
                "[hv1]\nlibvirt_uri = test://{}/node.xml\n",
                root.path().display()
            ),
        )
        .unwrap();
        std::fs::write(
            etc.join("installation-id"),
            format!("{THIS_INSTALLATION}\n"),
        )
        .unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
            etc.join("recipes.yaml"),
        )
        .unwrap();
        for (guest, global) in GUESTS {
            std::fs::write(
                etc.join(format!("recipes.d/{guest}.yaml")),
                format!("{guest}:\n  _global:\n    cpus: 1\n{global}  nginx: {{}}\n"),
            )
            .unwrap();
        }
        let kdf = StoreKdf {
            memory_mib: 1,
            iterations: 1,
            parallelism: 1,
        };
        let mut store =
            SecretStore::create(&etc.join("secrets.kdbx"), &Secret::new(PASSPHRASE), kdf).unwrap();
        let mut keypair = |name: &str| {
            guest_keypair(
                &mut store,
                &DomainName::parse(name).unwrap(),
                &mut rand::rngs::OsRng,
            )
            .unwrap()
        };
        let (www, db) = (keypair("www.site.test"), keypair("db.site.test"));
        Site { root, www, db }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// `trog --credentials ARGS…`, the passphrase handed in.
    pub fn trog(&self, args: &[&str]) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_trog"))
            .arg("--credentials")
            .args(args)
            .env("TROG_PROVISIONER_CONFIG", self.root.path().join("etc"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A run refused before it reads its credentials (an argument out of bounds) has closed
        // its standard input already: that is its answer, not the test's failure.
        let written = child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("keepass: {PASSPHRASE}\n\n").as_bytes());
        if let Err(error) = written {
            assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
        }
        crate::root_warning::output_without_root_warning(child.wait_with_output().unwrap())
    }

    /// `trog inventory ARGS…`, which must succeed; its standard output.
    pub fn inventory(&self, args: &[&str]) -> String {
        let mut all = vec!["inventory"];
        all.extend_from_slice(args);
        let output = self.trog(&all);
        assert!(output.status.success(), "{}", said(&output));
        String::from_utf8(output.stdout).unwrap()
    }
}

/// A test-driver node holding `domains` (name, who made it).
pub fn node(domains: &[(&str, Made)]) -> String {
    let mut xml = String::from(
        "<node>\n  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>\
         <active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>\n  <memory>16777216</memory>\n",
    );
    for (name, made) in domains {
        let installation = match made {
            Made::Here => format!(" installation='{THIS_INSTALLATION}'"),
            Made::Elsewhere => format!(" installation='{OTHER_INSTALLATION}'"),
            Made::NotTrog | Made::Unrecorded => String::new(),
        };
        let metadata = match made {
            Made::NotTrog => String::new(),
            _ => format!(
                "<metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='{name}' \
                 boot='b' shape='s' payload=''{installation}/></metadata>"
            ),
        };
        xml.push_str(&format!(
            "  <domain type='test'><name>{name}</name><memory>524288</memory><vcpu>1</vcpu>\
             <os><type>hvm</type></os>{metadata}</domain>\n"
        ));
    }
    xml.push_str("</node>\n");
    xml
}

pub fn said(output: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
