//! One guest's libvirt resources: observing them for the planner, and carrying out the plan's
//! libvirt actions. Every step here is safe to repeat: an interrupted run is rerun, re-observed
//! and re-planned, and each step finds what its earlier attempt left.

use crate::machine::command::Input;
use crate::machine::hypervisor_ops::boot_files::{self, BootFiles};
use crate::machine::hypervisor_ops::{HypervisorMachine, HypervisorOp, Placement, StoredForm};
use crate::model::digest::ImageDigest;
use crate::model::units::Bytes;
use crate::plan::{
    Action, DesiredGuest, GuestTag, ObservedDomain, ObservedGuest, ObservedVolume, PoolState,
};
use crate::render::domain_xml::metadata::{parse_tag, render_tag, TAG_NAMESPACE, TAG_PREFIX};
use crate::render::xml_text::escape_xml;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::ErrorNumber;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;
use virt::stream::Stream;

/// A seed larger than this is not a seed: observation refuses to read it back whole.
const SEED_READ_LIMIT: u64 = 16 * 1024 * 1024;
/// Streams move this much per call: large enough to keep a remote link busy.
const STREAM_CHUNK: usize = 1024 * 1024;
/// How long a guest gets to power off after an ACPI request before it is forced off. Long
/// enough for services to stop cleanly; a guest ignoring ACPI altogether is cut off after it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);

pub use crate::hypervisor::provisioning::{BuiltArtifacts, GuestResourceError};

#[path = "guest_resources_extra_disks.rs"]
mod extra_disks;

/// One guest on one hypervisor's libvirt connection.
pub struct GuestResources<'a> {
    pub connection: &'a Connect,
    pub hypervisor: &'a str,
    pub desired: &'a DesiredGuest,
    /// The hypervisor's own system, through which the base image and the seed are written into
    /// the pool's directory ([`HypervisorOp::PlaceInPool`]). `None` only for libvirt's test
    /// driver, which has no system: there they go through a libvirt upload stream, harmless in
    /// its process. A real libvirtd is never sent a stream, because a client killed while one
    /// is open can deadlock it.
    pub machine: Option<&'a HypervisorMachine>,
}

fn is(error: &virt::error::Error, number: ErrorNumber) -> bool {
    error.code().is(number)
}

/// How long a pool's refresh waits for the volumes being built in it.
const REFRESH_BUSY_WAIT: Duration = Duration::from_secs(60);
const REFRESH_BUSY_POLL: Duration = Duration::from_millis(200);

/// libvirt's refusal to refresh a pool while a volume is being built in it (`pool '…' has
/// asynchronous jobs running`). Its code is the generic internal error, so the message tells it
/// apart; libvirt has kept that wording since it added the refusal.
fn is_building(error: &virt::error::Error) -> bool {
    is(error, ErrorNumber::InternalError) && error.message().contains("asynchronous jobs running")
}

impl GuestResources<'_> {
    /// Turns the error of `operation` (libvirt's, or reading a local file) into this guest's.
    fn fail<E: std::error::Error + Send + Sync + 'static>(
        &self,
        operation: impl Into<String>,
    ) -> impl FnOnce(E) -> GuestResourceError + '_ {
        let operation = operation.into();
        move |source| GuestResourceError {
            backend: "libvirt",
            hypervisor: self.hypervisor.to_string(),
            operation,
            source: Box::new(source),
        }
    }

    /// `value` escaped for the XML given to libvirt; a value XML cannot carry is refused here,
    /// naming it, rather than by libvirt's parser.
    fn xml_text(&self, value: &str) -> Result<String, GuestResourceError> {
        escape_xml(value).map_err(self.fail("write a name or path into XML"))
    }

    fn pool(&self) -> Result<Option<StoragePool>, GuestResourceError> {
        match self
            .connection
            .lookup_storage_pool_by_name(&self.desired.pool_name)
        {
            Ok(pool) => Ok(Some(pool)),
            Err(error) if is(&error, ErrorNumber::NoStoragePool) => Ok(None),
            Err(error) => Err(self
                .fail(format!("look up storage pool {}", self.desired.pool_name))(
                error
            )),
        }
    }

    fn active_pool(&self) -> Result<StoragePool, GuestResourceError> {
        let pool = self.pool()?.ok_or_else(|| GuestResourceError {
            backend: "libvirt",
            hypervisor: self.hypervisor.to_string(),
            operation: format!("find storage pool {}", self.desired.pool_name),
            source: "the pool does not exist".into(),
        })?;
        Ok(pool)
    }

    fn volume(
        &self,
        pool: &StoragePool,
        name: &str,
    ) -> Result<Option<StorageVol>, GuestResourceError> {
        match pool.lookup_storage_vol_by_name(name) {
            Ok(volume) => Ok(Some(volume)),
            Err(error) if is(&error, ErrorNumber::NoStorageVolume) => Ok(None),
            Err(error) => Err(self.fail(format!("look up volume {name}"))(error)),
        }
    }

    fn domain(&self) -> Result<Option<Domain>, GuestResourceError> {
        match self
            .connection
            .lookup_domain_by_name(self.desired.domain.as_str())
        {
            Ok(domain) => Ok(Some(domain)),
            Err(error) if is(&error, ErrorNumber::NoDomain) => Ok(None),
            Err(error) => Err(self.fail(format!("look up domain {}", self.desired.domain))(error)),
        }
    }

    fn observed_volume(
        &self,
        volume: &StorageVol,
        read_digest: bool,
    ) -> Result<ObservedVolume, GuestResourceError> {
        let info = volume.info().map_err(self.fail("read a volume's size"))?;
        let sha256 = if read_digest && info.capacity <= SEED_READ_LIMIT {
            Some(hex::encode(Sha256::digest(
                self.download(volume, info.capacity)?,
            )))
        } else {
            None
        };
        Ok(ObservedVolume {
            capacity: Bytes(info.capacity),
            sha256,
        })
    }

    fn download(&self, volume: &StorageVol, length: u64) -> Result<Vec<u8>, GuestResourceError> {
        let stream = Stream::new(self.connection, 0).map_err(self.fail("open a stream"))?;
        volume
            .download(&stream, 0, length, 0)
            .map_err(self.fail("read a volume back"))?;
        let mut bytes = Vec::with_capacity(length as usize);
        let mut buffer = vec![0u8; STREAM_CHUNK];
        loop {
            let received = stream
                .recv(&mut buffer)
                .map_err(self.fail("read a volume back"))?;
            if received <= 0 {
                break;
            }
            bytes.extend_from_slice(&buffer[..received as usize]);
        }
        stream
            .finish()
            .map_err(self.fail("finish reading a volume"))?;
        Ok(bytes)
    }

    /// What the hypervisor has of this guest.
    pub fn observe(&self) -> Result<ObservedGuest, GuestResourceError> {
        let mut observed = ObservedGuest::nothing();
        if let Some(pool) = self.pool()? {
            let active = pool
                .is_active()
                .map_err(self.fail("ask whether the pool is active"))?;
            observed.pool = if active {
                PoolState::Active
            } else {
                PoolState::Inactive
            };
            if active {
                self.refresh(&pool)?;
                observed.base_image_present = self
                    .volume(&pool, &self.desired.base_image_volume)?
                    .is_some();
                observed.partial_base_image_present = self
                    .volume(&pool, &self.desired.partial_base_image_volume)?
                    .is_some();
                if let Some(volume) = self.volume(&pool, &self.desired.root_volume.name)? {
                    observed.root_volume = Some(self.observed_volume(&volume, false)?);
                }
                if let Some(volume) = self.volume(&pool, &self.desired.seed_volume)? {
                    observed.seed_volume = Some(self.observed_volume(&volume, true)?);
                }
                if let Some(data) = &self.desired.data_volume {
                    if let Some(volume) = self.volume(&pool, &data.name)? {
                        observed.data_volume = Some(self.observed_volume(&volume, false)?);
                    }
                }
                for disk in &self.desired.extra_disks {
                    if let Some(volume) = self.volume(&pool, &disk.volume)? {
                        observed
                            .extra_disks
                            .volumes
                            .insert(disk.volume.clone(), self.observed_volume(&volume, false)?);
                    }
                }
            }
        }
        if let Some(domain) = self.domain()? {
            let running = domain
                .is_active()
                .map_err(self.fail("ask whether the guest runs"))?;
            let autostart = domain
                .autostart()
                .map_err(self.fail("read the guest's autostart"))?;
            let tag = match domain.metadata(
                virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
                Some(TAG_NAMESPACE),
                virt::sys::VIR_DOMAIN_AFFECT_CONFIG,
            ) {
                Ok(element) => parse_tag(&element),
                Err(error) if is(&error, ErrorNumber::NoDomainMetadata) => None,
                Err(error) => return Err(self.fail("read the guest's metadata")(error)),
            };
            let snapshots = crate::libvirt::snapshot::snapshot_names_oldest_first(&domain)
                .map_err(self.fail("list the guest's snapshots"))?;
            let definition = domain
                .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)
                .map_err(self.fail("read the guest's definition"))?;
            let (defined, running_disks) = self.observe_extra_disks(&domain, running)?;
            observed.extra_disks.defined = defined;
            observed.extra_disks.running = running_disks;
            let shares_folders = shares_folders(&definition)
                || (running
                    && shares_folders(
                        &domain
                            .xml_desc(0)
                            .map_err(self.fail("read the running guest's definition"))?,
                    ));
            observed.domain = Some(ObservedDomain {
                tag,
                running,
                autostart,
                snapshots,
                seed_attached: crate::libvirt::seed::attaches_volume(
                    &definition,
                    &self.desired.seed_volume,
                ),
                shares_folders,
                disk_pools: crate::debug_boot::guest_disk::disk_pools(&definition),
                domain_type: crate::render::domain_xml::defined::domain_type_of(&definition),
            });
        }
        Ok(observed)
    }

    /// Carries out one libvirt action of a plan. `WaitForSsh` and `Finish` are not libvirt's
    /// and are refused here.
    pub fn execute(
        &self,
        action: &Action,
        artifacts: &BuiltArtifacts,
    ) -> Result<(), GuestResourceError> {
        match action {
            Action::DefinePool { name, path } => {
                let xml = format!(
                    "<pool type='dir'><name>{}</name><target><path>{}</path></target></pool>",
                    self.xml_text(name)?,
                    self.xml_text(path)?
                );
                let pool = match self.pool()? {
                    Some(pool) => pool,
                    None => match self.connection.define_storage_pool_xml(&xml, 0) {
                        Ok(pool) => pool,
                        // Defined by another run since this one looked: the same pool.
                        Err(error) if self.pool()?.is_some() => {
                            let _ = error;
                            self.active_pool()?
                        }
                        Err(error) => {
                            return Err(self.fail(format!("define storage pool {name}"))(error))
                        }
                    },
                };
                if let Err(error) = pool.build(0) {
                    // Defined and started by another run since this one looked: an active
                    // pool has its directory, and building one is refused.
                    if !pool
                        .is_active()
                        .map_err(self.fail("ask whether the pool is active"))?
                    {
                        return Err(self.fail(format!("create the directory of pool {name}"))(
                            error,
                        ));
                    }
                }
                pool.set_autostart(true)
                    .map_err(self.fail(format!("autostart pool {name}")))?;
            }
            Action::StartPool { name } => {
                let pool = self.active_pool()?;
                if !pool
                    .is_active()
                    .map_err(self.fail("ask whether the pool is active"))?
                {
                    if let Err(error) = pool.create(0) {
                        // Started by another run since this one asked: as good as done.
                        if !pool
                            .is_active()
                            .map_err(self.fail("ask whether the pool is active"))?
                        {
                            // A run killed between defining the pool and making its directory
                            // leaves a pool that cannot start: make the directory (as
                            // `define storage pool` does; for a directory pool, building only
                            // creates it) and try once more; if that fails too, libvirt's first
                            // reason is told. (NO_OVERWRITE is refused by directory pools.)
                            // Only a directory pool: building another kind formats disks.
                            if !is_directory_pool(&pool)
                                || pool.build(0).is_err()
                                || pool.create(0).is_err()
                            {
                                return Err(self.fail(format!("start storage pool {name}"))(error));
                            }
                        }
                    }
                }
            }
            Action::RemovePartialBaseImage { volume } => self.delete_volume(volume)?,
            Action::UploadBaseImage { volume, .. } => {
                self.upload_base_image(volume, artifacts.base_image_file)?
            }
            Action::DefineDomain { tag, .. } => {
                let domain = self
                    .connection
                    .define_domain_xml(artifacts.domain_xml)
                    .map_err(self.fail("define the guest"))?;
                // The rendered XML carries the tag too; setting it again makes sure the tag is
                // exactly the plan's, whatever the template says.
                let element = render_tag(
                    self.desired.domain.as_str(),
                    tag,
                    self.desired.installation.as_deref(),
                )
                .map_err(self.fail("tag the guest"))?;
                domain
                    .set_metadata(
                        virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
                        Some(&element),
                        Some(TAG_PREFIX),
                        Some(TAG_NAMESPACE),
                        virt::sys::VIR_DOMAIN_AFFECT_CONFIG,
                    )
                    .map_err(self.fail("tag the guest"))?;
            }
            Action::StopDomain => self.stop(SHUTDOWN_GRACE)?,
            Action::PowerOffDomain => self.stop(Duration::ZERO)?,
            Action::DeleteSnapshots { names } => {
                let Some(domain) = self.domain()? else {
                    return Ok(());
                };
                for name in names {
                    let snapshot = virt::domain::Domain::lookup_snapshot_by_name(&domain, name, 0)
                        .map_err(self.fail(format!("find snapshot {name}")))?;
                    snapshot
                        .delete(0)
                        .map_err(self.fail(format!("delete snapshot {name}")))?;
                }
            }
            Action::DeleteVolume { volume, .. } => self.delete_volume(volume)?,
            Action::CreateDataVolume { volume, capacity } => {
                let xml = format!(
                    "<volume><name>{}</name><capacity unit='bytes'>{}</capacity><target><format type='qcow2'/></target></volume>",
                    self.xml_text(volume)?,
                    capacity.0
                );
                self.create_volume_if_absent(volume, &xml)?;
            }
            Action::CreateExtraDisk {
                volume, capacity, ..
            } => {
                let xml = format!(
                    "<volume><name>{}</name><capacity unit='bytes'>{}</capacity><target><format type='qcow2'/></target></volume>",
                    self.xml_text(volume)?,
                    capacity.0
                );
                self.create_volume_if_absent(volume, &xml)?;
            }
            Action::AttachExtraDisk {
                volume,
                to_running,
                to_definition,
                ..
            } => {
                self.attach_extra_disk(volume, *to_running, *to_definition, artifacts.extra_disks)?
            }
            Action::DetachExtraDisk { volume, .. } => self.detach_extra_disk(volume)?,
            Action::CreateRootVolume {
                volume,
                backing_volume,
                capacity,
            } => {
                let pool = self.active_pool()?;
                let backing =
                    self.volume(&pool, backing_volume)?
                        .ok_or_else(|| GuestResourceError {
                            backend: "libvirt",
                            hypervisor: self.hypervisor.to_string(),
                            operation: format!("find base image {backing_volume}"),
                            source: "the volume does not exist".into(),
                        })?;
                let backing_path = backing
                    .path()
                    .map_err(self.fail("read the base image's path"))?;
                let xml = format!(
                    "<volume><name>{}</name><capacity unit='bytes'>{}</capacity><target><format type='qcow2'/></target>\
                     <backingStore><path>{}</path><format type='qcow2'/></backingStore></volume>",
                    self.xml_text(volume)?,
                    capacity.0,
                    self.xml_text(&backing_path)?
                );
                self.create_volume_if_absent(volume, &xml)?;
            }
            Action::UploadSeed { volume, sha256 } => match self.machine {
                Some(machine) => self.place_in_pool(
                    machine,
                    &format!("{volume}.part"),
                    volume,
                    Input::Bytes(artifacts.seed_iso.to_vec()),
                    artifacts.seed_iso.len() as u64,
                    sha256,
                    Placement::Replace,
                    StoredForm::AsSent,
                )?,
                None => {
                    self.delete_volume(volume)?;
                    let xml = format!(
                        "<volume><name>{}</name><capacity unit='bytes'>{}</capacity><target><format type='raw'/></target></volume>",
                        self.xml_text(volume)?,
                        artifacts.seed_iso.len()
                    );
                    let pool = self.active_pool()?;
                    let created = StorageVol::create_xml(&pool, &xml, 0)
                        .map_err(self.fail(format!("create volume {volume}")))?;
                    self.upload(
                        &created,
                        artifacts.seed_iso.len() as u64,
                        &mut &artifacts.seed_iso[..],
                        volume,
                    )?;
                }
            },
            Action::SetAutostart => {
                let domain = self.require_domain()?;
                domain
                    .set_autostart(true)
                    .map_err(self.fail("make the guest start with the hypervisor"))?;
            }
            Action::StartDomain => {
                let domain = self.require_domain()?;
                if !domain
                    .is_active()
                    .map_err(self.fail("ask whether the guest runs"))?
                {
                    domain.create().map_err(self.fail("start the guest"))?;
                }
            }
            Action::WaitForSsh
            | Action::RetireSeed { .. }
            | Action::BackUpBeforeRebuild
            | Action::RestoreBackup { .. }
            | Action::RestoreFreshBackup
            | Action::Finish { .. } => {
                unreachable!("{action} is not a libvirt action")
            }
        }
        Ok(())
    }

    /// Records `tag` on the existing domain.
    pub fn record_tag(&self, tag: &GuestTag) -> Result<(), GuestResourceError> {
        let domain = self.require_domain()?;
        let running = domain
            .is_active()
            .map_err(self.fail("ask whether the guest runs"))?;
        let mut flags = virt::sys::VIR_DOMAIN_AFFECT_CONFIG;
        if running {
            flags |= virt::sys::VIR_DOMAIN_AFFECT_LIVE;
        }
        let element = render_tag(
            self.desired.domain.as_str(),
            tag,
            self.desired.installation.as_deref(),
        )
        .map_err(self.fail("tag the guest"))?;
        domain
            .set_metadata(
                virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
                Some(&element),
                Some(TAG_PREFIX),
                Some(TAG_NAMESPACE),
                flags,
            )
            .map_err(self.fail("tag the guest"))
    }

    fn require_domain(&self) -> Result<Domain, GuestResourceError> {
        self.domain()?.ok_or_else(|| GuestResourceError {
            backend: "libvirt",
            hypervisor: self.hypervisor.to_string(),
            operation: format!("find domain {}", self.desired.domain),
            source: "the domain does not exist".into(),
        })
    }

    /// Stops the guest: a polite request first, and a guest that has not stopped once `grace`
    /// is over is forced off (at once, with no grace).
    fn stop(&self, grace: Duration) -> Result<(), GuestResourceError> {
        let Some(domain) = self.domain()? else {
            return Ok(());
        };
        if !domain
            .is_active()
            .map_err(self.fail("ask whether the guest runs"))?
        {
            return Ok(());
        }
        if !grace.is_zero() {
            let _ = domain.shutdown();
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !domain
                .is_active()
                .map_err(self.fail("ask whether the guest runs"))?
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        match domain.destroy() {
            Ok(()) => Ok(()),
            Err(error) if is(&error, ErrorNumber::OperationInvalid) => Ok(()),
            Err(error) => Err(self.fail("force the guest off")(error)),
        }
    }

    fn delete_volume(&self, name: &str) -> Result<(), GuestResourceError> {
        let pool = self.active_pool()?;
        if let Some(volume) = self.volume(&pool, name)? {
            volume
                .delete(0)
                .map_err(self.fail(format!("delete volume {name}")))?;
        }
        Ok(())
    }

    fn create_volume_if_absent(&self, name: &str, xml: &str) -> Result<(), GuestResourceError> {
        let pool = self.active_pool()?;
        if self.volume(&pool, name)?.is_none() {
            if let Err(error) = StorageVol::create_xml(&pool, xml, 0) {
                // Made by another run since this one looked: the step is done.
                if self.volume(&pool, name)?.is_none() {
                    return Err(self.fail(format!("create volume {name}"))(error));
                }
            }
        }
        Ok(())
    }

    /// Asks libvirt to list the pool's directory again: it does not see what trog wrote there
    /// itself. An operation libvirt calls invalid here (a pool that is not running) is no
    /// failure: there is nothing to list. While a volume is being built in the pool (another
    /// run's root disk or data volume, seconds each) libvirt refuses; that is waited out, at most
    /// [`REFRESH_BUSY_WAIT`], since what this run just wrote would not be listed otherwise.
    fn refresh(&self, pool: &StoragePool) -> Result<(), GuestResourceError> {
        let started = Instant::now();
        loop {
            match pool.refresh(0) {
                Ok(_) => return Ok(()),
                Err(error) if is(&error, ErrorNumber::OperationInvalid) => return Ok(()),
                Err(error) if is_building(&error) && started.elapsed() < REFRESH_BUSY_WAIT => {
                    std::thread::sleep(REFRESH_BUSY_POLL);
                }
                Err(error) if is_building(&error) => {
                    return Err(self.fail(format!(
                    "refresh the storage pool (volumes were still being built in it after {} s)",
                    started.elapsed().as_secs()
                ))(error))
                }
                Err(error) => return Err(self.fail("refresh the storage pool")(error)),
            }
        }
    }

    fn upload(
        &self,
        volume: &StorageVol,
        length: u64,
        source: &mut dyn Read,
        name: &str,
    ) -> Result<(), GuestResourceError> {
        let stream = Stream::new(self.connection, 0).map_err(self.fail("open a stream"))?;
        volume
            .upload(&stream, 0, length, 0)
            .map_err(self.fail(format!("upload to volume {name}")))?;
        let mut buffer = vec![0u8; STREAM_CHUNK];
        loop {
            let read = source
                .read(&mut buffer)
                .map_err(self.fail(format!("read what goes into {name}")))?;
            if read == 0 {
                break;
            }
            let mut sent = 0;
            while sent < read {
                let count = stream
                    .send(&buffer[sent..read])
                    .map_err(self.fail(format!("upload to volume {name}")))?;
                sent += count.max(0) as usize;
            }
        }
        stream
            .finish()
            .map_err(self.fail(format!("finish uploading {name}")))
    }

    /// Writes a file of the pool through the hypervisor's own system: `partial` first, then,
    /// checked against `digest_hex`, under `name`. The pool is refreshed after, so that libvirt
    /// lists the volume.
    #[allow(clippy::too_many_arguments)]
    fn place_in_pool(
        &self,
        machine: &HypervisorMachine,
        partial: &str,
        name: &str,
        input: Input,
        length: u64,
        digest_hex: &str,
        placement: Placement,
        form: StoredForm,
    ) -> Result<(), GuestResourceError> {
        let pool = self.active_pool()?;
        let dir = self.pool_directory(&pool)?;
        let digest = ImageDigest::from_hex(digest_hex).ok_or_else(|| GuestResourceError {
            backend: "libvirt",
            hypervisor: self.hypervisor.to_string(),
            operation: format!("check {name}"),
            source: format!("`{digest_hex}` is not a sha256 or sha512 digest").into(),
        })?;
        machine
            .run(&HypervisorOp::PlaceInPool {
                dir: dir.clone(),
                partial: partial.to_string(),
                name: name.to_string(),
                input,
                length,
                digest,
                placement,
                form,
            })
            .and_then(|output| output.success())
            .map_err(self.fail(format!("write {name} into {dir}")))?;
        self.refresh(&pool)?;
        match self.volume(&pool, name)? {
            Some(_) => Ok(()),
            None => Err(GuestResourceError {
                backend: "libvirt",
                hypervisor: self.hypervisor.to_string(),
                operation: format!("find {name} in storage pool {}", self.desired.pool_name),
                source: format!("it was written into {dir}, but the pool does not list it").into(),
            }),
        }
    }

    /// The directory a storage pool keeps its volumes in, on the hypervisor.
    fn pool_directory(&self, pool: &StoragePool) -> Result<String, GuestResourceError> {
        let xml = pool
            .xml_desc(0)
            .map_err(self.fail("read the storage pool's XML"))?;
        crate::libvirt::facts::target_path(&xml).ok_or_else(|| GuestResourceError {
            backend: "libvirt",
            hypervisor: self.hypervisor.to_string(),
            operation: format!(
                "find the directory of storage pool {}",
                self.desired.pool_name
            ),
            source: "its XML names no target path".into(),
        })
    }

    /// The base image's kernel, initramfs and kernel command line, read out of it on the
    /// hypervisor the first time one of its guests boots and kept beside it in the pool
    /// ([`HypervisorOp::BootFiles`]). `None` without a hypervisor's system (libvirt's test
    /// driver, whose guests never run).
    pub fn boot_files(&self) -> Result<Option<BootFiles>, GuestResourceError> {
        let Some(machine) = self.machine else {
            return Ok(None);
        };
        let base = &self.desired.base_image_volume;
        let pool = self.active_pool()?;
        let dir = self.pool_directory(&pool)?;
        let operation = format!("read the kernel out of {base} in {dir}");
        let output = machine
            .run(&HypervisorOp::BootFiles {
                dir: dir.clone(),
                base: base.clone(),
            })
            .and_then(|output| output.success())
            .map_err(self.fail(operation.clone()))?;
        let stdout = output.stdout_text();
        boot_files::parse(&stdout)
            .map(Some)
            .ok_or_else(|| GuestResourceError {
                backend: "libvirt",
                hypervisor: self.hypervisor.to_string(),
                operation,
                source: format!("its answer {stdout:?} is not what it prints").into(),
            })
    }

    /// Starts the guest once as `first_xml` defines it, then defines it as `lasting_xml` again:
    /// the running guest keeps the first definition until it stops, every later start uses the
    /// lasting one. The lasting one is put back also when the start fails. Nothing happens to a
    /// guest that runs already.
    pub fn start_once_as(
        &self,
        first_xml: &str,
        lasting_xml: &str,
    ) -> Result<(), GuestResourceError> {
        let domain = self.require_domain()?;
        if domain
            .is_active()
            .map_err(self.fail("ask whether the guest runs"))?
        {
            return Ok(());
        }
        let started = self
            .connection
            .define_domain_xml(first_xml)
            .map_err(self.fail("define the guest for its first boot"))
            .and_then(|first| first.create().map_err(self.fail("start the guest")));
        self.connection
            .define_domain_xml(lasting_xml)
            .map_err(self.fail("define the guest for the boots after its first"))?;
        started.map(|_| ())
    }

    /// Removes every partial copy of the base image in the pool, whichever machine's it is
    /// (`<volume>.part-<host>`). Only under the hypervisor's upload lock, which every writer of
    /// the image into the pool holds while it writes: then each one there is a dead run's.
    pub fn remove_partial_base_images(&self) -> Result<(), GuestResourceError> {
        let Some(pool) = self.pool()? else {
            return Ok(());
        };
        if !pool.is_active().unwrap_or(false) {
            return Ok(());
        }
        self.refresh(&pool)?;
        let prefix = format!("{}.part-", self.desired.base_image_volume);
        let names = pool
            .list_volumes()
            .map_err(self.fail("list the storage pool's volumes"))?;
        for name in names.iter().filter(|name| name.starts_with(&prefix)) {
            self.delete_volume(name)?;
        }
        Ok(())
    }

    /// Uploads under a temporary name, then gives it the final name: a volume under the final
    /// name is therefore always complete, which is what lets observation trust the name.
    ///
    /// Runs under the upload's lock (see `provision::execute`): a volume under this machine's
    /// partial name is a dead run's, and is replaced; a whole image that another run finished
    /// meanwhile makes the step done.
    fn upload_base_image(&self, volume: &str, file: &Path) -> Result<(), GuestResourceError> {
        let partial = self.desired.partial_base_image_volume.clone();
        let pool = self.active_pool()?;
        self.refresh(&pool)?;
        if self.volume(&pool, volume)?.is_some() {
            return self.delete_volume(&partial);
        }
        self.delete_volume(&partial)?;
        let length = std::fs::metadata(file)
            .map_err(self.fail(format!("read {}", file.display())))?
            .len();
        match self.machine {
            Some(machine) => self.place_in_pool(
                machine,
                &partial,
                volume,
                Input::File(file.to_path_buf()),
                length,
                &self.desired.base_image_digest,
                Placement::KeepExisting,
                StoredForm::Inflated,
            ),
            None => self.stream_base_image(volume, &partial, file, length),
        }
    }

    /// The test driver's way to [`upload_base_image`](Self::upload_base_image): a libvirt
    /// upload stream to the partial volume, then a copy under the final name.
    fn stream_base_image(
        &self,
        volume: &str,
        partial: &str,
        file: &Path,
        length: u64,
    ) -> Result<(), GuestResourceError> {
        let pool = self.active_pool()?;
        let partial = partial.to_string();
        let xml = format!(
            "<volume><name>{}</name><capacity unit='bytes'>{length}</capacity><target><format type='raw'/></target></volume>",
            self.xml_text(&partial)?
        );
        let created = StorageVol::create_xml(&pool, &xml, 0)
            .map_err(self.fail(format!("create volume {partial}")))?;
        let mut reader =
            std::fs::File::open(file).map_err(self.fail(format!("open {}", file.display())))?;
        self.upload(&created, length, &mut reader, &partial)?;
        self.refresh(&pool)?;
        let uploaded = self
            .volume(&pool, &partial)?
            .expect("the volume just uploaded");
        let virtual_size = uploaded
            .info()
            .map_err(self.fail("read the base image's size"))?
            .capacity;
        let xml = format!(
            "<volume><name>{}</name><capacity unit='bytes'>{virtual_size}</capacity><target><format type='qcow2'/></target></volume>",
            self.xml_text(volume)?
        );
        if self.volume(&pool, volume)?.is_none() {
            if let Err(error) = StorageVol::create_xml_from(&pool, &xml, &uploaded, 0) {
                // Another machine sharing the pool finished the same image first: the same
                // bytes, since the name is their digest.
                if self.volume(&pool, volume)?.is_none() {
                    return Err(self.fail(format!("copy the base image to {volume}"))(error));
                }
            }
        }
        self.delete_volume(&partial)
    }
}

/// Whether a domain's XML mounts a folder of the hypervisor in the guest (`<filesystem>`).
fn shares_folders(domain_xml: &str) -> bool {
    roxmltree::Document::parse(domain_xml).is_ok_and(|document| {
        document
            .descendants()
            .any(|node| node.has_tag_name("filesystem"))
    })
}

#[cfg(test)]
#[path = "guest_resources_tests.rs"]
mod tests;

/// Whether `pool` is a plain directory pool, the only kind whose building just makes a directory.
fn is_directory_pool(pool: &virt::storage_pool::StoragePool) -> bool {
    let Ok(xml) = pool.xml_desc(0) else {
        return false;
    };
    roxmltree::Document::parse(&xml)
        .is_ok_and(|document| document.root_element().attribute("type") == Some("dir"))
}
