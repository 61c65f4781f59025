//! Printing a failed run: `error: …`, every `Caused by: …`, then `hint: …` on stderr.
//! What a failure is lives in `diagnose`; this is only how the edge shows it.

use crate::diagnose::Failure;

pub fn print_failure(failure: &Failure) {
    eprint!("{}", failure.render());
}
