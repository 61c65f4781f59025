//! Whether a guest's domain still runs, and if not, libvirt's word for why: a guest that
//! crashed or was shut off is not coming up, and waiting for it is wasted.

use virt::connect::Connect;
use virt::domain::{DomainState, DomainStateReason};
use virt::enumutil::Enum;
use virt::error::ErrorNumber;

/// `None` while the domain runs (or cannot be asked: the wait goes on and is bounded anyway);
/// otherwise its state and libvirt's reason, e.g. `shut off (crashed)`.
pub fn stopped_state(connection: &Connect, name: &str) -> Option<String> {
    let domain = match connection.lookup_domain_by_name(name) {
        Ok(domain) => domain,
        Err(error) if error.code().is(ErrorNumber::NoDomain) => {
            return Some("undefined: the domain no longer exists".to_string());
        }
        // Any other failure (a busy daemon, a dropped connection) says nothing about the guest:
        // the wait is asked again half a second later and keeps its own bound.
        Err(_) => return None,
    };
    let (state, reason) = domain.state().ok()?;
    let state = match state {
        Enum::Known(DomainState::Running | DomainState::Blocked) => return None,
        Enum::Known(DomainState::Paused) => "paused",
        Enum::Known(DomainState::Shutdown) => "shutting down",
        Enum::Known(DomainState::Shutoff) => "shut off",
        Enum::Known(DomainState::Crashed) => "crashed",
        Enum::Known(DomainState::PMSuspended) => "suspended",
        Enum::Known(DomainState::NoState) | Enum::Unknown(_) => return None,
    };
    let reason = match reason {
        Enum::Known(DomainStateReason::Paused(reason)) => format!("{reason:?}"),
        Enum::Known(DomainStateReason::Shutdown(reason)) => format!("{reason:?}"),
        Enum::Known(DomainStateReason::Shutoff(reason)) => format!("{reason:?}"),
        Enum::Known(DomainStateReason::Crashed(reason)) => format!("{reason:?}"),
        Enum::Known(DomainStateReason::PMSuspended(reason)) => format!("{reason:?}"),
        other => format!("{other:?}"),
    };
    Some(format!("{state} ({})", plain_reason(&reason)))
}

/// `Known(Crashed)` → `crashed`: the Debug form of libvirt's reason, as a word.
fn plain_reason(debug: &str) -> String {
    let inner = debug
        .strip_prefix("Known(")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or(debug);
    let mut word = String::new();
    for (index, c) in inner.chars().enumerate() {
        if c.is_uppercase() && index > 0 {
            word.push(' ');
        }
        word.extend(c.to_lowercase());
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_words() {
        assert_eq!(plain_reason("Known(Crashed)"), "crashed");
        assert_eq!(plain_reason("Known(FromSnapshot)"), "from snapshot");
        assert_eq!(plain_reason("Unknown(42)"), "unknown(42)");
    }
}
