//! `image build`: a cloud-init-ready base image made from a package mirror, filed in the image
//! cache under its digest, and the `image` setting that names it.

use crate::cli::GlobalArgs;
use crate::diagnose::Failure;
use crate::exit_status::ExitStatus;
use crate::images::build::{
    build_image, check_recipe, ImageRecipe, DEBIAN_ARCHIVE, DEBIAN_SECURITY_ARCHIVE,
};
use crate::images::image_cache_of_this_account;
use crate::machine::local::LocalMachine;
use crate::output::events::{emit, BuiltImageSummary, Event, ImageSetting};
use crate::workflow::baked_images::{CopyOutcome, PoolCopy};

#[derive(Debug, clap::Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub action: ImageAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum ImageAction {
    /// Build a cloud-init-ready image of a distribution release from a package mirror (as root,
    /// or as an account with subordinate ids, in a user namespace), and file it in the image
    /// cache under its sha256 with the list of its packages.
    Build(BuildArgs),
    /// Remove the baked images (`bake_packages`) in the image cache that no guest of the
    /// installation resolves to, and their copies in the hypervisors' pools that nothing is
    /// layered over, naming each.
    Prune(PruneArgs),
}

#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Name what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The distribution (only debian can be built).
    #[arg(long, default_value = "debian")]
    pub distro: String,
    /// The release.
    #[arg(long, default_value = "bookworm")]
    pub release: String,
    /// The package mirror the release comes from.
    #[arg(
        long,
        value_name = "URL",
        default_value = "http://deb.debian.org/debian"
    )]
    pub mirror: String,
    /// A mirror asked when --mirror fails a request, file by file (repeat: asked in the order
    /// given), as the installation's `fallback_mirrors`.
    #[arg(long = "fallback-mirror", value_name = "URL")]
    pub fallback_mirrors: Vec<String>,
    /// Where the security suite comes from; default: Debian's security archive when the mirror
    /// is Debian's own, else the mirror itself.
    #[arg(long, value_name = "URL")]
    pub security_mirror: Option<String>,
    /// A mirror asked when --security-mirror fails a request (repeat: asked in the order given);
    /// default, without --security-mirror: the security suite of each --fallback-mirror, found
    /// as for --mirror.
    #[arg(long = "fallback-security-mirror", value_name = "URL")]
    pub fallback_security_mirrors: Vec<String>,
    /// Further packages to install in the image (repeat, or separate with commas).
    #[arg(long = "include", value_name = "PACKAGE", value_delimiter = ',')]
    pub include: Vec<String>,
    /// A directory laid out like the image's root, copied over it after the build's own
    /// settings: an apt configuration or keyring for the site's mirror, a CA certificate,
    /// cloud-init settings.
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<std::path::PathBuf>,
}

pub fn run(global: &GlobalArgs, args: ImageArgs) -> Result<ExitStatus, Failure> {
    match args.action {
        ImageAction::Build(build) => run_build(global, build),
        ImageAction::Prune(prune) => run_prune(global, prune),
    }
}

fn run_prune(global: &GlobalArgs, args: PruneArgs) -> Result<ExitStatus, Failure> {
    let cache = image_cache_of_this_account();
    let pruned = crate::workflow::baked_images::prune(
        &global.installation_paths(),
        &cache,
        &global.locks("image prune"),
        args.dry_run,
    )?;
    let say = |text: String| {
        if global.json {
            emit(&Event::Message { text: &text });
        } else {
            crate::outln!("{text}");
        }
    };
    for image in &pruned {
        let record = &image.record;
        say(format!(
            "{} baked image {} ({} {}, {} packages, built {}): {}",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            record.short_key(),
            record.distro,
            record.release,
            record.packages.len(),
            crate::lock::utc_timestamp(record.built_at),
            record.image_path(&cache).display()
        ));
        for copy in &image.copies {
            say(copy_line(copy, args.dry_run));
        }
        if image.record_kept() {
            say(format!(
                "  {} its record baked-{}.json, for a later prune to remove the copies left",
                if args.dry_run { "would keep" } else { "kept" },
                record.key
            ));
        }
    }
    if pruned.is_empty() && !global.json {
        crate::outln!(
            "no baked image to remove: every one in {} is used by a guest",
            cache.display()
        );
    }
    Ok(ExitStatus::Success)
}

/// What became of a pruned image's copy in a pool, as a line under the image's.
fn copy_line(copy: &PoolCopy, dry_run: bool) -> String {
    let PoolCopy {
        hypervisor,
        pool,
        volume,
        outcome,
    } = copy;
    match outcome {
        CopyOutcome::Removed => format!(
            "  {} its copy {volume} from pool {pool} on {hypervisor}",
            if dry_run { "would remove" } else { "removed" }
        ),
        CopyOutcome::Kept { by } => format!(
            "  {} its copy {volume} in pool {pool} on {hypervisor}: used by {}",
            if dry_run { "would keep" } else { "kept" },
            by.join(", ")
        ),
        CopyOutcome::Unasked { why } => {
            format!("  left its copy in pool {pool} on {hypervisor}, if there is one: {why}")
        }
    }
}

/// `url` without the slashes that end its path: `http://m.test/debian/` is
/// `http://m.test/debian`; the `//` after the scheme stays, so a URL without a host is refused
/// as written.
fn without_trailing_slashes(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", rest.trim_end_matches('/')),
        None => url.trim_end_matches('/').to_string(),
    }
}

/// Where the security suite of `mirror` is: Debian's own archive keeps it in one beside it; any
/// other mirror is taken to serve it too.
fn security_suite_of(mirror: &str) -> String {
    if mirror == DEBIAN_ARCHIVE {
        DEBIAN_SECURITY_ARCHIVE.to_string()
    } else {
        mirror.to_string()
    }
}

/// The security suite's mirror and its fallbacks: as given, or, without --security-mirror,
/// each mirror's own security suite in the same order (those of --fallback-security-mirror
/// instead, when given).
fn security_mirrors(
    mirror: &str,
    fallback_mirrors: &[String],
    security_mirror: Option<String>,
    fallback_security_mirrors: Vec<String>,
) -> (String, Vec<String>) {
    match security_mirror {
        Some(security_mirror) => (security_mirror, fallback_security_mirrors),
        None if fallback_security_mirrors.is_empty() => (
            security_suite_of(mirror),
            fallback_mirrors
                .iter()
                .map(|fallback| security_suite_of(fallback))
                .collect(),
        ),
        None => (security_suite_of(mirror), fallback_security_mirrors),
    }
}

fn run_build(global: &GlobalArgs, args: BuildArgs) -> Result<ExitStatus, Failure> {
    let mirror = without_trailing_slashes(&args.mirror);
    let fallback_mirrors: Vec<String> = args
        .fallback_mirrors
        .iter()
        .map(|fallback| without_trailing_slashes(fallback))
        .collect();
    let (security_mirror, fallback_security_mirrors) = security_mirrors(
        &mirror,
        &fallback_mirrors,
        args.security_mirror,
        args.fallback_security_mirrors,
    );
    let recipe = ImageRecipe {
        distro: args.distro,
        release: args.release,
        mirror,
        fallback_mirrors,
        security_mirror,
        fallback_security_mirrors,
        extra_packages: args.include,
        overlay: args.overlay,
    };
    check_recipe(&recipe)?;
    let cache = image_cache_of_this_account();
    if !global.json {
        let then = if recipe.fallback_mirrors.is_empty() {
            String::new()
        } else {
            format!(" (then {})", recipe.fallback_mirrors.join(", "))
        };
        crate::errln!(
            "building {} {} from {}{then} (a few minutes)…",
            recipe.distro,
            recipe.release,
            recipe.mirror
        );
    }
    let built = build_image(&LocalMachine, &recipe, &cache)?;
    let url = format!("file://{}", built.path.display());
    if global.json {
        emit(&Event::ImageBuilt(&BuiltImageSummary {
            distro: recipe.distro.clone(),
            release: recipe.release.clone(),
            mirror: recipe.mirror.clone(),
            path: built.path.clone(),
            sha256: built.sha256.clone(),
            packages: built.packages_path.clone(),
            size_bytes: built.size_bytes,
            image: ImageSetting {
                url: url.clone(),
                sha256: built.sha256.clone(),
            },
        }));
    } else {
        crate::outln!(
            "built {} {} from {}: {} ({} MiB)",
            recipe.distro,
            recipe.release,
            recipe.mirror,
            built.path.display(),
            built.size_bytes / (1024 * 1024)
        );
        crate::outln!(
            "its packages and versions: {}",
            built.packages_path.display()
        );
        crate::outln!("a guest (or the installation's _global) uses it with:");
        crate::outln!("  image: {{url: {url}, sha256: {}}}", built.sha256);
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_security_suite_follows_each_mirror_unless_given() {
        let hub = "http://hub.example.test:3142/deb.debian.org/debian";
        let fallbacks = vec![DEBIAN_ARCHIVE.to_string()];
        assert_eq!(
            security_mirrors(hub, &fallbacks, None, Vec::new()),
            (hub.to_string(), vec![DEBIAN_SECURITY_ARCHIVE.to_string()])
        );
        let hub_security = "http://hub.example.test:3142/deb.debian.org/debian-security";
        assert_eq!(
            security_mirrors(hub, &fallbacks, Some(hub_security.into()), Vec::new()),
            (hub_security.to_string(), Vec::new())
        );
        assert_eq!(
            security_mirrors(
                hub,
                &fallbacks,
                None,
                vec!["http://security.example.test/debian-security".into()]
            ),
            (
                hub.to_string(),
                vec!["http://security.example.test/debian-security".to_string()]
            )
        );
    }

    #[test]
    fn a_mirror_loses_the_slashes_ending_its_path_but_not_those_after_its_scheme() {
        assert_eq!(
            without_trailing_slashes("http://m.test/debian//"),
            "http://m.test/debian"
        );
        assert_eq!(without_trailing_slashes("http://"), "http://");
        assert_eq!(without_trailing_slashes("m.test/"), "m.test");
    }
}
