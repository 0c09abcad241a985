//! The report's content, once, as a list of blocks (headings, paragraphs,
//! tables, lists, code, figures) that `markdown` and `html` each render:
//! both formats say the same things in the same order; only the HTML draws
//! the figures.

/// A run of text in a paragraph or list item.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    /// Plain.
    Text(String),
    /// Emphasised (a significant change).
    Strong(String),
    /// A setting or a file name.
    Code(String),
}

/// A table cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Its text (plain; the renderers escape it).
    pub text: String,
    /// Emphasised.
    pub strong: bool,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell {
            text,
            strong: false,
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_string())
    }
}

/// One block of the report.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A heading, level 1–3, with an anchor for the HTML contents.
    Heading(u8, String, Option<&'static str>),
    /// A paragraph.
    Para(Vec<Span>),
    /// A table; `right[i]` right-aligns column i (numbers).
    Table {
        /// Column headings.
        head: Vec<String>,
        /// Right-aligned columns.
        right: Vec<bool>,
        /// The rows.
        rows: Vec<Vec<Cell>>,
    },
    /// A list; each item may have sub-items.
    List(Vec<(Vec<Span>, Vec<String>)>),
    /// Verbatim text.
    Code {
        /// Language of a Markdown fence ("toml", "").
        lang: String,
        /// The text.
        text: String,
    },
    /// A chart (HTML only): the `<svg>`, and a caption.
    Figure {
        /// The SVG element.
        svg: String,
        /// What it shows.
        caption: String,
    },
    /// Small multiples side by side (HTML only): SVG and caption each.
    Grid(Vec<(String, String)>),
    /// A warning set apart from the text (a box in HTML, a quote in
    /// Markdown): a title, a sentence, and one item a line.
    Warning {
        /// What it is about, emphasised.
        title: String,
        /// What the reader must know.
        text: String,
        /// The items, plain text.
        items: Vec<String>,
    },
}

/// A paragraph of plain text.
pub fn para(text: impl Into<String>) -> Block {
    Block::Para(vec![Span::Text(text.into())])
}

/// A table of plain cells.
pub fn table(head: &[&str], right: &[bool], rows: Vec<Vec<Cell>>) -> Block {
    debug_assert_eq!(head.len(), right.len());
    debug_assert!(rows.iter().all(|r| r.len() == head.len()));
    Block::Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        right: right.to_vec(),
        rows,
    }
}
