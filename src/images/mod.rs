//! Base images on this machine: fetched once per digest into a local cache, verified against
//! the declared sha256 before anything is touched on a hypervisor, then uploaded from there.

use crate::model::digest::ImageDigest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a download may go without receiving anything before it counts as stalled.
pub const DOWNLOAD_STALL_TIMEOUT: Duration = Duration::from_secs(60);

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

/// The local file holding the image with `sha256`, fetching and verifying it if it is not
/// already cached. A file in the cache is named by its verified digest, so its presence is
/// proof of its contents.
pub fn ensure_image(
    source_url: &str,
    digest: &ImageDigest,
    cache_dir: &Path,
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
    let mut reader = open_source(source_url)?;
    let mut hasher = digest.hasher();
    let mut buffer = vec![0u8; 1024 * 1024];
    loop {
        let read = reader
            .read(&mut buffer)
            .map_err(|error| fetch_error(Box::new(error)))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        partial.write_all(&buffer[..read]).map_err(cache_error)?;
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

fn open_source(source_url: &str) -> Result<Box<dyn Read>, ImageError> {
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
            .timeout_recv_body(None)
            .timeout_per_call(None)
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

    /// Serves `body` once over HTTP on loopback and returns the URL.
    fn serve_once(body: &'static [u8]) -> String {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let mut stream = stream;
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
