//! Quoting a value for the two languages trog writes commands in: `sh` and make.
//!
//! A value from the configuration or a recipe's arguments reaches the guest's shell through the
//! Makefile, so it is quoted for the shell first and then for make. A Makefile's command line
//! (a recipe line) is read by make, which expands `$`, and then handed to the shell; a variable
//! assignment is read by make alone, which also ends it at a `#` or a newline. Each context has
//! its function here, and what a context can never carry is refused rather than mangled. The
//! template environment quotes with them by the kind of template ([`Quoting`]).

use minijinja::value::ValueKind;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Output, State};

/// Why a value cannot be written in a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unquotable {
    /// NUL ends a C string: no shell or make can carry it.
    #[error("it holds a NUL character, which no shell command can carry")]
    Nul,
    /// A newline ends a Makefile line; a command line continued with `\` keeps the backslash.
    #[error("it holds a line break, which a Makefile line cannot carry")]
    Newline,
    /// A backslash in a make assignment escapes the `#` or line end after it.
    #[error("it holds a backslash, which a Makefile variable cannot carry unchanged")]
    Backslash,
}

/// Quotes `word` for `sh` so the shell reads it back as exactly one word, unchanged. Plain words
/// stay as they are, so generated commands stay readable.
pub fn shell_quote(word: &str) -> Result<String, Unquotable> {
    if word.contains('\0') {
        return Err(Unquotable::Nul);
    }
    Ok(shell_quote_text(word))
}

/// [`shell_quote`] for text known to hold no NUL (text trog wrote itself).
pub(crate) fn shell_quote_text(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Quotes `word` for a Makefile's command line: quoted for the shell, then every `$` doubled so
/// make hands it over unchanged. A line break cannot be written there at all.
pub fn make_recipe_quote(word: &str) -> Result<String, Unquotable> {
    if word.contains('\n') {
        return Err(Unquotable::Newline);
    }
    Ok(make_escape(&shell_quote(word)?))
}

/// Escapes `$` in text trog wrote for a shell, so make passes it to the shell unchanged.
pub(crate) fn make_escape(text: &str) -> String {
    text.replace('$', "$$")
}

/// `text` as the value of a Makefile variable assignment (`NAME := value`), which make reads
/// without a shell: `$` doubled, `#` escaped so it does not start a comment. A line break, NUL
/// or a backslash (which escapes what follows it) is refused. Leading blanks are dropped by make,
/// so they are refused too.
pub fn make_assignment_value(text: &str) -> Result<String, Unquotable> {
    if text.contains('\0') {
        return Err(Unquotable::Nul);
    }
    if text.contains(['\n', '\r']) {
        return Err(Unquotable::Newline);
    }
    if text.contains('\\') {
        return Err(Unquotable::Backslash);
    }
    Ok(text.replace('$', "$$").replace('#', r"\#"))
}

/// What a template's values are quoted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// Printed as they are: a configuration file in its own syntax, a path.
    None,
    /// Each a word of a shell command line (a test, a shell script).
    Shell,
    /// Each a word of a Makefile's command line: quoted for the shell, then for make.
    MakeRecipe,
}

impl Quoting {
    /// The quoting of a recipe's file template named `file_name`: a shell script's
    /// (`*.sh.j2`, `*.sh`) quotes for the shell, any other prints values as they are.
    pub fn of_file(file_name: &str) -> Quoting {
        if file_name.ends_with(".sh.j2") || file_name.ends_with(".sh") {
            Quoting::Shell
        } else {
            Quoting::None
        }
    }

    /// The prefix of a template's name to the engine, which tells the auto-escape callback.
    pub(crate) fn name_prefix(self) -> &'static str {
        match self {
            Quoting::None => "",
            Quoting::Shell => SHELL_PREFIX,
            Quoting::MakeRecipe => MAKE_PREFIX,
        }
    }
}

const SHELL_PREFIX: &str = "shell:";
const MAKE_PREFIX: &str = "make:";
const SHELL_ESCAPE: &str = "shell";
const MAKE_ESCAPE: &str = "make";

/// Makes `environment` quote by [`Quoting`] (told by the template's name, see
/// [`Quoting::name_prefix`]) and gives it the `shell_quote` and `make_quote` filters.
pub(crate) fn install_quoting(environment: &mut Environment<'static>) {
    environment.set_auto_escape_callback(|name| {
        if name.starts_with(SHELL_PREFIX) {
            AutoEscape::Custom(SHELL_ESCAPE.into())
        } else if name.starts_with(MAKE_PREFIX) {
            AutoEscape::Custom(MAKE_ESCAPE.into())
        } else {
            AutoEscape::None
        }
    });
    environment.set_formatter(quoting_formatter);
    environment.add_filter("shell_quote", |value: String| {
        shell_quote(&value).map_err(unquotable)
    });
    environment.add_filter("make_quote", |value: String| {
        make_recipe_quote(&value).map_err(unquotable)
    });
}

/// Prints `{{ value }}`: quoted for the template's context, a list as one word per item.
fn quoting_formatter(
    out: &mut Output,
    state: &mut State,
    value: &minijinja::Value,
) -> Result<(), Error> {
    let quote: fn(&str) -> Result<String, Unquotable> = match state.auto_escape() {
        AutoEscape::Custom(name) if name == SHELL_ESCAPE => shell_quote,
        AutoEscape::Custom(name) if name == MAKE_ESCAPE => make_recipe_quote,
        _ => return minijinja::escape_formatter(out, state, value),
    };
    if value.is_safe() {
        return minijinja::escape_formatter(out, state, value);
    }
    let words = quoted_words(value, quote)?;
    out.write_str(&words.join(" "))
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "the template's output failed"))
}

/// `value` as quoted words: one for a plain value, one per item for a list.
fn quoted_words(
    value: &minijinja::Value,
    quote: fn(&str) -> Result<String, Unquotable>,
) -> Result<Vec<String>, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => {
            let mut words = Vec::new();
            for item in value.try_iter()? {
                words.extend(quoted_words(&item, quote)?);
            }
            Ok(words)
        }
        ValueKind::Map => Err(Error::new(
            ErrorKind::InvalidOperation,
            "a mapping cannot be printed as a command's word; print one of its values",
        )),
        _ => {
            let text = match value.as_str() {
                Some(text) => text.to_string(),
                None => value.to_string(),
            };
            Ok(vec![quote(&text).map_err(unquotable)?])
        }
    }
}

/// The engine's error for a value a context cannot carry. The value itself is left out: it may
/// be a secret.
fn unquotable(why: Unquotable) -> Error {
    Error::new(ErrorKind::InvalidOperation, "a value cannot be quoted here").with_source(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Every character that means something to the shell or make, each alone and all together.
    const HOSTILE: &[&str] = &[
        "it's",
        "a;b",
        "$HOME",
        "$(id)",
        "`id`",
        "two words",
        "tab\there",
        "#hash",
        "back\\slash",
        "\"double\"",
        "*",
        "~",
        "-n",
        "",
        "a'b\"c$d`e f;g|h&i<j>k(l)m{n}o*p?q[r]s~t#u%v\\w\u{1b}x",
    ];

    /// What `sh` makes of `line`: each argument of `printf` on its own, NUL-separated.
    fn shell_words(line: &str) -> Vec<String> {
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {line}"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{line}");
        let mut words: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .split('\0')
            .map(str::to_string)
            .collect();
        words.pop();
        words
    }

    #[test]
    fn the_shell_reads_back_each_value_as_one_unchanged_word() {
        let mut line = String::new();
        for value in HOSTILE {
            line.push_str(&shell_quote(value).unwrap());
            line.push(' ');
        }
        let multiline = "first\nsecond";
        line.push_str(&shell_quote(multiline).unwrap());
        let mut expected: Vec<String> = HOSTILE.iter().map(|value| value.to_string()).collect();
        expected.push(multiline.to_string());
        assert_eq!(shell_words(&line), expected);
    }

    #[test]
    fn plain_words_stay_readable() {
        assert_eq!(shell_quote("/srv/www").unwrap(), "/srv/www");
        assert_eq!(shell_quote("a b").unwrap(), "'a b'");
        assert_eq!(shell_quote("it's").unwrap(), r"'it'\''s'");
        assert_eq!(shell_quote("").unwrap(), "''");
        assert_eq!(shell_quote("nul\0").unwrap_err(), Unquotable::Nul);
    }

    /// Runs `makefile`'s `all` for real in a scratch directory and returns its standard output.
    fn run_make(makefile: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Makefile"), makefile).unwrap();
        let output = Command::new("make")
            .args(["-s", "all"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{makefile}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn make_and_then_the_shell_hand_each_value_over_unchanged() {
        let words: Vec<String> = HOSTILE
            .iter()
            .map(|value| make_recipe_quote(value).unwrap())
            .collect();
        let said = run_make(&format!("all:\n\t@printf '%s\\0' {}\n", words.join(" ")));
        let said: Vec<&str> = said.split('\0').collect();
        assert_eq!(said[..said.len() - 1], *HOSTILE);
    }

    #[test]
    fn a_line_break_is_refused_on_a_makefile_line() {
        assert_eq!(
            make_recipe_quote("ssh-ed25519 AAAA\nrm -rf /").unwrap_err(),
            Unquotable::Newline
        );
    }

    #[test]
    fn an_assignment_keeps_dollars_and_hashes() {
        let value = "http://u:pa$$w#rd@cache.test:3128/?a=$(b)";
        let said = run_make(&format!(
            "export PROXY := {}\nall:\n\t@printf '%s' \"$$PROXY\"\n",
            make_assignment_value(value).unwrap()
        ));
        assert_eq!(said, value);
        for (refused, why) in [
            ("a\nb", Unquotable::Newline),
            ("a\rb", Unquotable::Newline),
            ("a\\", Unquotable::Backslash),
            ("a\0", Unquotable::Nul),
        ] {
            assert_eq!(make_assignment_value(refused).unwrap_err(), why);
        }
    }
}
