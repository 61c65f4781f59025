//! A kernel booted directly by QEMU, without firmware reading the disk and without GRUB: what a
//! guest's first boot starts when its base image's kernel could be read out of it.

/// Files on the hypervisor, and the command line the image's own GRUB menu gives that kernel.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirectBoot {
    pub kernel: String,
    pub initrd: String,
    pub cmdline: String,
}
