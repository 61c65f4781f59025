//! A recipe's `args`: its OpenAPI-3 schema turned into JSON Schema, the guest's arguments checked
//! against it (every problem reported at once), and schema defaults filled in.
//!
//! Arguments may be secret references, `secret:Group/Entry/Field`, which stand for a value kept in
//! `secrets.kdbx`. They are not resolved here: validation accepts one wherever a string is
//! expected (its own text cannot be checked against a pattern or format, since it is not the
//! value), and [`EffectiveArgs::secrets`] lists where each one is so a later step can put the
//! secret in its place.

use crate::model::names::RecipeName;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value};
use std::fmt;

/// The prefix that marks an argument as a reference into the secret store.
pub const SECRET_PREFIX: &str = "secret:";

/// A `secret:Group/Entry/Field` found in a recipe's arguments.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecretReference {
    /// JSON pointer of the value inside the recipe's args (`/root_pw`), for `Value::pointer_mut`.
    pub pointer: String,
    /// The group path, `/`-separated when nested.
    pub group: String,
    pub entry: String,
    pub field: String,
}

impl SecretReference {
    /// Reads `secret:Group/Entry/Field`; the group may itself be a path (`Sites/Db/Entry/Field`).
    pub fn parse(pointer: &str, text: &str) -> Option<SecretReference> {
        let rest = text.strip_prefix(SECRET_PREFIX)?;
        let mut parts: Vec<&str> = rest.split('/').collect();
        if parts.len() < 3 || parts.iter().any(|part| part.is_empty()) {
            return None;
        }
        let field = parts.pop()?.to_string();
        let entry = parts.pop()?.to_string();
        Some(SecretReference {
            pointer: pointer.to_string(),
            group: parts.join("/"),
            entry,
            field,
        })
    }
}

/// A recipe's arguments: the guest's values over the schema defaults. A `secret:` reference stays
/// its reference text here for good: generation keeps the values it looks up apart, as
/// [`crate::render::templates::ResolvedSecrets`], so printing or serialising these arguments can
/// never show a secret. Debug shows `<redacted>` where a reference is all the same.
#[derive(Clone, PartialEq, serde::Serialize)]
pub struct EffectiveArgs {
    /// Always an object. Secret references are in place as their `secret:` text.
    pub value: Value,
    /// Every secret reference in `value`, in document order.
    pub secrets: Vec<SecretReference>,
}

impl EffectiveArgs {
    /// `value` with `<redacted>` wherever a secret (or its reference) is.
    pub fn redacted(&self) -> Value {
        let mut value = self.value.clone();
        for reference in &self.secrets {
            if let Some(slot) = value.pointer_mut(&reference.pointer) {
                *slot = Value::String("<redacted>".into());
            }
        }
        value
    }
}

impl std::fmt::Debug for EffectiveArgs {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EffectiveArgs")
            .field("value", &self.redacted())
            .field("secrets", &self.secrets)
            .finish()
    }
}

/// One thing wrong with one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgProblem {
    /// JSON pointer of the offending value (`/allow/0`); empty for the args object itself.
    pub path: String,
    /// The top-level argument concerned (`allow`), or empty when it is about the whole object.
    pub argument: String,
    /// Why, without the value itself (it may be a password).
    pub why: String,
    /// Where the value was written (`file:line:column`), once the configuration layer has said.
    pub written_at: Option<String>,
}

impl fmt::Display for ArgProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(place) = &self.written_at {
            write!(f, "{place}: ")?;
        }
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        if self.argument.is_empty() {
            write!(f, "{path}: {}", self.why)
        } else {
            write!(f, "{path} ({}): {}", self.argument, self.why)
        }
    }
}

/// Why a recipe's arguments or schema were refused.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("{}recipe `{recipe}` has an args schema that is not valid JSON Schema after conversion: {why}", written_at.as_ref().map(|place| format!("{place}: ")).unwrap_or_default())]
    Schema {
        recipe: RecipeName,
        why: String,
        /// Where the recipe's manifest writes `args` (`file:line:column`), once the cookbook said.
        written_at: Option<String>,
    },
    #[error("recipe `{recipe}`: {} problem(s) with its arguments:{}", problems.len(), list(problems))]
    Invalid {
        recipe: RecipeName,
        problems: Vec<ArgProblem>,
    },
}

fn list(problems: &[ArgProblem]) -> String {
    problems
        .iter()
        .map(|problem| format!("\n  {problem}"))
        .collect()
}

impl crate::diagnose::Diagnose for ArgsError {
    fn exit_status(&self) -> crate::exit_status::ExitStatus {
        crate::exit_status::ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ArgsError::Schema { recipe, .. } => {
                format!("fix `args` in recipes/{recipe}/recipe.yaml")
            }
            ArgsError::Invalid { recipe, .. } => {
                format!("correct the arguments under `{recipe}:` in the guest's file; `trog recipes {recipe}` shows what it takes")
            }
        })
    }
}

/// Rewrites an OpenAPI-3 schema object as JSON Schema (2020-12): `nullable: true` becomes a
/// type union with `null` (and `null` joins an `enum`), boolean `exclusiveMinimum`/`Maximum`
/// become numbers. Everything else (`default`, `required`, `format`, `enum`, `description`) is kept.
pub fn openapi_to_json_schema(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut converted = Map::new();
    for (key, value) in object {
        let value = match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" => match value {
                Value::Object(children) => Value::Object(
                    children
                        .iter()
                        .map(|(name, child)| (name.clone(), openapi_to_json_schema(child)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => openapi_to_json_schema(value),
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(children) => {
                    Value::Array(children.iter().map(openapi_to_json_schema).collect())
                }
                other => other.clone(),
            },
            "nullable" => continue,
            _ => value.clone(),
        };
        converted.insert(key.clone(), value);
    }
    if object.get("nullable") == Some(&Value::Bool(true)) {
        match converted.get_mut("type") {
            Some(Value::String(single)) => {
                let single = single.clone();
                converted.insert(
                    "type".into(),
                    Value::Array(vec![Value::String(single), Value::from("null")]),
                );
            }
            Some(Value::Array(types)) if !types.contains(&Value::from("null")) => {
                types.push(Value::from("null"))
            }
            _ => {}
        }
        if let Some(Value::Array(choices)) = converted.get_mut("enum") {
            if !choices.contains(&Value::Null) {
                choices.push(Value::Null);
            }
        }
    }
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(flag)) = converted.get(exclusive).cloned() {
            converted.remove(exclusive);
            if flag {
                if let Some(limit) = converted.remove(bound) {
                    converted.insert(exclusive.into(), limit);
                }
            }
        }
    }
    Value::Object(converted)
}

/// Fills in schema defaults: every absent property that has a `default`, recursively inside
/// objects that are present (or were just defaulted) and inside the items of arrays.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    if let (Some(properties), Value::Object(object)) = (
        schema.get("properties").and_then(Value::as_object),
        &mut *value,
    ) {
        for (name, property_schema) in properties {
            if !object.contains_key(name) {
                if let Some(default) = property_schema.get("default") {
                    object.insert(name.clone(), default.clone());
                }
            }
            if let Some(child) = object.get_mut(name) {
                apply_defaults(property_schema, child);
            }
        }
    }
    if let (Some(items), Value::Array(elements)) = (schema.get("items"), value) {
        for element in elements {
            apply_defaults(items, element);
        }
    }
}

/// Every secret reference in `value`, with its JSON pointer.
pub fn find_secret_references(value: &Value) -> Vec<SecretReference> {
    let mut found = Vec::new();
    walk_secrets(value, String::new(), &mut found);
    found
}

fn walk_secrets(value: &Value, pointer: String, found: &mut Vec<SecretReference>) {
    walk_strings(value, pointer, &mut |pointer, text| {
        if let Some(reference) = SecretReference::parse(pointer, text) {
            found.push(reference);
        }
    });
}

/// The JSON pointer of every string that starts with `secret:` but is not a whole
/// `secret:Group/Entry/Field`. Left alone it would pass as a plain value, and a recipe would be
/// handed the reference's text instead of the secret.
pub fn find_malformed_secret_references(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_strings(value, String::new(), &mut |pointer, text| {
        if text.starts_with(SECRET_PREFIX) && SecretReference::parse(pointer, text).is_none() {
            found.push(pointer.to_string());
        }
    });
    found
}

/// Calls `visit` with the pointer and text of every string in `value`, in document order.
fn walk_strings(value: &Value, pointer: String, visit: &mut dyn FnMut(&str, &str)) {
    match value {
        Value::String(text) => visit(&pointer, text),
        Value::Array(elements) => {
            for (index, element) in elements.iter().enumerate() {
                walk_strings(element, format!("{pointer}/{index}"), visit);
            }
        }
        Value::Object(object) => {
            for (key, child) in object {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                walk_strings(child, format!("{pointer}/{escaped}"), visit);
            }
        }
        _ => {}
    }
}

/// The top-level argument a JSON pointer lies under (`/allow/0` → `allow`), unescaped.
fn argument_of(pointer: &str) -> Option<String> {
    pointer
        .split('/')
        .nth(1)
        .map(|first| first.replace("~1", "/").replace("~0", "~"))
}

/// Checks `args` against the recipe's OpenAPI-3 schema and returns them with defaults applied.
/// Every problem is reported, not just the first.
pub fn validate_args(
    recipe: &RecipeName,
    openapi_schema: &Value,
    args: &Value,
) -> Result<EffectiveArgs, ArgsError> {
    let schema = openapi_to_json_schema(openapi_schema);
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|error| ArgsError::Schema {
            recipe: recipe.clone(),
            why: error.to_string(),
            written_at: None,
        })?;
    let mut value = if args.is_null() {
        Value::Object(Map::new())
    } else {
        args.clone()
    };
    apply_defaults(&schema, &mut value);
    let secrets = find_secret_references(&value);
    let mut problems = Vec::new();
    for error in validator.iter_errors(&value) {
        let path = error.instance_path().as_str().to_string();
        let at_secret = secrets.iter().any(|secret| secret.pointer == path);
        if at_secret && !matches!(error.kind(), ValidationErrorKind::Type { .. }) {
            // The reference's own text is not the value, so string constraints do not apply to it.
            continue;
        }
        let why = if at_secret {
            "a secret reference stands for a string, and a string is not allowed here".to_string()
        } else {
            error.masked().to_string()
        };
        let argument = match (error.kind(), argument_of(&path)) {
            (_, Some(first)) => first,
            (ValidationErrorKind::Required { property }, None) => {
                property.as_str().unwrap_or_default().to_string()
            }
            _ => String::new(),
        };
        problems.push(ArgProblem {
            path,
            argument,
            why,
            written_at: None,
        });
    }
    for path in find_malformed_secret_references(&value) {
        problems.push(ArgProblem {
            argument: argument_of(&path).unwrap_or_default(),
            path,
            why: "a secret reference names a group, an entry and a field: \
                  `secret:Group/Entry/Field`"
                .to_string(),
            written_at: None,
        });
    }
    if !problems.is_empty() {
        return Err(ArgsError::Invalid {
            recipe: recipe.clone(),
            problems,
        });
    }
    Ok(EffectiveArgs { value, secrets })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resolved_secret_does_not_show_in_debug() {
        let reference = SecretReference::parse("/root_pw", "secret:Db/Root/Password").unwrap();
        let args = EffectiveArgs {
            value: json!({"root_pw": "planted-4711", "port": 3306}),
            secrets: vec![reference],
        };
        let shown = format!("{args:?}");
        assert!(!shown.contains("planted-4711"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("3306"),
            "{shown}"
        );
    }

    fn recipe() -> RecipeName {
        RecipeName::parse("mariadb").unwrap()
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["root_pw", "port"],
            "additionalProperties": false,
            "properties": {
                "root_pw": {"type": "string", "minLength": 12, "description": "root password"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 3306},
                "version": {"type": "string", "enum": ["10.11", "11.4"], "nullable": true},
                "admin_email": {"type": "string", "format": "email"},
                "databases": {"type": "array", "items": {
                    "type": "object", "properties": {"charset": {"type": "string", "default": "utf8mb4"}}
                }},
                "tuning": {"type": "object", "default": {}, "properties": {"buffer_mib": {"type": "integer", "default": 128}}}
            }
        })
    }

    #[test]
    fn nullable_becomes_a_type_union_and_joins_the_enum() {
        let converted = openapi_to_json_schema(&schema());
        let version = &converted["properties"]["version"];
        assert_eq!(version["type"], json!(["string", "null"]));
        assert_eq!(version["enum"], json!(["10.11", "11.4", null]));
        assert!(version.get("nullable").is_none());
        assert_eq!(
            converted["properties"]["root_pw"]["description"],
            "root password"
        );
        assert_eq!(converted["required"], json!(["root_pw", "port"]));
    }

    #[test]
    fn nullable_accepts_null_and_not_nullable_refuses_it() {
        let args = json!({"root_pw": "long enough password", "version": null});
        assert!(validate_args(&recipe(), &schema(), &args).is_ok());
        let args = json!({"root_pw": null});
        assert!(validate_args(&recipe(), &schema(), &args).is_err());
    }

    #[test]
    fn boolean_exclusive_bounds_become_numbers() {
        let converted = openapi_to_json_schema(
            &json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true}),
        );
        assert_eq!(converted, json!({"type": "integer", "exclusiveMinimum": 0}));
        let converted = openapi_to_json_schema(
            &json!({"type": "integer", "maximum": 9, "exclusiveMaximum": false}),
        );
        assert_eq!(converted, json!({"type": "integer", "maximum": 9}));
    }

    #[test]
    fn defaults_are_applied_recursively() {
        let args =
            json!({"root_pw": "long enough password", "databases": [{}, {"charset": "latin1"}]});
        let effective = validate_args(&recipe(), &schema(), &args).unwrap();
        assert_eq!(effective.value["port"], 3306);
        assert_eq!(effective.value["tuning"], json!({"buffer_mib": 128}));
        assert_eq!(
            effective.value["databases"],
            json!([{"charset": "utf8mb4"}, {"charset": "latin1"}])
        );
        assert!(
            effective.value.get("version").is_none(),
            "no default, so left out"
        );
    }

    #[test]
    fn null_args_are_an_empty_object() {
        let effective = validate_args(
            &recipe(),
            &json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}),
            &Value::Null,
        )
        .unwrap();
        assert_eq!(effective.value, json!({"a": 1}));
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_path() {
        let args = json!({"root_pw": "short", "port": 70000, "version": "9", "admin_email": "nobody",
                          "databases": [{"charset": 5}], "colour": "red"});
        let ArgsError::Invalid { problems, .. } =
            validate_args(&recipe(), &schema(), &args).unwrap_err()
        else {
            panic!("expected argument problems")
        };
        let paths: Vec<&str> = problems
            .iter()
            .map(|problem| problem.path.as_str())
            .collect();
        for expected in [
            "/root_pw",
            "/port",
            "/version",
            "/admin_email",
            "/databases/0/charset",
            "",
        ] {
            assert!(
                paths.contains(&expected),
                "{expected} missing from {paths:?}"
            );
        }
        let charset = problems
            .iter()
            .find(|problem| problem.path == "/databases/0/charset")
            .unwrap();
        assert_eq!(charset.argument, "databases");
    }

    #[test]
    fn missing_required_names_the_argument_and_the_recipe() {
        let error = validate_args(&recipe(), &schema(), &json!({})).unwrap_err();
        let ArgsError::Invalid { problems, .. } = &error else {
            panic!()
        };
        assert_eq!(
            problems.len(),
            1,
            "port has a default, root_pw does not: {problems:?}"
        );
        assert_eq!(problems[0].argument, "root_pw");
        let message = error.to_string();
        assert!(
            message.starts_with("recipe `mariadb`: 1 problem(s)"),
            "{message}"
        );
        assert!(message.contains("root_pw"), "{message}");
    }

    #[test]
    fn problems_never_print_the_value() {
        let error =
            validate_args(&recipe(), &schema(), &json!({"root_pw": "hunter2"})).unwrap_err();
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn secret_references_pass_where_a_string_is_expected() {
        // minLength and format would refuse the reference's own text; it is not the value.
        let args = json!({"root_pw": "secret:Db/mariadb/password", "admin_email": "secret:Ops/Mail/Address"});
        let effective = validate_args(&recipe(), &schema(), &args).unwrap();
        assert_eq!(
            effective.secrets,
            [
                SecretReference {
                    pointer: "/root_pw".into(),
                    group: "Db".into(),
                    entry: "mariadb".into(),
                    field: "password".into()
                },
                SecretReference {
                    pointer: "/admin_email".into(),
                    group: "Ops".into(),
                    entry: "Mail".into(),
                    field: "Address".into()
                },
            ]
        );
        assert_eq!(
            effective.value.pointer("/root_pw").unwrap(),
            "secret:Db/mariadb/password"
        );
    }

    #[test]
    fn secret_reference_where_a_number_is_expected_is_refused() {
        let args = json!({"root_pw": "long enough password", "port": "secret:Db/mariadb/port"});
        let ArgsError::Invalid { problems, .. } =
            validate_args(&recipe(), &schema(), &args).unwrap_err()
        else {
            panic!()
        };
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].why.contains("secret reference"),
            "{}",
            problems[0].why
        );
    }

    #[test]
    fn secret_reference_syntax() {
        let nested = SecretReference::parse("/a", "secret:Sites/Db/Entry/Field").unwrap();
        assert_eq!(
            (
                nested.group.as_str(),
                nested.entry.as_str(),
                nested.field.as_str()
            ),
            ("Sites/Db", "Entry", "Field")
        );
        assert!(SecretReference::parse("/a", "secret:Entry/Field").is_none());
        assert!(SecretReference::parse("/a", "secret:A//Field").is_none());
        assert!(SecretReference::parse("/a", "plain").is_none());
    }

    #[test]
    fn malformed_secret_reference_is_an_argument_error() {
        let args = json!({"root_pw": "secret:Db/password", "admin_email": "ops@example.test"});
        let error = validate_args(&recipe(), &schema(), &args).unwrap_err();
        let ArgsError::Invalid { problems, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(problems.len(), 1, "{error}");
        assert_eq!(problems[0].path, "/root_pw");
        assert_eq!(problems[0].argument, "root_pw");
        assert!(
            error
                .to_string()
                .starts_with("recipe `mariadb`: 1 problem(s)"),
            "{error}"
        );
        assert!(
            problems[0].why.contains("secret:Group/Entry/Field"),
            "{error}"
        );
        assert!(!error.to_string().contains("secret:Db/password"), "{error}");
    }

    #[test]
    fn malformed_secret_references_are_found_anywhere() {
        let found = find_malformed_secret_references(&json!({
            "a": "secret:",
            "b": ["secret:G/E/F", "secret:A//F", "plain"],
            "c": {"d": "secret:x"}
        }));
        assert_eq!(found, ["/a", "/b/1", "/c/d"]);
    }

    #[test]
    fn secret_pointers_escape_keys() {
        let found = find_secret_references(&json!({"a/b": ["x", "secret:G/E/F"]}));
        assert_eq!(found[0].pointer, "/a~1b/1");
    }

    #[test]
    fn broken_schema_is_reported() {
        let error = validate_args(
            &recipe(),
            &json!({"type": "object", "properties": {"a": {"type": "nonsense"}}}),
            &json!({}),
        );
        assert!(matches!(error, Err(ArgsError::Schema { .. })));
    }
}
