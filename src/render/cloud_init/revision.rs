//! The seed's revisions: renderings of the same inputs that differ only in how fast a first boot
//! goes, never in what the root disk it makes holds that matters. A guest's root disk is kept
//! across them: the seed's identity, which the root disk's fingerprint covers, is taken at
//! [`SeedRevision::IDENTITY`] whatever revision is rendered (`generate::seed_identities`).

use super::modules::ConfigModules;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedRevision {
    /// The config stage's modules run in that stage's own process; a DHCP guest's networkd
    /// file lets networkd take the host name the lease carries.
    SeparateConfigStage,
    /// The config stage's modules run in the local stage, and that stage's unit is masked on a
    /// first boot trog starts directly; networkd leaves the lease's host name alone (the
    /// guest's name is the seed's, and asking systemd-hostnamed to set another one only started
    /// it, 2 s of an emulated processor, for it to refuse).
    OneSetupStage,
    /// As [`SeedRevision::OneSetupStage`], and the first-boot commands are a script the seed
    /// writes ([`super::FIRST_BOOT_COMMANDS_PATH`]) for trog's wait to run once cloud-init's
    /// first boot is over, instead of cloud-init's `runcmd`: cloud-init's final stage then holds
    /// nothing the finish needs, and a seed that installs no packages lets trog leave that stage
    /// until after the finish (`guest::cloud_init`).
    CommandsAfterCloudInit,
}

impl SeedRevision {
    /// What every seed is rendered as.
    pub const CURRENT: SeedRevision = SeedRevision::CommandsAfterCloudInit;
    /// What the seed's identity is taken at: the first revision.
    pub const IDENTITY: SeedRevision = SeedRevision::SeparateConfigStage;
    pub const ALL: [SeedRevision; 3] = [
        SeedRevision::SeparateConfigStage,
        SeedRevision::OneSetupStage,
        SeedRevision::CommandsAfterCloudInit,
    ];

    pub fn config_modules(self) -> ConfigModules {
        match self {
            SeedRevision::SeparateConfigStage => ConfigModules::InConfigStage,
            SeedRevision::OneSetupStage | SeedRevision::CommandsAfterCloudInit => {
                ConfigModules::InLocalStage
            }
        }
    }

    /// Whether a DHCP guest's networkd file tells networkd not to set the lease's host name.
    pub fn ignores_lease_hostname(self) -> bool {
        self != SeedRevision::SeparateConfigStage
    }

    /// Whether the first-boot commands are left to trog's wait rather than cloud-init's
    /// `runcmd`.
    pub fn commands_after_cloud_init(self) -> bool {
        self == SeedRevision::CommandsAfterCloudInit
    }
}
