//! Credentials a run needs (`keepass`, `sudo`): read from standard input with `--credentials`,
//! asked for on a terminal, or refused with an error when there is nobody to ask.
