//! The versions a baked image's packages would get if it were built now: each listed package's
//! highest version across the suites the builder installs from (the release and `-updates` from
//! `mirror`, `-security` from `security_mirror`), read from each suite's Release and `Packages`
//! index over HTTP, each mirror's fallbacks asked in turn as the build asks them. A baked image's
//! key holds these versions, so a new point release of a listed package makes a new image, and a
//! change to any other package of the archive does not.
//!
//! A run resolves each suite once ([`PackageVersions`] keeps what it read, failures included), so
//! five guests of one release cost one fetch, and a mirror that cannot be reached one wait. A
//! failure that may pass (a refused or cut connection, a cache's 503, a file caught mid-sync) is
//! asked again after 10 s and then 30 s, as the finish asks apt again: a mirror back within
//! about 40 s fails no plan.

use crate::images::archive_index::{
    highest_versions, merge_highest, packages_index, release_files, Compression, PACKAGES_DIR,
};
use crate::images::baked::BakeInputs;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a mirror has to accept a connection.
pub const INDEX_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long one index file may take to arrive whole: the release's gzip index is about 12 MB,
/// which a mirror that still answers sends in far less.
pub const INDEX_FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// The pauses before a suite's mirrors are asked again, when every one failed in a way that may
/// pass: the finish's schedule for apt (docs/CONFIGURATION.md, "How a guest's apt gets past a
/// mirror that fails").
pub const INDEX_RETRY_PAUSES: [Duration; 2] = [Duration::from_secs(10), Duration::from_secs(30)];

/// The bounds of each request for an index file, and the pauses before asking again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchBounds {
    pub connect: Duration,
    pub whole: Duration,
    pub retry_pauses: &'static [Duration],
}

impl FetchBounds {
    pub const DEFAULT: FetchBounds = FetchBounds {
        connect: INDEX_CONNECT_TIMEOUT,
        whole: INDEX_FETCH_TIMEOUT,
        retry_pauses: &INDEX_RETRY_PAUSES,
    };
}

/// Why one mirror did not give a suite's index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexFetchError {
    #[error("{url} did not accept a connection within {seconds}s")]
    NoConnection { url: String, seconds: u64 },
    #[error("{url} was not read whole within {seconds}s")]
    TooSlow { url: String, seconds: u64 },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("cannot read {url}: {reason}")]
    Unreadable { url: String, reason: String },
    #[error("{url} lists no {PACKAGES_DIR}/Packages.gz or Packages.xz")]
    NoPackagesIndex { url: String },
    #[error("{url} is not the file its suite's Release lists (sha256 {listed}, read {read})")]
    NotAsListed {
        url: String,
        listed: String,
        read: String,
    },
    #[error("cannot decompress {url}: {reason}")]
    Undecodable { url: String, reason: String },
}

impl IndexFetchError {
    /// Whether asking the same mirror again later may succeed: not for an answer that says the
    /// file is not there or not allowed, nor for a Release that lists no index.
    pub fn may_pass(&self) -> bool {
        match self {
            IndexFetchError::Status { status, .. } => {
                !(400..500).contains(status) || matches!(status, 408 | 429)
            }
            IndexFetchError::NoPackagesIndex { .. } => false,
            IndexFetchError::NoConnection { .. }
            | IndexFetchError::TooSlow { .. }
            | IndexFetchError::Unreadable { .. }
            | IndexFetchError::NotAsListed { .. }
            | IndexFetchError::Undecodable { .. } => true,
        }
    }
}

/// No mirror of a suite gave its index: the versions a baked image would hold are unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot tell which versions a baked image would hold: no mirror gave the index of {suite}{} ({})",
    asked_again(*tries, waited),
    failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
)]
pub struct VersionsUnresolved {
    pub suite: String,
    /// The first mirror's URL, for the hint.
    pub mirror: String,
    /// How many times the mirrors were asked, and the pauses between those times.
    pub tries: usize,
    pub waited: Duration,
    /// Why each mirror failed, the last time it was asked.
    pub failures: Vec<IndexFetchError>,
}

fn asked_again(tries: usize, waited: &Duration) -> String {
    if tries > 1 {
        format!(" in {tries} tries over {}s", waited.as_secs())
    } else {
        String::new()
    }
}

impl crate::diagnose::Diagnose for VersionsUnresolved {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        Some(format!(
            "nothing was changed. Check that this machine can fetch {}/dists/{}/InRelease (`curl -I` it), or list a mirror that can in `fallback_mirrors`; or set `bake_packages: false` for the guest",
            self.mirror, self.suite
        ))
    }
}

/// One suite from one list of mirrors (the first, then its fallbacks).
type SuiteSource = (Vec<String>, String);

/// What one suite resolved to in this run: its highest versions, or why it could not be read.
type SuiteResult = Result<Arc<HashMap<String, String>>, VersionsUnresolved>;

/// The suites' indexes read in one run, each once: guests converged side by side wait for the
/// one fetch of a suite another is making rather than fetch it again.
#[derive(Default)]
pub struct PackageVersions {
    suites: Mutex<HashMap<SuiteSource, Arc<OnceLock<SuiteResult>>>>,
    bounds: Option<FetchBounds>,
}

impl PackageVersions {
    /// A run's versions, each request bounded by `bounds`.
    pub fn with_bounds(bounds: FetchBounds) -> PackageVersions {
        PackageVersions {
            suites: Mutex::default(),
            bounds: Some(bounds),
        }
    }

    /// The version each of `inputs`' packages would be installed at, highest across the
    /// builder's suites; a package no index holds is left out (a virtual one, or a name the
    /// build would refuse).
    pub fn resolve(
        &self,
        inputs: &BakeInputs,
    ) -> Result<BTreeMap<String, String>, VersionsUnresolved> {
        let mut highest: HashMap<String, String> = HashMap::new();
        for (mirrors, suite) in builder_suites(inputs) {
            let versions = self.suite(mirrors, suite)?;
            let listed: HashMap<String, String> = inputs
                .packages
                .iter()
                .filter_map(|name| Some((name.clone(), versions.get(name)?.clone())))
                .collect();
            merge_highest(&mut highest, &listed);
        }
        Ok(highest.into_iter().collect())
    }

    fn suite(&self, mirrors: Vec<String>, suite: String) -> SuiteResult {
        let cell = {
            let mut suites = self
                .suites
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            suites
                .entry((mirrors.clone(), suite.clone()))
                .or_default()
                .clone()
        };
        let bounds = self.bounds.unwrap_or(FetchBounds::DEFAULT);
        cell.get_or_init(|| fetch_suite(&mirrors, &suite, bounds).map(Arc::new))
            .clone()
    }
}

/// The suites the builder installs from, each with its mirrors in the order it asks them
/// (`build_debian.sh`'s sources).
fn builder_suites(inputs: &BakeInputs) -> [(Vec<String>, String); 3] {
    let main: Vec<String> = std::iter::once(inputs.mirror.clone())
        .chain(
            inputs
                .fallback_mirrors
                .iter()
                .map(|url| url.trim_end_matches('/').to_string()),
        )
        .collect();
    let security: Vec<String> = std::iter::once(inputs.security_mirror.clone())
        .chain(
            inputs
                .fallback_security_mirrors
                .iter()
                .map(|url| url.trim_end_matches('/').to_string()),
        )
        .collect();
    let release = &inputs.release;
    [
        (main.clone(), release.clone()),
        (main, format!("{release}-updates")),
        (security, format!("{release}-security")),
    ]
}

/// The highest versions of `suite`, from the first of `mirrors` that gives its index whole;
/// every mirror asked again after each of `bounds.retry_pauses` while a failure may pass.
fn fetch_suite(
    mirrors: &[String],
    suite: &str,
    bounds: FetchBounds,
) -> Result<HashMap<String, String>, VersionsUnresolved> {
    let mut pauses = bounds.retry_pauses.iter();
    let mut tries = 0;
    let mut waited = Duration::ZERO;
    loop {
        tries += 1;
        let mut failures = Vec::new();
        for mirror in mirrors {
            match fetch_from(mirror, suite, bounds) {
                Ok(versions) => return Ok(versions),
                Err(failure) => failures.push(failure),
            }
        }
        let pause = pauses
            .next()
            .filter(|_| failures.iter().any(IndexFetchError::may_pass));
        let Some(pause) = pause else {
            return Err(VersionsUnresolved {
                suite: suite.to_string(),
                mirror: mirrors.first().cloned().unwrap_or_default(),
                tries,
                waited,
                failures,
            });
        };
        std::thread::sleep(*pause);
        waited += *pause;
    }
}

fn fetch_from(
    mirror: &str,
    suite: &str,
    bounds: FetchBounds,
) -> Result<HashMap<String, String>, IndexFetchError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(bounds.connect))
        .timeout_global(Some(bounds.whole))
        .build()
        .into();
    let dists = format!("{mirror}/dists/{suite}");
    // InRelease where the mirror has it (every current Debian suite), else Release.
    let mut release_url = format!("{dists}/InRelease");
    let release = match get(&agent, &release_url, RELEASE_LIMIT, bounds) {
        Err(IndexFetchError::Status { status: 404, .. }) => {
            release_url = format!("{dists}/Release");
            get(&agent, &release_url, RELEASE_LIMIT, bounds)?
        }
        other => other?,
    };
    let files = release_files(&String::from_utf8_lossy(&release));
    let (path, compression, listed) =
        packages_index(&files).ok_or(IndexFetchError::NoPackagesIndex { url: release_url })?;
    let url = format!("{dists}/{path}");
    let compressed = get(&agent, &url, listed.size, bounds)?;
    let read = hex::encode(Sha256::digest(&compressed));
    if read != listed.sha256 {
        return Err(IndexFetchError::NotAsListed {
            url,
            listed: listed.sha256,
            read,
        });
    }
    let text = decompress(&compressed, compression)
        .map_err(|reason| IndexFetchError::Undecodable { url, reason })?;
    Ok(highest_versions(&String::from_utf8_lossy(&text)))
}

/// A Release is a few hundred kilobytes; anything far larger is not one.
const RELEASE_LIMIT: u64 = 16 * 1024 * 1024;

/// The body at `url`, at most `limit` bytes.
fn get(
    agent: &ureq::Agent,
    url: &str,
    limit: u64,
    bounds: FetchBounds,
) -> Result<Vec<u8>, IndexFetchError> {
    let failed = |error: ureq::Error| match error {
        ureq::Error::StatusCode(status) => IndexFetchError::Status {
            url: url.to_string(),
            status,
        },
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            IndexFetchError::NoConnection {
                url: url.to_string(),
                seconds: bounds.connect.as_secs(),
            }
        }
        ureq::Error::Timeout(_) => IndexFetchError::TooSlow {
            url: url.to_string(),
            seconds: bounds.whole.as_secs(),
        },
        other => IndexFetchError::Unreadable {
            url: url.to_string(),
            reason: other.to_string(),
        },
    };
    let mut response = agent.get(url).call().map_err(failed)?;
    response
        .body_mut()
        .with_config()
        .limit(limit.saturating_add(1))
        .read_to_vec()
        .map_err(failed)
}

fn decompress(bytes: &[u8], compression: Compression) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    match compression {
        Compression::Gzip => flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut text)
            .map(|_| ())
            .map_err(|error| error.to_string()),
        Compression::Xz => lzma_rs::xz_decompress(&mut std::io::BufReader::new(bytes), &mut text)
            .map_err(|error| error.to_string()),
    }?;
    Ok(text)
}

#[cfg(test)]
#[path = "package_versions_tests.rs"]
mod tests;
