//! The directories of a Debian or Ubuntu system that nothing of trog's may be put over or into
//! as a whole: a guest's disk or shared folder mounted there, or a hypervisor's pool made there,
//! would hide or fill what the system itself runs from. One list, so that every setting that
//! names such a place refuses the same ones.

/// The system's own top-level directories, and `/` itself. Their subdirectories are not in the
/// list: `/var/lib/postgresql` is a database's place and may well be a disk of its own.
pub const SYSTEM_DIRECTORIES: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/run", "/sbin",
    "/sys", "/usr", "/var",
];

/// The system directory `path` names, if it names one: written with a trailing slash, doubled
/// slashes or `.` parts (`/etc/`, `//`, `/./usr`) it still names that directory. A path with a
/// `..` part names none here: what it names depends on links, and every setting that takes a
/// path refuses `..` on its own.
pub fn system_directory(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part),
        }
    }
    let normal = format!("/{}", parts.join("/"));
    SYSTEM_DIRECTORIES
        .iter()
        .copied()
        .find(|directory| *directory == normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_way_of_writing_a_system_directory_names_it() {
        for (path, named) in [
            ("/", "/"),
            ("//", "/"),
            ("/.", "/"),
            ("/etc", "/etc"),
            ("/etc/", "/etc"),
            ("/./usr", "/usr"),
            ("/var//", "/var"),
            ("/boot", "/boot"),
            ("/proc", "/proc"),
        ] {
            assert_eq!(system_directory(path), Some(named), "{path}");
        }
    }

    #[test]
    fn other_places_are_not_system_directories() {
        for path in [
            "/srv/data",
            "/var/lib/postgresql",
            "/etcetera",
            "/vms",
            "etc",
            "",
            "/srv/../etc",
        ] {
            assert_eq!(system_directory(path), None, "{path}");
        }
    }
}
