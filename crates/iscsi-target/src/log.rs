//! Log lines that a peer cannot forge: text that came from the network
//! (initiator names, login failure reasons quoting them) is written with
//! its control characters escaped, so a name holding a newline or an
//! escape sequence stays on its own line and draws nothing on a terminal.

use std::fmt;

/// Shows `text` with control characters (C0, DEL, C1) escaped the way Rust
/// escapes them (`\n`, `\u{1b}`); everything else, quotes included, as is.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_fmt(format_args!("{c}"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Escaped;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        let forged = "iqn.x\nisoe: login from 10.0.0.1 accepted\u{1b}[2J\0\u{7f}\u{85}";
        let shown = Escaped(forged).to_string();
        assert_eq!(
            shown,
            "iqn.x\\nisoe: login from 10.0.0.1 accepted\\u{1b}[2J\\u{0}\\u{7f}\\u{85}"
        );
        assert!(!shown.contains('\n'));
        assert_eq!(
            Escaped("user \"alice\" café").to_string(),
            "user \"alice\" café"
        );
    }
}
