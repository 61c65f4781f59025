//! Deep merge of located YAML: `_base` first, the domain on top.
//!
//! Mappings merge key by key; anything else (a scalar, a list, a `~`) is replaced whole by the
//! domain's value. Every node keeps the origin of the file that gave it, so after merging each
//! leaf still says which file and line it came from.

use crate::config::yaml::{LocatedEntry, LocatedNode, Node, Origin};
use indexmap::IndexMap;

/// `overlay` on top of `base`.
pub fn merge_nodes(base: &LocatedNode, overlay: &LocatedNode) -> LocatedNode {
    match (&base.value, &overlay.value) {
        (Node::Mapping(base_entries), Node::Mapping(overlay_entries)) => LocatedNode {
            value: Node::Mapping(merge_entries(base_entries, overlay_entries)),
            origin: overlay.origin.clone(),
        },
        _ => overlay.clone(),
    }
}

/// The entries of two mappings merged: base's keys in base's order, then the overlay's new keys
/// in the overlay's order.
pub fn merge_entries(
    base: &IndexMap<String, LocatedEntry>,
    overlay: &IndexMap<String, LocatedEntry>,
) -> IndexMap<String, LocatedEntry> {
    let mut merged = base.clone();
    for (key, overlay_entry) in overlay {
        let entry = match base.get(key) {
            Some(base_entry) => LocatedEntry {
                key_origin: overlay_entry.key_origin.clone(),
                value: merge_nodes(&base_entry.value, &overlay_entry.value),
            },
            None => overlay_entry.clone(),
        };
        merged.insert(key.clone(), entry);
    }
    merged
}

/// Where every key and list item of a merged tree was written, by JSON pointer
/// (`/_global/memory`, `/mariadb/root_pw`, `/_global/ips/0`). The pointer form is what JSON
/// Schema validators report, so a recipe's argument error can be located with it directly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    by_pointer: IndexMap<String, Origin>,
}

impl Origins {
    /// Records `entries` (a guest's top level: `_global` and its recipes).
    pub fn record(entries: &IndexMap<String, LocatedEntry>) -> Origins {
        let mut origins = Origins::default();
        for (key, entry) in entries {
            origins.record_entry(&pointer_segment(key), entry);
        }
        origins
    }

    fn record_entry(&mut self, pointer: &str, entry: &LocatedEntry) {
        self.by_pointer
            .insert(pointer.to_string(), entry.key_origin.clone());
        self.record_children(pointer, &entry.value);
    }

    fn record_children(&mut self, pointer: &str, node: &LocatedNode) {
        match &node.value {
            Node::Mapping(entries) => {
                for (key, entry) in entries {
                    self.record_entry(&format!("{pointer}{}", pointer_segment(key)), entry);
                }
            }
            Node::Sequence(items) => {
                for (index, item) in items.iter().enumerate() {
                    let item_pointer = format!("{pointer}/{index}");
                    self.by_pointer
                        .insert(item_pointer.clone(), item.origin.clone());
                    self.record_children(&item_pointer, item);
                }
            }
            _ => {}
        }
    }

    /// Where the value at `pointer` was written; for a pointer into something that was not
    /// written (a default, a missing key), the nearest written ancestor.
    pub fn locate(&self, pointer: &str) -> Option<&Origin> {
        let mut pointer = pointer;
        loop {
            if let Some(origin) = self.by_pointer.get(pointer) {
                return Some(origin);
            }
            pointer = &pointer[..pointer.rfind('/')?];
        }
    }

    /// Where a recipe's argument was written, from the JSON pointer into its args.
    pub fn locate_recipe_arg(&self, recipe: &str, pointer_in_args: &str) -> Option<&Origin> {
        self.locate(&format!("{}{pointer_in_args}", pointer_segment(recipe)))
    }

    /// Where a `_global` setting was written.
    pub fn locate_setting(&self, key: &str) -> Option<&Origin> {
        self.by_pointer
            .get(&format!("/_global{}", pointer_segment(key)))
    }
}

/// `/key`, escaped as RFC 6901 says.
fn pointer_segment(key: &str) -> String {
    format!("/{}", key.replace('~', "~0").replace('/', "~1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::yaml::parse_located;
    use std::path::Path;

    fn merged(base: &str, overlay: &str) -> LocatedNode {
        let base = parse_located(Path::new("base.yaml"), base).unwrap();
        let overlay = parse_located(Path::new("domain.yaml"), overlay).unwrap();
        merge_nodes(&base, &overlay)
    }

    #[test]
    fn the_domain_wins_and_maps_merge_deeply() {
        let tree = merged(
            "a: 1\nm: {x: 1, y: {deep: base, keep: yes}}\nlist: [1, 2]\n",
            "m: {y: {deep: domain}, z: 3}\nlist: [9]\nb: 2\n",
        );
        assert_eq!(
            tree.value.to_json().to_string(),
            r#"{"a":1,"m":{"x":1,"y":{"deep":"domain","keep":"yes"},"z":3},"list":[9],"b":2}"#
        );
    }

    #[test]
    fn null_on_top_replaces() {
        let tree = merged("m: {x: 1}\n", "m: ~\n");
        assert_eq!(tree.value.to_json().to_string(), r#"{"m":null}"#);
    }

    #[test]
    fn every_leaf_remembers_its_file() {
        let tree = merged("m:\n  x: 1\n  y: 2\n", "m:\n  y: 3\n");
        let Node::Mapping(top) = &tree.value else {
            panic!()
        };
        let origins = Origins::record(top);
        assert_eq!(origins.locate("/m/x").unwrap().to_string(), "base.yaml:2:3");
        assert_eq!(
            origins.locate("/m/y").unwrap().to_string(),
            "domain.yaml:2:3"
        );
        assert_eq!(origins.locate("/m").unwrap().to_string(), "domain.yaml:1:1");
        assert_eq!(
            origins.locate("/m/y/not/there").unwrap().to_string(),
            "domain.yaml:2:3"
        );
        assert_eq!(origins.locate("/nothing"), None);
    }

    #[test]
    fn list_items_and_escaped_keys_have_pointers() {
        let tree = parse_located(
            Path::new("f.yaml"),
            "_global:\n  ips:\n    - a\n    - b\nr:\n  a/b: 1\n",
        )
        .unwrap();
        let Node::Mapping(top) = &tree.value else {
            panic!()
        };
        let origins = Origins::record(top);
        assert_eq!(origins.locate("/_global/ips/1").unwrap().line, 4);
        assert_eq!(origins.locate_setting("ips").unwrap().line, 2);
        assert_eq!(origins.locate_recipe_arg("r", "/a~1b").unwrap().line, 6);
    }
}
