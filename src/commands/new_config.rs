//! `new_config DOMAIN [--out DIR]`: generate everything a guest needs into a directory, without
//! touching any hypervisor: the cloud-init seed (its three files and the ISO), the rendered
//! files, the Makefile, and the payload archive with its digest.
//!
//! The guest's private key is never written here: it stays in the secret store.

use crate::addresses::settle::AddressPolicy;
use crate::cli::GlobalArgs;
use crate::credentials::CredentialSource;
use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use crate::output::events::{emit, Event, GeneratedImage, GeneratedSummary};
use crate::workflow::inputs::{load_guest_inputs, StoreUse};
use crate::workflow::store_guard::new_store_asked_without_the_fleet;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct NewConfigArgs {
    #[command(flatten)]
    pub guest: crate::cli::target::GuestName,
    /// Where to write the guest's files (default: ./DOMAIN).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Make the secret store, which is not there: new_config asks no hypervisor, so it makes one
    /// only when asked (every guest of the installation would get a new key). Refused when the
    /// store is there.
    #[arg(long)]
    pub new_secret_store: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl Diagnose for WriteError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some("choose a writable directory with --out".into())
    }
}

/// Writes `path` through a new file beside it that has `mode` from the moment it is created (the
/// seed and the payload hold secrets: never readable by others, not even for an instant), then
/// renamed over the old one.
fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut new_name = path.as_os_str().to_owned();
    new_name.push(".trog-new");
    let new_path = PathBuf::from(new_name);
    // One left by a run that was killed while writing.
    match std::fs::remove_file(&new_path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(fail(error)),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&new_path)
        .map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    std::fs::rename(&new_path, path).map_err(fail)
}

pub fn run(global: &GlobalArgs, args: NewConfigArgs) -> Result<ExitStatus, Failure> {
    let domain = &args.guest.domain;
    let paths = global.installation_paths();
    let locks = global.locks("new_config");
    // A missing store is refused after the configuration is read, unless asked for.
    let store_use = if args.new_secret_store {
        StoreUse::WriteOrCreate(&locks, new_store_asked_without_the_fleet(&paths)?)
    } else {
        StoreUse::Write(&locks)
    };
    let mut credentials = CredentialSource::for_run(global.credentials_input())?;
    let inputs = load_guest_inputs(
        &paths,
        domain,
        &mut credentials,
        store_use,
        AddressPolicy::ReadOnly,
    )?;
    let generated = &inputs.generated;
    let out = args.out.unwrap_or_else(|| PathBuf::from(domain.as_str()));

    // payload/ shows what payload.tar.gz holds: a file a previous run rendered for a recipe the
    // guest no longer has must not linger there.
    let payload_dir = out.join("payload");
    match std::fs::remove_dir_all(&payload_dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(WriteError {
                path: payload_dir,
                source: error,
            }
            .into())
        }
        _ => {}
    }
    // user-data may carry password hashes from users.yaml: only its owner reads it.
    write(
        &out.join("seed/user-data"),
        generated.seed.user_data.as_bytes(),
        0o600,
    )?;
    write(
        &out.join("seed/meta-data"),
        generated.seed.meta_data.as_bytes(),
        0o644,
    )?;
    write(
        &out.join("seed/network-config"),
        generated.seed.network_config.as_bytes(),
        0o644,
    )?;
    write(&out.join("seed.iso"), &generated.seed_iso.bytes, 0o600)?;
    write(
        &out.join("payload/Makefile"),
        generated.makefile.as_bytes(),
        0o644,
    )?;
    for file in &generated.files {
        write(
            &out.join("payload").join(file.payload_path()),
            &file.contents,
            0o600,
        )?;
    }
    write(&out.join("payload.tar.gz"), &generated.payload.bytes, 0o600)?;
    write(
        &out.join("payload.sha256"),
        format!("{}  payload.tar.gz\n", generated.payload.sha256_hex).as_bytes(),
        0o644,
    )?;

    if global.json {
        emit(&Event::ConfigGenerated(&GeneratedSummary {
            domain: domain.to_string(),
            directory: out.display().to_string(),
            recipes: generated
                .resolved
                .names()
                .iter()
                .map(|name| name.to_string())
                .collect(),
            packages: generated.resolved.packages.clone(),
            image: GeneratedImage {
                url: generated.image_url.clone(),
                digest: generated.image_digest.to_string(),
            },
            seed_iso_sha256: generated.seed_iso.sha256_hex.clone(),
            payload_sha256: generated.payload.sha256_hex.clone(),
            boot_fingerprint: generated.fingerprint.root_disk.clone(),
            shape_fingerprint: generated.fingerprint.value.clone(),
            public_key: inputs.keypair.public_key_openssh().to_string(),
        }));
    } else {
        crate::outln!("Wrote {}", out.display());
        crate::outln!(
            "{domain}: {} recipes ({})",
            generated.resolved.recipes.len(),
            generated.resolved.names().join(", ")
        );
        crate::outln!("  seed       seed/user-data, seed/meta-data, seed/network-config, seed.iso (sha256 {})", &generated.seed_iso.sha256_hex[..16]);
        crate::outln!(
            "  payload    payload/ and payload.tar.gz (sha256 {})",
            &generated.payload.sha256_hex[..16]
        );
        crate::outln!("  image      {}", generated.image_url);
        crate::outln!(
            "  guest key  {}",
            inputs.keypair.public_key_openssh().trim()
        );
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_is_created_with_its_mode_and_replaces_a_more_open_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed/user-data");
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        write(&path, b"first", 0o600).unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, b"second", 0o600).unwrap();
        assert_eq!(mode(&path), 0o600, "the old file's mode is not kept");
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }
}
