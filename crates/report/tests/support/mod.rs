//! Helpers the report tests share.

/// The part of `md` from the heading `start` to the next heading of the
/// same or a higher level.
pub fn section<'a>(md: &'a str, start: &str) -> &'a str {
    let at = md
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in\n{md}"));
    let level = start.chars().take_while(|&c| c == '#').count();
    let rest = &md[at + start.len()..];
    let end = rest
        .match_indices("\n#")
        .find(|(i, _)| rest[i + 1..].chars().take_while(|&c| c == '#').count() <= level)
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}
