use super::*;
use crate::model::hypervisor::{Transport, DEFAULT_RESERVE_DISK};

fn parse(text: &str) -> Result<Fleet, HypervisorsConfError> {
    parse_fleet(text, Path::new("/etc/trog-provisioner/hypervisors.conf"))
}

fn error_text(text: &str) -> (String, String) {
    let error = parse(text).unwrap_err();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(&format!(" / {cause}"));
        source = cause.source();
    }
    (message, error.hint().unwrap_or_default())
}

#[test]
fn the_specifications_example_parses_with_defaults() {
    let fleet = parse(
        "[hv1]\nlibvirt_uri    = qemu+ssh://root@hv1.example.test/system\nreserve_memory = 4096\n\
         max_guests     = 20\n\n[hv2]\nlibvirt_uri    = qemu+ssh://root@hv2.example.test/system\n",
    )
    .unwrap();
    assert_eq!(fleet.hypervisors.len(), 2);
    let hv1 = &fleet.hypervisors[0];
    assert_eq!(hv1.name.as_str(), "hv1");
    assert_eq!(hv1.reserve_memory, MiB(4096));
    assert_eq!(hv1.max_guests, Some(20));
    assert!(matches!(hv1.libvirt_uri.transport, Transport::Ssh { .. }));
    let hv2 = &fleet.hypervisors[1];
    assert_eq!(hv2.max_guests, None);
    assert_eq!(hv2.reserve_disk, DEFAULT_RESERVE_DISK);
    assert_eq!(hv2.domain_type, DomainType::Kvm);
}

#[test]
fn every_key_comments_and_quotes() {
    let fleet = parse(
        "# the runner's machine\n; another comment\n  [runner]  \n\
         libvirt_uri=\"test:///tmp/node.xml\"\nreserve_memory = 4G\nreserve_disk = '50'\n\
         max_guests = 3\ncpu_overcommit = 1.5\npool_name = runner_disks\n\
         pool_path = /srv/vm-disks/runner\npartition = /machine/runner\ndomain_type = qemu\n",
    )
    .unwrap();
    let runner = &fleet.hypervisors[0];
    assert_eq!(runner.libvirt_uri.uri, "test:///tmp/node.xml");
    assert_eq!(runner.reserve_memory, MiB(4096));
    assert_eq!(runner.reserve_disk, Bytes::from_gib(50));
    assert_eq!(runner.max_guests, Some(3));
    assert_eq!(runner.cpu_overcommit, 1.5);
    assert_eq!(runner.pool_name, "runner_disks");
    assert_eq!(runner.pool_path, PathBuf::from("/srv/vm-disks/runner"));
    assert_eq!(runner.partition.as_deref(), Some("/machine/runner"));
    assert_eq!(runner.domain_type, DomainType::Qemu);
}

#[test]
fn an_unknown_key_points_at_its_line_and_suggests_the_likely_one() {
    let (message, hint) =
        error_text("[hv1]\nlibvirt_uri = qemu:///system\n  reserv_memory = 4096\n");
    assert_eq!(
        message,
        "/etc/trog-provisioner/hypervisors.conf:3:3: unknown key `reserv_memory` in [hv1]"
    );
    assert!(hint.starts_with("did you mean `reserve_memory`?"), "{hint}");
    let (_, hint) = error_text("[hv1]\nlibvirt_uri = qemu:///system\ncolour = blue\n");
    assert!(hint.starts_with("the keys are: libvirt_uri,"), "{hint}");
}

#[test]
fn refused_values_name_file_line_column_and_why() {
    let (message, hint) = error_text("[hv1]\nlibvirt_uri = qemu+tcp://hv1/system\n");
    assert_eq!(
        message,
        "/etc/trog-provisioner/hypervisors.conf:2:15: `libvirt_uri` in [hv1] has a value trog \
         cannot use / `qemu+tcp://hv1/system` uses the `tcp` transport, which gives libvirt but no \
         shell on the hypervisor"
    );
    assert!(hint.contains("qemu+ssh://"));
    let cases = [
        ("reserve_memory = lots", "`lots` is not a size"),
        ("reserve_disk = 5X", "`5X` is not a size"),
        ("max_guests = -1", "`-1` is not a whole number"),
        ("cpu_overcommit = 0", "`0` is not above 0"),
        ("cpu_overcommit = many", "`many` is not a number"),
        ("cpu_overcommit = NaN", "`NaN` is not a finite number"),
        ("cpu_overcommit = inf", "`inf` is not a finite number"),
        ("cpu_overcommit = -inf", "`-inf` is not a finite number"),
        ("pool_path = /srv/../etc", "climbs out of itself"),
        ("pool_name = a\tb", "control character \\t"),
        ("pool_path = vms", "`vms` is not an absolute path"),
        (
            "pool_path = /",
            "`/` is a directory of the hypervisor's own system",
        ),
        ("pool_path = /etc/", "`/etc/` (/etc) is a directory of"),
        ("pool_path = /./usr", "`/./usr` (/usr) is a directory of"),
        ("pool_name = my pool", "`my pool` is not a pool name"),
        (
            "partition = /runner",
            "`/runner` is not a partition below /machine/",
        ),
        ("domain_type = xen", "`xen` is neither kvm nor qemu"),
        (
            &format!("pool_path = /{}", "p".repeat(5000)),
            "at most 4096 are allowed",
        ),
    ];
    for (line, cause) in cases {
        let (message, _) = error_text(&format!("[hv1]\nlibvirt_uri = qemu:///system\n{line}\n"));
        assert!(
            message.starts_with("/etc/trog-provisioner/hypervisors.conf:3:"),
            "{message}"
        );
        assert!(message.contains(cause), "{line}: {message}");
    }
}

#[test]
fn structural_mistakes_are_located() {
    let cases = [
        (
            "libvirt_uri = qemu:///system\n",
            "1:1: `libvirt_uri` is set before any `[block]` header",
        ),
        ("[hv1\n", "1:5: a block header is missing its closing `]`"),
        (
            "[hv 1]\nlibvirt_uri = qemu:///system\n",
            "1:2: `hv 1` is not a valid hypervisor name",
        ),
        ("[hv1]\njust words\n", "2:1: `just words` is neither"),
        (
            "[hv1]\nlibvirt_uri = qemu:///system\nmax_guests = 1\nmax_guests = 2\n",
            "4: `max_guests` is set twice in [hv1] (first on line 3)",
        ),
        (
            "[hv1]\nlibvirt_uri = qemu:///system\n[hv1]\nlibvirt_uri = qemu:///system\n",
            "3: [hv1] appears twice (first on line 1)",
        ),
        ("[hv1]\nmax_guests = 2\n", "1: [hv1] has no libvirt_uri"),
        (
            "# nothing yet\n\n",
            "hypervisors.conf describes no hypervisor",
        ),
        ("", "hypervisors.conf describes no hypervisor"),
        (
            "\u{feff}[hv1]\nlibvirt_uri = qemu:///system\n",
            "1:1: the file starts with a byte order mark (U+FEFF)",
        ),
        ("[hv1]\n\u{1b}[2J\n", "2:1: `\\x1b[2J` is neither"),
    ];
    for (text, expected) in cases {
        let (message, hint) = error_text(text);
        assert!(message.contains(expected), "{text:?}: {message}");
        assert!(!hint.is_empty());
    }
}

#[test]
fn an_absent_file_is_no_fleet_and_a_present_one_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hypervisors.conf");
    assert!(load_fleet(&path).unwrap().is_none());
    std::fs::write(&path, "[hv1]\nlibvirt_uri = qemu:///system\n").unwrap();
    assert_eq!(load_fleet(&path).unwrap().unwrap().hypervisors.len(), 1);
    std::fs::create_dir(dir.path().join("a-directory")).unwrap();
    assert!(matches!(
        load_fleet(&dir.path().join("a-directory")),
        Err(HypervisorsConfError::Read { .. })
    ));
}

#[test]
fn without_a_fleet_this_machine_or_the_guests_uri_is_used() {
    let file = Path::new("/etc/trog-provisioner/hypervisors.conf");
    let local = fleet_to_build_on(file, None, None);
    assert_eq!(local.fleet.hypervisors[0].name.as_str(), "localhost");
    assert_eq!(local.fleet.hypervisors[0].libvirt_uri.uri, "qemu:///system");
    assert_eq!(local.warning, None);

    let guest_uri = LibvirtUri::parse("qemu+ssh://root@old.example.test/system").unwrap();
    let old_style = fleet_to_build_on(file, None, Some(&guest_uri));
    assert_eq!(old_style.fleet.hypervisors[0].libvirt_uri, guest_uri);
    assert_eq!(old_style.warning, None);

    let fleet = parse("[hv1]\nlibvirt_uri = qemu:///system\n").unwrap();
    let with_fleet = fleet_to_build_on(file, Some(fleet.clone()), Some(&guest_uri));
    assert_eq!(with_fleet.fleet, fleet);
    assert_eq!(
        with_fleet.warning.as_deref(),
        Some(
            "the guest's libvirt_uri (qemu+ssh://root@old.example.test/system) is ignored because \
             /etc/trog-provisioner/hypervisors.conf describes the fleet; remove it, or pin the \
             guest with hypervisor=NAME"
        )
    );
}

#[test]
fn a_hypervisor_is_looked_up_by_name_and_an_unknown_one_lists_the_names() {
    let file = Path::new("/etc/trog-provisioner/hypervisors.conf");
    let fleet =
        parse("[hv1]\nlibvirt_uri = qemu:///system\n[hv2]\nlibvirt_uri = test:///default\n")
            .unwrap();
    let build = fleet_to_build_on(file, Some(fleet), None);
    assert_eq!(build.hypervisor_named("hv2").unwrap().name.as_str(), "hv2");
    let error = build.hypervisor_named("hv3").unwrap_err();
    assert_eq!(
        error.to_string(),
        "there is no hypervisor named `hv3` in /etc/trog-provisioner/hypervisors.conf (from --hypervisor)"
    );
    assert_eq!(error.hint().unwrap(), "the names it has are: hv1, hv2");

    let local = fleet_to_build_on(file, None, None);
    let error = local.hypervisor_named("localhost").unwrap_err();
    assert!(error
        .to_string()
        .contains("this machine (there is no /etc/trog-provisioner/hypervisors.conf)"));
}

#[test]
fn the_shipped_example_parses_and_shows_every_key() {
    let example = include_str!("../../etc/hypervisors.conf.example");
    let fleet = parse(example).unwrap();
    assert_eq!(fleet.hypervisors.len(), 3);
    for key in KEYS {
        assert!(
            example.contains(&format!("\n{key} =")) || example.contains(&format!("# {key} =")),
            "{key}"
        );
    }
}
