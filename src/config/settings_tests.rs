//! Tests of `settings.rs`: defaults, every field, and every way a setting is refused.

use super::*;
use crate::config::yaml::parse_located;
use std::path::Path;

fn settings(yaml: &str) -> Result<(GuestSettings, Vec<DeprecatedSetting>), Vec<SettingProblem>> {
    let tree = parse_located(Path::new("g.yaml"), yaml).unwrap();
    let entries = match tree.value {
        Node::Mapping(entries) => entries,
        Node::Null => IndexMap::new(),
        other => panic!("{other:?}"),
    };
    settings_from_global(&entries, &[])
}

const MINIMAL: &str = "admin_user: someadmin\ncontact_email: ops@example.test\n";

#[test]
fn defaults_fill_everything_not_written() {
    let (settings, deprecations) = settings(MINIMAL).unwrap();
    assert_eq!(settings.distro, Distro::Ubuntu);
    assert_eq!(settings.timezone, "Etc/UTC");
    assert_eq!(settings.network, "default");
    assert_eq!(settings.size, Bytes::from_gib(10));
    assert_eq!(settings.memory, MiB(1024));
    assert_eq!(settings.cpus, 1);
    assert_eq!(settings.cpu_mode, "host-passthrough");
    assert!(settings.ips.is_empty() && settings.release.is_none() && settings.image.is_none());
    assert!(deprecations.is_empty());
}

#[test]
fn every_declared_default_passes_its_own_check() {
    for declaration in GLOBAL_SETTINGS {
        if let Presence::Default(text) = declaration.presence {
            default_value(declaration.setting_type, text);
        }
    }
}

#[test]
fn every_setting_is_read_into_its_field() {
    let digest = "0123456789abcdef".repeat(4);
    let yaml = format!(
        "{MINIMAL}distro: debian\nrelease: bookworm\nmirror: http://m.example.test/debian\n\
         timezone: Europe/Berlin\nnetwork: lan\nbridge: br0\n\
         gateway: 192.0.2.1\nresolvers: [192.0.2.53, \"2001:db8::53\"]\nsearch_domains: [example.test, lan]\n\
         ips: [192.0.2.10/24, \"2001:db8::10/64\"]\nsize: 20G\nmemory: 2G\ncpus: 4\n\
         image: {{url: \"https://img.example.test/b.qcow2\", sha256: {digest}}}\npackages: [htop]\n\
         hypervisor: hv1\ncpu_mode: host-model\n\
         aliases: [www.example.test]\nlibvirt_uri: \"qemu+ssh://root@hv1.example.test/system\"\n"
    );
    let (settings, deprecations) = settings(&yaml).unwrap();
    assert_eq!(settings.distro, Distro::Debian);
    assert_eq!(settings.release.as_deref(), Some("bookworm"));
    assert_eq!(
        settings.mirror.as_deref(),
        Some("http://m.example.test/debian")
    );
    assert_eq!(settings.timezone, "Europe/Berlin");
    assert_eq!(
        (settings.network.as_str(), settings.bridge.as_deref()),
        ("lan", Some("br0"))
    );
    assert_eq!(settings.gateway, Some("192.0.2.1".parse().unwrap()));
    assert_eq!(settings.resolvers.len(), 2);
    assert_eq!(settings.search_domains, ["example.test", "lan"]);
    assert_eq!(settings.ips[1].to_string(), "2001:db8::10/64");
    assert_eq!(
        (settings.size, settings.memory, settings.cpus),
        (Bytes::from_gib(20), MiB(2048), 4)
    );
    assert_eq!(settings.image.unwrap().sha256, digest);
    assert_eq!(settings.packages, ["htop"]);
    assert_eq!(settings.hypervisor.unwrap().as_str(), "hv1");
    assert_eq!(settings.cpu_mode, "host-model");
    assert_eq!(settings.aliases[0].as_str(), "www.example.test");
    assert!(settings.libvirt_uri.is_some());
    assert_eq!(deprecations.len(), 1);
    assert_eq!(deprecations[0].key, "libvirt_uri");
    assert_eq!(deprecations[0].origin.line, 21);
}

#[test]
fn every_missing_required_setting_is_reported_at_once() {
    let problems = settings("memory: 2048\n").unwrap_err();
    let keys: Vec<_> = problems
        .iter()
        .map(|problem| problem.key_path.as_str())
        .collect();
    assert_eq!(keys, ["_global.admin_user", "_global.contact_email"]);
    assert!(problems
        .iter()
        .all(|problem| matches!(problem.kind, SettingProblemKind::Missing { .. })));
}

#[test]
fn null_unsets_and_a_required_null_is_missing() {
    let problems = settings("admin_user: ~\ncontact_email: ops@example.test\n").unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].key_path, "_global.admin_user");
    let (settings, _) = settings(&format!("{MINIMAL}memory: ~\n")).unwrap();
    assert_eq!(settings.memory, MiB(1024));
}

#[test]
fn unknown_keys_are_named_with_a_suggestion() {
    let problems = settings(&format!("{MINIMAL}memroy: 2048\nflavour: big\n")).unwrap_err();
    assert_eq!(problems.len(), 2);
    assert_eq!(
        problems[0].to_string(),
        "g.yaml:3:1: `_global.memroy` is not a setting (did you mean `memory`?)"
    );
    assert_eq!(
        problems[1].to_string(),
        "g.yaml:4:1: `_global.flavour` is not a setting"
    );
}

#[test]
fn settings_declared_by_recipes_pass_untyped_and_are_suggested() {
    let tree = parse_located(
        Path::new("g.yaml"),
        &format!("{MINIMAL}disk_bus: scsi\ndisk_buss: x\n"),
    )
    .unwrap();
    let Node::Mapping(entries) = tree.value else {
        panic!()
    };
    let problems = settings_from_global(&entries, &["disk_bus".to_string()]).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0].to_string(),
        "g.yaml:4:1: `_global.disk_buss` is not a setting (did you mean `disk_bus`?)"
    );
    let tree = parse_located(Path::new("g.yaml"), &format!("{MINIMAL}disk_bus: scsi\n")).unwrap();
    let Node::Mapping(entries) = tree.value else {
        panic!()
    };
    assert!(settings_from_global(&entries, &["disk_bus".to_string()]).is_ok());
}

#[test]
fn wrong_types_are_all_reported_with_missing_ones() {
    let problems =
        settings("cpus: many\nsize: [1]\nimage: {url: \"https://x.test/i\", sha256: zz}\n")
            .unwrap_err();
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        text[0],
        "g.yaml:1:7: `_global.cpus`: expected a whole number, found the text `many`"
    );
    assert_eq!(
        text[1],
        "g.yaml:2:7: `_global.size`: expected a size, found a list"
    );
    assert!(
        text[2].starts_with("g.yaml:3:42: `_global.image.sha256`:"),
        "{}",
        text[2]
    );
    assert!(
        text[3].starts_with("`_global.admin_user` (the login"),
        "{}",
        text[3]
    );
    assert_eq!(problems.len(), 5);
}

#[test]
fn placeholders_load_so_that_the_scan_can_name_them() {
    let (settings, _) =
        settings("admin_user: CHANGEME\ncontact_email: CHANGEME\nmemory: CHANGEME\n").unwrap();
    assert_eq!(settings.admin_user, "CHANGEME");
    assert_eq!(settings.contact_email, "CHANGEME");
    assert_eq!(settings.memory, MiB(1024));
}

#[test]
fn settings_serialize_as_the_templates_global() {
    let yaml = format!("{MINIMAL}ips: [192.0.2.10/24]\nmemory: 2G\nsize: 1G\n");
    let (settings, _) = settings(&yaml).unwrap();
    let global = serde_json::to_value(&settings).unwrap();
    assert_eq!(global["ips"][0], "192.0.2.10/24");
    assert_eq!(global["memory"], 2048);
    assert_eq!(global["size"], 1024 * 1024 * 1024);
    assert_eq!(global["distro"], "ubuntu");
    assert_eq!(global["release"], serde_json::Value::Null);
}

#[test]
fn a_cache_is_an_http_url() {
    let (parsed, _) = settings(&format!("{MINIMAL}cache: http://hub.example.test:3128\n")).unwrap();
    assert_eq!(
        parsed.cache.as_deref(),
        Some("http://hub.example.test:3128")
    );
    let problems = settings(&format!("{MINIMAL}cache: hub.example.test:3128\n")).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|problem| problem.to_string().contains("_global.cache")),
        "{problems:?}"
    );
}

#[test]
fn a_domain_runs_on_its_own_guest_another_domains_machine_or_an_existing_host() {
    let (own, _) = settings(MINIMAL).unwrap();
    assert_eq!(own.runs_on(), RunsOn::OwnGuest);
    let (dependent, _) = settings(&format!("{MINIMAL}depends_on: db.example.test\n")).unwrap();
    assert_eq!(
        dependent.runs_on(),
        RunsOn::DependsOn(DomainName::parse("db.example.test").unwrap())
    );
    let (existing, _) = settings(&format!("{MINIMAL}existing_host: 192.0.2.7\n")).unwrap();
    assert_eq!(existing.runs_on(), RunsOn::ExistingHost("192.0.2.7".into()));
    let problems = settings(&format!("{MINIMAL}existing_host: \"a b;c\"\n")).unwrap_err();
    assert!(
        problems[0]
            .to_string()
            .contains("is neither an IP address nor a DNS name"),
        "{problems:?}"
    );
}

#[test]
fn admin_user_is_required_to_build_a_guest_and_is_root_on_an_existing_host() {
    let contact = "contact_email: ops@example.test\n";
    let problems = settings(contact).unwrap_err();
    assert!(
        problems[0].to_string().contains("`_global.admin_user`"),
        "{problems:?}"
    );
    let (existing, _) = settings(&format!("{contact}existing_host: old.example.test\n")).unwrap();
    assert_eq!(existing.admin_user, "root");
    let (named, _) = settings(&format!(
        "{contact}existing_host: old.example.test\nadmin_user: ops\n"
    ))
    .unwrap();
    assert_eq!(named.admin_user, "ops");
    // A dependent logs in as its machine's admin: none of its own is asked for.
    let (dependent, _) = settings(&format!("{contact}depends_on: web.example.test\n")).unwrap();
    assert_eq!(dependent.admin_user, "");
}

#[test]
fn fallback_mirrors_are_read_in_order_and_need_the_mirror_they_follow() {
    let (read, _) = settings(&format!(
        "{MINIMAL}mirror: http://hub.example.test:3142/deb.debian.org/debian\n\
         fallback_mirrors: [http://deb.debian.org/debian, https://mirror.example.test/debian]\n"
    ))
    .unwrap();
    assert_eq!(
        read.fallback_mirrors,
        [
            "http://deb.debian.org/debian",
            "https://mirror.example.test/debian"
        ]
    );
    assert!(read.fallback_security_mirrors.is_empty());

    let problems = settings(&format!(
        "{MINIMAL}fallback_mirrors: [http://deb.debian.org/debian]\n\
         fallback_security_mirrors: [http://deb.debian.org/debian-security]\n"
    ))
    .unwrap_err();
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0]
            .starts_with("g.yaml:3:1: `_global.fallback_mirrors`: is tried after `mirror` fails"),
        "{said:?}"
    );
    assert!(
        said[1].contains("`security_mirror` is set nowhere"),
        "{said:?}"
    );
}

#[test]
fn a_security_mirror_needs_the_mirror_it_serves_beside() {
    let problems = settings(&format!(
        "{MINIMAL}security_mirror: http://hub.example.test:3142/deb.debian.org/debian-security\n"
    ))
    .unwrap_err();
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(
            "g.yaml:3:1: `_global.security_mirror`: serves the security suite beside `mirror`, and `mirror` is set nowhere"
        ),
        "{said:?}"
    );

    let (read, _) = settings(&format!(
        "{MINIMAL}mirror: http://hub.example.test:3142/deb.debian.org/debian\n\
         security_mirror: http://hub.example.test:3142/deb.debian.org/debian-security\n"
    ))
    .unwrap();
    assert_eq!(
        read.security_mirror.as_deref(),
        Some("http://hub.example.test:3142/deb.debian.org/debian-security")
    );
}

#[test]
fn a_pinned_image_is_refused_beside_a_baked_one_on_debian() {
    let image = "image: {url: 'https://images.example.test/base.qcow2', sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}\n";
    let debian = format!("{MINIMAL}distro: debian\n");
    let problems = settings(&format!("{debian}bake_packages: true\n{image}")).unwrap_err();
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("g.yaml:5:1: `_global.image`: is not used with `bake_packages: true`"),
        "{said:?}"
    );
    // Either alone is fine, and so is an image pinned with bake_packages off, or on a
    // distribution whose images are not built (its guests keep their declared image).
    settings(&format!("{debian}bake_packages: true\n")).unwrap();
    settings(&format!("{debian}{image}")).unwrap();
    settings(&format!("{debian}bake_packages: false\n{image}")).unwrap();
    settings(&format!(
        "{MINIMAL}distro: ubuntu\nbake_packages: true\n{image}"
    ))
    .unwrap();
}

#[test]
fn a_gateway_is_on_the_subnet_of_the_addresses_it_routes_for() {
    for written in [
        "ips: [10.0.0.5/24]\ngateway: 10.0.0.1\n",
        "ips: [10.0.0.5/24, 192.0.2.5/24]\ngateway: 192.0.2.1\n",
        "ips: [2001:db8::5/64]\ngateway: 2001:db8::1\n",
        "ips: [10.0.0.5/0]\ngateway: 192.0.2.1\n",
        "address_range: 10.0.0.10-10.0.0.20/24\ngateway: 10.0.0.1\n",
        "address_range: 10.0.0.10-10.0.0.20/24\nips: [192.0.2.5/24]\ngateway: 192.0.2.1\n",
        "gateway: 10.0.0.1\n",
    ] {
        assert!(
            settings(&format!("{MINIMAL}{written}")).is_ok(),
            "{written}"
        );
    }
    for (written, why) in [
        (
            "ips: [10.0.0.5/24]\ngateway: 192.168.9.1\n",
            "g.yaml:4:10: `_global.gateway`: 192.168.9.1 is outside the subnet of every address in `ips` (10.0.0.5/24)",
        ),
        (
            "ips: [2001:db8::5/64]\ngateway: 10.0.0.1\n",
            "is outside the subnet of every address in `ips`",
        ),
        (
            "address_range: 10.0.0.10-10.0.0.20/24\ngateway: 10.0.1.1\n",
            "g.yaml:4:10: `_global.gateway`: 10.0.1.1 is outside the subnet of `address_range` 10.0.0.10-10.0.0.20/24",
        ),
    ] {
        let said = refused(written);
        assert!(said.len() == 1 && said[0].contains(why), "{written}: {said:?}");
    }
}

/// What the settings `written` after the minimal ones are refused with, one line a problem.
fn refused(written: &str) -> Vec<String> {
    settings(&format!("{MINIMAL}{written}"))
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn an_address_of_ips_is_refused_at_its_own_line_naming_the_gateway_it_equals() {
    for (written, why) in [
        (
            "ips:\n  - 192.0.2.5/24\n  - 192.0.2.5/24\n",
            "g.yaml:5:5: `_global.ips[1]`: 192.0.2.5 is listed twice (the first is ips[0])",
        ),
        (
            "ips: [192.0.2.255/24]\n",
            "g.yaml:3:7: `_global.ips[0]`: 192.0.2.255 is the broadcast address of the subnet 192.0.2.0/24",
        ),
        (
            "ips: [192.0.2.5/24]\ngateway: 192.0.2.5\n",
            "g.yaml:3:7: `_global.ips[0]`: 192.0.2.5 is the guest's `gateway` too (g.yaml:4:10)",
        ),
    ] {
        let said = refused(written);
        assert!(said.len() == 1 && said[0].contains(why), "{written}: {said:?}");
    }
}
