//! Debian's ordering of package versions, as dpkg compares them (deb-version(7)): the epoch
//! numerically, then the upstream version, then the revision, each compared part by part —
//! runs of non-digits by a character order in which `~` sorts before everything (even the end),
//! letters before other characters, and runs of digits numerically. Which version apt installs
//! from several suites is the highest by this order, so a baked image's key takes that one.

use std::cmp::Ordering;

/// Compares two Debian versions as `dpkg --compare-versions` does.
pub fn compare(a: &str, b: &str) -> Ordering {
    let (a, b) = (Parts::of(a), Parts::of(b));
    a.epoch
        .cmp(&b.epoch)
        .then_with(|| compare_part(a.upstream, b.upstream))
        .then_with(|| compare_part(a.revision, b.revision))
}

struct Parts<'a> {
    epoch: u64,
    upstream: &'a str,
    revision: &'a str,
}

impl<'a> Parts<'a> {
    fn of(version: &'a str) -> Parts<'a> {
        let version = version.trim();
        // An epoch is the digits before the first colon; a version without one has epoch 0.
        let (epoch, rest) = match version.split_once(':') {
            Some((epoch, rest)) if epoch.chars().all(|c| c.is_ascii_digit()) => {
                (epoch.parse().unwrap_or(0), rest)
            }
            _ => (0, version),
        };
        // The revision follows the last hyphen; a version without one has an empty revision,
        // which dpkg orders as it does "0".
        let (upstream, revision) = rest.rsplit_once('-').unwrap_or((rest, ""));
        Parts {
            epoch,
            upstream,
            revision,
        }
    }
}

/// The weight of one character of a non-digit run: `~` below the end of the run, the end (and a
/// digit, which ends the run) at 0, letters by their code, everything else above the letters.
fn weight(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(b'~') => -1,
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's `verrevcmp`: alternating non-digit and digit runs, compared in turn.
fn compare_part(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        // The non-digit run, character by character.
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let (wa, wb) = (weight(a.get(i).copied()), weight(b.get(j).copied()));
            if wa != wb {
                return wa.cmp(&wb);
            }
            i += 1;
            j += 1;
        }
        // The digit run, numerically: leading zeros skipped, then the longer run is the larger,
        // else the first digit that differs decides.
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_difference = Ordering::Equal;
        while i < a.len() && a[i].is_ascii_digit() && j < b.len() && b[j].is_ascii_digit() {
            if first_difference == Ordering::Equal {
                first_difference = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if i < a.len() && a[i].is_ascii_digit() {
            return Ordering::Greater;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        }
        if first_difference != Ordering::Equal {
            return first_difference;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::{Equal, Greater, Less};

    /// Each pair as `dpkg --compare-versions` orders it.
    #[test]
    fn versions_are_ordered_as_dpkg_orders_them() {
        let cases = [
            // Plain numbers, numerically, not as text.
            ("1.22.1-9", "1.22.1-9", Equal),
            ("1.10", "1.9", Greater),
            ("1.22.1-9", "1.22.1-10", Less),
            ("1.022", "1.22", Equal),
            // The epoch outranks everything after it.
            ("1:1.0", "2.0", Greater),
            ("0:1.0", "1.0", Equal),
            ("2:0.1", "1:9.9", Greater),
            // A tilde sorts before everything, even the end: pre-releases and backports.
            ("1.0~rc1", "1.0", Less),
            ("1.0~rc1", "1.0~rc2", Less),
            ("1.0~~", "1.0~", Less),
            ("1.0~", "1.0", Less),
            ("1.22.1-9~bpo12+1", "1.22.1-9", Less),
            ("1.22.1-9+deb12u1", "1.22.1-9", Greater),
            ("1.22.1-9+deb12u2", "1.22.1-9+deb12u10", Less),
            // Letters sort before other characters, and anything sorts after the end.
            ("1.0a", "1.0+", Less),
            ("1.0a", "1.0", Greater),
            ("1.0.1", "1.0a", Greater),
            // The revision is after the last hyphen; none orders as "0".
            ("1.0-1-2", "1.0-1-1", Greater),
            ("1.0", "1.0-0", Equal),
            ("1.0-1", "1.0", Greater),
            ("2.36.1-8+deb12u1", "2.36.1-8", Greater),
            // Security updates of bookworm: how the suites compare in practice.
            ("3.0.11-1~deb12u2", "3.0.11-1~deb12u1", Greater),
            ("3.0.11-1~deb12u2", "3.0.11-1", Less),
            ("3.0.15-1~deb12u1", "3.0.11-1~deb12u2", Greater),
        ];
        for (a, b, expected) in cases {
            assert_eq!(compare(a, b), expected, "{a} against {b}");
            assert_eq!(compare(b, a), expected.reverse(), "{b} against {a}");
        }
    }
}
