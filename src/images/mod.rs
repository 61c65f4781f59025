//! Base images on this machine: fetched once per digest into a local cache, verified against
//! the declared sha256 before anything is touched on a hypervisor, then uploaded from there.
//! `build` makes one from a package mirror instead and files it in the same cache.

pub mod archive_index;
pub mod baked;
pub mod build;
pub mod debian_version;
#[cfg(test)]
pub mod fake_builder;
pub mod package_versions;

#[cfg(test)]
#[path = "subordinate_ids_tests.rs"]
mod subordinate_ids_tests;

use crate::model::digest::ImageDigest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a download may go without receiving anything before it counts as stalled: a mirror
/// that sends nothing for a minute is not coming back soon, and waiting longer only delays the
/// error.
pub const DOWNLOAD_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a whole download may take: a cloud image of about 600 MB arrives in 40 minutes at
/// 2 Mbit/s; slower than that, fetching it by hand and declaring it as `file://` is the better way.
pub const DOWNLOAD_TOTAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// The bounds of one download.
#[derive(Debug, Clone, Copy)]
pub struct DownloadBounds {
    pub stall: Duration,
    pub total: Duration,
}

impl DownloadBounds {
    pub const DEFAULT: DownloadBounds = DownloadBounds {
        stall: DOWNLOAD_STALL_TIMEOUT,
        total: DOWNLOAD_TOTAL_TIMEOUT,
    };
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("the base image from {source_url} has the digest {actual}, but {expected} is pinned")]
    DigestMismatch {
        source_url: String,
        expected: String,
        actual: String,
    },
    #[error("`{source_url}` is not a source trog can fetch a base image from")]
    UnsupportedSource { source_url: String },
    #[error("cannot fetch the base image from {source_url}")]
    Fetch {
        source_url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "the download of the base image from {source_url} stalled: nothing arrived for {seconds}s"
    )]
    Stalled { source_url: String, seconds: u64 },
    #[error("the download of the base image from {source_url} did not end within {seconds}s")]
    TooSlow { source_url: String, seconds: u64 },
    #[error("cannot keep the base image in {}", dir.display())]
    Cache {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::diagnose::Diagnose for ImageError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        match self {
            ImageError::DigestMismatch { .. } | ImageError::UnsupportedSource { .. } => {
                crate::exit_status::ExitStatus::Configuration
            }
            _ => crate::exit_status::ExitStatus::Failure,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ImageError::DigestMismatch { .. } => Some(
                "nothing was changed on any hypervisor. If the image was updated on purpose, declare its new sha256 (`image.sha256`); otherwise the source is serving something else"
                    .into(),
            ),
            ImageError::UnsupportedSource { .. } => Some("use a file://, http:// or https:// URL".into()),
            ImageError::Stalled { .. } | ImageError::TooSlow { .. } => Some("try again later, or fetch the image yourself (`curl -o FILE URL`) and declare it as file:///path".into()),
            ImageError::Fetch { .. } => Some("check the URL, or fetch it yourself and declare it as file:///path".into()),
            ImageError::Cache { .. } => Some("set XDG_CACHE_HOME to a writable directory".into()),
        }
    }
}

/// Where fetched images are kept: `$XDG_CACHE_HOME/trog/images`, else `~/.cache/trog/images`.
pub fn default_cache_dir(xdg_cache_home: Option<&str>, home: Option<&str>) -> PathBuf {
    match (xdg_cache_home, home) {
        (Some(cache), _) if !cache.is_empty() => PathBuf::from(cache).join("trog/images"),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".cache/trog/images"),
        _ => std::env::temp_dir().join("trog-images"),
    }
}

/// This account's image cache, from its environment ([`default_cache_dir`]).
pub fn image_cache_of_this_account() -> PathBuf {
    default_cache_dir(
        std::env::var("XDG_CACHE_HOME").ok().as_deref(),
        std::env::var("HOME").ok().as_deref(),
    )
}

/// The local file holding the image with `sha256`, fetching and verifying it if it is not
/// already cached. A file in the cache is named by its verified digest, so its presence is
/// proof of its contents.
pub fn ensure_image(
    source_url: &str,
    digest: &ImageDigest,
    cache_dir: &Path,
) -> Result<PathBuf, ImageError> {
    ensure_image_within(source_url, digest, cache_dir, DownloadBounds::DEFAULT)
}

/// [`ensure_image`], with the download bounded by `bounds`.
pub fn ensure_image_within(
    source_url: &str,
    digest: &ImageDigest,
    cache_dir: &Path,
    bounds: DownloadBounds,
) -> Result<PathBuf, ImageError> {
    let expected = digest.to_string();
    let cached = cache_dir.join(format!("{}-{}.img", digest.algorithm.name(), digest.hex));
    if cached.exists() {
        return Ok(cached);
    }
    let cache_error = |source| ImageError::Cache {
        dir: cache_dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(cache_dir).map_err(cache_error)?;
    let mut partial = tempfile::NamedTempFile::new_in(cache_dir).map_err(cache_error)?;
    let fetch_error = |source: Box<dyn std::error::Error + Send + Sync>| ImageError::Fetch {
        source_url: source_url.to_string(),
        source,
    };
    let started = Instant::now();
    let reader = open_source(source_url, bounds)?;
    let chunks = read_in_background(reader);
    let mut hasher = digest.hasher();
    loop {
        let left = bounds.total.saturating_sub(started.elapsed());
        let chunk = match chunks.recv_timeout(bounds.stall.min(left)) {
            // The connection's own total timeout ends a read at the same bound as this loop's
            // (the thread must not outlive it): which of the two is seen first is a race, and
            // either way the download did not end in time.
            Ok(Err(_)) if started.elapsed() >= bounds.total => {
                return Err(ImageError::TooSlow {
                    source_url: source_url.to_string(),
                    seconds: bounds.total.as_secs(),
                })
            }
            Ok(chunk) => chunk.map_err(|error| fetch_error(Box::new(error)))?,
            Err(RecvTimeoutError::Timeout) if left <= bounds.stall => {
                return Err(ImageError::TooSlow {
                    source_url: source_url.to_string(),
                    seconds: bounds.total.as_secs(),
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(ImageError::Stalled {
                    source_url: source_url.to_string(),
                    seconds: bounds.stall.as_secs(),
                })
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if chunk.is_empty() {
            break;
        }
        hasher.update(&chunk);
        partial.write_all(&chunk).map_err(cache_error)?;
    }
    let actual = format!(
        "{}:{}",
        digest.algorithm.name(),
        hex::encode(hasher.finalize())
    );
    if actual != expected {
        // The partial file is removed when `partial` drops; nothing else was touched.
        return Err(ImageError::DigestMismatch {
            source_url: source_url.to_string(),
            expected,
            actual,
        });
    }
    partial
        .persist(&cached)
        .map_err(|error| cache_error(error.error))?;
    Ok(cached)
}

/// Reads `reader` on a thread of its own, chunk by chunk (an empty chunk at the end), so the
/// caller can give up on a read that never returns. A thread left blocked on a stalled
/// connection ends with the connection's own total timeout, or with the process.
fn read_in_background(mut reader: Box<dyn Read + Send>) -> Receiver<std::io::Result<Vec<u8>>> {
    let (sender, receiver) = sync_channel(4);
    std::thread::spawn(move || loop {
        let mut buffer = vec![0u8; 1024 * 1024];
        let result = reader.read(&mut buffer).map(|read| {
            buffer.truncate(read);
            buffer
        });
        let last = !matches!(&result, Ok(chunk) if !chunk.is_empty());
        if sender.send(result).is_err() || last {
            return;
        }
    });
    receiver
}

fn open_source(
    source_url: &str,
    bounds: DownloadBounds,
) -> Result<Box<dyn Read + Send>, ImageError> {
    let fetch_error = |source: Box<dyn std::error::Error + Send + Sync>| ImageError::Fetch {
        source_url: source_url.to_string(),
        source,
    };
    if let Some(path) = source_url.strip_prefix("file://") {
        let file = std::fs::File::open(path).map_err(|error| fetch_error(Box::new(error)))?;
        return Ok(Box::new(file));
    }
    if source_url.starts_with("https://") || source_url.starts_with("http://") {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(bounds.stall))
            .timeout_recv_body(None)
            .timeout_per_call(None)
            .timeout_global(Some(bounds.total))
            .build()
            .into();
        let response = agent
            .get(source_url)
            .call()
            .map_err(|error| fetch_error(Box::new(error)))?;
        return Ok(Box::new(response.into_body().into_reader()));
    }
    Err(ImageError::UnsupportedSource {
        source_url: source_url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::digest::DigestAlgorithm;
    use sha2::{Digest, Sha256};

    fn sha256(hex: &str) -> ImageDigest {
        ImageDigest::parse(DigestAlgorithm::Sha256, hex).unwrap()
    }

    fn image(dir: &Path, contents: &[u8]) -> (String, String) {
        let path = dir.join("source.qcow2");
        std::fs::write(&path, contents).unwrap();
        (
            format!("file://{}", path.display()),
            hex::encode(Sha256::digest(contents)),
        )
    }

    #[test]
    fn a_verified_image_is_cached_under_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let (url, sha) = image(dir.path(), b"image bytes");
        let cache = dir.path().join("cache");
        let cached = ensure_image(
            &url,
            &sha256(&format!("sha256:{}", sha.to_uppercase())),
            &cache,
        )
        .unwrap();
        assert_eq!(cached, cache.join(format!("sha256-{sha}.img")));
        assert_eq!(std::fs::read(&cached).unwrap(), b"image bytes");
        // Cached: the source is not read again.
        std::fs::remove_file(dir.path().join("source.qcow2")).unwrap();
        assert_eq!(ensure_image(&url, &sha256(&sha), &cache).unwrap(), cached);
    }

    #[test]
    fn a_mismatch_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _) = image(dir.path(), b"image bytes");
        let cache = dir.path().join("cache");
        let declared = "0".repeat(64);
        let error = ensure_image(&url, &sha256(&declared), &cache).unwrap_err();
        assert!(
            matches!(error, ImageError::DigestMismatch { .. }),
            "{error}"
        );
        assert_eq!(
            std::fs::read_dir(&cache).unwrap().count(),
            0,
            "no partial file left"
        );
    }

    /// A server that sends the headers and half the body, then nothing, without closing: the
    /// download ends as stalled after the stall bound, and keeps nothing.
    #[test]
    fn a_stalled_download_ends_and_keeps_nothing() {
        let (done_sender, done) = std::sync::mpsc::channel::<()>();
        let address = answer_one_request(move |mut stream| {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"
            )
            .unwrap();
            stream.flush().unwrap();
            // Holds the connection open until the test is over.
            let _ = done.recv();
        });
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let bounds = DownloadBounds {
            stall: Duration::from_millis(500),
            total: Duration::from_secs(30),
        };
        let error = download_within(address, &cache, bounds).unwrap_err();
        drop(done_sender);
        assert!(matches!(error, ImageError::Stalled { .. }), "{error}");
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
    }

    /// A server that trickles the body a byte at a time, for ever: the download never stalls, so
    /// only the total bound ends it, with the error that says so, and keeps nothing.
    #[test]
    fn a_download_that_never_ends_stops_at_the_total_bound_and_keeps_nothing() {
        let (sent_sender, sent) = std::sync::mpsc::channel::<usize>();
        let address = answer_one_request(move |mut stream| {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n"
            )
            .unwrap();
            // Until the client lets go of the connection.
            let mut bytes = 0;
            while stream.write_all(b"x").and_then(|()| stream.flush()).is_ok() {
                bytes += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = sent_sender.send(bytes);
        });
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        // The stall bound is far above the total one: a loaded machine that holds the trickling
        // thread back for a second must not turn this into a stall.
        let bounds = DownloadBounds {
            stall: Duration::from_secs(20),
            total: Duration::from_secs(2),
        };
        let started = Instant::now();
        let error = download_within(address, &cache, bounds).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(error, ImageError::TooSlow { seconds: 2, .. }),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "the download of the base image from http://{address}/base.qcow2 did not end within 2s"
            )
        );
        assert!(took >= Duration::from_secs(2), "{took:?}");
        // Bounded, not a hang: a generous margin for a loaded machine.
        assert!(took < Duration::from_secs(30), "{took:?}");
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
        // Bytes kept arriving all along (it never stalled), and the connection was let go.
        let bytes = sent.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(bytes >= 10, "only {bytes} bytes were sent");
    }

    /// Accepts one HTTP request on `listener` and reads past its headers, ready for the answer.
    fn accept_request(listener: &std::net::TcpListener) -> std::net::TcpStream {
        use std::io::{BufRead, BufReader};
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        stream
    }

    /// Listens on loopback, and hands the first request's connection, read past its headers, to
    /// `answer` on a thread of its own.
    fn answer_one_request(
        answer: impl FnOnce(std::net::TcpStream) + Send + 'static,
    ) -> std::net::SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || answer(accept_request(&listener)));
        address
    }

    /// Downloads `/base.qcow2` from `address` within `bounds`, expecting a digest nothing has.
    fn download_within(
        address: std::net::SocketAddr,
        cache: &Path,
        bounds: DownloadBounds,
    ) -> Result<PathBuf, ImageError> {
        ensure_image_within(
            &format!("http://{address}/base.qcow2"),
            &sha256(&"0".repeat(64)),
            cache,
            bounds,
        )
    }

    /// Serves `body` once over HTTP on loopback and returns the URL.
    fn serve_once(body: &'static [u8]) -> String {
        let address = answer_one_request(move |mut stream| {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .unwrap();
            stream.write_all(body).unwrap();
        });
        format!("http://{address}/images/base.qcow2")
    }

    #[test]
    fn images_are_fetched_over_http_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let url = serve_once(b"served image bytes");
        let sha = hex::encode(Sha256::digest(b"served image bytes"));
        let cached = ensure_image(&url, &sha256(&sha), dir.path()).unwrap();
        assert_eq!(std::fs::read(cached).unwrap(), b"served image bytes");

        // What Debian publishes: SHA-512.
        let url = serve_once(b"debian image bytes");
        let sha512 = ImageDigest::parse(
            DigestAlgorithm::Sha512,
            &hex::encode(sha2::Sha512::digest(b"debian image bytes")),
        )
        .unwrap();
        let cached = ensure_image(&url, &sha512, dir.path()).unwrap();
        assert_eq!(std::fs::read(cached).unwrap(), b"debian image bytes");

        let wrong = serve_once(b"something else");
        let error = ensure_image(
            &wrong,
            &sha256(&hex::encode(Sha256::digest(b"other"))),
            dir.path(),
        )
        .unwrap_err();
        assert!(
            matches!(error, ImageError::DigestMismatch { .. }),
            "{error}"
        );
    }

    #[test]
    fn unknown_schemes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            ensure_image("ftp://x/y", &sha256(&"0".repeat(64)), dir.path()),
            Err(ImageError::UnsupportedSource { .. })
        ));
    }
}
