//! The guest answers with the host key trog made for it and no other; when something else
//! answers at its address (here: the same guest with its host key replaced), `provision` and
//! `backup` refuse it with their own exit status before any login, and the payload does not
//! cross; `provision --adopt-host-key` takes that key once, on purpose, and finishes the guest.

use super::support::*;
use super::{on_guest, Installation};
use trog::secrets::{stored_keypair, SecretStore};

/// What `status` 12 means: something answered that is not the guest.
const UNTRUSTED_GUEST: i32 = 12;
/// Where the guest's own key is kept while another stands in for it.
const SAVED: &str = "/root/trog-host-key";
const SECOND_MARK: &str = "/srv/site-made-again.txt";

pub fn stored_host_keys(installation: &Installation) -> (String, Option<String>) {
    let store = SecretStore::open(
        &installation.dir.path().join("secrets.kdbx"),
        &trog::credentials::Secret::new(PASSPHRASE),
    )
    .unwrap();
    let keypair = stored_keypair(&store, &installation.domain)
        .unwrap()
        .unwrap();
    (
        keypair.host_key().public_key_openssh.clone(),
        keypair.adopted_host_key().map(str::to_string),
    )
}

fn key_of(public_key_file: &str) -> String {
    public_key_file
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// How many logins the guest's sshd accepted so far.
fn accepted_logins(installation: &Installation, address: &str) -> usize {
    on_guest(
        installation,
        address,
        "sudo journalctl -u ssh --no-pager -o cat | grep -c '^Accepted publickey' || true",
    )
    .trim()
    .parse()
    .unwrap()
}

/// A new site archive, so the next provision has a payload to send.
fn change_the_payload(installation: &Installation) {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        site.path().join("Makefile"),
        format!(
            "all:\n\techo \"made by the site's Makefile\" > /srv/site-made.txt\n\ttouch {SECOND_MARK}\n"
        ),
    )
    .unwrap();
    let archive = installation
        .dir
        .path()
        .join("recipes.d")
        .join(installation.domain.as_str())
        .join("data.tar.gz");
    let made = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(site.path())
        .arg("Makefile")
        .status()
        .unwrap();
    assert!(made.success());
}

pub fn only_the_guests_own_host_key_is_trusted(installation: &Installation, address: &str) {
    let config = installation.dir.path();
    let domain = installation.domain.as_str();
    let (made_by_trog, adopted) = stored_host_keys(installation);
    assert_eq!(adopted, None);
    assert_eq!(
        key_of(&on_guest(
            installation,
            address,
            "sudo cat /etc/ssh/ssh_host_ed25519_key.pub"
        )),
        made_by_trog,
        "the guest answers with the key trog made"
    );
    assert_eq!(
        on_guest(
            installation,
            address,
            "ls /etc/ssh | grep -c '^ssh_host_.*_key$'"
        )
        .trim(),
        "1",
        "no other host key was made"
    );

    // Another key answers at the guest's address.
    on_guest(
        installation,
        address,
        &format!(
            "sudo mkdir -p {SAVED} && sudo cp -p /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub {SAVED}/ \
             && sudo rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub \
             && sudo ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && sudo systemctl restart ssh"
        ),
    );
    let impostor = key_of(&on_guest(
        installation,
        address,
        "sudo cat /etc/ssh/ssh_host_ed25519_key.pub",
    ));
    assert_ne!(impostor, made_by_trog);
    change_the_payload(installation);
    let logins_before = accepted_logins(installation, address);

    let provision = run_verb("provision", config, &[domain]);
    let said = format!("{}\n{}", text(&provision.stdout), text(&provision.stderr));
    assert_eq!(provision.status.code(), Some(UNTRUSTED_GUEST), "{said}");
    assert!(
        said.contains(&format!(
            "answered for {domain} with a host key that is not the guest's"
        )) && said.contains(&format!("trog provision --adopt-host-key {domain}")),
        "{said}"
    );
    let backup = run_verb("backup", config, &[domain]);
    let said = format!("{}\n{}", text(&backup.stdout), text(&backup.stderr));
    assert_eq!(backup.status.code(), Some(UNTRUSTED_GUEST), "{said}");
    assert!(
        said.contains("with a host key that is not the guest's"),
        "{said}"
    );
    // Neither run logged in (the one login counted is the count's own), so no payload crossed.
    assert_eq!(
        accepted_logins(installation, address),
        logins_before + 1,
        "a refused run logged in"
    );
    assert_eq!(
        on_guest(
            installation,
            address,
            &format!("test -e {SECOND_MARK} && echo there || echo absent")
        )
        .trim(),
        "absent"
    );

    // Taken on purpose, once: the run says so, keeps the key and finishes the guest.
    let adopting = run_verb("provision", config, &["--adopt-host-key", domain]);
    let said = format!("{}\n{}", text(&adopting.stdout), text(&adopting.stderr));
    assert!(adopting.status.success(), "{said}");
    assert!(said.contains("adopted the host key"), "{said}");
    assert_eq!(
        stored_host_keys(installation),
        (made_by_trog.clone(), Some(impostor))
    );
    assert_eq!(
        on_guest(
            installation,
            address,
            &format!("test -e {SECOND_MARK} && echo there || echo absent")
        )
        .trim(),
        "there"
    );

    // The guest's own key back: trog's key is accepted as before.
    on_guest(
        installation,
        address,
        &format!(
            "sudo cp -p {SAVED}/ssh_host_ed25519_key {SAVED}/ssh_host_ed25519_key.pub /etc/ssh/ \
             && sudo rm -rf {SAVED} && sudo systemctl restart ssh"
        ),
    );
    let converged = run_verb("provision", config, &[domain]);
    assert!(converged.status.success(), "{}", text(&converged.stderr));
    assert!(
        text(&converged.stdout).contains(&format!("{domain}: converged, nothing to do")),
        "{}",
        text(&converged.stdout)
    );
}
