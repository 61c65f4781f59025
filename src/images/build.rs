//! Base images built instead of downloaded: a cloud-init-ready Debian image made from a package
//! mirror (mmdebstrap, no loop devices), for sites whose guests' distribution image cannot be
//! fetched, air-gapped ones with their own mirror included. The image goes into the image cache
//! under its sha256, beside the list of its packages and their versions, so a guest's `image`
//! setting names it exactly as it names a downloaded one.

use crate::machine::{Machine, MachineCommand, MachineError};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The build itself, run with bash as root: the method the project's test image proved. An
/// ordinary account runs it as root of a user namespace of its own ([`AS_NAMESPACE_ROOT`]).
const BUILD_DEBIAN_SCRIPT: &str = include_str!("build_debian.sh");

/// How an account that is not root runs the build: as root of a new user namespace whose other
/// ids are the account's subordinate ones (/etc/subuid, /etc/subgid, through `newuidmap`), with
/// its own mount and process namespaces for mmdebstrap's mounts. The files of the image belong
/// to root and the packages' own users inside the namespace, which `mkfs.ext4 -d`, run in the
/// same namespace, records as they are; nothing runs as the real root, and no sudo is asked.
/// (mmdebstrap's own `--mode=unshare` does the same, but cannot write outside the namespace's
/// ids, where the account's cache is.)
pub const AS_NAMESPACE_ROOT: &[&str] = &[
    "unshare",
    "--map-auto",
    "--map-root-user",
    "--mount",
    "--pid",
    "--fork",
    "--mount-proc",
];

/// How long a build may take: bootstrapping fetches a few hundred packages (50-110 s from a near
/// mirror), so half an hour means a mirror that has stopped answering.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// What every built image holds besides the base system, one package a line: what boots it like
/// a cloud image and what trog needs to reach and finish a guest. A file of its own, so the test
/// image (tests/image/ensure-image.sh) knows when it must be built again.
const BASE_PACKAGES: &str = include_str!("base_packages.txt");

/// The packages of [`BASE_PACKAGES`], in order.
pub fn base_packages() -> impl Iterator<Item = &'static str> {
    BASE_PACKAGES
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// The digest of the builder: its script and its base package list. Part of a baked image's key,
/// so a changed builder builds new images.
pub fn builder_digest() -> String {
    let mut hasher = Sha256::new();
    hasher.update(BUILD_DEBIAN_SCRIPT.as_bytes());
    hasher.update(b"\0");
    hasher.update(BASE_PACKAGES.as_bytes());
    hex::encode(hasher.finalize())
}

/// Debian's own archive keeps security updates in a separate one beside it.
pub const DEBIAN_ARCHIVE: &str = "http://deb.debian.org/debian";
pub const DEBIAN_SECURITY_ARCHIVE: &str = "http://deb.debian.org/debian-security";

/// Where the security suite comes from when none is declared: Debian's security archive when the
/// mirror is Debian's own, else the mirror itself.
pub fn default_security_mirror(mirror: &str) -> String {
    let mirror = mirror.trim_end_matches('/');
    if mirror == DEBIAN_ARCHIVE {
        DEBIAN_SECURITY_ARCHIVE.to_string()
    } else {
        mirror.to_string()
    }
}

/// The distributions trog can build images of.
pub const BUILDABLE_DISTROS: &[&str] = &["debian"];

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecipe {
    pub distro: String,
    pub release: String,
    /// Where the release's packages come from (`http://deb.debian.org/debian`, a site mirror).
    pub mirror: String,
    /// Asked in this order, file by file, when `mirror` fails a request (the installation's
    /// `fallback_mirrors`: the archive behind a hub's cache, say).
    pub fallback_mirrors: Vec<String>,
    /// Where its security suite comes from (Debian's is a separate archive).
    pub security_mirror: String,
    /// The same for `security_mirror`.
    pub fallback_security_mirrors: Vec<String>,
    /// Packages installed besides [`BASE_PACKAGES`].
    pub extra_packages: Vec<String>,
    /// A directory whose tree is copied over the image's root after the build's own settings
    /// (an apt configuration or keyring for a site's mirror, a CA certificate, cloud-init
    /// settings); its files are owned by root in the image and keep their modes.
    pub overlay: Option<PathBuf>,
}

/// A built image, in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImage {
    pub path: PathBuf,
    pub sha256: String,
    /// Every package in the image with its version, one `name version` per line.
    pub packages_path: PathBuf,
    pub size_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ImageBuildError {
    #[error("trog builds images of {}, not of `{distro}`", BUILDABLE_DISTROS.join(", "))]
    UnsupportedDistro { distro: String },
    #[error("`{name}` is not a package name")]
    BadPackageName { name: String },
    #[error("`{release}` is not a release's name")]
    BadRelease { release: String },
    #[error("`{url}` is not a mirror's URL")]
    BadMirror { url: String },
    #[error("the overlay {} is not a directory", path.display())]
    Overlay {
        path: PathBuf,
        #[source]
        source: Option<std::io::Error>,
    },
    #[error("cannot build {distro} {release} from {mirror}")]
    Build {
        distro: String,
        release: String,
        mirror: String,
        #[source]
        source: Box<MachineError>,
    },
    #[error("cannot keep the built image in {}", dir.display())]
    Cache {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::diagnose::Diagnose for ImageBuildError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            ImageBuildError::UnsupportedDistro { .. }
            | ImageBuildError::BadPackageName { .. }
            | ImageBuildError::BadRelease { .. }
            | ImageBuildError::BadMirror { .. }
            | ImageBuildError::Overlay { .. } => crate::exit_status::ExitStatus::Usage,
            _ => crate::exit_status::ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ImageBuildError::UnsupportedDistro { .. } => Some(format!(
                "a guest of another distro needs no built image: it uses the one its distro \
                 recipe publishes (a url and a sha256 under `distro: releases:` in the recipe's \
                 recipe.yaml; Ubuntu's is ubuntu/recipe.yaml of trog's recipes, \
                 /usr/share/trog/recipes when installed), fetched into the image cache when a \
                 guest is first built; to build an image here, use --distro {}",
                BUILDABLE_DISTROS.join(" or --distro ")
            )),
            ImageBuildError::BadPackageName { .. } => {
                Some("--include takes Debian package names: lower case, digits, + - .".into())
            }
            ImageBuildError::BadRelease { .. } => Some(
                "--release takes a Debian release's code name or suite, as the mirror's dists/ names it: lower case, digits, + - . (bookworm, trixie, stable)"
                    .into(),
            ),
            ImageBuildError::BadMirror { .. } => Some(
                "a mirror is an http:// or https:// URL without spaces (http://deb.debian.org/debian)"
                    .into(),
            ),
            ImageBuildError::Overlay { .. } => Some(
                "--overlay takes a directory laid out like the image's root (DIR/etc/apt/apt.conf.d/…)"
                    .into(),
            ),
            ImageBuildError::Build { .. } => Some(
                "the last lines above say what failed; check that the mirrors serve the release (http://MIRROR/dists/RELEASE/InRelease); an account that is not root needs subordinate ids (a line for it in /etc/subuid and /etc/subgid, `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER`) and the `uidmap` package"
                    .into(),
            ),
            ImageBuildError::Cache { .. } => {
                Some("set XDG_CACHE_HOME to a writable directory".into())
            }
        }
    }
}

/// Checks what cannot be built before anything runs.
pub fn check_recipe(recipe: &ImageRecipe) -> Result<(), ImageBuildError> {
    if !BUILDABLE_DISTROS.contains(&recipe.distro.as_str()) {
        return Err(ImageBuildError::UnsupportedDistro {
            distro: recipe.distro.clone(),
        });
    }
    let valid = |name: &str| {
        name.len() >= 2
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
    };
    // The release names a folder of the mirror's dists/ and goes into the sources the builder
    // is given, words separated by spaces.
    let release = &recipe.release;
    if release.is_empty()
        || !release.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        || !release
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
    {
        return Err(ImageBuildError::BadRelease {
            release: release.clone(),
        });
    }
    if let Some(name) = recipe.extra_packages.iter().find(|name| !valid(name)) {
        return Err(ImageBuildError::BadPackageName { name: name.clone() });
    }
    // The builder takes each suite's mirrors as one argument, separated by spaces.
    let mirror_url = |url: &str| {
        let host = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        host.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
            && !url.chars().any(|c| c.is_whitespace() || c.is_control())
    };
    if let Some(url) = mirrors(recipe)
        .chain(security_mirrors(recipe))
        .find(|url| !mirror_url(url))
    {
        return Err(ImageBuildError::BadMirror {
            url: url.to_string(),
        });
    }
    match &recipe.overlay {
        Some(path) => match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(ImageBuildError::Overlay {
                path: path.clone(),
                source: None,
            }),
            Err(source) => Err(ImageBuildError::Overlay {
                path: path.clone(),
                source: Some(source),
            }),
        },
        None => Ok(()),
    }
}

/// The release's mirrors in the order they are asked.
fn mirrors(recipe: &ImageRecipe) -> impl Iterator<Item = &str> {
    std::iter::once(recipe.mirror.as_str())
        .chain(recipe.fallback_mirrors.iter().map(String::as_str))
}

/// The security suite's mirrors in the order they are asked.
fn security_mirrors(recipe: &ImageRecipe) -> impl Iterator<Item = &str> {
    std::iter::once(recipe.security_mirror.as_str())
        .chain(recipe.fallback_security_mirrors.iter().map(String::as_str))
}

/// The comma-separated package list the build installs.
fn package_list(recipe: &ImageRecipe) -> String {
    let mut packages: Vec<&str> = base_packages().collect();
    for extra in &recipe.extra_packages {
        if !packages.contains(&extra.as_str()) {
            packages.push(extra);
        }
    }
    packages.join(",")
}

/// Builds the image on `machine` (this one: the cache is local) and files it in `cache_dir` as
/// `sha256-<hex>.img`, with its package list as `sha256-<hex>.packages`.
pub fn build_image(
    machine: &dyn Machine,
    recipe: &ImageRecipe,
    cache_dir: &Path,
) -> Result<BuiltImage, ImageBuildError> {
    check_recipe(recipe)?;
    let cache_error = |source| ImageBuildError::Cache {
        dir: cache_dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(cache_dir).map_err(cache_error)?;
    // Built beside the cache, so the finished image is renamed into it, never copied; a build
    // that fails or is interrupted leaves only this directory, removed when it drops.
    let work = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(cache_dir)
        .map_err(cache_error)?;
    let out_dir = work.path().display().to_string();
    // The script runs from wherever this process does, but says nothing of it: an absolute path.
    let overlay = match &recipe.overlay {
        Some(path) => std::path::absolute(path)
            .map_err(|source| ImageBuildError::Overlay {
                path: path.clone(),
                source: Some(source),
            })?
            .display()
            .to_string(),
        None => String::new(),
    };
    let as_root: &[&str] = if crate::machine::local::LocalMachine::running_as_root() {
        &[]
    } else {
        AS_NAMESPACE_ROOT
    };
    let command = MachineCommand::new(as_root.iter().copied().chain([
        "bash",
        "-c",
        BUILD_DEBIAN_SCRIPT,
        "build_debian.sh",
        &out_dir,
        &recipe.release,
        &mirrors(recipe).collect::<Vec<_>>().join(" "),
        &security_mirrors(recipe).collect::<Vec<_>>().join(" "),
        &package_list(recipe),
        &overlay,
    ]))
    .timeout(BUILD_TIMEOUT);
    let build_error = |source| ImageBuildError::Build {
        distro: recipe.distro.clone(),
        release: recipe.release.clone(),
        mirror: recipe.mirror.clone(),
        source: Box::new(source),
    };
    let output = machine.run(&command).map_err(build_error)?;
    if output.status != Some(0) {
        return Err(build_error(MachineError::Failed {
            host: output.host.clone(),
            command: format!("the image build of {}", recipe.release),
            status: output.status,
            stderr: last_lines(&String::from_utf8_lossy(&output.stderr), 15),
        }));
    }
    let built = work.path().join("image.qcow2");
    let sha256 = sha256_of(&built).map_err(cache_error)?;
    let path = cache_dir.join(format!("sha256-{sha256}.img"));
    let packages_path = cache_dir.join(format!("sha256-{sha256}.packages"));
    std::fs::rename(work.path().join("packages"), &packages_path).map_err(cache_error)?;
    std::fs::rename(&built, &path).map_err(cache_error)?;
    let size_bytes = std::fs::metadata(&path).map_err(cache_error)?.len();
    Ok(BuiltImage {
        path,
        sha256,
        packages_path,
        size_bytes,
    })
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::fake_builder::{BuildArgs, FakeBuild, FakeBuilder};

    fn recipe() -> ImageRecipe {
        ImageRecipe {
            distro: "debian".into(),
            release: "bookworm".into(),
            mirror: MIRROR.into(),
            fallback_mirrors: Vec::new(),
            security_mirror: SECURITY_MIRROR.into(),
            fallback_security_mirrors: Vec::new(),
            extra_packages: vec!["nginx".into(), "sudo".into()],
            overlay: None,
        }
    }

    /// The builder as the script would run for [`recipe`]'s mirrors, or `mirrors` and
    /// `security_mirrors` when a test lists more: builds, or fails like mmdebstrap with a
    /// package the mirror lacks.
    fn builder(
        fail: bool,
        mirrors: &'static str,
        security_mirrors: &'static str,
    ) -> FakeBuilder<impl Fn(&BuildArgs) -> FakeBuild> {
        FakeBuilder(move |args: &BuildArgs| {
            assert_eq!(args.release, "bookworm");
            assert_eq!(args.mirrors, mirrors);
            assert_eq!(args.security_mirrors, security_mirrors);
            assert!(args.packages.ends_with(",ca-certificates,tzdata,nginx"));
            assert_eq!(args.overlay, "", "no overlay");
            if fail {
                FakeBuild::Failed {
                    status: 100,
                    stderr: "noise\nE: Unable to locate package nginx\n".into(),
                }
            } else {
                FakeBuild::Built {
                    image: b"qcow2 bytes".to_vec(),
                    packages: "nginx 1.22.1-9\n".into(),
                }
            }
        })
    }

    const MIRROR: &str = "http://mirror.example.test/debian";
    const SECURITY_MIRROR: &str = "http://mirror.example.test/debian-security";

    #[test]
    fn a_built_image_is_filed_under_its_digest_with_its_package_list() {
        let cache = tempfile::tempdir().unwrap();
        let built = build_image(
            &builder(false, MIRROR, SECURITY_MIRROR),
            &recipe(),
            cache.path(),
        )
        .unwrap();
        let sha = hex::encode(Sha256::digest(b"qcow2 bytes"));
        assert_eq!(built.sha256, sha);
        assert_eq!(built.path, cache.path().join(format!("sha256-{sha}.img")));
        assert_eq!(
            std::fs::read_to_string(&built.packages_path).unwrap(),
            "nginx 1.22.1-9\n"
        );
        // Nothing else is left behind: the work directory went with the build.
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
    }

    #[test]
    fn the_builder_gets_every_mirror_in_the_order_they_are_asked() {
        let cache = tempfile::tempdir().unwrap();
        let mut listed = recipe();
        listed.fallback_mirrors = vec![
            "http://deb.debian.org/debian".into(),
            "https://mirror.example.org/debian".into(),
        ];
        listed.fallback_security_mirrors = vec!["http://deb.debian.org/debian-security".into()];
        let builder = builder(
            false,
            "http://mirror.example.test/debian http://deb.debian.org/debian https://mirror.example.org/debian",
            "http://mirror.example.test/debian-security http://deb.debian.org/debian-security",
        );
        build_image(&builder, &listed, cache.path()).unwrap();
    }

    #[test]
    fn a_mirror_the_builder_cannot_take_is_refused_before_anything_runs() {
        for url in [
            "http://a.test/debian http://b.test/debian",
            "ftp://a.test/debian",
            "",
            "http://",
            "https:///debian",
        ] {
            let mut odd = recipe();
            odd.fallback_security_mirrors = vec![url.into()];
            let error = check_recipe(&odd).unwrap_err();
            assert!(
                matches!(&error, ImageBuildError::BadMirror { url: refused } if refused == url),
                "{error}"
            );
        }
    }

    #[test]
    fn a_failed_build_keeps_nothing_and_says_why() {
        let cache = tempfile::tempdir().unwrap();
        let error = build_image(
            &builder(true, MIRROR, SECURITY_MIRROR),
            &recipe(),
            cache.path(),
        )
        .unwrap_err();
        let chain = crate::diagnose::Failure::from(error).chain().join("\n");
        assert!(
            chain.contains("cannot build debian bookworm from http://mirror.example.test/debian"),
            "{chain}"
        );
        assert!(chain.contains("Unable to locate package nginx"), "{chain}");
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
    }

    #[test]
    fn what_cannot_be_built_is_refused_before_anything_runs() {
        let mut ubuntu = recipe();
        ubuntu.distro = "ubuntu".into();
        let refused = check_recipe(&ubuntu).unwrap_err();
        assert!(matches!(refused, ImageBuildError::UnsupportedDistro { .. }));
        // The hint names what exists in an installed trog: no checkout's bin/, and no command
        // that does not show the image (`trog recipes ubuntu` prints the arguments only).
        let hint = crate::diagnose::Diagnose::hint(&refused).unwrap();
        assert!(hint.ends_with("use --distro debian"), "{hint}");
        assert!(hint.contains("ubuntu/recipe.yaml"), "{hint}");
        assert!(
            !hint.contains("bin/") && !hint.contains("trog recipes"),
            "{hint}"
        );
        let mut odd = recipe();
        odd.extra_packages = vec!["nginx;reboot".into()];
        assert!(matches!(
            check_recipe(&odd),
            Err(ImageBuildError::BadPackageName { .. })
        ));
        for release in ["", "a;b", "book worm", "Bookworm", "-x", "../sid"] {
            let mut odd = recipe();
            odd.release = release.into();
            assert!(
                matches!(check_recipe(&odd), Err(ImageBuildError::BadRelease { .. })),
                "{release:?}"
            );
        }
        for release in ["bookworm", "bookworm-backports", "sid", "13"] {
            let mut named = recipe();
            named.release = release.into();
            assert!(check_recipe(&named).is_ok(), "{release}");
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        for missing in [file.path().to_path_buf(), file.path().join("absent")] {
            let mut overlaid = recipe();
            overlaid.overlay = Some(missing);
            let error = check_recipe(&overlaid).unwrap_err();
            assert!(matches!(error, ImageBuildError::Overlay { .. }), "{error}");
        }
    }

    #[test]
    fn the_base_packages_are_the_lines_of_their_list() {
        let base: Vec<&str> = base_packages().collect();
        assert_eq!(base.first(), Some(&"linux-image-cloud-amd64"));
        assert!(base.contains(&"cloud-init") && base.contains(&"tzdata"));
        assert!(base
            .iter()
            .all(|name| !name.contains(' ') && !name.starts_with('#')));
    }

    /// The builder keeps the state an upgrade rests on where the distro recipe's Makefile
    /// looks for it, read by the same command: a command that differed would never match, and
    /// every finish over an image would upgrade again.
    #[test]
    fn the_image_keeps_the_apt_state_as_the_distro_recipe_reads_it() {
        let fragment = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/debian/fragment.mk"),
        )
        .unwrap();
        let variable = |name: &str| {
            fragment
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} := ")))
                .unwrap_or_else(|| panic!("{name} in the fragment"))
                .replace("$$", "$")
        };
        let builder_state = BUILD_DEBIAN_SCRIPT
            .lines()
            .find_map(|line| line.strip_prefix("apt_state=\""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("apt_state in the builder");
        assert_eq!(builder_state, variable("APT_STATE"));
        assert!(BUILD_DEBIAN_SCRIPT.contains(&format!(">\"$rootfs{}\"", variable("APT_UPGRADED"))));
    }
}
