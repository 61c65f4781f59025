//! What the tests of the recipes' guest-side scripts share: a directory standing in for the guest,
//! with stand-ins for the commands a script calls first on its PATH, and the scripts and Makefile
//! targets rendered as a guest's payload carries them.

use super::{facts, guest, shipped, template_environment};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use trog::cookbook::resolve::{resolve_recipes, ResolvedRecipes};
use trog::model::names::RecipeName;
use trog::render::files::{render_files, RenderedFile};
use trog::render::makefile::render_makefile;

/// A directory with stand-in commands in its `bin/`.
pub struct StandIns {
    pub dir: tempfile::TempDir,
}

impl StandIns {
    /// `commands` are each a name and the text of its script.
    pub fn new(commands: &[(&str, &str)]) -> StandIns {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        for (name, text) in commands {
            let path = dir.path().join("bin").join(name);
            std::fs::write(&path, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        StandIns { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }

    pub fn lines(&self, name: &str) -> Vec<String> {
        self.read(name).lines().map(str::to_string).collect()
    }

    /// `program ARGS…` run in this directory with the stand-ins first on its PATH, `input` on
    /// its standard input.
    pub fn run(&self, program: &str, args: &[&str], input: &[u8]) -> Output {
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap()
        );
        let mut child = Command::new(program)
            .args(args)
            .current_dir(self.dir.path())
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input).unwrap();
        child.wait_with_output().unwrap()
    }

    /// `script` written here as `name` and run by sh with `args`. By sh rather than executed: a
    /// file just written can be "busy" for exec while a process another test forks at that moment
    /// still holds it open.
    pub fn sh_script(&self, name: &str, script: &str, args: &[&str], input: &[u8]) -> Output {
        let at = self.path(name);
        std::fs::write(&at, script).unwrap();
        let at = at.display().to_string();
        let args: Vec<&str> = std::iter::once(at.as_str())
            .chain(args.iter().copied())
            .collect();
        self.run("sh", &args, input)
    }
}

/// A guest of `recipe` alone (beside the distro and vm), with `args` as its arguments.
fn resolved(recipe: &str, args: Value) -> ResolvedRecipes {
    let mut wanted = guest(&[recipe], "debian");
    wanted
        .recipes
        .insert(RecipeName::parse(recipe).unwrap(), args);
    resolve_recipes(&shipped(), &wanted).unwrap()
}

fn files(resolved: &ResolvedRecipes) -> Vec<RenderedFile> {
    render_files(&template_environment(), &facts(), resolved).unwrap()
}

/// The file at `guest_path` of the payload of a guest of `recipe` with `args`.
pub fn rendered_file(recipe: &str, args: Value, guest_path: &str) -> String {
    let files = files(&resolved(recipe, args));
    let file = files
        .iter()
        .find(|file| file.guest_path == guest_path)
        .unwrap_or_else(|| panic!("no {guest_path} among the rendered files"));
    String::from_utf8(file.contents.clone()).unwrap()
}

/// The commands of `recipe`'s target in the Makefile of a guest of `recipe` with `args` (its
/// prerequisites, the other targets, are a line of their own), as a Makefile of that target
/// alone; and the guest's rendered files.
pub fn target_alone(recipe: &str, args: Value) -> (String, Vec<RenderedFile>) {
    let resolved = resolved(recipe, args);
    let files = files(&resolved);
    let makefile = render_makefile(&template_environment(), &facts(), &resolved, &files).unwrap();
    let commands = makefile
        .split(&format!("\n{recipe}:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("the Makefile has no commands for {recipe}"))
        .split("\n\n")
        .next()
        .unwrap();
    (format!("{recipe}:\n{commands}\n"), files)
}
