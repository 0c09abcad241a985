//! Escaping user text (plan names, case names, knob values) for the two
//! output languages: XML/HTML (also inside SVG) and Markdown.

/// Escapes text for HTML and XML content and attribute values.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // XML 1.0 forbids most control characters even as references.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a Markdown paragraph or table cell so that it renders as
/// itself and still reads as plain text: backslash escapes (CommonMark §2.4)
/// for the characters that would start markup, and no line breaks (a table
/// row is one line).
pub fn md(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\\' | '|' | '<' | '>' | '*' | '`' | '[' | ']' | '#' => {
                out.push('\\');
                out.push(c);
            }
            // An underscore inside a word (tcp_nodelay) is not emphasis.
            '_' => {
                let inside = i > 0
                    && i + 1 < chars.len()
                    && chars[i - 1].is_alphanumeric()
                    && chars[i + 1].is_alphanumeric();
                if !inside {
                    out.push('\\');
                }
                out.push('_');
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A fenced code block holding `text` verbatim: the fence is longer than
/// any run of backticks inside.
pub fn md_fence(text: &str, lang: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let body = text.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_markup_and_quotes() {
        assert_eq!(
            html("<script>\"a\" & 'b'"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;"
        );
        assert_eq!(html("a\u{1}b"), "a\u{fffd}b");
    }

    #[test]
    fn markdown_escapes_markup_but_not_words() {
        assert_eq!(md("<script>|*x*"), "\\<script\\>\\|\\*x\\*");
        assert_eq!(md("tcp_nodelay"), "tcp_nodelay");
        assert_eq!(md("_x_"), "\\_x\\_");
        assert_eq!(md("a\nb"), "a b");
    }

    #[test]
    fn fences_outgrow_backticks_inside() {
        assert_eq!(md_fence("a", "toml"), "```toml\na\n```\n");
        assert_eq!(md_fence("x ```` y\n", ""), "`````\nx ```` y\n`````\n");
    }
}
