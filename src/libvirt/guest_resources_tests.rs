//! The pool writes through a scripted hypervisor (libvirt's test driver for the pool): what is
//! run there, and a failed or unseen write ending the step with what went wrong.

use super::*;
use crate::machine::fake::{Answer, FakeMachine};
use crate::model::names::DomainName;
use crate::plan::resource_names;
use crate::plan::DesiredVolume;

fn desired(pool: &str) -> DesiredGuest {
    let domain = DomainName::parse("www.example.test").unwrap();
    let digest = "ab".repeat(32);
    DesiredGuest {
        pool_name: pool.into(),
        pool_path: format!("/vms/{pool}"),
        base_image_volume: resource_names::base_image_volume(&digest),
        partial_base_image_volume: resource_names::partial_base_image_volume(&digest, "h"),
        base_image_digest: digest,
        base_image_source: "file:///images/debian.qcow2".into(),
        root_volume: DesiredVolume {
            name: resource_names::root_volume(&domain),
            capacity: Bytes::from_gib(10),
            declared_at: None,
        },
        seed_volume: resource_names::seed_volume(&domain),
        seed_sha256: "cd".repeat(32),
        equivalent_seed_sha256s: vec!["ce".repeat(32)],
        data_volume: None,
        extra_disks: Vec::new(),
        boot_fingerprint: "b00t".into(),
        shape_fingerprint: "5hape".into(),
        domain_type: crate::model::hypervisor::DomainType::Kvm,
        payload_digest: "pay1oad".into(),
        installation: None,
        domain,
    }
}

#[test]
fn the_base_image_and_the_seed_are_written_by_the_hypervisor_never_streamed() {
    let connection = Connect::open(Some("test:///default")).unwrap();
    let desired = desired("trog-fake-write");
    let fake = FakeMachine::new().answer("trog-base-", &[Answer::Exit(1, "")]);
    let machine = HypervisorMachine::fake(fake.clone());
    let resources = GuestResources {
        connection: &connection,
        hypervisor: "hv1",
        desired: &desired,
        machine: Some(&machine),
    };
    let image = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(image.path(), b"image").unwrap();
    let artifacts = BuiltArtifacts {
        domain_xml: "",
        seed_iso: b"seed",
        base_image_file: image.path(),
        extra_disks: &[],
    };
    for action in [
        Action::DefinePool {
            name: desired.pool_name.clone(),
            path: desired.pool_path.clone(),
        },
        Action::StartPool {
            name: desired.pool_name.clone(),
        },
    ] {
        resources.execute(&action, &artifacts).unwrap();
    }

    // The write fails on the hypervisor: the step fails naming it, nothing is listed.
    let upload = Action::UploadBaseImage {
        volume: desired.base_image_volume.clone(),
        source: desired.base_image_source.clone(),
        digest: desired.base_image_digest.clone(),
    };
    let error = resources.execute(&upload, &artifacts).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "libvirt on hv1 could not write {} into /vms/trog-fake-write",
            desired.base_image_volume
        )
    );
    let lines = fake.command_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(&format!(
        "/usr/libexec/trog/place-in-pool /vms/trog-fake-write {} {} sha256sum {} keep inflate",
        desired.partial_base_image_volume, desired.base_image_volume, desired.base_image_digest
    )));
    assert!(!resources.observe().unwrap().base_image_present);

    // The seed's write succeeds but the pool does not list it afterwards (here: the test driver
    // has no directory): the step does not pretend it is done.
    let seed = Action::UploadSeed {
        volume: desired.seed_volume.clone(),
        sha256: desired.seed_sha256.clone(),
    };
    let error = resources.execute(&seed, &artifacts).unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "could not find {} in storage pool trog-fake-write",
            desired.seed_volume
        )),
        "{error}"
    );
    assert!(fake.command_lines()[1].ends_with(&format!(
        "{seed}.part {seed} sha256sum {} replace as-sent",
        desired.seed_sha256,
        seed = desired.seed_volume
    )));
    let pool = connection
        .lookup_storage_pool_by_name("trog-fake-write")
        .unwrap();
    let _ = pool.destroy();
    let _ = pool.undefine();
}

#[test]
fn a_pool_path_xml_cannot_carry_is_refused_before_libvirt_sees_it() {
    let connection = Connect::open(Some("test:///default")).unwrap();
    let desired = desired("trog-control-character");
    let resources = GuestResources {
        connection: &connection,
        hypervisor: "hv1",
        desired: &desired,
        machine: None,
    };
    let artifacts = BuiltArtifacts {
        domain_xml: "",
        seed_iso: b"seed",
        base_image_file: Path::new("/nonexistent"),
        extra_disks: &[],
    };
    let error = resources
        .execute(
            &Action::DefinePool {
                name: desired.pool_name.clone(),
                path: "/vms/bell\u{7}".into(),
            },
            &artifacts,
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "libvirt on hv1 could not write a name or path into XML"
    );
    assert!(
        error.source.to_string().contains("control character"),
        "{}",
        error.source
    );
    assert!(connection
        .list_all_storage_pools(0)
        .unwrap()
        .iter()
        .all(|pool| pool.name().unwrap() != "trog-control-character"));
}

#[test]
fn a_folder_shared_with_the_guest_is_read_from_its_definition() {
    let sharing = "<domain type='kvm'><name>g</name><devices>\
        <disk type='volume' device='disk'><source pool='p' volume='v'/><target dev='vda'/></disk>\
        <filesystem type='mount' accessmode='passthrough'><driver type='virtiofs'/>\
        <source dir='/srv/shared'/><target dir='shared'/></filesystem>\
        </devices></domain>";
    assert!(shares_folders(sharing));
    assert!(!shares_folders(
        "<domain type='kvm'><name>g</name><devices></devices></domain>"
    ));
    assert!(!shares_folders("<domain"));
}
