//! trog's tag on a domain it owns: one element in the domain's `<metadata>`, in trog's own XML
//! namespace, holding the three digests the planner compares. The domain template writes it at
//! definition; the libvirt backend reads it back and rewrites it when a finish succeeds.

use crate::plan::GuestTag;

/// trog's XML namespace. libvirt keeps one metadata element per namespace.
pub const TAG_NAMESPACE: &str = "urn:x-trog:guest:1";
/// The prefix libvirt writes the element with.
pub const TAG_PREFIX: &str = "trog";
/// What the `owner` attribute says on everything trog created.
pub const OWNER: &str = "trog";

/// The element as written into the domain's metadata.
pub fn render_tag(domain: &str, tag: &GuestTag) -> String {
    let payload = tag.payload_digest.as_deref().unwrap_or("");
    format!(
        "<guest xmlns=\"{TAG_NAMESPACE}\" owner=\"{OWNER}\" domain=\"{}\" boot=\"{}\" shape=\"{}\" payload=\"{}\"/>",
        escape(domain),
        escape(&tag.boot_fingerprint),
        escape(&tag.shape_fingerprint),
        escape(payload)
    )
}

/// Reads the tag back from the element libvirt returns for trog's namespace; `None` when it is
/// not trog's. libvirt hands the element back unprefixed, with only a declaration of the prefix,
/// so the namespace is vouched for by the lookup, not by the element.
pub fn parse_tag(element: &str) -> Option<GuestTag> {
    let document = roxmltree::Document::parse(element).ok()?;
    let root = document.root_element();
    if root.tag_name().name() != "guest" || root.attribute("owner") != Some(OWNER) {
        return None;
    }
    let payload = root.attribute("payload").unwrap_or("");
    Some(GuestTag {
        boot_fingerprint: root.attribute("boot")?.to_string(),
        shape_fingerprint: root.attribute("shape")?.to_string(),
        payload_digest: (!payload.is_empty()).then(|| payload.to_string()),
    })
}

fn escape(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_through_libvirts_prefixed_form() {
        let tag = GuestTag {
            boot_fingerprint: "b".into(),
            shape_fingerprint: "s".into(),
            payload_digest: None,
        };
        assert_eq!(
            parse_tag(&render_tag("www.example.test", &tag)),
            Some(tag.clone())
        );
        // As libvirt 11 hands it back.
        let prefixed = "<guest xmlns:trog=\"urn:x-trog:guest:1\" owner=\"trog\" domain=\"w.test\" boot=\"b\" shape=\"s\" payload=\"p\"/>";
        assert_eq!(
            parse_tag(prefixed).unwrap().payload_digest.as_deref(),
            Some("p")
        );
    }

    #[test]
    fn foreign_metadata_is_not_a_tag() {
        assert_eq!(
            parse_tag("<machine owner=\"trog\" boot=\"b\" shape=\"s\"/>"),
            None
        );
        assert_eq!(
            parse_tag(
                "<guest xmlns=\"urn:x-trog:guest:1\" owner=\"someone\" boot=\"b\" shape=\"s\"/>"
            ),
            None
        );
        assert_eq!(parse_tag("not xml"), None);
    }
}
