//! `completions SHELL` and `manpages DIR`: hidden verbs that generate, from the command line's own
//! definition, the shell completions and the man pages a package or bin/setup installs, so both
//! always describe the binary they ship with.

use crate::diagnose::{Diagnose, Failure};
use crate::exit_status::ExitStatus;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell whose completion script to print on stdout.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManpagesArgs {
    /// The folder to write `trog.1` and one `trog-VERB.1` per verb into (made when missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ShellDocsError {
    #[error("cannot write the man page {}", path.display())]
    WriteManPage {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnose for ShellDocsError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Failure
    }

    fn hint(&self) -> Option<String> {
        match self {
            ShellDocsError::WriteManPage { .. } => Some(
                "name a folder this user may write (e.g. `trog manpages /usr/local/share/man/man1` as root)"
                    .to_string(),
            ),
        }
    }
}

pub fn completions(args: CompletionsArgs) -> Result<ExitStatus, Failure> {
    let mut command = crate::commands::verbs::Cli::command();
    // Generated whole first: clap_complete panics on a write that fails, and the script is a few
    // kilobytes.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "trog", &mut script);
    crate::output::print::write_stdout_bytes(&script);
    Ok(ExitStatus::Success)
}

pub fn manpages(args: ManpagesArgs) -> Result<ExitStatus, Failure> {
    for (name, page) in man_pages() {
        let path = args.dir.join(&name);
        write_page(&args.dir, &path, &page)?;
        crate::outln!("{}", path.display());
    }
    Ok(ExitStatus::Success)
}

fn write_page(dir: &Path, path: &Path, page: &[u8]) -> Result<(), ShellDocsError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(path, page))
        .map_err(|source| ShellDocsError::WriteManPage {
            path: path.to_path_buf(),
            source,
        })
}

/// Every man page, by file name: `trog.1`, then `trog-VERB.1` for each verb that is not hidden.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    let mut command = crate::commands::verbs::Cli::command();
    // Building propagates the global options (--json, --credentials, ...) into every verb, so
    // each verb's page lists them where its synopsis is used.
    command.build();
    let mut pages = vec![("trog.1".to_string(), render(command.clone()))];
    for verb in command.get_subcommands().filter(|verb| !verb.is_hide_set()) {
        let name = format!("trog-{}", verb.get_name());
        let verb = verb.clone().name(name.clone());
        pages.push((format!("{name}.1"), render(verb)));
    }
    pages
}

fn render(command: clap::Command) -> Vec<u8> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .expect("rendering into memory cannot fail");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs() -> Vec<String> {
        crate::commands::verbs::Cli::command()
            .get_subcommands()
            .filter(|verb| !verb.is_hide_set())
            .map(|verb| verb.get_name().to_string())
            .collect()
    }

    #[test]
    fn every_verb_has_a_man_page_naming_it() {
        let pages = man_pages();
        assert_eq!(pages[0].0, "trog.1");
        let main_page = String::from_utf8(pages[0].1.clone()).unwrap();
        assert!(verbs().len() >= 15, "{:?}", verbs());
        for verb in verbs() {
            let name = format!("trog-{verb}");
            let (_, page) = pages
                .iter()
                .find(|(file, _)| *file == format!("{name}.1"))
                .unwrap_or_else(|| panic!("no man page for {verb}"));
            let page = String::from_utf8(page.clone()).unwrap();
            assert!(page.contains(&format!(".TH {name} 1")), "{page}");
            assert!(
                page.contains("\\-\\-credentials"),
                "no global options: {page}"
            );
            assert!(
                main_page.contains(&verb.replace('_', "\\_").replace('-', "\\-"))
                    || main_page.contains(&verb),
                "{verb}"
            );
        }
        assert!(!pages.iter().any(|(file, _)| file.contains("completions")));
    }

    #[test]
    fn every_verb_completes_in_every_shell() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut script = Vec::new();
            clap_complete::generate(
                shell,
                &mut crate::commands::verbs::Cli::command(),
                "trog",
                &mut script,
            );
            let script = String::from_utf8(script).unwrap();
            for verb in verbs() {
                assert!(script.contains(&verb), "{shell:?} does not complete {verb}");
            }
        }
    }
}
