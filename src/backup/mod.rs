//! Backups as data: which paths of a guest a backup holds (what its recipes list under
//! `backup:`, and the data recipe's site directory), how archives are named by their UTC time,
//! which one is the newest, which ones a sweep deletes, and the shell that reads those paths on
//! the guest and the one that puts them back. No I/O here; `archive_dir` keeps the files.

pub mod archive_dir;
pub mod members;

use crate::cookbook::resolve::ResolvedRecipes;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::machine::command::shell_quote;
use crate::snapshot::utc_compact;

/// How long backups are kept when `backup_retention_days` is not set (the setting's default,
/// the configuration's).
pub use crate::config::settings::DEFAULT_RETENTION_DAYS;

/// The directory backups go to when `backup_dir` is not set, relative to the configuration
/// directory.
pub const DEFAULT_BACKUP_DIR: &str = "backups";

/// The ending of an archive's file name; its stem is its UTC time (`20261201T010203Z`).
pub const ARCHIVE_SUFFIX: &str = ".tar.gz";
/// Beside the archive: its sha256, in `sha256sum`'s format (`sha256sum -c` checks it).
pub const DIGEST_SUFFIX: &str = ".tar.gz.sha256";
/// Beside the archive: the recipes it came from, one `recipe path` line per path.
pub const RECIPES_SUFFIX: &str = ".recipes";

#[derive(Debug, thiserror::Error)]
pub enum BackupPathError {
    #[error("recipe {recipe} lists `{path}` under backup:, which is not an absolute path of plain characters")]
    NotAbsolute { recipe: String, path: String },
}

impl Diagnose for BackupPathError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some("write each backup: path as an absolute path without `..` (`/var/lib/mysql-dumps`); `trog recipes` lists the recipes".into())
    }
}

/// Where the installation's backups go for a guest with `settings` (`backup_dir`, relative to
/// the configuration directory).
pub fn backup_dir(
    paths: &crate::config::paths::InstallationPaths,
    settings: &crate::config::settings::GuestSettings,
) -> std::path::PathBuf {
    paths.dir.join(&settings.backup_dir)
}

/// One path a backup holds, and the recipe that asked for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct BackupPath {
    pub path: String,
    pub recipe: String,
}

/// The data recipe, whose `site_dir` holds the site and is always backed up.
const DATA_RECIPE: &str = "data";

/// Whether `path` is absolute, names no parent, and holds no character a shell or a line-based
/// file would misread.
pub(crate) fn plain_absolute(path: &str) -> bool {
    path.starts_with('/')
        && path.len() > 1
        && !path
            .split('/')
            .any(|component| component == ".." || component == ".")
        && !path.chars().any(|c| c.is_control())
}

/// What a backup of a guest running `resolved` holds, sorted by path and each path once (a path
/// two recipes list is credited to the first in order). A path inside another is left out: the
/// outer one holds it.
pub fn backup_paths(resolved: &ResolvedRecipes) -> Result<Vec<BackupPath>, BackupPathError> {
    let mut paths: Vec<BackupPath> = Vec::new();
    for recipe in &resolved.recipes {
        let mut listed = recipe.recipe.manifest.backup.clone();
        if recipe.name.as_str() == DATA_RECIPE {
            if let Some(site_dir) = recipe.args.value.get("site_dir").and_then(|v| v.as_str()) {
                listed.push(site_dir.to_string());
            }
        }
        for path in listed {
            if !plain_absolute(&path) {
                return Err(BackupPathError::NotAbsolute {
                    recipe: recipe.name.to_string(),
                    path,
                });
            }
            let path = path.trim_end_matches('/').to_string();
            if !paths.iter().any(|known| known.path == path) {
                paths.push(BackupPath {
                    path,
                    recipe: recipe.name.to_string(),
                });
            }
        }
    }
    Ok(outermost(paths))
}

/// `paths` sorted, without those inside another of them.
fn outermost(mut paths: Vec<BackupPath>) -> Vec<BackupPath> {
    paths.sort();
    let mut kept: Vec<BackupPath> = Vec::new();
    for candidate in paths {
        let inside = kept.iter().any(|outer| {
            candidate
                .path
                .strip_prefix(&outer.path)
                .is_some_and(|rest| rest.starts_with('/'))
        });
        if !inside {
            kept.push(candidate);
        }
    }
    kept
}

/// The recipe list written beside an archive: `recipe path`, one line per path.
pub fn recipes_file(paths: &[BackupPath]) -> String {
    paths
        .iter()
        .map(|path| format!("{} {}\n", path.recipe, path.path))
        .collect()
}

/// The file name stem of an archive taken at `unix_seconds`.
pub fn archive_stem(unix_seconds: i64) -> String {
    utc_compact(unix_seconds)
}

/// The Unix time an archive's stem names, or `None` for a stem that is not one
/// (`20261201T010203Z`).
pub fn stem_time(stem: &str) -> Option<i64> {
    let time = chrono::NaiveDateTime::parse_from_str(stem, crate::snapshot::UTC_COMPACT).ok()?;
    let seconds = time.and_utc().timestamp();
    // Only the form trog writes: fixed widths, nothing chrono would also accept.
    (utc_compact(seconds) == stem).then_some(seconds)
}

/// The newest of `stems` (archives of one guest), by the time each names.
pub fn newest(stems: &[String]) -> Option<&String> {
    stems
        .iter()
        .filter_map(|stem| stem_time(stem).map(|time| (time, stem)))
        .max()
        .map(|(_, stem)| stem)
}

/// The archives a sweep at `now_unix` deletes: those taken more than `retention_days` days
/// before it. The time is the one each archive's name says (not its file's, which a copy or a
/// restore of the backup directory changes). Names that are not archive stems are never swept.
pub fn past_retention(stems: &[String], now_unix: i64, retention_days: u32) -> Vec<String> {
    let retention_seconds = i64::from(retention_days) * 86_400;
    let mut swept: Vec<String> = stems
        .iter()
        .filter(|stem| stem_time(stem).is_some_and(|taken| now_unix - taken > retention_seconds))
        .cloned()
        .collect();
    swept.sort();
    swept
}

/// Which filesystems of a machine a backup reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filesystems {
    /// Only the root disk's: on a guest trog built (and a dependent's site on one), the data
    /// volume has its own life and is left out.
    RootDisk,
    /// Every one a listed path is on: an existing host has no data volume of trog's, and what
    /// its recipes list is backed up wherever it is mounted.
    Every,
}

/// The shell that writes, to standard output, an uncompressed tar of `paths` on the machine.
/// Deterministic: names sorted, owners by number, no access or change times (GNU format), so the
/// same files give the same bytes. With [`Filesystems::RootDisk`] only the root disk's filesystem
/// is read (`--one-file-system`, and a listed path on another filesystem, such as the data
/// volume, is left out and named on standard error). A listed path that does not exist is
/// passed over.
pub fn guest_tar_script(paths: &[BackupPath], filesystems: Filesystems) -> String {
    let relative: Vec<String> = paths
        .iter()
        .map(|path| shell_quote(path.path.trim_start_matches('/')))
        .collect();
    let (on_root_disk, one_file_system) = match filesystems {
        Filesystems::RootDisk => (
            format!(
                "if [ \"$(stat -c %d \"/$p\")\" = \"$root\" ]; then set -- \"$@\" \"$p\"; \
                 else echo \"{SKIPPED_MARK}/$p\" >&2; fi;"
            ),
            " --one-file-system",
        ),
        Filesystems::Every => ("set -- \"$@\" \"$p\";".to_string(), ""),
    };
    format!(
        "set -e; cd /; root=$(stat -c %d /); set --; \
         for p in {}; do \
           if [ -e \"/$p\" ] || [ -L \"/$p\" ]; then \
             {on_root_disk} \
           fi; \
         done; \
         tar --create --file=- --format=gnu --sort=name --numeric-owner{one_file_system} \
           --files-from=/dev/null -- \"$@\"",
        relative.join(" ")
    )
}

/// What the guest's tar script says before a path it leaves out (on another filesystem).
pub const SKIPPED_MARK: &str = "trog-backup-skipped: ";

/// The paths the guest's tar script left out, from its standard error.
pub fn skipped_paths(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix(SKIPPED_MARK))
        .map(str::to_string)
        .collect()
}

/// The data recipe's record of the site archive it unpacked (in the site directory).
const DATA_RECIPE_MARK: &str = ".trog-data-sha256";

/// The shell that puts a backup back on a guest (run as root, the gzip archive on its standard
/// input): only `members`, each a recorded path relative to `/` that the archive holds (see
/// `members::check_members`, which has checked every member on this machine first), and every
/// file under them replaces the guest's, owners, modes and times as they were. Left out: login
/// keys, since who may log in is the declaration's to say (users.yaml, the guest's key in the
/// store), not an old backup's; and the data recipe's mark of the site archive it unpacked, so
/// that on the new root disk the site's Makefile runs again (the recipe unpacks its archive
/// keeping the restored files that are newer than the archive's copies). GNU tar's own guards
/// stay on besides: no absolute names, no `..`, links delayed until the end.
/// `members` must not be empty: tar given no member extracts them all.
pub fn guest_restore_script(members: &[String]) -> String {
    assert!(!members.is_empty(), "a restore names what it extracts");
    let quoted: Vec<String> = members.iter().map(|member| shell_quote(member)).collect();
    format!(
        "tar --extract --gzip --file=- -C / --numeric-owner --preserve-permissions \
         --wildcards --exclude='*/.ssh/authorized_keys' --exclude='*/{DATA_RECIPE_MARK}' \
         --no-wildcards -- {}",
        quoted.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::local::LocalMachine;
    use crate::machine::{Machine, MachineCommand};

    fn path(path: &str, recipe: &str) -> BackupPath {
        BackupPath {
            path: path.into(),
            recipe: recipe.into(),
        }
    }

    #[test]
    fn nested_paths_are_held_by_the_outer_one() {
        let kept = outermost(vec![
            path("/srv/site/uploads", "nginx"),
            path("/home", "adminconfig"),
            path("/srv/site", "data"),
            path("/srv/sitemap", "other"),
        ]);
        assert_eq!(
            kept,
            vec![
                path("/home", "adminconfig"),
                path("/srv/site", "data"),
                path("/srv/sitemap", "other")
            ]
        );
        assert_eq!(
            recipes_file(&kept),
            "adminconfig /home\ndata /srv/site\nother /srv/sitemap\n"
        );
    }

    #[test]
    fn only_plain_absolute_paths_are_backed_up() {
        assert!(plain_absolute("/var/lib/mysql-dumps"));
        assert!(plain_absolute("/srv/my site"));
        for bad in ["", "/", "var/www", "/srv/../etc", "/srv/./x", "/a\nb"] {
            assert!(!plain_absolute(bad), "{bad:?}");
        }
    }

    #[test]
    fn stems_read_back_the_time_they_were_named_by() {
        for time in [
            0,
            1_764_551_123,
            1_795_000_000,
            951_782_400, /* 2000-02-29 */
        ] {
            assert_eq!(stem_time(&archive_stem(time)), Some(time));
        }
        assert_eq!(stem_time("20261201T010203Z"), Some(1_796_086_923));
        for bad in [
            "20261301T010203Z",
            "20260231T000000Z",
            "20261201T250000Z",
            "20261201T010203",
            "2026120xT010203Z",
            "latest",
        ] {
            assert_eq!(stem_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_newest_is_the_latest_time_not_the_last_listed() {
        let stems = vec![
            "20261201T010203Z".to_string(),
            "notes".to_string(),
            "20261203T000000Z".to_string(),
            "20261130T235959Z".to_string(),
        ];
        assert_eq!(newest(&stems).unwrap(), "20261203T000000Z");
        assert_eq!(newest(&["notes".to_string()]), None);
    }

    #[test]
    fn a_sweep_deletes_only_what_is_past_retention() {
        let now = stem_time("20261231T120000Z").unwrap();
        let stems: Vec<String> = [
            "20261201T115959Z", // 30 days and a second: past 30 days
            "20261201T120000Z", // exactly 30 days: kept
            "20261230T000000Z",
            "20251231T120000Z",
            "README",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            past_retention(&stems, now, 30),
            vec!["20251231T120000Z", "20261201T115959Z"]
        );
        assert_eq!(past_retention(&stems, now, 400), Vec::<String>::new());
        // Zero days: everything taken before now goes.
        assert_eq!(past_retention(&stems, now, 0).len(), 4);
    }

    /// The guest's scripts, run for real on this machine against a scratch root standing in for
    /// the guest's `/`.
    #[test]
    fn the_tar_script_is_deterministic_and_skips_what_is_missing() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path();
        std::fs::create_dir_all(root.join("srv/site")).unwrap();
        std::fs::write(root.join("srv/site/b.txt"), "b").unwrap();
        std::fs::write(root.join("srv/site/a.txt"), "a").unwrap();
        let script = guest_tar_script(
            &[path("/srv/site", "data"), path("/nowhere", "x")],
            Filesystems::RootDisk,
        )
        .replace("cd /;", &format!("cd {};", root.display()))
        .replace("\"/$p\"", &format!("\"{}/$p\"", root.display()))
        .replace("stat -c %d /)", &format!("stat -c %d {})", root.display()));
        let run = || {
            let output = LocalMachine
                .run(&MachineCommand::shell(&script))
                .unwrap()
                .success()
                .unwrap();
            output.stdout
        };
        let first = run();
        assert_eq!(first, run());
        let mut archive = tar::Archive::new(&first[..]);
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|entry| entry.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["srv/site/", "srv/site/a.txt", "srv/site/b.txt"]);
    }

    /// An existing host's backup reads a listed path whatever filesystem it is on; a guest's
    /// leaves out, and names, one off its root disk.
    #[test]
    fn only_a_root_disk_backup_leaves_other_filesystems_out() {
        let listed = [path("/srv/site", "data")];
        let guest = guest_tar_script(&listed, Filesystems::RootDisk);
        assert!(guest.contains("--one-file-system") && guest.contains(SKIPPED_MARK));
        let host = guest_tar_script(&listed, Filesystems::Every);
        assert!(
            !host.contains("--one-file-system") && !host.contains(SKIPPED_MARK),
            "{host}"
        );
        // /proc is another filesystem than / everywhere: read by the host's script only.
        let proc_listed = [path("/proc/self/comm", "x")];
        let run = |filesystems| {
            LocalMachine
                .run(&MachineCommand::shell(&guest_tar_script(
                    &proc_listed,
                    filesystems,
                )))
                .unwrap()
        };
        let skipped = run(Filesystems::RootDisk);
        assert_eq!(
            skipped_paths(&String::from_utf8_lossy(&skipped.stderr)),
            ["/proc/self/comm"]
        );
        let read = run(Filesystems::Every);
        let names: Vec<String> = tar::Archive::new(&read.stdout[..])
            .entries()
            .unwrap()
            .map(|entry| entry.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["proc/self/comm"]);
    }

    /// A backup unpacked over a scratch root: files back with their times, login keys and the
    /// data recipe's mark left out, and nothing outside the members named.
    #[test]
    fn the_restore_script_leaves_out_login_keys_and_the_site_mark() {
        let source = tempfile::tempdir().unwrap();
        let root = source.path();
        for file in [
            "srv/site/index.html",
            "srv/site/.trog-data-sha256",
            "home/admin/.ssh/authorized_keys",
            "home/admin/notes",
            "srv/other/file",
        ] {
            std::fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            std::fs::write(root.join(file), file).unwrap();
        }
        let tar = LocalMachine
            .run(&MachineCommand::shell(&format!(
                "cd {} && tar -czf - srv home",
                root.display()
            )))
            .unwrap()
            .success()
            .unwrap()
            .stdout;
        let target = tempfile::tempdir().unwrap();
        let script = guest_restore_script(&["srv/site".into(), "home".into()])
            .replace("-C /", &format!("-C {}", target.path().display()));
        LocalMachine
            .run(&MachineCommand::shell(&script).stdin(tar))
            .unwrap()
            .success()
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(target.path().join("srv/site/index.html")).unwrap(),
            "srv/site/index.html"
        );
        assert!(target.path().join("home/admin/notes").exists());
        assert!(!target
            .path()
            .join("home/admin/.ssh/authorized_keys")
            .exists());
        assert!(!target.path().join("srv/site/.trog-data-sha256").exists());
        // Only the members named are extracted.
        assert!(!target.path().join("srv/other").exists());
    }

    #[test]
    fn skipped_paths_are_read_from_the_marks() {
        let stderr = format!("tar: something\n{SKIPPED_MARK}/srv/data\n");
        assert_eq!(skipped_paths(&stderr), ["/srv/data"]);
    }
}
