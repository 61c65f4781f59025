//! `trog new_config` as a person or a script runs it: the built binary against temporary copies of
//! the repository's example installation, credentials on standard input, never a terminal. What it
//! writes is checked by snapshots and by the programs that will read it (cloud-init, xorriso,
//! isoinfo, keepassxc-cli).

#[path = "../support/local_services.rs"]
mod local_services;
#[path = "../support/root_warning.rs"]
mod root_warning;

mod apt_packages;
mod generation;
mod harness;
mod mirror_fallback;
mod network;
mod refusals;
mod secrets;

/// A guest with static addresses, a mirror and a site `users.yaml`.
pub const STATIC_GUEST: &str = "static.example.test";
pub const STATIC_GUEST_YAML: &str = "\
static.example.test:
  _global:
    memory: 1024
    cpus: 1
    size: 4G
    ips: [192.0.2.10/24]
    gateway: 192.0.2.1
    resolvers: [192.0.2.53, 192.0.2.54]
    mirror: http://mirror.example.test/debian
  nginx: {}
";
pub const STATIC_GUEST_USERS: &str = "\
- name: alice
  gecos: Alice Example
  groups: [adm]
  shell: /bin/bash
  ssh_authorized_keys:
    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ6zTxnhJ2RK0nFQ0fQ0ygGz4mD1kHxWbF7o9kC8sE5f alice@example.test
";

/// An installation with the example guest and the static guest, their keys fixed.
pub fn installation_with_both_guests() -> harness::Installation {
    let installation = harness::Installation::example();
    installation.write_guest(STATIC_GUEST, STATIC_GUEST_YAML);
    installation.write_site_file(STATIC_GUEST, "users.yaml", STATIC_GUEST_USERS);
    installation.store_with_fixed_keys(&["example.test", STATIC_GUEST]);
    installation
}
