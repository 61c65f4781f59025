//! A value that must not be printed: a passphrase, a password, a private key.

use std::fmt;
use zeroize::Zeroizing;

/// A secret value. Debug and Display print `<redacted>`, so a secret that ends up in a log line, an
/// error or a printed plan by mistake shows nothing; the only way to the text is [`Secret::expose`],
/// which a reader can search for. The memory is overwritten with zeros when the value is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Zeroizing::new(value.into()))
    }

    /// The secret text, for the one place that has to hand it on (a KDBX key, sudo's stdin).
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Zeroizing<String>> for Secret {
    fn from(value: Zeroizing<String>) -> Secret {
        Secret(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact_the_value() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(&secret)), "Some(<redacted>)");
    }

    #[test]
    fn expose_gives_the_value() {
        assert_eq!(Secret::new("hunter2").expose(), "hunter2");
    }
}
