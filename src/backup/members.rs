//! What a backup may put back. An archive is made by the guest's own tar as root, so its
//! members are only as trustworthy as the guest was when it was backed up: before one is sent to
//! a new root disk, every member is checked here, on this machine, to lie inside the paths the
//! backup recorded (its `.recipes` file): no absolute name, no `..`, no device, no symbolic link
//! that points out of those paths, no hard link to a file outside them, and nothing written
//! through a symbolic link. One bad member refuses the whole archive.

use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ArchiveMembersError {
    #[error("cannot read the members of the backup {}", archive.display())]
    Read {
        archive: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the backup {} records `{path}`, which is not an absolute path of plain characters", archive.display())]
    BadRecord { archive: PathBuf, path: String },
    #[error("the backup {} holds `{member}`, which restore refuses: {why}", archive.display())]
    Refused {
        archive: PathBuf,
        member: String,
        why: Refusal,
    },
}

/// Why a member is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Absolute,
    /// A `..`, `.` or empty part in its name.
    UncleanName,
    /// Not inside any recorded path.
    Outside {
        recorded: Vec<String>,
    },
    /// A symbolic link whose target is not inside the recorded paths.
    LinkOut {
        target: String,
    },
    /// A hard link to a file not inside the recorded paths.
    HardLinkOut {
        target: String,
    },
    /// Its name passes through a symbolic link the archive made.
    ThroughLink {
        link: String,
    },
    /// A device or another kind of member a backup of files has no use for.
    Kind {
        kind: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Absolute => write!(f, "an absolute name"),
            Refusal::UncleanName => write!(f, "a name with `..`, `.` or an empty part"),
            Refusal::Outside { recorded } => write!(
                f,
                "outside the paths the backup recorded ({})",
                recorded.join(", ")
            ),
            Refusal::LinkOut { target } => write!(
                f,
                "a symbolic link to `{target}`, outside the paths the backup recorded"
            ),
            Refusal::HardLinkOut { target } => write!(
                f,
                "a hard link to `{target}`, outside the paths the backup recorded"
            ),
            Refusal::ThroughLink { link } => {
                write!(f, "it would be written through the symbolic link `{link}`")
            }
            Refusal::Kind { kind } => write!(f, "a member of kind {kind}"),
        }
    }
}

impl Diagnose for ArchiveMembersError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Guest
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ArchiveMembersError::Read { .. } => "the archive is damaged: move it out of the backup directory (the next newest is used then), or take a new one with `trog backup`".into(),
            ArchiveMembersError::BadRecord { .. } | ArchiveMembersError::Refused { .. } => "restore writes only inside the paths a backup recorded; this archive was not made by trog's backup as it is, or the guest was not itself: move it out of the backup directory (the next newest is used then)".into(),
        })
    }
}

/// A path as its parts, without a leading or trailing `/`; `None` for an empty, `.` or `..` part.
fn clean_parts(name: &[u8]) -> Option<Vec<&[u8]>> {
    let trimmed = name.strip_suffix(b"/").unwrap_or(name);
    let parts: Vec<&[u8]> = trimmed.split(|byte| *byte == b'/').collect();
    let unclean = parts
        .iter()
        .any(|part| part.is_empty() || *part == b"." || *part == b"..");
    (!unclean).then_some(parts)
}

/// `link`'s `target` resolved by its parts from the directory the link is in (from the root when
/// absolute); `None` when it climbs above the root.
fn resolve_link(link: &[&[u8]], target: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut resolved: Vec<Vec<u8>> = if target.starts_with(b"/") {
        Vec::new()
    } else {
        link[..link.len() - 1]
            .iter()
            .map(|part| part.to_vec())
            .collect()
    };
    for part in target.split(|byte| *byte == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                resolved.pop()?;
            }
            part => resolved.push(part.to_vec()),
        }
    }
    Some(resolved)
}

/// Whether `parts` is one of `recorded` or inside one.
fn inside<P: AsRef<[u8]>>(parts: &[P], recorded: &[Vec<&[u8]>]) -> bool {
    recorded.iter().any(|root| {
        root.len() <= parts.len()
            && root
                .iter()
                .zip(parts)
                .all(|(root_part, part)| *root_part == part.as_ref())
    })
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Checks every member of the gzip tar at `archive` against `recorded` (absolute paths, as the
/// backup's recipes file lists them), reading it as a stream. Returns the recorded paths the
/// archive holds, relative to `/` and in their recorded order: what the guest extracts, and
/// nothing else.
pub fn check_members(
    archive: &Path,
    recorded: &[String],
) -> Result<Vec<String>, ArchiveMembersError> {
    let read_error = |source| ArchiveMembersError::Read {
        archive: archive.to_path_buf(),
        source,
    };
    let mut roots: Vec<Vec<&[u8]>> = Vec::new();
    for path in recorded {
        let parts = crate::backup::plain_absolute(path)
            .then(|| clean_parts(&path.as_bytes()[1..]))
            .flatten()
            .ok_or_else(|| ArchiveMembersError::BadRecord {
                archive: archive.to_path_buf(),
                path: path.clone(),
            })?;
        roots.push(parts);
    }
    let file = std::fs::File::open(archive).map_err(read_error)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)));
    let mut links: HashSet<Vec<u8>> = HashSet::new();
    let mut held = vec![false; roots.len()];
    for entry in tar.entries().map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let name = entry.path_bytes().into_owned();
        let refuse = |why| ArchiveMembersError::Refused {
            archive: archive.to_path_buf(),
            member: lossy(&name),
            why,
        };
        let parts = member_parts(&name, &roots, &links, recorded).map_err(refuse)?;
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Regular
            | tar::EntryType::Continuous
            | tar::EntryType::GNUSparse
            | tar::EntryType::Directory
            | tar::EntryType::Fifo => {}
            tar::EntryType::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                let points_inside =
                    resolve_link(&parts, &target).is_some_and(|resolved| inside(&resolved, &roots));
                if !points_inside {
                    return Err(refuse(Refusal::LinkOut {
                        target: lossy(&target),
                    }));
                }
                links.insert(parts.join(&b'/'));
            }
            tar::EntryType::Link => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                if member_parts(&target, &roots, &links, recorded).is_err() {
                    return Err(refuse(Refusal::HardLinkOut {
                        target: lossy(&target),
                    }));
                }
            }
            other => {
                return Err(refuse(Refusal::Kind {
                    kind: format!("{other:?}"),
                }))
            }
        }
        for (index, root) in roots.iter().enumerate() {
            if inside(&parts, std::slice::from_ref(root)) {
                held[index] = true;
            }
        }
    }
    Ok(recorded
        .iter()
        .zip(held)
        .filter(|(_, held)| *held)
        .map(|(path, _)| path.trim_start_matches('/').to_string())
        .collect())
}

/// A member's name as parts, when it is clean, inside a recorded path and not under a link the
/// archive made.
fn member_parts<'n>(
    name: &'n [u8],
    roots: &[Vec<&[u8]>],
    links: &HashSet<Vec<u8>>,
    recorded: &[String],
) -> Result<Vec<&'n [u8]>, Refusal> {
    if name.starts_with(b"/") {
        return Err(Refusal::Absolute);
    }
    let parts = clean_parts(name).ok_or(Refusal::UncleanName)?;
    if !inside(&parts, roots) {
        return Err(Refusal::Outside {
            recorded: recorded.to_vec(),
        });
    }
    for end in 1..parts.len() {
        let prefix = parts[..end].join(&b'/');
        if links.contains(&prefix) {
            return Err(Refusal::ThroughLink {
                link: lossy(&prefix),
            });
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One member of a crafted archive: its raw name, kind and link target, written into the
    /// header as bytes (the `tar` crate's own setters refuse the bad names on purpose).
    struct Member<'a> {
        name: &'a str,
        kind: tar::EntryType,
        link: &'a str,
    }

    fn file(name: &str) -> Member<'_> {
        Member {
            name,
            kind: tar::EntryType::Regular,
            link: "",
        }
    }

    fn linked<'a>(name: &'a str, kind: tar::EntryType, link: &'a str) -> Member<'a> {
        Member { name, kind, link }
    }

    /// A gzip tar of `members` in a file of its own.
    fn archive(members: &[Member]) -> tempfile::NamedTempFile {
        let mut tar = tar::Builder::new(Vec::new());
        for member in members {
            let mut header = tar::Header::new_gnu();
            let gnu = header.as_gnu_mut().unwrap();
            gnu.name[..member.name.len()].copy_from_slice(member.name.as_bytes());
            gnu.linkname[..member.link.len()].copy_from_slice(member.link.as_bytes());
            header.set_entry_type(member.kind);
            header.set_mode(0o644);
            let data: &[u8] = if member.kind == tar::EntryType::Regular {
                b"data"
            } else {
                b""
            };
            header.set_size(data.len() as u64);
            header.set_cksum();
            tar.append(&header, data).unwrap();
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &tar.into_inner().unwrap()).unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), encoder.finish().unwrap()).unwrap();
        file
    }

    fn check(members: &[Member], recorded: &[&str]) -> Result<Vec<String>, ArchiveMembersError> {
        let recorded: Vec<String> = recorded.iter().map(|path| path.to_string()).collect();
        check_members(archive(members).path(), &recorded)
    }

    fn refusal(members: &[Member], recorded: &[&str]) -> Refusal {
        match check(members, recorded) {
            Err(ArchiveMembersError::Refused { why, .. }) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_backup_as_trog_takes_it_is_accepted_and_names_what_it_holds() {
        let members = [
            linked("var/www/", tar::EntryType::Directory, ""),
            file("var/www/index.html"),
            linked("var/www/current", tar::EntryType::Symlink, "releases/5"),
            linked(
                "var/www/abs",
                tar::EntryType::Symlink,
                "/var/www/index.html",
            ),
            linked("var/www/again", tar::EntryType::Link, "var/www/index.html"),
            file("home/admin/notes"),
        ];
        assert_eq!(
            check(&members, &["/home", "/srv/site", "/var/www"]).unwrap(),
            ["home", "var/www"]
        );
        assert_eq!(check(&[], &["/var/www"]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn members_outside_the_recorded_paths_are_refused() {
        let www = &["/var/www"][..];
        assert_eq!(refusal(&[file("../etc/passwd")], www), Refusal::UncleanName);
        assert_eq!(
            refusal(&[file("var/www/../../etc/passwd")], www),
            Refusal::UncleanName
        );
        assert_eq!(refusal(&[file("/etc/shadow")], www), Refusal::Absolute);
        assert!(matches!(
            refusal(&[file("etc/cron.d/x")], www),
            Refusal::Outside { .. }
        ));
        // A sibling whose name starts the same is not inside.
        assert!(matches!(
            refusal(&[file("var/www2/x")], www),
            Refusal::Outside { .. }
        ));
        assert!(matches!(
            refusal(&[file("var")], www),
            Refusal::Outside { .. }
        ));
    }

    #[test]
    fn links_out_and_members_through_links_are_refused() {
        let www = &["/var/www"][..];
        assert_eq!(
            refusal(&[linked("var/www/root", tar::EntryType::Symlink, "/")], www),
            Refusal::LinkOut { target: "/".into() }
        );
        assert_eq!(
            refusal(
                &[linked("var/www/up", tar::EntryType::Symlink, "../../etc")],
                www
            ),
            Refusal::LinkOut {
                target: "../../etc".into()
            }
        );
        assert_eq!(
            refusal(
                &[linked("var/www/shadow", tar::EntryType::Link, "etc/shadow")],
                www
            ),
            Refusal::HardLinkOut {
                target: "etc/shadow".into()
            }
        );
        // A link inside, then a file written through it.
        assert_eq!(
            refusal(
                &[
                    linked("var/www/cur", tar::EntryType::Symlink, "releases"),
                    file("var/www/cur/x"),
                ],
                www
            ),
            Refusal::ThroughLink {
                link: "var/www/cur".into()
            }
        );
        assert!(matches!(
            refusal(&[linked("var/www/disk", tar::EntryType::Block, "")], www),
            Refusal::Kind { .. }
        ));
    }

    /// A link to `/`, then a file under it: the classic way out of an extraction.
    #[test]
    fn a_link_to_the_root_followed_by_a_file_under_it_is_refused() {
        let members = [
            linked("var/www/root", tar::EntryType::Symlink, "/"),
            file("var/www/root/etc/passwd"),
        ];
        assert!(check(&members, &["/var/www"]).is_err());
    }

    #[test]
    fn a_record_that_is_not_a_plain_absolute_path_is_refused() {
        assert!(matches!(
            check(&[file("var/www/x")], &["/var/../etc"]),
            Err(ArchiveMembersError::BadRecord { .. })
        ));
    }
}
