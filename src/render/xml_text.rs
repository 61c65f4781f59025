//! Text written into XML. Every document trog writes, from a template or by hand, escapes its
//! values here, so one rule decides what a value may hold.

/// A value that no XML 1.0 document can carry.
#[derive(Debug, thiserror::Error)]
#[error(
    "the value `{}` holds a control character, which XML cannot carry",
    crate::untrusted::one_line(value)
)]
pub struct ControlCharacter {
    pub value: String,
}

/// Escapes `text` for XML element content and attribute values (either quote). Tabs and line
/// breaks become character references, which attribute normalisation would otherwise turn into
/// spaces; other control characters cannot appear in XML 1.0 at all and are refused.
pub fn escape_xml(text: &str) -> Result<String, ControlCharacter> {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' => escaped.push_str("&#9;"),
            '\n' => escaped.push_str("&#10;"),
            '\r' => escaped.push_str("&#13;"),
            control if control.is_control() => {
                return Err(ControlCharacter {
                    value: text.to_string(),
                })
            }
            other => escaped.push(other),
        }
    }
    Ok(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_quotes_and_line_breaks_and_refuses_control_characters() {
        assert_eq!(
            escape_xml("a&b<c>d\"e'f\tg\nh\ri").unwrap(),
            "a&amp;b&lt;c&gt;d&quot;e&apos;f&#9;g&#10;h&#13;i"
        );
        assert_eq!(escape_xml("/var/lib/trög").unwrap(), "/var/lib/trög");
        assert!(escape_xml("bell\u{7}").is_err());
        assert!(escape_xml("nul\0").is_err());
    }
}
