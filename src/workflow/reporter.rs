//! How a workflow tells the person running it something while it works (a lock it waits for, a
//! warning about the fleet) without printing: the command implements [`Reporter`] and prints.

/// Lines for the user while a verb works, printed by the edge (on stderr).
pub trait Reporter {
    fn say(&self, line: &str);
}

/// A reporter that drops what it is told: for a configuration read again whose warnings were
/// given when it was first read in the same run (a machine's, read to log into it).
pub struct AlreadyTold;

impl Reporter for AlreadyTold {
    fn say(&self, _line: &str) {}
}
