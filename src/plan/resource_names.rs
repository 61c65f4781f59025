//! The names trog gives what it creates for a guest. One function each, so the planner, the
//! executor, `destroy` and `status` can never disagree about what belongs to a guest.

use crate::model::names::DomainName;

/// The guest's root disk: a qcow2 overlay on the base image.
pub fn root_volume(domain: &DomainName) -> String {
    format!("{domain}-root.qcow2")
}

/// The guest's cloud-init seed ISO.
pub fn seed_volume(domain: &DomainName) -> String {
    format!("{domain}-seed.iso")
}

/// The guest's data volume, which outlives root disks.
pub fn data_volume(domain: &DomainName) -> String {
    format!("{domain}-data.qcow2")
}

/// A base image, named by its digest: the name is the proof of what it holds, so one copy
/// serves every guest built from the same image.
pub fn base_image_volume(digest_hex: &str) -> String {
    format!(
        "trog-base-{}.qcow2",
        &digest_hex[..digest_hex.len().min(16)]
    )
}

/// Where the machine named `uploader` (the one running trog) uploads a base image before it is
/// complete. Only a finished upload is copied to the final name, so a volume under the final
/// name is always whole. The name is the uploader's: runs on one machine take turns with it
/// (under the upload's lock, so the one there is always a dead run's and is removed), and
/// runs on two machines sharing a pool never write into one volume. Every writer also holds the
/// upload's lock on the hypervisor, under which any machine's partial copy there is a dead
/// run's and is removed too (`GuestResources::remove_partial_base_images`).
pub fn partial_base_image_volume(digest_hex: &str, uploader: &str) -> String {
    let uploader: String = uploader
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.part-{uploader}", base_image_volume(digest_hex))
}
