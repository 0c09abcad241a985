//! `report.html`: the report's blocks as one self-contained HTML file —
//! inline CSS, inline SVG charts, no scripts, no external resources — so
//! it can be mailed, archived, or opened from a results directory offline.

use super::document::{Block, Cell, Span};
use super::escape::html as esc;
use super::{sections, ReportInput};
use std::fmt::Write;

const STYLE: &str = "\
body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;font-size:14px;line-height:1.45;\
color:#1b1b1b;max-width:1000px;margin:1.5em auto;padding:0 1em}\
h1{font-size:1.6em;border-bottom:2px solid #4e79a7;padding-bottom:.2em}\
h2{font-size:1.3em;margin-top:2em;border-bottom:1px solid #ccc;padding-bottom:.15em}\
h3{font-size:1.05em;margin-top:1.4em}\
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}\
th,td{border:1px solid #d0d0d0;padding:3px 7px;vertical-align:top}\
th{background:#eef2f7;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr:nth-child(even) td{background:#fafafa}\
strong.sig,td strong{color:#0b3d91}\
.wide{overflow-x:auto;max-width:100%}\
figure{margin:1em 0}\
figure svg{max-width:100%;height:auto;display:block}\
figcaption{font-size:12px;color:#555;margin-top:.3em}\
.grid{display:flex;flex-wrap:wrap;gap:10px}\
.grid figure{margin:0;width:256px}\
pre{background:#f6f8fa;border:1px solid #ddd;padding:.7em;overflow-x:auto;font-size:12px}\
code{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:.92em}\
nav ul{columns:2;margin:.4em 0}\
.warning{border:2px solid #e15759;background:#fff5f5;padding:.5em 1em;margin:1em 0}\
.warning ul{margin:.4em 0}\
.spark{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;letter-spacing:1px;white-space:nowrap}";

/// The HTML report.
pub fn render_html(input: &ReportInput) -> String {
    let blocks = sections::build(input);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>isoe lab report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(&input.plan_name)
    );
    let mut toc_done = false;
    for block in &blocks {
        // The contents go after the front matter and the answer to the
        // plan's question (what a reader opens the page for, kept on its
        // first screen), before the next section.
        if !toc_done
            && matches!(block, Block::Heading(2, _, anchor) if anchor.as_deref() != Some("answer"))
        {
            out.push_str(&contents(&blocks));
            toc_done = true;
        }
        out.push_str(&render(block));
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn contents(blocks: &[Block]) -> String {
    let mut out = String::from("<nav><strong>Contents</strong><ul>\n");
    for b in blocks {
        if let Block::Heading(2, text, Some(anchor)) = b {
            let _ = writeln!(out, "<li><a href=\"#{anchor}\">{}</a></li>", esc(text));
        }
    }
    out.push_str("</ul></nav>\n");
    out
}

fn spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => esc(t),
            Span::Strong(t) => format!("<strong>{}</strong>", esc(t)),
            Span::Code(t) => format!("<code>{}</code>", esc(t)),
        })
        .collect()
}

fn cell(c: &Cell, right: bool) -> String {
    let class = if right {
        " class=\"num\""
    } else if c
        .text
        .chars()
        .any(|ch| ('▁'..='█').contains(&ch) || ch == '·')
    {
        " class=\"spark\""
    } else {
        ""
    };
    let text = esc(&c.text);
    if c.strong {
        format!("<td{class}><strong>{text}</strong></td>")
    } else {
        format!("<td{class}>{text}</td>")
    }
}

fn render(block: &Block) -> String {
    match block {
        Block::Heading(level, text, anchor) => {
            let id = anchor.map_or(String::new(), |a| format!(" id=\"{a}\""));
            format!("<h{level}{id}>{}</h{level}>\n", esc(text))
        }
        Block::Para(s) => format!("<p>{}</p>\n", spans(s)),
        Block::List(items) => {
            let mut out = String::from("<ul>\n");
            for (item, subs) in items {
                out.push_str("<li>");
                out.push_str(&spans(item));
                if !subs.is_empty() {
                    out.push_str("<ul>");
                    for sub in subs {
                        let _ = write!(out, "<li>{}</li>", esc(sub));
                    }
                    out.push_str("</ul>");
                }
                out.push_str("</li>\n");
            }
            out.push_str("</ul>\n");
            out
        }
        Block::Code { text, .. } => format!("<pre><code>{}</code></pre>\n", esc(text)),
        Block::Table { head, right, rows } => {
            // Wide tables scroll by themselves instead of widening the page.
            let mut out = String::from("<div class=\"wide\"><table>\n<thead><tr>");
            for h in head {
                let _ = write!(out, "<th>{}</th>", esc(h));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in rows {
                out.push_str("<tr>");
                for (c, &r) in row.iter().zip(right) {
                    out.push_str(&cell(c, r));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table></div>\n");
            out
        }
        Block::Figure { svg, caption } => {
            format!(
                "<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n",
                esc(caption)
            )
        }
        Block::Warning { title, text, items } => {
            let mut out = format!(
                "<div class=\"warning\">\n<p><strong>{}</strong> {}</p>\n<ul>\n",
                esc(title),
                esc(text)
            );
            for item in items {
                let _ = writeln!(out, "<li>{}</li>", esc(item));
            }
            out.push_str("</ul>\n</div>\n");
            out
        }
        Block::Grid(items) => {
            let mut out = String::from("<div class=\"grid\">\n");
            for (svg, caption) in items {
                let _ = write!(
                    out,
                    "<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n",
                    esc(caption)
                );
            }
            out.push_str("</div>\n");
            out
        }
    }
}
