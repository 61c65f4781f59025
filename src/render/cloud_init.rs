//! The three files of the cloud-init NoCloud seed: `user-data`, `meta-data`, `network-config`.
//!
//! The seed does only what has to happen before trog can reach the guest — its name, its
//! network, the admin login with the guest's key, the packages the recipes need and where root's
//! mail goes. Everything else is the payload's Makefile, run over SSH afterwards, so a change to
//! a recipe's files does not force a new root disk. It also names the cloud-init modules that
//! do this work, and no others ([`modules`]): a first boot is seconds shorter without the rest.

use serde::Serialize;
use serde_json::{json, Map, Value};

mod modules;
mod network;
mod revision;

pub use revision::SeedRevision;

/// The guest's SSH host key, as the seed installs it (cloud-init's `ssh_keys`).
#[derive(Debug, Clone)]
pub struct SeedHostKey {
    pub private_key_openssh: crate::credentials::Secret,
    pub public_key_openssh: String,
}

/// Everything the seed is made from, already validated by the configuration layer.
#[derive(Debug, Clone, Serialize)]
pub struct SeedInput {
    /// The guest's fully qualified name; its first label is the hostname.
    pub fqdn: String,
    pub hostname: String,
    /// The login trog and the site's administrators use; it gets passwordless sudo.
    pub admin_user: String,
    /// Public keys allowed to log in as the admin user: the guest's own key (kept in the secret
    /// store) first, then any the installation adds.
    pub admin_authorized_keys: Vec<String>,
    /// Further users, as cloud-init `users` entries (the site's `users.yaml`).
    pub extra_users: Vec<Value>,
    /// Packages cloud-init installs on first boot: what finishing needs before the Makefile can
    /// run (`make`, `at`), then every recipe's.
    pub packages: Vec<String>,
    /// The root disk is made over a baked image that already holds every one of `packages`
    /// (`bake_packages`): cloud-init neither refreshes the indexes nor installs, since the
    /// finish does both again anyway, and under emulation that pass costs half a minute of a
    /// first boot with nothing left to do.
    pub packages_in_image: bool,
    /// Commands run once on first boot (cloud-init `runcmd`), in order.
    pub first_boot_commands: Vec<String>,
    /// Which rendering: [`SeedRevision::CURRENT`], or an earlier one, whose seeds make the
    /// same root disks.
    pub revision: SeedRevision,
    /// Where root's mail goes.
    pub contact_email: String,
    pub timezone: String,
    /// The package mirror, when the installation has one.
    pub apt_mirror: Option<String>,
    /// The security suite's mirror, when `apt_mirror` does not serve it.
    pub apt_security_mirror: Option<String>,
    /// Tried in order after `apt_mirror` when it fails a request; empty: `apt_mirror` alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apt_fallback_mirrors: Vec<String>,
    /// Tried in order after `apt_security_mirror` when it fails a request.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apt_fallback_security_mirrors: Vec<String>,
    /// The distribution, which names the mirror lists (`/etc/apt/mirrors/trog-debian.list`), as
    /// the distro recipe's Makefile names them.
    pub distro: String,
    /// The `sources.list` cloud-init writes from the mirrors (the distro recipe's
    /// `first_boot.apt_sources`, in cloud-init's template words); `None` keeps cloud-init's own
    /// template for the distro.
    pub apt_sources: Option<String>,
    /// The guest's interface MAC, so the network configuration matches the right device
    /// whatever the kernel names it.
    pub mac_address: String,
    /// Static addresses (`192.0.2.10/24`); empty means DHCP.
    pub addresses: Vec<String>,
    pub gateway: Option<String>,
    pub resolvers: Vec<String>,
    pub search_domains: Vec<String>,
    /// The host key trog made for the guest; `None` renders the seed trog made before it made
    /// host keys (the guest's image or cloud-init then makes one).
    #[serde(skip)]
    pub host_key: Option<SeedHostKey>,
}

impl SeedInput {
    /// Whether cloud-init installs `packages` on the first boot: they are not in the image.
    pub fn installs_packages(&self) -> bool {
        !self.packages.is_empty() && !self.packages_in_image
    }
}

/// The rendered seed files. `user_data` may hold the guest's private host key: its Debug leaves
/// the file out.
#[derive(Clone, PartialEq, Eq)]
pub struct SeedFiles {
    pub user_data: String,
    pub meta_data: String,
    pub network_config: String,
    /// The user-data as it is without the host key: what the seed's identity (its instance id,
    /// and the provision fingerprint) is taken from, so that a host key added to a guest built
    /// before trog made them is not a change of its boot inputs.
    pub user_data_without_host_key: String,
    /// Whether cloud-init installs packages on the first boot (in its final stage, which the
    /// finish must then wait for).
    pub installs_packages: bool,
}

impl std::fmt::Debug for SeedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedFiles")
            .field(
                "user_data",
                &format_args!("<{} bytes>", self.user_data.len()),
            )
            .field("meta_data", &self.meta_data)
            .field("network_config", &self.network_config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the cloud-init {file} as YAML")]
pub struct CloudInitError {
    pub file: &'static str,
    #[source]
    pub source: serde_saphyr::SerializeError,
}

impl crate::diagnose::Diagnose for CloudInitError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Failure
    }
}

fn to_yaml(file: &'static str, value: &Value) -> Result<String, CloudInitError> {
    // Long single-line values (SSH keys, URLs) stay on one line: folding them is valid YAML but
    // makes a key unreadable and easy to break by hand.
    let mut options = serde_saphyr::SerializerOptions::default();
    options.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(value, options)
        .map_err(|source| CloudInitError { file, source })
}

/// Renders all three files. The instance id is derived from the other two, so it changes
/// whenever the guest is rebuilt from a different seed, and cloud-init then runs again instead
/// of taking the disk for one it has already set up.
pub fn render_seed(input: &SeedInput) -> Result<SeedFiles, CloudInitError> {
    use sha2::{Digest, Sha256};
    let networkd = network::networkd_file(input);
    let document = user_data(input, networkd.as_ref());
    let user_data_without_host_key = format!("#cloud-config\n{}", to_yaml("user-data", &document)?);
    let user_data = match &input.host_key {
        None => user_data_without_host_key.clone(),
        Some(host_key) => format!(
            "#cloud-config\n{}",
            to_yaml("user-data", &with_host_key(document, host_key))?
        ),
    };
    let network_config = to_yaml("network-config", &network::network_config(input))?;
    let digest = hex::encode(Sha256::digest(format!(
        "{user_data_without_host_key}\0{network_config}"
    )));
    let instance_id = format!("trog-{}-{}", input.fqdn, &digest[..16]);
    // Local mode: the network stage's modules (the name, the users and their keys, the host keys,
    // the files) run in cloud-init's local stage, before the network is brought up. trog's networkd
    // file needs it (it must be there when systemd-networkd starts),
    // and every guest gains from it: the network stage, whose end sshd waits for, then only
    // checks its cache, and the user-data is read once instead of twice (bench/README.md:
    // sshd listening 1.6 s sooner with one emulated vCPU).
    let meta_data = json!({
        "instance-id": instance_id,
        "local-hostname": input.hostname,
        "dsmode": "local",
    });
    let meta_data = to_yaml("meta-data", &meta_data)?;
    Ok(SeedFiles {
        user_data,
        meta_data,
        network_config,
        user_data_without_host_key,
        installs_packages: input.installs_packages(),
    })
}

/// `document` with the guest's host key in it: the image's own host keys (every guest of one
/// image would share them) are deleted, trog's is written, and no other is made (cloud-init makes
/// only the listed types whose file is missing, and trog's Ed25519 file is there), so sshd answers
/// with the one key trog pins.
fn with_host_key(document: Value, host_key: &SeedHostKey) -> Value {
    let Value::Object(mut document) = document else {
        return document;
    };
    document.insert(
        "ssh_keys".into(),
        json!({
            "ed25519_private": host_key.private_key_openssh.expose(),
            "ed25519_public": host_key.public_key_openssh,
        }),
    );
    document.insert("ssh_deletekeys".into(), json!(true));
    document.insert("ssh_genkeytypes".into(), json!(["ed25519"]));
    // The module lists stay as they were: `ssh` runs on every trog seed.
    Value::Object(document)
}

/// The apt settings a guest installs its packages with: nothing a package only recommends, and
/// no translated package descriptions (each `apt-get update` would fetch and parse several
/// megabytes more, slow on an emulated guest, for the long descriptions only `apt show` prints).
const APT_CONF: &str = "APT::Install-Recommends \"false\";\nAcquire::Languages \"none\";\n";

/// Where the seed turns password logins off, in sshd's drop-in directory: read before
/// `/etc/ssh/sshd_config`'s own lines (sshd keeps the first value it reads), and before any
/// drop-in an image or cloud-init writes (`50-cloud-init.conf`, `60-cloudimg-settings.conf`).
pub const SSHD_DROP_IN_PATH: &str = "/etc/ssh/sshd_config.d/05-trog.conf";

/// A trog guest is logged into with keys only: no password, also not through PAM's
/// keyboard-interactive prompt. Written with the first-boot files, before sshd first starts:
/// cloud-init's `ssh_pwauth: false` edits sshd_config only in the config stage, after sshd has
/// listened for seconds with the image's setting, and then restarts it (under emulation about
/// 1.3 s of the guest's processor, beside trog's first login).
const SSHD_DROP_IN: &str = "# Written by trog: logins to this guest are by key only.\n\
                            PasswordAuthentication no\n\
                            KbdInteractiveAuthentication no\n";

/// Where a seed of [`SeedRevision::CommandsAfterCloudInit`] writes the first-boot commands, for
/// trog's wait to run once cloud-init's first boot is over (`guest::cloud_init`): in the guest's
/// state directory (`guest::finish::GUEST_STATE_DIR`), which only root may write.
pub const FIRST_BOOT_COMMANDS_PATH: &str = "/var/lib/trog/first-boot-commands";

/// The first-boot commands as the script cloud-init's `runcmd` would have made of them: one a
/// line, each run whatever the one before it returned, the script's status the last one's.
fn first_boot_commands_script(commands: &[String]) -> String {
    let mut script = String::from("#!/bin/sh\n");
    for command in commands {
        script.push_str(command);
        script.push('\n');
    }
    script
}

/// The user-data; `networkd` is trog's networkd file, when the guest has one.
fn user_data(input: &SeedInput, networkd: Option<&network::NetworkdFile>) -> Value {
    let mut users = vec![json!({
        "name": input.admin_user,
        "groups": ["sudo"],
        "shell": "/bin/bash",
        "sudo": "ALL=(ALL) NOPASSWD:ALL",
        "lock_passwd": true,
        "ssh_authorized_keys": input.admin_authorized_keys,
    })];
    users.extend(input.extra_users.iter().cloned());

    let mut document = Map::new();
    document.insert("hostname".into(), json!(input.hostname));
    document.insert("fqdn".into(), json!(input.fqdn));
    document.insert("prefer_fqdn_over_hostname".into(), json!(true));
    document.insert("manage_etc_hosts".into(), json!(true));
    document.insert("timezone".into(), json!(input.timezone));
    // Without this the default cloud user (`debian`, `ubuntu`) is created too: an account nobody
    // configured, which is an account nobody watches.
    document.insert("users".into(), Value::Array(users));
    document.insert("disable_root".into(), json!(true));
    let mut apt = Map::new();
    if let Some(mirror) = &input.apt_mirror {
        // The installation's mirrors serve the security suite too: a guest that has to reach
        // the internet for security updates has not got a mirror.
        let archive = |uri: &str| json!([{ "arches": ["default"], "uri": uri }]);
        let mut security = input
            .apt_security_mirror
            .clone()
            .unwrap_or_else(|| mirror.clone());
        let mut mirror = mirror.clone();
        // With fallbacks, apt reads the mirrors from a list and turns to the next one when one
        // fails a request; the lists are written by bootcmd, before apt is configured, and the
        // distro recipe's Makefile writes the same ones.
        let mut lists = Vec::new();
        if !input.apt_fallback_mirrors.is_empty() {
            let list = mirror_list_path(&input.distro, "");
            lists.push((
                list.clone(),
                mirror_list(&mirror, &input.apt_fallback_mirrors),
            ));
            if input.apt_security_mirror.is_none() {
                security = format!("mirror+file:{list}");
            }
            mirror = format!("mirror+file:{list}");
        }
        if let (Some(first), false) = (
            &input.apt_security_mirror,
            input.apt_fallback_security_mirrors.is_empty(),
        ) {
            let list = mirror_list_path(&input.distro, "-security");
            lists.push((
                list.clone(),
                mirror_list(first, &input.apt_fallback_security_mirrors),
            ));
            security = format!("mirror+file:{list}");
        }
        let (mirror, security) = (mirror.as_str(), security.as_str());
        // Debian's images set `preserve_sources_list: true` in their cloud.cfg, and user data
        // merges into it: without saying false here the image's sources (the distribution's own
        // servers) stay, and the mirror is never used.
        apt.insert("preserve_sources_list".into(), json!(false));
        apt.insert("primary".into(), archive(mirror));
        apt.insert("security".into(), archive(security));
        // The distro's sources, as the Makefile writes them: cloud-init's own Debian template
        // adds source packages and backports, megabytes of indexes the first boot would fetch
        // and parse for nothing.
        if let Some(sources) = &input.apt_sources {
            apt.insert("sources_list".into(), json!(sources));
        }
        // An image may also carry its sources as a deb822 file beside sources.list; removed
        // before cloud-init writes the mirror's list (bootcmd runs before apt is configured), so
        // the mirror is the only archive apt knows and an unreachable one is an error, never a
        // silent fetch from the internet.
        let mut bootcmd = vec![json!([
            "rm",
            "-f",
            "/etc/apt/sources.list.d/debian.sources",
            "/etc/apt/sources.list.d/ubuntu.sources"
        ])];
        for (path, text) in lists {
            // The list travels as an argument, never as shell text: a URL is data here.
            bootcmd.push(json!([
                "sh",
                "-c",
                "mkdir -p /etc/apt/mirrors && printf '%s' \"$2\" > \"$1\"",
                "sh",
                path,
                text
            ]));
        }
        document.insert("bootcmd".into(), Value::Array(bootcmd));
    }
    if !input.packages.is_empty() {
        // The seed's packages install as the Makefile's distro target installs them: without
        // what they only recommend. cloud-init's own `apt-get install` would take those too, and
        // the guest would hold packages no recipe named (an MTA beside mariadb-server, nftables
        // beside ufw), each one more to fetch and unpack, slow on an emulated guest. The settings
        // stay in the guest (/etc/apt/apt.conf.d/94cloud-init-config), so later installs agree.
        apt.insert("conf".into(), json!(APT_CONF));
    }
    if !apt.is_empty() {
        document.insert("apt".into(), Value::Object(apt));
    }
    if input.installs_packages() {
        document.insert("package_update".into(), json!(true));
        document.insert("packages".into(), json!(input.packages));
    }
    let mut commands_script = None;
    if !input.first_boot_commands.is_empty() {
        if input.revision.commands_after_cloud_init() {
            commands_script = Some(first_boot_commands_script(&input.first_boot_commands));
        } else {
            document.insert("runcmd".into(), json!(input.first_boot_commands));
        }
    }
    // Root's mail is read by whoever `contact_email` names; any MTA a recipe installs uses it.
    let mut files = vec![json!({
        "path": "/etc/aliases",
        "content": format!("root: {}\n", input.contact_email),
        "permissions": "0644",
        "owner": "root:root",
    })];
    files.push(json!({
        "path": SSHD_DROP_IN_PATH,
        "content": SSHD_DROP_IN,
        "permissions": "0644",
        "owner": "root:root",
    }));
    if let Some(networkd) = networkd {
        files.push(json!({
            "path": networkd.path,
            "content": networkd.content,
            "permissions": "0644",
            "owner": "root:root",
        }));
    }
    if let Some(script) = commands_script {
        files.push(json!({
            "path": FIRST_BOOT_COMMANDS_PATH,
            "content": script,
            "permissions": "0700",
            "owner": "root:root",
        }));
    }
    document.insert("write_files".into(), Value::Array(files));
    modules::add_module_lists(&mut document, input.revision.config_modules());
    Value::Object(document)
}

/// Where a guest's mirror list for `mirror+file:` is: `suffix` is "" for the distribution's
/// suites, "-security" for the security suite's own list.
fn mirror_list_path(distro: &str, suffix: &str) -> String {
    format!("/etc/apt/mirrors/trog-{distro}{suffix}.list")
}

/// A `mirror+file:` list: one mirror a line, each with its place in the order apt tries them.
/// Without a `priority`, apt asks the mirrors of a list in an order of its own choosing (fixed
/// per machine), so a guest could go to the archive first and to the hub's cache only when the
/// archive fails; the lowest priority is asked first.
fn mirror_list(first: &str, fallbacks: &[String]) -> String {
    std::iter::once(first)
        .chain(fallbacks.iter().map(String::as_str))
        .zip(1..)
        .map(|(mirror, place)| format!("{mirror}\tpriority:{place}\n"))
        .collect()
}

/// A static guest's seed input, for tests here and in the layers above.
#[cfg(test)]
pub(crate) fn example_seed_input() -> SeedInput {
    SeedInput {
        fqdn: "www.example.test".into(),
        hostname: "www".into(),
        admin_user: "someadmin".into(),
        admin_authorized_keys: vec![
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample trog@www.example.test".into(),
        ],
        extra_users: vec![json!({"name": "alice", "groups": ["www-data"]})],
        packages: vec!["make".into(), "at".into()],
        packages_in_image: false,
        first_boot_commands: vec!["systemctl enable --now atd".into()],
        revision: SeedRevision::CURRENT,
        contact_email: "ops@example.test".into(),
        timezone: "Etc/UTC".into(),
        apt_mirror: Some("http://mirror.example.test/debian".into()),
        apt_security_mirror: None,
        apt_fallback_mirrors: Vec::new(),
        apt_fallback_security_mirrors: Vec::new(),
        distro: "debian".into(),
        apt_sources: Some(
            "deb $PRIMARY $RELEASE main\ndeb $SECURITY $RELEASE-security main\n".into(),
        ),
        mac_address: "52:54:00:12:34:56".into(),
        addresses: vec!["192.0.2.10/24".into()],
        gateway: Some("192.0.2.1".into()),
        resolvers: vec!["192.0.2.1".into()],
        search_domains: vec!["example.test".into()],
        host_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> SeedInput {
        example_seed_input()
    }

    fn host_key() -> SeedHostKey {
        SeedHostKey {
            private_key_openssh: crate::credentials::Secret::new(
                "-----BEGIN OPENSSH PRIVATE KEY-----\nexample\n-----END OPENSSH PRIVATE KEY-----\n",
            ),
            public_key_openssh: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyExample".into(),
        }
    }

    #[test]
    fn the_host_key_is_installed_alone_and_leaves_the_seeds_identity_as_it_was() {
        let without = render_seed(&example()).unwrap();
        let mut input = example();
        input.host_key = Some(host_key());
        let with = render_seed(&input).unwrap();
        let user_data: Value = serde_saphyr::from_str(&with.user_data).unwrap();
        assert_eq!(
            user_data["ssh_keys"]["ed25519_public"],
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyExample"
        );
        assert!(user_data["ssh_keys"]["ed25519_private"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
        assert_eq!(user_data["ssh_deletekeys"], true);
        assert_eq!(user_data["ssh_genkeytypes"], json!(["ed25519"]));
        assert!(user_data["cloud_init_modules"]
            .as_array()
            .unwrap()
            .contains(&json!("ssh")));
        // The same instance id and identity as the seed without it.
        assert_eq!(with.meta_data, without.meta_data);
        assert_eq!(with.user_data_without_host_key, without.user_data);
        assert_eq!(without.user_data_without_host_key, without.user_data);
        assert!(!format!("{with:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn static_guest_seed() {
        let files = render_seed(&example()).unwrap();
        insta::assert_snapshot!("static_user_data", files.user_data);
        insta::assert_snapshot!("static_meta_data", files.meta_data);
        insta::assert_snapshot!("static_network_config", files.network_config);
    }

    #[test]
    fn a_separate_security_mirror_serves_only_the_security_suite() {
        let mut input = example();
        input.apt_security_mirror = Some("http://mirror.example.test/debian-security".into());
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert_eq!(
            user_data["apt"]["primary"][0]["uri"],
            "http://mirror.example.test/debian"
        );
        assert_eq!(
            user_data["apt"]["security"][0]["uri"],
            "http://mirror.example.test/debian-security"
        );
    }

    #[test]
    fn fallback_mirrors_make_apt_read_a_list_that_bootcmd_writes_first() {
        let mut input = example();
        input.apt_security_mirror = Some("http://hub.example.test/debian-security".into());
        input.apt_fallback_mirrors = vec!["http://deb.debian.org/debian".into()];
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert_eq!(
            user_data["apt"]["primary"][0]["uri"],
            "mirror+file:/etc/apt/mirrors/trog-debian.list"
        );
        // The security suite keeps its own mirror, which has no fallbacks.
        assert_eq!(
            user_data["apt"]["security"][0]["uri"],
            "http://hub.example.test/debian-security"
        );
        let bootcmd = user_data["bootcmd"].as_array().unwrap();
        assert_eq!(bootcmd.len(), 2, "{bootcmd:?}");
        assert_eq!(bootcmd[1][4], "/etc/apt/mirrors/trog-debian.list");
        // The installation's mirror first, then its fallbacks in the order they are written.
        assert_eq!(
            bootcmd[1][5],
            "http://mirror.example.test/debian\tpriority:1\nhttp://deb.debian.org/debian\tpriority:2\n"
        );
        // What bootcmd runs writes exactly that list.
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("trog-debian.list");
        let script = bootcmd[1][2]
            .as_str()
            .unwrap()
            .replace("/etc/apt/mirrors", dir.path().to_str().unwrap());
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                &script,
                "sh",
                list.to_str().unwrap(),
                bootcmd[1][5].as_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            std::fs::read_to_string(&list).unwrap(),
            "http://mirror.example.test/debian\tpriority:1\nhttp://deb.debian.org/debian\tpriority:2\n"
        );

        input.apt_fallback_security_mirrors = vec!["http://deb.debian.org/debian-security".into()];
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert_eq!(
            user_data["apt"]["security"][0]["uri"],
            "mirror+file:/etc/apt/mirrors/trog-debian-security.list"
        );
        let bootcmd = user_data["bootcmd"].as_array().unwrap();
        assert_eq!(bootcmd.len(), 3);
        assert_eq!(bootcmd[2][4], "/etc/apt/mirrors/trog-debian-security.list");
        assert_eq!(
            bootcmd[2][5],
            "http://hub.example.test/debian-security\tpriority:1\nhttp://deb.debian.org/debian-security\tpriority:2\n"
        );
    }

    #[test]
    fn without_fallbacks_the_seed_is_what_it_was() {
        let input = example();
        let before = render_seed(&input).unwrap();
        let user_data: Value = serde_saphyr::from_str(&before.user_data).unwrap();
        assert_eq!(
            user_data["apt"]["primary"][0]["uri"],
            "http://mirror.example.test/debian"
        );
        assert_eq!(user_data["bootcmd"].as_array().unwrap().len(), 1);
        assert!(!before.user_data.contains("mirror+file"));
    }

    #[test]
    fn packages_install_without_recommends_with_or_without_a_mirror() {
        let mut input = example();
        for mirror in [true, false] {
            if !mirror {
                input.apt_mirror = None;
            }
            let user_data: Value =
                serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
            assert_eq!(
                user_data["apt"]["conf"],
                "APT::Install-Recommends \"false\";\nAcquire::Languages \"none\";\n"
            );
            assert_eq!(user_data["apt"]["primary"].is_null(), !mirror);
        }
    }

    #[test]
    fn a_root_disk_over_a_baked_image_installs_nothing_on_first_boot_and_keeps_apts_settings() {
        let mut input = example();
        input.packages_in_image = true;
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert!(user_data.get("packages").is_none(), "{user_data}");
        assert!(user_data.get("package_update").is_none(), "{user_data}");
        // Later installs (the finish's, a person's) still leave out what is only recommended.
        assert_eq!(
            user_data["apt"]["conf"],
            "APT::Install-Recommends \"false\";\nAcquire::Languages \"none\";\n"
        );
        // Nor does cloud-init run the module that would only refresh the indexes.
        let finals = user_data["cloud_final_modules"].to_string();
        assert!(!finals.contains("package"), "{finals}");

        input.packages_in_image = false;
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert_eq!(user_data["packages"], json!(["make", "at"]));
        assert_eq!(user_data["package_update"], json!(true));
    }

    /// The seed's file at `path`, and the whole user-data, of `input`.
    fn written(input: &SeedInput, path: &str) -> (Option<Value>, Value) {
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(input).unwrap().user_data).unwrap();
        let file = user_data["write_files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|file| file["path"] == path)
            .cloned();
        (file, user_data)
    }

    #[test]
    fn the_first_boot_commands_are_a_root_script_for_after_cloud_init_and_no_runcmd() {
        for packages_in_image in [false, true] {
            let mut input = example();
            input.packages_in_image = packages_in_image;
            input.first_boot_commands = vec!["systemctl start atd".into(), "echo 'a b'".into()];
            let (file, user_data) = written(&input, FIRST_BOOT_COMMANDS_PATH);
            let file = file.expect("the commands' script");
            assert_eq!(
                file["content"],
                "#!/bin/sh\nsystemctl start atd\necho 'a b'\n"
            );
            assert_eq!(file["permissions"], "0700");
            assert_eq!(file["owner"], "root:root");
            assert!(user_data.get("runcmd").is_none(), "{user_data}");
            let modules = [
                &user_data["cloud_init_modules"],
                &user_data["cloud_config_modules"],
                &user_data["cloud_final_modules"],
            ]
            .map(ToString::to_string)
            .join(" ");
            assert!(!modules.contains("runcmd") && !modules.contains("scripts_user"));
            // Whether cloud-init's final stage installs anything: the first boot then waits for
            // it.
            assert_eq!(
                render_seed(&input).unwrap().installs_packages,
                !packages_in_image
            );

            // Earlier revisions, which a guest's root disk may have been made with, had runcmd.
            input.revision = SeedRevision::OneSetupStage;
            let (file, user_data) = written(&input, FIRST_BOOT_COMMANDS_PATH);
            assert!(file.is_none());
            assert_eq!(
                user_data["runcmd"],
                json!(["systemctl start atd", "echo 'a b'"])
            );
        }
        let mut none = example();
        none.first_boot_commands.clear();
        assert!(written(&none, FIRST_BOOT_COMMANDS_PATH).0.is_none());
    }

    #[test]
    fn the_distros_sources_replace_cloud_inits_only_with_a_mirror() {
        let mut input = example();
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert_eq!(
            user_data["apt"]["sources_list"],
            "deb $PRIMARY $RELEASE main\ndeb $SECURITY $RELEASE-security main\n"
        );
        input.apt_mirror = None;
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&input).unwrap().user_data).unwrap();
        assert!(user_data["apt"]["sources_list"].is_null());
        assert!(user_data["apt"]["preserve_sources_list"].is_null());
    }

    #[test]
    fn every_guest_is_seeded_in_local_mode_with_its_networkd_file() {
        let seeded = |input: &SeedInput| {
            let files = render_seed(input).unwrap();
            let meta_data: Value = serde_saphyr::from_str(&files.meta_data).unwrap();
            let user_data: Value = serde_saphyr::from_str(&files.user_data).unwrap();
            let paths: Vec<String> = user_data["write_files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|file| file["path"].as_str().unwrap().to_string())
                .collect();
            (
                meta_data["dsmode"].as_str().map(str::to_string),
                paths,
                user_data,
            )
        };
        let (dsmode, paths, user_data) = seeded(&example());
        assert_eq!(dsmode.as_deref(), Some("local"));
        assert_eq!(
            paths,
            [
                "/etc/aliases",
                SSHD_DROP_IN_PATH,
                network::NETWORKD_STATIC_FILE_PATH,
                FIRST_BOOT_COMMANDS_PATH
            ]
        );
        // Written in the stage local mode runs before the network starts.
        assert!(user_data["cloud_init_modules"]
            .as_array()
            .unwrap()
            .contains(&json!("write_files")));
        let mut dhcp = example();
        dhcp.addresses.clear();
        let (dsmode, paths, _) = seeded(&dhcp);
        assert_eq!(dsmode.as_deref(), Some("local"));
        assert_eq!(
            paths,
            [
                "/etc/aliases",
                SSHD_DROP_IN_PATH,
                network::NETWORKD_LEASE_FILE_PATH,
                FIRST_BOOT_COMMANDS_PATH
            ]
        );
    }

    #[test]
    fn password_logins_are_off_before_sshd_first_starts() {
        let user_data: Value =
            serde_saphyr::from_str(&render_seed(&example()).unwrap().user_data).unwrap();
        let drop_in = user_data["write_files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|file| file["path"] == SSHD_DROP_IN_PATH)
            .expect("the seed writes sshd's drop-in");
        let lines: Vec<&str> = drop_in["content"].as_str().unwrap().lines().collect();
        assert!(lines.contains(&"PasswordAuthentication no"));
        assert!(lines.contains(&"KbdInteractiveAuthentication no"));
        // Among the files written before sshd starts, and nothing left for cloud-init's
        // set_passwords, which would restart sshd during the first login.
        let before_sshd = user_data["cloud_init_modules"].as_array().unwrap();
        assert!(before_sshd.contains(&json!("write_files")));
        assert!(user_data["ssh_pwauth"].is_null());
        for stage in [
            "cloud_init_modules",
            "cloud_config_modules",
            "cloud_final_modules",
        ] {
            assert!(!user_data[stage]
                .as_array()
                .unwrap()
                .contains(&json!("set_passwords")));
        }
    }

    #[test]
    fn dhcp_guest_has_no_addresses_and_no_mirror() {
        let mut input = example();
        input.addresses.clear();
        input.gateway = None;
        input.resolvers.clear();
        input.search_domains.clear();
        input.apt_mirror = None;
        input.packages.clear();
        let files = render_seed(&input).unwrap();
        assert!(
            files.network_config.contains("dhcp4: true"),
            "{}",
            files.network_config
        );
        assert!(!files.network_config.contains("addresses"));
        assert!(!files.user_data.contains("apt:"));
        assert!(!files.user_data.contains("packages"));
    }

    #[test]
    fn every_key_of_the_seed_is_read_by_a_module_it_runs() {
        let mut bare = example();
        bare.apt_mirror = None;
        bare.packages.clear();
        bare.first_boot_commands.clear();
        bare.extra_users.clear();
        for input in [example(), bare] {
            let Value::Object(document) =
                user_data(&input, network::networkd_file(&input).as_ref())
            else {
                panic!("user data is a mapping")
            };
            assert_eq!(modules::unread_keys(&document), Vec::<String>::new());
        }
    }

    #[test]
    fn the_instance_id_follows_the_seed() {
        let first = render_seed(&example()).unwrap();
        assert_eq!(first.meta_data, render_seed(&example()).unwrap().meta_data);
        let mut changed = example();
        changed.admin_user = "other".into();
        assert_ne!(first.meta_data, render_seed(&changed).unwrap().meta_data);
    }
}
