//! What a Debian archive's index files say, read without apt: the files a suite's Release (or
//! InRelease) lists with their SHA256 digests, and the highest version of each package a
//! `Packages` index holds. Pure text in, values out; `package_versions` fetches the files.

use crate::images::debian_version;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// The architecture and component whose packages a built image installs.
pub const PACKAGES_DIR: &str = "main/binary-amd64";

/// One file a Release lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    pub sha256: String,
    pub size: u64,
}

/// The files of a suite's Release's `SHA256` field, by their path under the suite.
pub fn release_files(text: &str) -> BTreeMap<String, ListedFile> {
    let mut files = BTreeMap::new();
    let mut in_sha256 = false;
    for line in signed_text(text).lines() {
        if let Some(entry) = line.strip_prefix(' ') {
            if !in_sha256 {
                continue;
            }
            let mut fields = entry.split_whitespace();
            if let (Some(sha256), Some(size), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            {
                if let Ok(size) = size.parse() {
                    files.insert(
                        path.to_string(),
                        ListedFile {
                            sha256: sha256.to_ascii_lowercase(),
                            size,
                        },
                    );
                }
            }
        } else {
            in_sha256 = line.trim_end() == "SHA256:";
        }
    }
    files
}

/// The text an InRelease signs (a Release is returned as it is): the armour's header and
/// signature left out, dash-escaped lines restored. The signature itself is not checked: the
/// build's apt checks it, and a mirror that lied here would change only an image's key.
fn signed_text(text: &str) -> String {
    if !text.starts_with("-----BEGIN PGP SIGNED MESSAGE-----") {
        return text.to_string();
    }
    let mut lines = text.lines();
    // The armour's header ends at its first empty line.
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
    }
    let mut signed = String::new();
    for line in lines {
        if line.starts_with("-----BEGIN PGP SIGNATURE-----") {
            break;
        }
        signed.push_str(line.strip_prefix("- ").unwrap_or(line));
        signed.push('\n');
    }
    signed
}

/// How an index is compressed, in the order one is preferred: gzip decodes fastest, and
/// Debian's security and updates suites publish only xz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Xz,
}

impl Compression {
    pub const PREFERRED: [Compression; 2] = [Compression::Gzip, Compression::Xz];

    pub fn suffix(self) -> &'static str {
        match self {
            Compression::Gzip => ".gz",
            Compression::Xz => ".xz",
        }
    }
}

/// The `Packages` index to fetch, of those `files` lists: its path under the suite, how it is
/// compressed, and what the Release says it is.
pub fn packages_index(
    files: &BTreeMap<String, ListedFile>,
) -> Option<(String, Compression, ListedFile)> {
    Compression::PREFERRED.iter().find_map(|&compression| {
        let path = format!("{PACKAGES_DIR}/Packages{}", compression.suffix());
        files
            .get(&path)
            .map(|listed| (path.clone(), compression, listed.clone()))
    })
}

/// The highest version of each package in a `Packages` index (an index may hold several
/// versions of one package; apt takes the highest).
pub fn highest_versions(text: &str) -> HashMap<String, String> {
    let mut versions: HashMap<String, String> = HashMap::new();
    let mut package: Option<&str> = None;
    let mut version: Option<&str> = None;
    let mut keep = |package: &mut Option<&str>, version: &mut Option<&str>| {
        if let (Some(name), Some(found)) = (package.take(), version.take()) {
            match versions.get_mut(name) {
                Some(known) if debian_version::compare(found, known) == Ordering::Greater => {
                    *known = found.to_string();
                }
                Some(_) => {}
                None => {
                    versions.insert(name.to_string(), found.to_string());
                }
            }
        }
        *package = None;
        *version = None;
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            keep(&mut package, &mut version);
        } else if let Some(name) = line.strip_prefix("Package:") {
            package = Some(name.trim());
        } else if let Some(found) = line.strip_prefix("Version:") {
            version = Some(found.trim());
        }
    }
    keep(&mut package, &mut version);
    versions
}

/// Each suite's highest versions merged: the highest of each package across them, as apt picks
/// among suites of equal priority.
pub fn merge_highest(into: &mut HashMap<String, String>, suite: &HashMap<String, String>) {
    for (name, version) in suite {
        match into.get_mut(name) {
            Some(known) if debian_version::compare(version, known) == Ordering::Greater => {
                known.clone_from(version);
            }
            Some(_) => {}
            None => {
                into.insert(name.clone(), version.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IN_RELEASE: &str = "-----BEGIN PGP SIGNED MESSAGE-----
Hash: SHA512

Origin: Debian
Suite: stable-security
Codename: bookworm-security
SHA256:
 ffdfc0b919fa70ee96eca136614b977b4aa3041920e03f1b7f755abe564d373f  2579986 main/binary-amd64/Packages
 A28F0765258285920AAE9076F2E256AB3B8341EF03590FDF34E5839C36A9094A   385532 main/binary-amd64/Packages.xz
 0000000000000000000000000000000000000000000000000000000000000000 10 main/binary-i386/Packages.xz
- -dash-escaped: not an entry
-----BEGIN PGP SIGNATURE-----

iQIzBAEBCgAdFiEE
-----END PGP SIGNATURE-----
";

    #[test]
    fn a_clearsigned_release_lists_its_sha256_files() {
        let files = release_files(IN_RELEASE);
        assert_eq!(files.len(), 3, "{files:?}");
        assert_eq!(
            files["main/binary-amd64/Packages.xz"],
            ListedFile {
                sha256: "a28f0765258285920aae9076f2e256ab3b8341ef03590fdf34e5839c36a9094a".into(),
                size: 385_532
            }
        );
        // Only xz is published: that is the index to fetch.
        let (path, compression, listed) = packages_index(&files).unwrap();
        assert_eq!(path, "main/binary-amd64/Packages.xz");
        assert_eq!(compression, Compression::Xz);
        assert_eq!(listed.size, 385_532);
    }

    #[test]
    fn gzip_is_preferred_and_other_digests_are_not_taken_for_sha256() {
        let release = "Codename: bookworm\nMD5Sum:\n a8ed 12 main/binary-amd64/Packages.gz\nSHA256:\n 6777 12084798 main/binary-amd64/Packages.gz\n 9e0b 8790396 main/binary-amd64/Packages.xz\n";
        let files = release_files(release);
        let (path, compression, listed) = packages_index(&files).unwrap();
        assert_eq!(
            (path.as_str(), compression, listed.sha256.as_str()),
            ("main/binary-amd64/Packages.gz", Compression::Gzip, "6777")
        );
        assert!(packages_index(&release_files("SHA256:\n 1 2 contrib/x\n")).is_none());
    }

    #[test]
    fn an_index_gives_the_highest_version_of_each_package() {
        let index = "Package: nginx
Version: 1.22.1-9
Description: small, powerful
 Version: 9.9 (a continuation line, not a field)

Package: nginx
Version: 1.22.1-9+deb12u1

Package: nginx
Version: 1.22.1-9~bpo11+1

Package: ufw
Source: ufw
Version: 0.36.2-1
";
        let versions = highest_versions(index);
        assert_eq!(versions.len(), 2);
        assert_eq!(versions["nginx"], "1.22.1-9+deb12u1");
        assert_eq!(versions["ufw"], "0.36.2-1");

        // Across suites: the security suite's newer nginx wins, the release's sudo stays.
        let mut merged = highest_versions(
            "Package: nginx\nVersion: 1.22.1-9\n\nPackage: sudo\nVersion: 1.9.13p3-1+deb12u1\n",
        );
        merge_highest(
            &mut merged,
            &highest_versions(
                "Package: nginx\nVersion: 1.22.1-9+deb12u2\n\nPackage: sudo\nVersion: 1.9.13p3-1\n",
            ),
        );
        assert_eq!(merged["nginx"], "1.22.1-9+deb12u2");
        assert_eq!(merged["sudo"], "1.9.13p3-1+deb12u1");
    }
}
