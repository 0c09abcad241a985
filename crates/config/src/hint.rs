//! "Did you mean" hints: the known name a misspelt one was probably meant
//! to be.

/// The candidate closest to `name` when `name` is likely a typo of it: at
/// most 2 edits away (Levenshtein distance over characters), or a fifth of
/// the candidate's length for long ones. Of equally close candidates the
/// first wins; `None` when none is close.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|&(d, c)| d <= 2.max(c.chars().count() / 5))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}
