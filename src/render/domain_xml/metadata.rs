//! trog's tag on a domain it owns: one element in the domain's `<metadata>`, in trog's own XML
//! namespace, holding the three digests the planner compares and the identity of the
//! installation that last defined or finished the domain (`config::installation_id`). The domain
//! template writes it at definition; the libvirt backend reads it back and rewrites it when a
//! finish succeeds. A tag written before tags named their installation has no `installation`
//! attribute: it is trog's, by an installation nobody recorded.

use crate::plan::GuestTag;
use crate::render::xml_text::{escape_xml, ControlCharacter};

/// trog's XML namespace. libvirt keeps one metadata element per namespace.
pub const TAG_NAMESPACE: &str = "urn:x-trog:guest:1";
/// The prefix libvirt writes the element with.
pub const TAG_PREFIX: &str = "trog";
/// What the `owner` attribute says on everything trog created.
pub const OWNER: &str = "trog";

/// The element as written into the domain's metadata, naming `installation` when there is one.
pub fn render_tag(
    domain: &str,
    tag: &GuestTag,
    installation: Option<&str>,
) -> Result<String, ControlCharacter> {
    let payload = tag.payload_digest.as_deref().unwrap_or("");
    let installation = match installation {
        Some(id) => format!(" installation=\"{}\"", escape_xml(id)?),
        None => String::new(),
    };
    Ok(format!(
        "<guest xmlns=\"{TAG_NAMESPACE}\" owner=\"{OWNER}\" domain=\"{}\" boot=\"{}\" shape=\"{}\" payload=\"{}\"{installation}/>",
        escape_xml(domain)?,
        escape_xml(&tag.boot_fingerprint)?,
        escape_xml(&tag.shape_fingerprint)?,
        escape_xml(payload)?
    ))
}

/// Who made a domain, as its metadata in trog's namespace says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Maker {
    /// No trog tag: a domain someone else made (or one trog's definition step never tagged).
    NotTrog,
    /// trog's tag naming no installation: tagged before tags named theirs, by this
    /// installation or another; nobody can tell which.
    TrogUnrecorded,
    /// trog's tag naming the installation that last defined or finished it.
    Trog { installation: String },
}

impl Maker {
    /// Whether trog made it, whichever installation.
    pub fn is_trogs(&self) -> bool {
        !matches!(self, Maker::NotTrog)
    }
}

/// Who made the domain whose element in trog's namespace is `element` (`None`: it has none).
pub fn maker_of(element: Option<&str>) -> Maker {
    let Some(element) = element else {
        return Maker::NotTrog;
    };
    if parse_tag(element).is_none() {
        return Maker::NotTrog;
    }
    let installation = roxmltree::Document::parse(element)
        .ok()
        .and_then(|document| {
            document
                .root_element()
                .attribute("installation")
                .filter(|id| !id.is_empty())
                .map(str::to_string)
        });
    match installation {
        Some(installation) => Maker::Trog { installation },
        None => Maker::TrogUnrecorded,
    }
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
            parse_tag(&render_tag("www.example.test", &tag, None).unwrap()),
            Some(tag.clone())
        );
        let named = render_tag("www.example.test", &tag, Some("0b5e-1")).unwrap();
        assert_eq!(parse_tag(&named), Some(tag.clone()));
        assert_eq!(
            maker_of(Some(&named)),
            Maker::Trog {
                installation: "0b5e-1".into()
            }
        );
        // As libvirt 11 hands it back.
        let prefixed = "<guest xmlns:trog=\"urn:x-trog:guest:1\" owner=\"trog\" domain=\"w.test\" boot=\"b\" shape=\"s\" payload=\"p\"/>";
        assert_eq!(
            parse_tag(prefixed).unwrap().payload_digest.as_deref(),
            Some("p")
        );
    }

    #[test]
    fn a_tag_from_before_installations_were_named_is_trogs_by_an_unrecorded_one() {
        let old = "<guest xmlns:trog=\"urn:x-trog:guest:1\" owner=\"trog\" domain=\"w.test\" boot=\"b\" shape=\"s\" payload=\"\"/>";
        assert_eq!(maker_of(Some(old)), Maker::TrogUnrecorded);
        assert!(maker_of(Some(old)).is_trogs());
        let empty = old.replace("/>", " installation=\"\"/>");
        assert_eq!(maker_of(Some(&empty)), Maker::TrogUnrecorded);
        assert_eq!(maker_of(None), Maker::NotTrog);
        assert_eq!(maker_of(Some("<guest owner=\"x\"/>")), Maker::NotTrog);
        assert!(!Maker::NotTrog.is_trogs());
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
