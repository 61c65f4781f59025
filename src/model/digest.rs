//! The digest a base image is pinned by. Distributions publish different sums (Debian SHA-512,
//! Ubuntu SHA-256), so a pin says which algorithm it is; the image is verified with that one.

use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DigestAlgorithm {
    Sha256,
    Sha512,
}

impl DigestAlgorithm {
    pub fn name(self) -> &'static str {
        match self {
            DigestAlgorithm::Sha256 => "sha256",
            DigestAlgorithm::Sha512 => "sha512",
        }
    }

    fn hex_length(self) -> usize {
        match self {
            DigestAlgorithm::Sha256 => 64,
            DigestAlgorithm::Sha512 => 128,
        }
    }
}

/// A digest in its one spelling: algorithm and lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ImageDigest {
    pub algorithm: DigestAlgorithm,
    pub hex: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {} digest ({} hexadecimal digits)", algorithm.name(), algorithm.hex_length())]
pub struct DigestError {
    pub text: String,
    pub algorithm: DigestAlgorithm,
}

impl ImageDigest {
    /// Reads `hex` (upper case and an `sha256:`/`sha512:` prefix accepted) as a digest of
    /// `algorithm`.
    pub fn parse(algorithm: DigestAlgorithm, hex: &str) -> Result<ImageDigest, DigestError> {
        let trimmed = hex.trim();
        let bare = trimmed
            .strip_prefix(&format!("{}:", algorithm.name()))
            .unwrap_or(trimmed);
        if bare.len() != algorithm.hex_length()
            || !bare.bytes().all(|byte| byte.is_ascii_hexdigit())
        {
            return Err(DigestError {
                text: hex.to_string(),
                algorithm,
            });
        }
        Ok(ImageDigest {
            algorithm,
            hex: bare.to_ascii_lowercase(),
        })
    }

    /// A digest already in its one spelling (lower-case hex), its algorithm told by its length.
    pub fn from_hex(hex: &str) -> Option<ImageDigest> {
        [DigestAlgorithm::Sha256, DigestAlgorithm::Sha512]
            .into_iter()
            .find_map(|algorithm| ImageDigest::parse(algorithm, hex).ok())
    }

    /// The digest of `bytes` with this digest's algorithm.
    pub fn hasher(&self) -> Box<dyn sha2::digest::DynDigest> {
        match self.algorithm {
            DigestAlgorithm::Sha256 => Box::new(sha2::Sha256::default()),
            DigestAlgorithm::Sha512 => Box::new(sha2::Sha512::default()),
        }
    }
}

impl fmt::Display for ImageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.name(), self.hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_have_one_spelling() {
        let digest = ImageDigest::parse(
            DigestAlgorithm::Sha256,
            &format!("sha256:{}", "AB".repeat(32)),
        )
        .unwrap();
        assert_eq!(digest.to_string(), format!("sha256:{}", "ab".repeat(32)));
        assert!(ImageDigest::parse(DigestAlgorithm::Sha512, &"a".repeat(64)).is_err());
        assert!(ImageDigest::parse(DigestAlgorithm::Sha512, &"a".repeat(128)).is_ok());
        assert!(ImageDigest::parse(DigestAlgorithm::Sha256, &"g".repeat(64)).is_err());
    }

    #[test]
    fn the_hasher_matches_the_algorithm() {
        let digest = ImageDigest::parse(DigestAlgorithm::Sha512, &"0".repeat(128)).unwrap();
        let mut hasher = digest.hasher();
        hasher.update(b"abc");
        assert_eq!(hex::encode(hasher.finalize()).len(), 128);
    }
}
