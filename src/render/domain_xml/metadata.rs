//! trog's own element in a domain's `<metadata>`: how trog tells its domains from foreign ones
//! and what it recorded about them. The template writes it; [`parse_guest_metadata`] reads it.

use crate::render::fingerprint::ProvisionFingerprint;

/// trog's XML namespace for the domain `<metadata>` element, and the prefix it is written with.
/// The namespace is how trog recognises its own domains: one without it is foreign.
pub const TROG_METADATA_NAMESPACE: &str = "urn:x-trog:guest:1";
pub const TROG_METADATA_PREFIX: &str = "trog";
/// What the metadata's `owner` element says on every domain trog creates.
pub const TROG_METADATA_OWNER: &str = "trog";

/// What trog's `<metadata>` element says about a domain, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestMetadata {
    pub owner: String,
    pub fqdn: String,
    pub fingerprint: ProvisionFingerprint,
}

/// Reads trog's metadata element back, as libvirt returns it for [`TROG_METADATA_NAMESPACE`]
/// (`virDomainGetMetadata`: `<guest><owner>…`, without a prefix) or as it sits in the domain
/// XML (`<trog:guest xmlns:trog=…>`). `None` when an element is missing: the domain is not one
/// trog can recognise. Only the flat, attribute-free elements trog writes are understood; the
/// caller has already selected the element by namespace.
pub fn parse_guest_metadata(xml: &str) -> Option<GuestMetadata> {
    Some(GuestMetadata {
        owner: metadata_field(xml, "owner")?,
        fqdn: metadata_field(xml, "fqdn")?,
        fingerprint: ProvisionFingerprint {
            value: metadata_field(xml, "fingerprint")?,
            root_disk: metadata_field(xml, "root-disk-fingerprint")?,
        },
    })
}

/// The text of the first element whose local name is `local_name`, entities resolved.
fn metadata_field(xml: &str, local_name: &str) -> Option<String> {
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>')?;
        let tag = &after[..end];
        let tag_local_name = tag.rsplit(':').next().unwrap_or(tag);
        if !tag.starts_with('/') && tag_local_name == local_name {
            let text = &after[end + 1..];
            let text = &text[..text.find('<')?];
            return Some(unescape_xml(text.trim()));
        }
        rest = &after[end + 1..];
    }
    None
}

fn unescape_xml(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_reads_back_with_or_without_a_prefix() {
        let expected = GuestMetadata {
            owner: "trog".to_string(),
            fqdn: "web.example.test".to_string(),
            fingerprint: ProvisionFingerprint {
                value: "1".repeat(64),
                root_disk: "2".repeat(64),
            },
        };
        // As `virsh metadata DOMAIN urn:x-trog:guest:1` prints it.
        let unprefixed = format!(
            "<guest>\n  <owner>trog</owner>\n  <fqdn>web.example.test</fqdn>\n  <fingerprint>{}</fingerprint>\n  \
             <root-disk-fingerprint>{}</root-disk-fingerprint>\n</guest>\n",
            "1".repeat(64),
            "2".repeat(64)
        );
        assert_eq!(parse_guest_metadata(&unprefixed), Some(expected.clone()));
        let prefixed = unprefixed
            .replace("<", "<trog:")
            .replace("<trog:/", "</trog:")
            .replacen(
                "<trog:guest>",
                "<trog:guest xmlns:trog=\"urn:x-trog:guest:1\">",
                1,
            );
        assert_eq!(parse_guest_metadata(&prefixed), Some(expected));
        assert_eq!(
            parse_guest_metadata("<guest><owner>trog</owner></guest>"),
            None
        );
    }
}
