//! This machine, as a [`Machine`]: commands are local processes.

use crate::machine::command::{CommandOutput, MachineCommand, MachineError};
use crate::machine::held::{start_held, HeldCommand};
use crate::machine::process::{run_process, Feed};
use crate::machine::{Machine, Watch};

#[derive(Debug, Default)]
pub struct LocalMachine;

impl LocalMachine {
    /// Whether this process runs as root (then nothing needs sudo here).
    pub fn running_as_root() -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self")
            .map(|meta| meta.uid() == 0)
            .unwrap_or(false)
    }
}

impl LocalMachine {
    /// The command's argument vector, behind `sudo -n` when it runs as root and this process
    /// does not.
    fn argv(command: &MachineCommand) -> Vec<String> {
        let mut argv = command.argv.clone();
        if command.as_root && !Self::running_as_root() {
            argv.splice(
                0..0,
                ["sudo".to_string(), "-n".to_string(), "--".to_string()],
            );
        }
        argv
    }
}

impl Machine for LocalMachine {
    fn describe(&self) -> String {
        "this machine".into()
    }

    fn is_root(&self) -> bool {
        Self::running_as_root()
    }

    fn run_watched(
        &self,
        command: &MachineCommand,
        watch: Watch,
    ) -> Result<CommandOutput, MachineError> {
        let argv = Self::argv(command);
        let (program, args) = argv.split_first().expect("a command has a program");
        run_process(
            program,
            args,
            command.stdin.as_ref().map(|input| Feed {
                prefix: &[],
                input: Some(input),
            }),
            command.timeout,
            &self.describe(),
            &command.to_shell_line(),
            watch,
        )
    }

    fn start(&self, command: &MachineCommand) -> Result<HeldCommand, MachineError> {
        let argv = Self::argv(command);
        let (program, args) = argv.split_first().expect("a command has a program");
        start_held(
            program,
            args,
            &[],
            &self.describe(),
            &command.to_shell_line(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn runs_with_stdin_and_collects_output() {
        let output = LocalMachine
            .run(&MachineCommand::new(["tr", "a-z", "A-Z"]).stdin(b"hello".to_vec()))
            .unwrap();
        assert_eq!(output.success().unwrap().stdout, b"HELLO");
    }

    #[test]
    fn a_file_is_streamed_into_standard_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, b"from a file").unwrap();
        let output = LocalMachine
            .run(&MachineCommand::new(["tr", "a-z", "A-Z"]).stdin_file(path.clone()))
            .unwrap();
        assert_eq!(output.success().unwrap().stdout, b"FROM A FILE");
        let missing = LocalMachine
            .run(&MachineCommand::new(["cat"]).stdin_file(dir.path().join("gone")))
            .unwrap_err();
        assert!(
            matches!(missing, MachineError::ReadInput { .. }),
            "{missing}"
        );
    }

    #[test]
    fn failure_carries_status_and_stderr() {
        let error = LocalMachine
            .run(&MachineCommand::shell("echo broken >&2; exit 3"))
            .unwrap()
            .success()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`sh -c 'echo broken >&2; exit 3'` on this machine failed with status 3: broken"
        );
    }

    #[test]
    fn a_command_past_its_deadline_is_stopped() {
        let error = LocalMachine
            .run(&MachineCommand::new(["sleep", "30"]).timeout(Duration::from_millis(200)))
            .unwrap_err();
        assert!(matches!(error, MachineError::TimedOut { .. }), "{error}");
    }

    #[test]
    fn a_watched_command_is_stopped_once_its_watch_gives_a_reason() {
        let started = std::time::Instant::now();
        let mut asked = 0;
        let error = LocalMachine
            .run_watched(&MachineCommand::new(["sleep", "30"]), &mut || {
                asked += 1;
                (asked == 2).then(|| "the guest is gone".to_string())
            })
            .unwrap_err();
        assert!(
            matches!(&error, MachineError::Abandoned { reason, .. } if reason == "the guest is gone"),
            "{error}"
        );
        assert_eq!(asked, 2, "asked every half second until it said so");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "stopped, not run to its end"
        );
        assert_eq!(
            error.to_string(),
            "`sleep 30` on this machine was stopped after 1s: the guest is gone"
        );
    }

    #[test]
    fn files_are_written_through_standard_input_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("it's here.txt");
        let path = path.to_str().unwrap();
        LocalMachine
            .write_file(path, b"contents\n", 0o640, false)
            .unwrap();
        assert_eq!(LocalMachine.read_file(path, false).unwrap(), b"contents\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }
}
