//! Where the recipes are: one documented search order, the same for a checkout and an installed
//! binary (README "Installing trog").
//!
//! 1. `TROG_RECIPES`, when set: a site's own recipes, or the tests' (taken as it is: a folder that
//!    is not there is reported when it is read).
//! 2. `<prefix>/share/trog/recipes`, the prefix found from the binary's own path (`/usr/bin/trog`
//!    → `/usr/share/trog/recipes`): what the Debian package installs.
//! 3. The checkout the binary was built from, only while the binary runs from inside it (a
//!    development build under `target/`): an installed copy never reads the build machine's tree.
//!
//! Pure: the caller hands in the environment, the binary's path and a way to test for a folder.

use std::path::{Path, PathBuf};

/// The recipes' folder below an installation prefix (`/usr`, `/usr/local`).
pub const SHARED_RECIPES: &str = "share/trog/recipes";

/// The first recipe folder of the search order, or every place looked at when none is there.
pub fn find_recipes_dir(
    from_environment: Option<PathBuf>,
    executable: Option<&Path>,
    checkout: &Path,
    is_dir: impl Fn(&Path) -> bool,
) -> Result<PathBuf, Vec<PathBuf>> {
    if let Some(dir) = from_environment {
        return Ok(dir);
    }
    let mut looked = Vec::new();
    let prefix = executable.and_then(Path::parent).and_then(Path::parent);
    if let Some(prefix) = prefix {
        let installed = prefix.join(SHARED_RECIPES);
        if is_dir(&installed) {
            return Ok(installed);
        }
        looked.push(installed);
    }
    if executable.is_some_and(|binary| binary.starts_with(checkout)) {
        let development = checkout.join("recipes");
        if is_dir(&development) {
            return Ok(development);
        }
        looked.push(development);
    }
    Err(looked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKOUT: &str = "/home/dev/trog";

    fn find(
        environment: Option<&str>,
        binary: &str,
        dirs: &[&str],
    ) -> Result<PathBuf, Vec<PathBuf>> {
        find_recipes_dir(
            environment.map(PathBuf::from),
            Some(Path::new(binary)),
            Path::new(CHECKOUT),
            |path| dirs.iter().any(|dir| path == Path::new(dir)),
        )
    }

    #[test]
    fn the_environment_comes_first_even_when_the_folder_is_missing() {
        assert_eq!(
            find(
                Some("/srv/site-recipes"),
                "/usr/bin/trog",
                &["/usr/share/trog/recipes"]
            ),
            Ok(PathBuf::from("/srv/site-recipes"))
        );
    }

    #[test]
    fn an_installed_binary_finds_the_recipes_beside_its_prefix() {
        assert_eq!(
            find(None, "/usr/bin/trog", &["/usr/share/trog/recipes"]),
            Ok(PathBuf::from("/usr/share/trog/recipes"))
        );
        assert_eq!(
            find(
                None,
                "/usr/local/bin/trog",
                &["/usr/local/share/trog/recipes"]
            ),
            Ok(PathBuf::from("/usr/local/share/trog/recipes"))
        );
    }

    #[test]
    fn a_development_build_reads_its_checkout() {
        assert_eq!(
            find(
                None,
                "/home/dev/trog/target/debug/trog",
                &["/home/dev/trog/recipes"]
            ),
            Ok(PathBuf::from("/home/dev/trog/recipes"))
        );
    }

    #[test]
    fn an_installed_binary_never_reads_the_build_machines_checkout() {
        assert_eq!(
            find(None, "/usr/bin/trog", &["/home/dev/trog/recipes"]),
            Err(vec![PathBuf::from("/usr/share/trog/recipes")])
        );
    }

    #[test]
    fn every_place_looked_at_is_named_when_none_is_there() {
        assert_eq!(
            find(None, "/home/dev/trog/target/debug/trog", &[]),
            Err(vec![
                PathBuf::from("/home/dev/trog/target/share/trog/recipes"),
                PathBuf::from("/home/dev/trog/recipes"),
            ])
        );
    }
}
