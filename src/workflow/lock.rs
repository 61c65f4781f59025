//! The guest's lock, taken by every verb that changes a guest after locating it and held until
//! the verb is done: two runs never act on one guest at once (see the module docs of
//! `workflow`).

use crate::lock::{HeldLock, LockError, Locks, Subject};
use crate::model::names::DomainName;

/// Takes `domain`'s lock, waiting up to the run's `--wait` for another run holding it; `on_wait`
/// is told what is waited for, once, when a wait begins.
pub fn take_guest_lock(
    locks: &Locks,
    domain: &DomainName,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HeldLock, LockError> {
    locks.acquire(&Subject::Guest(domain.to_string()), on_wait)
}
