//! The data recipe's Makefile target, rendered and run by make in a directory of this test's, with
//! stand-ins for `chown` and `stat` (the owner is a name in a file): the archive unpacked and its
//! Makefile run once per archive, and on an archive unpacked before, a new `owner` given the files
//! and a new `make_target` run once. A real guest runs it in `tests/recipes_on_guests`.

use super::stand_ins::{target_alone, StandIns};
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

/// `chown -R OWNER: DIR` records the call and the owner; `stat -c %U DIR` answers it.
const FAKES: &[(&str, &str)] = &[
    (
        "chown",
        "#!/bin/sh\nhere=$(dirname \"$0\")/..\necho \"chown $*\" >>\"$here/calls\"\necho \"${2%:}\" >\"$here/owner\"\n",
    ),
    (
        "stat",
        "#!/bin/sh\nhere=$(dirname \"$0\")/..\ncat \"$here/owner\" 2>/dev/null || echo root\n",
    ),
];

/// The site's Makefile: each target says it ran.
const SITE_MAKEFILE: &str = "all:\n\techo all >> ../ran\nother:\n\techo other >> ../ran\n";

struct Site {
    stand_ins: StandIns,
}

impl Site {
    fn new() -> Site {
        let stand_ins = StandIns::new(FAKES);
        std::fs::create_dir(stand_ins.path("payload")).unwrap();
        let site = Site { stand_ins };
        site.archive("first", 1_000_000_000);
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.stand_ins.path(name)
    }

    /// A new archive in the payload: the site's Makefile and a page saying `text`, its files
    /// dated `mtime` (seconds since the epoch: a later archive's are newer, as a site's are).
    fn archive(&self, text: &str, mtime: u64) {
        let source = tempfile::tempdir().unwrap();
        std::fs::write(source.path().join("Makefile"), SITE_MAKEFILE).unwrap();
        std::fs::write(source.path().join("page.txt"), text).unwrap();
        let status = Command::new("tar")
            .arg(format!("--mtime=@{mtime}"))
            .arg("-czf")
            .arg(self.path("payload/data.tar.gz"))
            .arg("-C")
            .arg(source.path())
            .args(["Makefile", "page.txt"])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Runs the data target rendered for `owner` and `make_target`; returns the chown calls and
    /// the site's targets that ran, each since the last run.
    fn run(&self, owner: &str, make_target: &str) -> (Vec<String>, Vec<String>) {
        for file in ["calls", "ran"] {
            std::fs::write(self.path(file), "").unwrap();
        }
        let (target, _) = target_alone(
            "data",
            json!({"site_dir": self.path("site"), "owner": owner, "make_target": make_target}),
        );
        std::fs::write(self.path("payload/Makefile"), target).unwrap();
        let output = self
            .stand_ins
            .run("make", &["-s", "-C", "payload", "data"], b"");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        (self.stand_ins.lines("calls"), self.stand_ins.lines("ran"))
    }
}

#[test]
fn an_archive_is_unpacked_once_and_a_new_owner_or_target_reaches_it() {
    let site = Site::new();
    let site_dir = site.path("site").display().to_string();
    let chown = |owner: &str| vec![format!("chown -R {owner}: {site_dir}")];
    let none = Vec::<String>::new();

    // The first archive: unpacked, given to its owner, its Makefile's default target run.
    assert_eq!(
        site.run("root", ""),
        (chown("root"), vec!["all".to_string()])
    );
    assert_eq!(
        std::fs::read_to_string(site.path("site/page.txt")).unwrap(),
        "first"
    );
    // Again: nothing.
    assert_eq!(site.run("root", ""), (none.clone(), none.clone()));

    // A new owner is given the files; the Makefile does not run again.
    assert_eq!(site.run("www-data", ""), (chown("www-data"), none.clone()));
    assert_eq!(site.run("www-data", ""), (none.clone(), none.clone()));

    // A new target runs once, on the archive already unpacked.
    assert_eq!(
        site.run("www-data", "other"),
        (none.clone(), vec!["other".to_string()])
    );
    assert_eq!(site.run("www-data", "other"), (none.clone(), none.clone()));

    // A new archive: unpacked, given to the owner, the target run.
    site.archive("second", 2_000_000_000);
    assert_eq!(
        site.run("www-data", "other"),
        (chown("www-data"), vec!["other".to_string()])
    );
    assert_eq!(
        std::fs::read_to_string(site.path("site/page.txt")).unwrap(),
        "second"
    );

    // A site unpacked before targets were recorded: its target is taken as the one that ran.
    std::fs::remove_file(site.path("site/.trog-data-target")).unwrap();
    assert_eq!(site.run("www-data", ""), (none.clone(), none));
    assert_eq!(
        std::fs::read_to_string(site.path("site/.trog-data-target")).unwrap(),
        "\n"
    );
}
