//! "Did you mean": the known name a mistyped one most likely meant, for every hint that
//! suggests one (a `_global` setting, a `hypervisors.conf` key, a handed-in credential).

/// The candidate fewest edits (Levenshtein, over characters) away from `word`, among those within
/// `allowed(candidate)` edits; of equally near ones, the first.
pub fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    allowed: impl Fn(&str) -> usize,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::levenshtein(word, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= allowed(candidate))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_within_reach_is_chosen() {
        let known = ["memory", "cpus", "contact_email"];
        assert_eq!(nearest("memroy", known, |_| 2), Some("memory"));
        assert_eq!(nearest("kitten", ["sitting"], |_| 3), Some("sitting"));
        assert_eq!(nearest("kitten", ["sitting"], |_| 2), None);
        assert_eq!(nearest("cpu", ["cpux", "cpus"], |_| 1), Some("cpux"));
        assert_eq!(nearest("é", ["e"], |_| 1), Some("e"));
    }
}
