//! What reading a guest's configuration tells the run: deprecated settings reach the run's
//! reporter (the edge prints them), with their text.

use super::*;
use crate::workflow::fake_fleet::RecordedReport;

#[test]
fn a_deprecated_setting_is_told_to_the_reporter_with_where_it_is_written() {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("recipes.d")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/recipes.yaml"),
        etc.join("recipes.yaml"),
    )
    .unwrap();
    std::fs::write(
        etc.join("recipes.d/old.example.test.yaml"),
        "old.example.test:\n  _global:\n    cpus: 1\n    libvirt_uri: test:///default\n  nginx: {}\n",
    )
    .unwrap();
    let paths = InstallationPaths::resolve(etc.to_str(), None, None);
    let domain = DomainName::parse("old.example.test").unwrap();
    let reporter = RecordedReport::default();
    load_guest_configured(&paths, &domain, &reporter).unwrap();
    let said = reporter.0.into_inner();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("warning: libvirt_uri (")
            && said[0].contains("old.example.test.yaml")
            && said[0].ends_with("pin with `hypervisor` if you must"),
        "{said:?}"
    );
}
