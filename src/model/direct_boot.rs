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
    /// Whether the first boot may leave cloud-init's final stage until after the finish: the
    /// seed installs no packages, so that stage holds nothing the finish needs (the provision
    /// sets it from the seed; see `guest::cloud_init`).
    pub final_stage_deferred: bool,
}

/// cloud-init's config stage, a systemd service of its own wherever the network stage is one:
/// every cloud-init before 24.3. From 24.3 on, `cloud-init-main.service` runs every stage in one
/// process and waits for each stage's unit, and the image has no network unit to report.
pub const CLOUD_INIT_CONFIG_UNIT: &str = "cloud-config.service";

/// cloud-init's final stage, a systemd service of its own wherever the network stage is one.
pub const CLOUD_INIT_FINAL_UNIT: &str = "cloud-final.service";

impl DirectBoot {
    /// The command line the first boot starts with: the image's, and the cloud-init stages this
    /// boot need not run masked for it only, when the image runs each stage as a process of its
    /// own.
    ///
    /// - The network stage. Every trog seed is in cloud-init's local mode (`render::cloud_init`):
    ///   the local stage has done that stage's work before the network came up, so on the first
    ///   boot it would only start Python to find that out, about 4.5 s of an emulated processor
    ///   that sshd waits for (sshd is ordered after it).
    /// - The config stage. Every trog seed runs that stage's modules in the local stage and
    ///   leaves its list empty (`render::cloud_init::modules`): its process would start Python and
    ///   read the configuration again, about 6 s under emulation, to run nothing.
    ///
    /// - The final stage, when [`DirectBoot::final_stage_deferred`]: a seed over a baked image
    ///   leaves it nothing but the image's per-instance scripts and cloud-init's record of the
    ///   boot's end, yet its process is another Python start, about 3 s of the emulated
    ///   processor the finish waits behind. trog's wait starts that stage itself at the lowest
    ///   priority once the local stage is over (`guest::cloud_init`), so cloud-init's record is
    ///   complete as ever, only not in the finish's way.
    ///
    /// Later boots go through GRUB and run every stage as the image has them.
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
            add(&format!("systemd.mask={CLOUD_INIT_CONFIG_UNIT}"));
            if self.final_stage_deferred {
                add(&format!("systemd.mask={CLOUD_INIT_FINAL_UNIT}"));
            }
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
    fn the_network_and_config_stages_are_masked_on_the_first_boot_only_when_the_image_has_them() {
        let mut boot = DirectBoot {
            kernel: "/k".into(),
            initrd: "/i".into(),
            cmdline: "root=LABEL=r ro".into(),
            cloud_init_network_unit: None,
            final_stage_deferred: false,
        };
        assert_eq!(boot.first_boot_cmdline(DomainType::Kvm), "root=LABEL=r ro");
        boot.cloud_init_network_unit = Some("cloud-init.service".into());
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Kvm),
            "root=LABEL=r ro systemd.mask=cloud-init.service systemd.mask=cloud-config.service"
        );
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Qemu),
            "root=LABEL=r ro systemd.mask=cloud-init.service systemd.mask=cloud-config.service \
             no_timer_check"
        );
        boot.cmdline.clear();
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Kvm),
            "systemd.mask=cloud-init.service systemd.mask=cloud-config.service"
        );
    }

    #[test]
    fn the_final_stage_is_masked_only_when_deferred_and_the_image_runs_it_apart() {
        let mut boot = DirectBoot {
            kernel: "/k".into(),
            initrd: "/i".into(),
            cmdline: "ro".into(),
            cloud_init_network_unit: None,
            final_stage_deferred: true,
        };
        // cloud-init 24.3 and later: one process waits for every stage's unit; none is masked.
        assert_eq!(boot.first_boot_cmdline(DomainType::Kvm), "ro");
        boot.cloud_init_network_unit = Some("cloud-init.service".into());
        assert_eq!(
            boot.first_boot_cmdline(DomainType::Kvm),
            "ro systemd.mask=cloud-init.service systemd.mask=cloud-config.service \
             systemd.mask=cloud-final.service"
        );
        boot.final_stage_deferred = false;
        assert!(!boot
            .first_boot_cmdline(DomainType::Kvm)
            .contains(CLOUD_INIT_FINAL_UNIT));
    }
}
