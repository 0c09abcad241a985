//! `report.md`: the report's blocks as Markdown that reads as plain text —
//! tables padded into columns, no HTML, the charts left to `report.html`.

use super::document::{Block, Cell, Span};
use super::escape::{md, md_fence};
use super::{sections, ReportInput};
use std::fmt::Write;

/// The Markdown report.
pub fn render_markdown(input: &ReportInput) -> String {
    let mut out = String::new();
    let mut figures = 0;
    for block in sections::build(input) {
        match block {
            Block::Figure { .. } | Block::Grid(_) => {
                figures += 1;
                continue;
            }
            block => out.push_str(&render(&block)),
        }
        out.push('\n');
    }
    if figures > 0 {
        let _ = writeln!(
            out,
            "---\n\nThe charts ({figures} figures) are in report.html, beside this file."
        );
    }
    out
}

fn spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => md(t),
            Span::Strong(t) => format!("**{}**", md(t)),
            Span::Code(t) => code(t),
        })
        .collect()
}

/// An inline code span; its delimiter outruns any backticks inside.
fn code(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    let ticks = if text.contains('`') { "``" } else { "`" };
    format!(
        "{ticks}{}{ticks}",
        if ticks.len() > 1 {
            format!(" {text} ")
        } else {
            text
        }
    )
}

fn cell(c: &Cell) -> String {
    let t = md(&c.text);
    if c.strong && !t.is_empty() {
        format!("**{t}**")
    } else {
        t
    }
}

fn render(block: &Block) -> String {
    match block {
        Block::Heading(level, text, _) => {
            format!("{} {}\n", "#".repeat(usize::from(*level)), md(text))
        }
        Block::Para(s) => format!("{}\n", spans(s)),
        Block::List(items) => {
            let mut out = String::new();
            for (item, subs) in items {
                let _ = writeln!(out, "- {}", spans(item));
                for sub in subs {
                    let _ = writeln!(out, "  - {}", md(sub));
                }
            }
            out
        }
        Block::Code { lang, text } => md_fence(text, lang),
        Block::Table { head, right, rows } => {
            let head: Vec<String> = head.iter().map(|h| md(h)).collect();
            let rows: Vec<Vec<String>> =
                rows.iter().map(|r| r.iter().map(cell).collect()).collect();
            table(&head, right, &rows)
        }
        Block::Figure { .. } | Block::Grid(_) => String::new(),
        Block::Warning { title, text, items } => {
            let mut out = format!("> **{}** {}\n>\n", md(title), md(text));
            for item in items {
                let _ = writeln!(out, "> - {}", md(item));
            }
            out
        }
    }
}

/// A pipe table with its columns padded to a common width.
fn table(head: &[String], right: &[bool], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = head.iter().map(|h| width(h).max(3)).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(c));
        }
    }
    let pad = |s: &str, i: usize| {
        let fill = " ".repeat(widths[i] - width(s));
        if right[i] {
            format!("{fill}{s}")
        } else {
            format!("{s}{fill}")
        }
    };
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(head.iter().enumerate().map(|(i, h)| pad(h, i)).collect());
    out.push_str(&line(
        widths
            .iter()
            .zip(right)
            .map(|(&w, &r)| {
                if r {
                    format!("{}:", "-".repeat(w - 1))
                } else {
                    "-".repeat(w)
                }
            })
            .collect(),
    ));
    for row in rows {
        out.push_str(&line(
            row.iter().enumerate().map(|(i, c)| pad(c, i)).collect(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns() {
        let t = table(
            &["case".into(), "IOPS".into()],
            &[false, true],
            &[
                vec!["baseline".into(), "1,000".into()],
                vec!["b".into(), "2".into()],
            ],
        );
        assert_eq!(
            t,
            "| case     |  IOPS |\n| -------- | ----: |\n| baseline | 1,000 |\n| b        |     2 |\n"
        );
    }

    #[test]
    fn code_spans_survive_backticks() {
        assert_eq!(code("mtu = 9000"), "`mtu = 9000`");
        assert_eq!(code("a`b"), "`` a`b ``");
    }
}
