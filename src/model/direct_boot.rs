//! A kernel booted directly by QEMU, without firmware reading the disk and without GRUB: what a
//! guest's first boot starts when its base image's kernel could be read out of it.

use super::hypervisor::DomainType;

/// Files on the hypervisor, and the command line the image's own GRUB menu gives that kernel.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirectBoot {
    pub kernel: String,
    pub initrd: String,
    /// The command line of the image's GRUB menu, as the menu has it.
    pub cmdline: String,
    /// cloud-init's network stage, when the image runs it as a systemd service of its own
    /// (`cloud-init.service` before cloud-init 24.3).
    pub cloud_init_network_unit: Option<String>,
}

impl DirectBoot {
    /// The command line the first boot starts with: the image's, and its cloud-init network
    /// stage masked for this boot only. Every trog seed is in cloud-init's local mode
    /// (`render::cloud_init`): the local stage has done that stage's work before the network
    /// came up, so on the first boot it would only start Python to find that out, about 4.5 s of
    /// an emulated processor that sshd waits for (sshd is ordered after it). Later boots go
    /// through GRUB and run it as the image has it.
    ///
    /// Under TCG it also goes without the kernel's early check that the timer interrupt arrives:
    /// on a busy host that check can lose against its own calibrated delay and panic ("IO-APIC +
    /// timer doesn't work"), seen with five guests starting at once, and it has nothing to find
    /// on QEMU's emulated chipset.
    pub fn first_boot_cmdline(&self, domain_type: DomainType) -> String {
        let mut cmdline = self.cmdline.clone();
        let mut add = |word: &str| {
            if !cmdline.is_empty() {
                cmdline.push(' ');
            }
            cmdline.push_str(word);
        };
        if let Some(unit) = &self.cloud_init_network_unit {
            add(&format!("systemd.mask={unit}"));
        }
        if domain_type == DomainType::Qemu {
            add("no_timer_check");
        }
        cmdline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_stage_is_masked_on_the_first_boot_only_when_the_image_has_it() {
        let mut boot = DirectBoot {
            kernel: "/k".into(),
            initrd: "/i".into(),
            cmdline: "root=LABEL=r ro".into(),
            cloud_init_network_unit: None,
        };
        assert_eq!(boot.first_boot_cmdline(DomainType::Kvm), "root=LABEL=r ro");
        boot.cloud_init_network_unit = Some("cloud-init.service".into());
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Kvm),
            "root=LABEL=r ro systemd.mask=cloud-init.service"
        );
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Qemu),
            "root=LABEL=r ro systemd.mask=cloud-init.service no_timer_check"
        );
        boot.cmdline.clear();
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Kvm),
            "systemd.mask=cloud-init.service"
        );
    }
}
