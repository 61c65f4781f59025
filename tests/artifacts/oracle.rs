//! Running the system tools the tests check against.

use std::path::Path;
use std::process::Command;

/// Runs `program` with `args`, fails the test with its stderr unless it succeeds, and returns
/// its stdout.
pub fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("could not run {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("tool output is UTF-8")
}

/// The path as a `&str`, for passing to a tool.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
