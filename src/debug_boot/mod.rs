//! The pure parts of `debug_boot`: key names into key codes, a screenshot into a PNG, where a
//! console capture ends, and the edits it makes to (and takes back from) a domain's XML. No I/O;
//! the sequence that uses them is in `workflow/debug_boot*.rs`.

pub mod console;
pub mod domain_edit;
pub mod guest_disk;
pub mod keys;
pub mod screen;
