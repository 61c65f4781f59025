//! YAML read into a tree that remembers where every key and value was written, so that a
//! problem found after parsing (a setting of the wrong type, an unknown key, a `CHANGEME` left
//! in a merged value) can still be reported at its file, line and column.
//!
//! serde-saphyr hands out locations through its `Spanned<T>` wrapper; the private `RawNode`
//! below asks for a `Spanned` key and value at every level, and `LocatedNode` then carries the
//! file name as well, which serde-saphyr does not know.

use indexmap::IndexMap;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where something was written: a file and a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    pub file: Arc<Path>,
    pub line: u32,
    pub column: u32,
}

impl Origin {
    fn from_location(file: &Arc<Path>, location: Location) -> Origin {
        Origin {
            file: Arc::clone(file),
            line: location.line() as u32,
            column: location.column() as u32,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// A YAML value with the place it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct LocatedNode {
    pub value: Node,
    pub origin: Origin,
}

/// A YAML value. Mapping keys are text (a key written as a number is kept as it was written).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Sequence(Vec<LocatedNode>),
    Mapping(IndexMap<String, LocatedEntry>),
}

/// One entry of a mapping: where its key was written, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct LocatedEntry {
    pub key_origin: Origin,
    pub value: LocatedNode,
}

impl Node {
    /// What kind of value this is, for messages (`a mapping`, `the number 3`).
    pub fn describe(&self) -> String {
        match self {
            Node::Null => "nothing (null)".to_string(),
            Node::Bool(value) => format!("the boolean `{value}`"),
            Node::Integer(value) => format!("the number `{value}`"),
            Node::Float(value) => format!("the number `{value}`"),
            Node::String(value) => format!("the text `{value}`"),
            Node::Sequence(_) => "a list".to_string(),
            Node::Mapping(_) => "a mapping".to_string(),
        }
    }

    /// The scalar written as text, as a setting that accepts `2048` or `2G` reads it.
    pub fn scalar_text(&self) -> Option<String> {
        match self {
            Node::String(value) => Some(value.clone()),
            Node::Integer(value) => Some(value.to_string()),
            Node::Float(value) => Some(value.to_string()),
            Node::Bool(value) => Some(value.to_string()),
            Node::Null | Node::Sequence(_) | Node::Mapping(_) => None,
        }
    }

    /// The value as JSON, locations dropped: what recipes and templates receive.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Node::Null => Value::Null,
            Node::Bool(value) => Value::Bool(*value),
            Node::Integer(value) => Value::from(*value),
            Node::Float(value) => serde_json::Number::from_f64(*value)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Node::String(value) => Value::String(value.clone()),
            Node::Sequence(items) => {
                Value::Array(items.iter().map(|item| item.value.to_json()).collect())
            }
            Node::Mapping(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, entry)| (key.clone(), entry.value.value.to_json()))
                    .collect(),
            ),
        }
    }
}

/// YAML that could not be read at all: bad syntax, a duplicate key, a value serde-saphyr refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", origin_text(.file, *.line, *.column))]
pub struct YamlSyntaxError {
    pub file: PathBuf,
    /// 1-based; 0 when the parser could not say.
    pub line: u32,
    pub column: u32,
    pub message: String,
}

fn origin_text(file: &Path, line: u32, column: u32) -> String {
    if line == 0 {
        file.display().to_string()
    } else {
        format!("{}:{line}:{column}", file.display())
    }
}

impl YamlSyntaxError {
    pub fn hint(&self) -> String {
        if self.message.contains("second time") {
            "a key may appear only once in a mapping: merge the two entries into one".to_string()
        } else if self.message.contains("than a configuration file may") {
            "write the values out plainly: settings need neither deep nesting nor more than a few aliases".to_string()
        } else if self.message.contains("YAML's NaN") || self.message.contains("is infinity") {
            "write a number there (or quote the value, if it is meant as text)".to_string()
        } else if self.message.contains("boolean") {
            "write booleans as `true` or `false`; quote text such as \"yes\" or \"no\"".to_string()
        } else {
            "check the indentation and quoting around that line (YAML indents with spaces, not tabs)"
                .to_string()
        }
    }
}

/// The parser options every configuration file is read with: YAML 1.2 booleans only (so `no`
/// stays the text "no", as a country code or an answer would need) and duplicate keys refused
/// (a second `memory:` silently winning is how a guest gets the wrong size).
fn parser_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        with_snippet: false,
    }
}

/// Parses one YAML document. `file` is only used to name the file in origins and errors.
/// An empty document is `Node::Null`.
pub fn parse_located(file: &Path, text: &str) -> Result<LocatedNode, YamlSyntaxError> {
    let file: Arc<Path> = Arc::from(file);
    if text
        .trim()
        .lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
    {
        return Ok(LocatedNode {
            value: Node::Null,
            origin: Origin {
                file,
                line: 1,
                column: 1,
            },
        });
    }
    let raw: Spanned<RawNode> = serde_saphyr::from_str_with_options(text, parser_options())
        .map_err(|error| {
            let location = error.location();
            YamlSyntaxError {
                file: file.to_path_buf(),
                line: location.map(|at| at.line() as u32).unwrap_or(0),
                column: location.map(|at| at.column() as u32).unwrap_or(0),
                message: bare_message(&error),
            }
        })?;
    Ok(locate(&file, raw))
}

/// serde-saphyr's message in words for the person editing the file: without its own
/// " at line X column Y" (the error says where already) and without advice meant for the
/// programmer calling it.
pub(crate) fn bare_message(error: &serde_saphyr::Error) -> String {
    match error.without_snippet() {
        serde_saphyr::Error::DuplicateMappingKey { key: Some(key), .. } => {
            return format!("the key `{key}` appears a second time in the same mapping");
        }
        serde_saphyr::Error::DuplicateMappingKey { key: None, .. } => {
            return "a key appears a second time in the same mapping".to_string();
        }
        serde_saphyr::Error::MultipleDocuments { .. } => {
            return "the file holds more than one YAML document (a `---` line); trog reads one"
                .to_string();
        }
        _ => {}
    }
    let text = error.without_snippet().to_string();
    let text = match text.find(" at line ") {
        Some(index) => text[..index].to_string(),
        None => text,
    };
    // serde-saphyr refuses a float that is not finite, quoting what was written: YAML's names
    // for NaN and infinity, or a number too large for a float.
    if let Some(rest) = text.strip_prefix("non-finite float") {
        return non_finite_message(rest.split('`').nth(1).unwrap_or_default());
    }
    if let Some(message) = limit_message(&text) {
        return message;
    }
    text.trim().to_string()
}

/// What a non-finite number written as `written` is, in words.
fn non_finite_message(written: &str) -> String {
    let bare = written
        .trim()
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase();
    match bare.as_str() {
        ".nan" => format!("`{written}` is not a number (it is YAML's NaN)"),
        ".inf" => format!("`{written}` is infinity, not a number that can be used"),
        _ => "the number is too large".to_string(),
    }
}

/// A limit serde-saphyr keeps a file within (so a hostile file cannot exhaust memory), in words:
/// it reports one as `budget breached: ` and a Rust value (`Depth { depth: 65 }`), also when the
/// breach comes back through a nested value's error, so its text is what is recognised.
fn limit_message(text: &str) -> Option<String> {
    if text.starts_with("recursion limit exceeded") {
        return Some(NESTED_TOO_DEEP.to_string());
    }
    let breach = text.strip_prefix("budget breached: ")?;
    let kind = breach.split([' ', '{', '(']).next().unwrap_or_default();
    Some(match kind {
        "Depth" | "InclusionDepth" | "PropertyExpansionDepth" => NESTED_TOO_DEEP.to_string(),
        "Aliases"
        | "Anchors"
        | "AliasAnchorRatio"
        | "MergeKeys"
        | "RecordedAnchorEvents"
        | "RecordedAnchorBytes" => {
            "the file uses more anchors, aliases or merge keys than a configuration file may"
                .to_string()
        }
        _ => "the file is larger than a configuration file may be (once its aliases are expanded)"
            .to_string(),
    })
}

const NESTED_TOO_DEEP: &str = "values are nested deeper than a configuration file may nest them";

fn locate(file: &Arc<Path>, raw: Spanned<RawNode>) -> LocatedNode {
    let origin = Origin::from_location(file, raw.referenced);
    let value = match raw.value {
        RawNode::Null => Node::Null,
        RawNode::Bool(value) => Node::Bool(value),
        RawNode::Integer(value) => Node::Integer(value),
        RawNode::Float(value) => Node::Float(value),
        RawNode::String(value) => Node::String(value),
        RawNode::Sequence(items) => {
            Node::Sequence(items.into_iter().map(|item| locate(file, item)).collect())
        }
        RawNode::Mapping(entries) => Node::Mapping(
            entries
                .into_iter()
                .map(|(key, value)| {
                    let entry = LocatedEntry {
                        key_origin: Origin::from_location(file, key.referenced),
                        value: locate(file, value),
                    };
                    (key.value.0, entry)
                })
                .collect(),
        ),
    };
    LocatedNode { value, origin }
}

/// The tree as serde-saphyr gives it, every key and value wrapped in `Spanned`.
enum RawNode {
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Sequence(Vec<Spanned<RawNode>>),
    Mapping(Vec<(Spanned<KeyText>, Spanned<RawNode>)>),
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawNodeVisitor)
    }
}

struct RawNodeVisitor;

impl<'de> Visitor<'de> for RawNodeVisitor {
    type Value = RawNode;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<RawNode, D::Error> {
        RawNode::deserialize(deserializer)
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawNode, E> {
        Ok(RawNode::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawNode, E> {
        Ok(RawNode::Integer(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawNode, E> {
        match i64::try_from(value) {
            Ok(value) => Ok(RawNode::Integer(value)),
            Err(_) => Ok(RawNode::Float(value as f64)),
        }
    }
    fn visit_i128<E: de::Error>(self, value: i128) -> Result<RawNode, E> {
        i64::try_from(value)
            .map(RawNode::Integer)
            .map_err(|_| E::custom("the number is too large"))
    }
    fn visit_u128<E: de::Error>(self, value: u128) -> Result<RawNode, E> {
        i64::try_from(value)
            .map(RawNode::Integer)
            .map_err(|_| E::custom("the number is too large"))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawNode, E> {
        Ok(RawNode::Float(value))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<RawNode, E> {
        Ok(RawNode::String(value.to_string()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<RawNode, E> {
        Ok(RawNode::String(value))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<RawNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = sequence.next_element::<Spanned<RawNode>>()? {
            items.push(item);
        }
        Ok(RawNode::Sequence(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Spanned<RawNode>>()?;
            entries.push((key, value));
        }
        Ok(RawNode::Mapping(entries))
    }
}

/// A mapping key as text. Keys are names in trog's files; one written as a number or a
/// boolean is kept in its written form rather than refused here, so the check that knows
/// which names are allowed can say what is wrong with it.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key written as text")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_bool<E: de::Error>(self, value: bool) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Err(E::custom("a mapping key is empty (null)"))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_against_hostile_files_are_told_in_words() {
        let deep = format!("a: {}{}\n", "[".repeat(1000), "]".repeat(1000));
        let error = parse_located(Path::new("g.yaml"), &deep).unwrap_err();
        assert_eq!(error.message, NESTED_TOO_DEEP, "{error}");
        let bomb: String = (1..12)
            .map(|n| {
                format!(
                    "a{n}: &a{n} [{}]\n",
                    vec![format!("*a{}", n - 1); 10].join(", ")
                )
            })
            .collect();
        let error = parse_located(
            Path::new("g.yaml"),
            &format!("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n{bomb}"),
        )
        .unwrap_err();
        assert!(
            error.message.contains("than a configuration file may"),
            "{error}"
        );
        assert!(!error.to_string().contains('{'), "{error}");
        assert!(error.hint().contains("plainly"));
    }

    #[test]
    fn nan_and_infinity_are_not_called_too_large() {
        for (written, says) in [
            (".nan", "`.nan` is not a number"),
            (".NaN", "`.NaN` is not a number"),
            (".inf", "`.inf` is infinity"),
            ("-.inf", "`-.inf` is infinity"),
            ("+.Inf", "`+.Inf` is infinity"),
            ("1e999", "the number is too large"),
        ] {
            let error = parse(&format!("memory: {written}\n")).unwrap_err();
            assert_eq!(error.line, 1, "{written}: {error}");
            assert!(error.message.contains(says), "{written}: {error}");
            if !written.ends_with("999") {
                assert!(error.hint().contains("write a number"), "{written}");
            }
        }
    }

    fn parse(text: &str) -> Result<LocatedNode, YamlSyntaxError> {
        parse_located(Path::new("test.yaml"), text)
    }

    fn entry<'a>(node: &'a LocatedNode, key: &str) -> &'a LocatedEntry {
        match &node.value {
            Node::Mapping(entries) => &entries[key],
            other => panic!("not a mapping: {other:?}"),
        }
    }

    #[test]
    fn keys_and_values_carry_their_line_and_column() {
        let tree = parse("top:\n  memory: 2048\n  list:\n    - a\n    - b\n").unwrap();
        let top = entry(&tree, "top");
        assert_eq!((top.key_origin.line, top.key_origin.column), (1, 1));
        let memory = entry(&top.value, "memory");
        assert_eq!((memory.key_origin.line, memory.key_origin.column), (2, 3));
        assert_eq!(
            (memory.value.origin.line, memory.value.origin.column),
            (2, 11)
        );
        assert_eq!(memory.value.value, Node::Integer(2048));
        let list = entry(&top.value, "list");
        let Node::Sequence(items) = &list.value.value else {
            panic!()
        };
        assert_eq!(items[1].origin.line, 5);
        assert_eq!(items[1].value, Node::String("b".into()));
        assert_eq!(memory.key_origin.to_string(), "test.yaml:2:3");
    }

    #[test]
    fn scalars_are_typed_by_yaml_1_2_rules() {
        let tree = parse("a: true\nb: no\nc: ~\nd: 1.5\ne: \"10\"\nf:\n").unwrap();
        assert_eq!(entry(&tree, "a").value.value, Node::Bool(true));
        assert_eq!(entry(&tree, "b").value.value, Node::String("no".into()));
        assert_eq!(entry(&tree, "c").value.value, Node::Null);
        assert_eq!(entry(&tree, "d").value.value, Node::Float(1.5));
        assert_eq!(entry(&tree, "e").value.value, Node::String("10".into()));
        assert_eq!(entry(&tree, "f").value.value, Node::Null);
    }

    #[test]
    fn mapping_order_is_kept() {
        let tree = parse("z: 1\na: 2\nm: 3\n").unwrap();
        let Node::Mapping(entries) = tree.value else {
            panic!()
        };
        assert_eq!(entries.keys().collect::<Vec<_>>(), ["z", "a", "m"]);
    }

    #[test]
    fn duplicate_keys_are_refused_at_the_second_key() {
        let error = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(error.line, 3, "{error}");
        assert_eq!(
            error.message,
            "the key `a` appears a second time in the same mapping"
        );
        assert!(error.hint().contains("only once"));
    }

    #[test]
    fn malformed_yaml_names_file_line_and_column() {
        let error = parse("a:\n  b: 1\n c: [unclosed\n").unwrap_err();
        assert!(error.line >= 2, "{error:?}");
        assert!(error.to_string().starts_with("test.yaml:"), "{error}");
    }

    #[test]
    fn several_documents_are_refused() {
        let error = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(
            error.message.contains("more than one YAML document"),
            "{error}"
        );
    }

    #[test]
    fn yaml_1_1_booleans_are_refused_where_a_boolean_is_demanded() {
        let error = parse("a: !!bool yes\n").unwrap_err();
        assert!(error.hint().contains("true"), "{error}");
    }

    #[test]
    fn empty_documents_are_null() {
        assert_eq!(parse("").unwrap().value, Node::Null);
        assert_eq!(parse("# only a comment\n\n").unwrap().value, Node::Null);
    }

    #[test]
    fn to_json_keeps_order_and_types() {
        let tree = parse("b: [1, x, true]\na: {c: ~}\n").unwrap();
        assert_eq!(
            tree.value.to_json().to_string(),
            r#"{"b":[1,"x",true],"a":{"c":null}}"#
        );
    }
}
