//! A stand-in for the image builder's script (mmdebstrap and friends) in unit tests: it reads
//! the script's arguments from the command, lets the test check them and decide the outcome, and
//! writes what the script writes or fails as it does.

use crate::machine::{CommandOutput, HeldCommand, Machine, MachineCommand, MachineError, Watch};
use std::path::Path;

/// The builder script's arguments (`build_debian.sh OUT_DIR RELEASE MIRRORS SECURITY_MIRRORS
/// PACKAGES [OVERLAY]`), as the fake received them.
pub struct BuildArgs<'a> {
    pub out_dir: &'a Path,
    pub release: &'a str,
    pub mirrors: &'a str,
    pub security_mirrors: &'a str,
    pub packages: &'a str,
    pub overlay: &'a str,
}

/// What one fake build does.
pub enum FakeBuild {
    /// Writes the image's bytes and its package list where the script would.
    Built { image: Vec<u8>, packages: String },
    /// Exits with this status and standard error, writing nothing.
    Failed { status: i32, stderr: String },
}

/// A builder whose every build is `build`'s answer to the arguments it got.
pub struct FakeBuilder<F>(pub F);

impl<F: Fn(&BuildArgs) -> FakeBuild> Machine for FakeBuilder<F> {
    fn describe(&self) -> String {
        "this machine".into()
    }

    /// The fake's commands end at once: there is nothing to watch.
    fn run_watched(
        &self,
        command: &MachineCommand,
        _watch: Watch,
    ) -> Result<CommandOutput, MachineError> {
        // The script's arguments follow its name, whoever runs it (root, or an account as root
        // of a user namespace).
        let name = command
            .argv
            .iter()
            .position(|arg| arg == "build_debian.sh")
            .expect("the builder's script is run");
        let args = &command.argv[name + 1..];
        let build_args = BuildArgs {
            out_dir: Path::new(&args[0]),
            release: &args[1],
            mirrors: &args[2],
            security_mirrors: &args[3],
            packages: &args[4],
            overlay: args.get(5).map(String::as_str).unwrap_or(""),
        };
        let (status, stderr) = match (self.0)(&build_args) {
            FakeBuild::Built { image, packages } => {
                std::fs::write(build_args.out_dir.join("image.qcow2"), image).unwrap();
                std::fs::write(build_args.out_dir.join("packages"), packages).unwrap();
                (0, Vec::new())
            }
            FakeBuild::Failed { status, stderr } => (status, stderr.into_bytes()),
        };
        Ok(CommandOutput {
            command_line: "bash -c …".into(),
            host: self.describe(),
            status: Some(status),
            stdout: Vec::new(),
            stderr,
        })
    }

    fn start(&self, _command: &MachineCommand) -> Result<HeldCommand, MachineError> {
        unreachable!("building an image keeps no command running")
    }
}
