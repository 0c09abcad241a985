//! Hand-written SVG, self-contained (generic font families only, no
//! external references, no scripts): horizontal grouped bar charts whose
//! panels share their rows, log2 latency histograms, lines over time, and a
//! box that says there is no data instead of drawing nothing.
//!
//! Text widths are estimated, not measured: 0.6 em per character is wide
//! enough for the digits and lower-case letters of a sans-serif face, so
//! labels sized by it do not overlap.

use super::escape::html as esc;
use super::numbers::short_us;
use std::fmt::Write;

/// Width of a full-width chart, px (the HTML scales it down when narrow).
pub const WIDTH: f64 = 800.0;
/// Width of a histogram small multiple, px.
pub const HIST_WIDTH: f64 = 256.0;
const HIST_HEIGHT: f64 = 190.0;
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";
const BAR_H: f64 = 14.0;
const BAR_GAP: f64 = 3.0;
const ROW_PAD: f64 = 7.0;

/// Estimated width of `text` at `size` px.
pub fn text_w(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// Horizontal grid lines with their value labels, every `step` from 0 to
/// `y_hi`, across a plot from `left` to `right`.
struct YGrid {
    left: f64,
    right: f64,
    /// Between the labels' right edge and the plot.
    label_gap: f64,
    font: f64,
    /// After each label ("%" or nothing).
    unit: &'static str,
}

impl YGrid {
    fn draw(&self, s: &mut String, y_hi: f64, step: f64, y: impl Fn(f64) -> f64) {
        let (left, right) = (self.left, self.right);
        let mut v = 0.0;
        while v <= y_hi + step * 1e-6 {
            let yy = y(v);
            let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{right}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>");
            s.push_str(&text(
                left - self.label_gap,
                yy + 3.5,
                self.font,
                "end",
                "fill=\"#444\"",
                &tick_label(v, step, self.unit),
            ));
            v += step;
        }
    }
}

/// A chart's title, bold, top left, cut to the chart's width.
pub(super) fn chart_title(title: &str) -> String {
    text(
        12.0,
        20.0,
        14.0,
        "start",
        "font-weight=\"bold\"",
        &fit(title, WIDTH - 24.0, 14.0),
    )
}

/// `text` cut to about `width` px at `size`, with an ellipsis.
pub(super) fn fit(text: &str, width: f64, size: f64) -> String {
    let max = (width / (size * 0.6)).floor().max(2.0) as usize;
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

/// A legend under a full-width chart's title: each item's swatch (drawn
/// in a 12 px square at the origin) and label, in as many lines as they
/// take; and the last line's y.
pub(super) fn legend(items: &[(String, String)]) -> (String, f64) {
    let (mut out, mut x, mut y) = (String::new(), 12.0, 40.0);
    for (swatch, label) in items {
        let label = fit(label, WIDTH - 40.0, 12.0);
        let item_w = 18.0 + text_w(&label, 12.0) + 16.0;
        if x + item_w > WIDTH - 8.0 && x > 12.0 {
            x = 12.0;
            y += 18.0;
        }
        let _ = write!(
            out,
            "<g transform=\"translate({x:.1},{:.1})\">{swatch}</g>",
            y - 10.0
        );
        out.push_str(&text(x + 17.0, y, 12.0, "start", "", &label));
        x += item_w;
    }
    (out, y)
}

/// A legend's swatch for a series of bars: a 12 px square of `color`.
pub(super) fn box_swatch(color: &str) -> String {
    format!("<rect width=\"12\" height=\"12\" fill=\"{color}\"/>")
}

/// What a value axis measures, centred under it at `x`.
pub(super) fn axis_title(x: f64, y: f64, label: &str) -> String {
    text(x, y, 10.5, "middle", "fill=\"#555\"", label)
}

/// One series of bars (a colour in the legend).
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Fill colour (from the fixed palettes of `charts`, never user text).
    pub color: &'static str,
}

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Its length in the panel's unit.
    pub value: f64,
    /// Solid fill; hatched and pale otherwise (not significant).
    pub solid: bool,
    /// Printed at the bar's end.
    pub label: String,
    /// Shown on hover.
    pub tooltip: String,
    /// The value's 95% confidence interval, drawn as an error bar.
    pub interval: Option<Interval>,
}

/// A confidence interval around a bar's value, in the panel's unit.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Low end.
    pub lo: f64,
    /// High end.
    pub hi: f64,
    /// Shown on hover, e.g. "95% CI +7.3 to +12.8%".
    pub label: String,
}

/// A row label (a group of bars: one case).
#[derive(Debug, Clone)]
pub struct Row {
    /// The case's name.
    pub label: String,
    /// A second, smaller line (what the case changes).
    pub sublabel: String,
}

/// A shaded range behind the bars (the ±threshold of significance).
#[derive(Debug, Clone, Copy)]
pub struct Band {
    /// Low end, in the panel's unit.
    pub lo: f64,
    /// High end.
    pub hi: f64,
}

/// One panel: a value axis of its own, the chart's rows.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Printed above the panel: what its axis measures.
    pub title: String,
    /// Appended to tick labels ("%", "").
    pub unit: String,
    /// The series, one bar each per row.
    pub series: Vec<Series>,
    /// `bars[row][series]`; None draws "n/a".
    pub bars: Vec<Vec<Option<Bar>>>,
    /// Shaded range.
    pub band: Option<Band>,
    /// The axis reaches at least this far from 0 whatever the bars, so
    /// that a tiny value draws as a tiny bar, not as a full one (0: none).
    pub axis_floor: f64,
}

/// A legend entry besides the series.
#[derive(Debug, Clone)]
pub enum Key {
    /// A hatched grey swatch.
    Hatched(String),
    /// A shaded band swatch.
    Band(String),
    /// An error bar swatch.
    ErrorBar(String),
}

/// Horizontal grouped bars: rows of cases, one or more panels side by side.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Unique within the document (pattern ids derive from it): `[a-z0-9-]`.
    pub id: String,
    /// Printed at the top.
    pub title: String,
    /// The rows.
    pub rows: Vec<Row>,
    /// The panels.
    pub panels: Vec<Panel>,
    /// Extra legend entries.
    pub keys: Vec<Key>,
    /// Said instead of drawing when no panel has a bar.
    pub empty_message: String,
}

/// A chart that has nothing to draw says so.
pub fn no_data(title: &str, message: &str, width: f64) -> String {
    let h = 86.0;
    let mut s = open_svg(width, h, title);
    let _ = write!(
        s,
        "<rect x=\"1\" y=\"1\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#bbb\" \
         stroke-dasharray=\"4 3\"/>",
        width - 2.0,
        h - 2.0
    );
    s.push_str(&text(
        12.0,
        22.0,
        13.0,
        "start",
        "font-weight=\"bold\"",
        &fit(title, width - 24.0, 13.0),
    ));
    let mut y = 48.0;
    for line in wrap(message, width - 24.0, 12.0).iter().take(3) {
        s.push_str(&text(width / 2.0, y, 12.0, "middle", "fill=\"#666\"", line));
        y += 15.0;
    }
    s.push_str("</svg>\n");
    s
}

pub(super) fn open_svg(width: f64, height: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" {FONT} font-size=\"12\">\
         <title>{}</title>\n",
        esc(title)
    )
}

pub(super) fn text(x: f64, y: f64, size: f64, anchor: &str, attrs: &str, content: &str) -> String {
    format!(
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {attrs}>{}</text>\n",
        esc(content)
    )
}

/// Words of `text` in lines of about `width` px.
fn wrap(text: &str, width: f64, size: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && text_w(&format!("{line} {word}"), size) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A round step near `span / 4`: 1, 2, 2.5 or 5 × 10^k.
pub(super) fn nice_step(span: f64) -> f64 {
    let raw = (span / 4.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    // 100 / 100 can come out a hair above 1: compare with some slack.
    let f = raw / mag * (1.0 - 1e-9);
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn tick_label(v: f64, step: f64, unit: &str) -> String {
    // As many decimals as the step needs: 25 → 0, 2.5 → 1, 0.05 → 2.
    let decimals = (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6) as usize;
    if v.abs() < step * 1e-9 {
        return format!("0{unit}");
    }
    if v.abs() >= 10_000.0 {
        format!("{}{unit}", short_us(v))
    } else {
        format!("{v:.decimals$}{unit}")
    }
}

/// A panel's mapping from values to x.
pub(super) struct Scale {
    /// The value at the axis's low end.
    pub lo: f64,
    /// The value at its high end.
    pub hi: f64,
    /// The x of `lo`, px.
    pub x0: f64,
    /// The x of `hi`, px.
    pub x1: f64,
    /// Between grid lines, in the values' unit.
    pub step: f64,
}

impl Scale {
    /// The x of `v`, px.
    pub fn x(&self, v: f64) -> f64 {
        self.x0 + (v - self.lo) / (self.hi - self.lo) * (self.x1 - self.x0)
    }
}

/// Where a bar chart's parts go, px.
struct Frame {
    /// Width of the row-label column.
    label_w: f64,
    /// Baseline of the panel titles.
    title_y: f64,
    /// Top of the first row.
    top: f64,
    /// Bottom of the last row (the value axes).
    bottom: f64,
    /// Height of a row.
    row_h: f64,
    /// Most series in any panel: the bars a row has room for.
    max_series: usize,
}

impl BarChart {
    /// The chart as one `<svg>` element.
    pub fn render(&self) -> String {
        debug_assert!(self
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-'));
        let has_bars = self
            .panels
            .iter()
            .any(|p| p.bars.iter().flatten().any(Option::is_some));
        if self.rows.is_empty() || !has_bars {
            return no_data(&self.title, &self.empty_message, WIDTH);
        }
        let (legend, legend_y) = self.legend();
        let frame = self.frame(legend_y);
        let plot_left = frame.label_w + 18.0;
        let panel_gap = 30.0;
        let np = self.panels.len() as f64;
        let panel_w = (WIDTH - plot_left - 14.0 - panel_gap * (np - 1.0)) / np;

        let mut s = open_svg(WIDTH, frame.bottom + 34.0, &self.title);
        s.push_str(&self.defs());
        s.push_str(&chart_title(&self.title));
        s.push_str(&legend);
        s.push_str(&self.row_labels(&frame));
        for (pi, panel) in self.panels.iter().enumerate() {
            let px0 = plot_left + pi as f64 * (panel_w + panel_gap);
            s.push_str(&self.panel(panel, px0, px0 + panel_w, &frame));
        }
        s.push_str("</svg>\n");
        s
    }

    fn frame(&self, legend_y: f64) -> Frame {
        let label_w = self
            .rows
            .iter()
            .map(|r| text_w(&r.label, 12.0).max(text_w(&r.sublabel, 10.5)))
            .fold(60.0, f64::max)
            .min(230.0);
        let max_series = self
            .panels
            .iter()
            .map(|p| p.series.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let row_h = max_series as f64 * (BAR_H + BAR_GAP) - BAR_GAP + 2.0 * ROW_PAD;
        let title_y = legend_y + 24.0;
        let top = title_y + 8.0;
        Frame {
            label_w,
            title_y,
            top,
            bottom: top + row_h * self.rows.len() as f64,
            row_h,
            max_series,
        }
    }

    /// The legend, laid out in lines under the title; and its last line's y.
    fn legend(&self) -> (String, f64) {
        let mut items: Vec<(String, String)> = Vec::new();
        for s in self.panels.iter().flat_map(|p| &p.series) {
            if !items.iter().any(|(_, name)| *name == s.name) {
                items.push((box_swatch(s.color), s.name.clone()));
            }
        }
        for k in &self.keys {
            items.push(match k {
                Key::Hatched(l) => (
                    format!(
                        "<rect width=\"12\" height=\"12\" fill=\"url(#{}-hg)\" stroke=\"#777\"/>",
                        self.id
                    ),
                    l.clone(),
                ),
                Key::Band(l) => (
                    "<rect width=\"12\" height=\"12\" fill=\"#e4e4e4\" stroke=\"#999\" \
                     stroke-dasharray=\"3 2\"/>"
                        .to_string(),
                    l.clone(),
                ),
                Key::ErrorBar(l) => (
                    "<path d=\"M0 6H12M0 2V10M12 2V10\" stroke=\"#222\" stroke-width=\"1.3\" \
                     fill=\"none\"/>"
                        .to_string(),
                    l.clone(),
                ),
            });
        }
        legend(&items)
    }

    /// Striped rows, each with its case's name and what it changes.
    fn row_labels(&self, f: &Frame) -> String {
        let mut s = String::new();
        let right = f.label_w + 8.0;
        for (i, row) in self.rows.iter().enumerate() {
            let y = f.top + f.row_h * i as f64;
            if i % 2 == 0 {
                let _ = writeln!(
                    s,
                    "<rect x=\"4\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f5f5f5\"/>",
                    WIDTH - 8.0,
                    f.row_h
                );
            }
            // A long sublabel takes a second line where the row is tall enough.
            let mut sub = wrap(&row.sublabel, f.label_w, 10.5);
            let max_lines = if f.row_h >= 44.0 { 2 } else { 1 };
            if sub.len() > max_lines {
                let rest = sub[max_lines - 1..].join(" ");
                sub.truncate(max_lines - 1);
                sub.push(rest);
            }
            let label_y = y + f.row_h / 2.0 + 4.0 - 6.5 * sub.len() as f64;
            let tooltip = esc(&format!("{} {}", row.label, row.sublabel));
            let _ = write!(s, "<g><title>{tooltip}</title>");
            let label = fit(&row.label, f.label_w, 12.0);
            s.push_str(&text(
                right,
                label_y,
                12.0,
                "end",
                "font-weight=\"bold\"",
                &label,
            ));
            for (k, line) in sub.iter().enumerate() {
                let line_y = label_y + 13.0 * (k + 1) as f64;
                let line = fit(line, f.label_w, 10.5);
                s.push_str(&text(right, line_y, 10.5, "end", "fill=\"#555\"", &line));
            }
            s.push_str("</g>\n");
        }
        s
    }

    /// The series' colours, each once, in order.
    fn colors(&self) -> Vec<&'static str> {
        let mut colors: Vec<&'static str> = Vec::new();
        for s in self.panels.iter().flat_map(|p| &p.series) {
            if !colors.contains(&s.color) {
                colors.push(s.color);
            }
        }
        colors
    }

    /// Hatch patterns: a grey one for the legend, then one per colour.
    fn defs(&self) -> String {
        let mut colors = vec!["#777777"];
        colors.extend(self.colors());
        let mut d = String::from("<defs>");
        for (i, c) in colors.iter().enumerate() {
            let id = if i == 0 {
                format!("{}-hg", self.id)
            } else {
                format!("{}-h{}", self.id, i)
            };
            let _ = write!(
                d,
                "<pattern id=\"{id}\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" \
                 patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"{c}\" \
                 fill-opacity=\"0.15\"/><line x1=\"1\" y1=\"0\" x2=\"1\" y2=\"6\" stroke=\"{c}\" \
                 stroke-width=\"2\" stroke-opacity=\"0.8\"/></pattern>"
            );
        }
        d.push_str("</defs>\n");
        d
    }

    fn hatch_id(&self, color: &str) -> String {
        let i = self
            .colors()
            .iter()
            .position(|c| *c == color)
            .map_or(0, |i| i + 1);
        format!("{}-h{}", self.id, i)
    }

    /// One panel between `px0` and `px1`: title, grid, band, bars, axes.
    fn panel(&self, p: &Panel, px0: f64, px1: f64, f: &Frame) -> String {
        let (top, bottom) = (f.top, f.bottom);
        let mid = (px0 + px1) / 2.0;
        let mut s = text(
            mid,
            f.title_y,
            12.0,
            "middle",
            "font-weight=\"bold\" fill=\"#333\"",
            &fit(&p.title, px1 - px0, 12.0),
        );
        let bars: Vec<&Bar> = p.bars.iter().flatten().flatten().collect();
        if bars.is_empty() {
            let y = (top + bottom) / 2.0;
            s.push_str(&text(mid, y, 12.0, "middle", "fill=\"#666\"", "no data"));
            return s;
        }
        let scale = Self::scale(p, &bars, px0, px1);
        s.push_str(&grid(&scale, &p.unit, px0, px1, top, bottom));
        if let Some(band) = p.band {
            let a = scale.x(band.lo.max(scale.lo));
            let b = scale.x(band.hi.min(scale.hi));
            let _ = writeln!(
                s,
                "<rect x=\"{a:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#d0d0d0\" \
                 fill-opacity=\"0.45\"/><line x1=\"{a:.1}\" y1=\"{top:.1}\" x2=\"{a:.1}\" y2=\"{bottom:.1}\" \
                 stroke=\"#888\" stroke-dasharray=\"3 2\"/><line x1=\"{b:.1}\" y1=\"{top:.1}\" x2=\"{b:.1}\" \
                 y2=\"{bottom:.1}\" stroke=\"#888\" stroke-dasharray=\"3 2\"/>",
                b - a,
                bottom - top
            );
        }
        // Fewer series than the row has room for: centre them.
        let offset = (f.max_series - p.series.len()) as f64 * (BAR_H + BAR_GAP) / 2.0;
        for (ri, row) in p.bars.iter().enumerate() {
            for (si, bar) in row.iter().enumerate() {
                let y =
                    top + ri as f64 * f.row_h + ROW_PAD + offset + si as f64 * (BAR_H + BAR_GAP);
                let color = p.series.get(si).map_or("#777777", |s| s.color);
                s.push_str(&self.bar(bar.as_ref(), color, y, &scale, px0, px1));
            }
        }
        let x_zero = scale.x(0.0);
        let _ = writeln!(s, "<line x1=\"{x_zero:.1}\" y1=\"{top:.1}\" x2=\"{x_zero:.1}\" y2=\"{bottom:.1}\" stroke=\"#222\" stroke-width=\"1.2\"/>");
        let _ = writeln!(s, "<line x1=\"{px0:.1}\" y1=\"{bottom:.1}\" x2=\"{px1:.1}\" y2=\"{bottom:.1}\" stroke=\"#222\"/>");
        s
    }

    /// One bar with its value at its end ("n/a" for a missing one).
    fn bar(
        &self,
        bar: Option<&Bar>,
        color: &str,
        y: f64,
        scale: &Scale,
        px0: f64,
        px1: f64,
    ) -> String {
        let x_zero = scale.x(0.0);
        let cy = y + BAR_H / 2.0 + 4.0;
        let Some(bar) = bar else {
            let attrs = "fill=\"#888\" font-style=\"italic\"";
            return text(x_zero + 4.0, cy, 10.5, "start", attrs, "n/a");
        };
        let x_end = scale.x(bar.value);
        let (x, width) = (x_zero.min(x_end), (x_end - x_zero).abs());
        let fill = if bar.solid {
            color.to_string()
        } else {
            format!("url(#{})", self.hatch_id(color))
        };
        let mut s = format!(
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR_H}\" fill=\"{fill}\" \
             stroke=\"{color}\" stroke-width=\"{}\"><title>{}</title></rect>\n",
            width.max(1.0),
            if bar.solid { 0 } else { 1 },
            esc(&bar.tooltip)
        );
        s.push_str(&error_bar(bar.interval.as_ref(), y, scale));
        // Outside the bar's end (past its error bar), or inside it when
        // the panel has no room left.
        let negative = bar.value < 0.0;
        let x_out = scale.x(outer_end(bar));
        let label_w = text_w(&bar.label, 10.5);
        let no_room = if negative {
            x_out - 4.0 - label_w < px0
        } else {
            x_out + 4.0 + label_w > px1
        };
        let inside = no_room && width > label_w + 8.0;
        let (lx, anchor) = match (negative, inside) {
            (true, false) => (x_out - 4.0, "end"),
            (false, false) => (x_out + 4.0, "start"),
            (true, true) => (x_end + 4.0, "start"),
            (false, true) => (x_end - 4.0, "end"),
        };
        let attrs = match (inside, bar.solid) {
            (true, _) => "font-weight=\"bold\" fill=\"#fff\"",
            (false, true) => "font-weight=\"bold\" fill=\"#111\"",
            (false, false) => "fill=\"#555\"",
        };
        s.push_str(&text(lx, cy, 10.5, anchor, attrs, &bar.label));
        s
    }

    /// The value range (0, the band and every bar, rounded out to ticks)
    /// mapped inside the panel, room left beyond both ends for the labels.
    fn scale(p: &Panel, bars: &[&Bar], px0: f64, px1: f64) -> Scale {
        let mut lo: f64 = 0.0;
        let mut hi: f64 = 0.0;
        for b in bars {
            lo = lo.min(b.value);
            hi = hi.max(b.value);
            if let Some(i) = &b.interval {
                lo = lo.min(i.lo);
                hi = hi.max(i.hi);
            }
        }
        if let Some(band) = p.band {
            lo = lo.min(band.lo);
            hi = hi.max(band.hi);
        }
        hi = hi.max(p.axis_floor);
        if hi - lo <= f64::EPSILON {
            hi = lo + 1.0;
        }
        let step = nice_step(hi - lo);
        let lo = (lo / step).floor() * step;
        let hi = (hi / step).ceil() * step;
        let width = px1 - px0;
        let pad = |neg: bool| {
            bars.iter()
                .filter(|b| (b.value < 0.0) == neg)
                .map(|b| text_w(&b.label, 10.5) + 8.0)
                .fold(0.0, f64::max)
                .min(width * 0.35)
        };
        let has_none = p.bars.iter().flatten().any(Option::is_none);
        let pad_right = pad(false).max(if has_none { 30.0 } else { 0.0 }).max(8.0);
        let pad_left = pad(true).max(8.0);
        Scale {
            lo,
            hi,
            x0: px0 + pad_left,
            x1: px1 - pad_right,
            step,
        }
    }
}

/// The end of a bar, or of its interval, farthest from 0 on the bar's
/// side: where its label goes.
fn outer_end(bar: &Bar) -> f64 {
    match &bar.interval {
        Some(i) if bar.value < 0.0 => bar.value.min(i.lo),
        Some(i) => bar.value.max(i.hi),
        None => bar.value,
    }
}

/// An interval as an error bar across the middle of the bar at `y`: a
/// line from its low to its high end, capped at both.
fn error_bar(interval: Option<&Interval>, y: f64, scale: &Scale) -> String {
    let Some(i) = interval else {
        return String::new();
    };
    let (a, b) = (scale.x(i.lo), scale.x(i.hi));
    let mid = y + BAR_H / 2.0;
    let (cap0, cap1) = (y + 2.0, y + BAR_H - 2.0);
    let line = |x1: f64, y1: f64, x2: f64, y2: f64| {
        format!(
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#222\" \
             stroke-width=\"1.3\"/>"
        )
    };
    format!(
        "<g class=\"ci\"><title>{}</title>{}{}{}</g>\n",
        esc(&i.label),
        line(a, mid, b, mid),
        line(a, cap0, a, cap1),
        line(b, cap0, b, cap1)
    )
}

/// Grid lines at every step and tick labels under the axis, thinned (0
/// always kept) so that they never touch, and kept inside the panel.
pub(super) fn grid(scale: &Scale, unit: &str, px0: f64, px1: f64, top: f64, bottom: f64) -> String {
    let mut s = String::new();
    let first = (scale.lo / scale.step).round() as i64;
    let last = ((scale.hi / scale.step).round() as i64).min(first + 40);
    let label = |i: i64| tick_label(i as f64 * scale.step, scale.step, unit);
    let widest = (first..=last)
        .map(|i| text_w(&label(i), 10.5))
        .fold(0.0, f64::max);
    let spacing = (scale.x(scale.step) - scale.x(0.0)).abs().max(1.0);
    let every = ((widest + 8.0) / spacing).ceil().max(1.0) as i64;
    for i in first..=last {
        let x = scale.x(i as f64 * scale.step);
        let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#d8d8d8\" stroke-width=\"1\"/>");
        if i % every == 0 {
            let label = label(i);
            let half = text_w(&label, 10.5) / 2.0;
            let tx = x.clamp(px0 + half, px1 - half);
            s.push_str(&text(
                tx,
                bottom + 15.0,
                10.5,
                "middle",
                "fill=\"#444\"",
                &label,
            ));
        }
    }
    s
}

/// A log2 latency histogram: the share of I/Os per bucket, one series per
/// direction, bars side by side.
#[derive(Debug, Clone)]
pub struct Histogram {
    /// Printed at the top (the case).
    pub title: String,
    /// The buckets' upper bounds, µs, shared by the small multiples of a workload.
    pub uppers: Vec<f64>,
    /// Each series with its counts, aligned with `uppers`.
    pub series: Vec<(Series, Vec<u64>)>,
    /// Said instead of drawing when no series has a count.
    pub empty_message: String,
}

/// The plot area of a histogram, px.
const HIST_LEFT: f64 = 40.0;
const HIST_RIGHT: f64 = HIST_WIDTH - 8.0;
const HIST_TOP: f64 = 44.0;
const HIST_BOTTOM: f64 = HIST_HEIGHT - 36.0;

impl Histogram {
    /// The histogram as one `<svg>` element.
    pub fn render(&self) -> String {
        let totals: Vec<u64> = self.series.iter().map(|(_, c)| c.iter().sum()).collect();
        if self.uppers.is_empty() || totals.iter().all(|&t| t == 0) {
            return self.empty();
        }
        // Each direction as shares of its own I/Os, so reads and writes compare.
        let shares: Vec<Vec<f64>> = self
            .series
            .iter()
            .zip(&totals)
            .map(|((_, counts), &t)| {
                let t = t.max(1) as f64;
                counts.iter().map(|&c| 100.0 * c as f64 / t).collect()
            })
            .collect();
        let max = shares.iter().flatten().copied().fold(0.0, f64::max);
        let step = nice_step(max);
        let y_hi = ((max / step).ceil() * step).clamp(step, 100.0);
        let y = |v: f64| HIST_BOTTOM - v / y_hi * (HIST_BOTTOM - HIST_TOP);

        let mut s = open_svg(HIST_WIDTH, HIST_HEIGHT, &self.title);
        s.push_str(&self.heading(&totals));
        let grid = YGrid {
            left: HIST_LEFT,
            right: HIST_RIGHT,
            label_gap: 4.0,
            font: 10.0,
            unit: "%",
        };
        grid.draw(&mut s, y_hi, step, y);
        let cat_w = (HIST_RIGHT - HIST_LEFT) / self.uppers.len() as f64;
        let bar_w = ((cat_w - 2.0) / self.series.len().max(1) as f64).max(0.5);
        for (si, ((series, _), share)) in self.series.iter().zip(&shares).enumerate() {
            for (i, &v) in share.iter().enumerate().filter(|(_, v)| **v > 0.0) {
                let x = HIST_LEFT + i as f64 * cat_w + 1.0 + si as f64 * bar_w;
                let tooltip = format!("{} ≤ {} µs: {v:.1}%", series.name, self.uppers[i]);
                let _ = writeln!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" fill=\"{}\">\
                     <title>{}</title></rect>",
                    y(v),
                    (HIST_BOTTOM - y(v)).max(0.5),
                    series.color,
                    esc(&tooltip)
                );
            }
        }
        s.push_str(&self.x_axis(cat_w));
        s.push_str("</svg>\n");
        s
    }

    /// Title, legend (a direction without I/O says "none"), y unit.
    fn heading(&self, totals: &[u64]) -> String {
        let title = fit(&self.title, HIST_WIDTH - 12.0, 12.0);
        let mut s = text(6.0, 15.0, 12.0, "start", "font-weight=\"bold\"", &title);
        let mut x = 6.0;
        for ((series, _), &t) in self.series.iter().zip(totals) {
            let label = if t == 0 {
                format!("{}: none", series.name)
            } else {
                series.name.clone()
            };
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"23\" width=\"10\" height=\"10\" fill=\"{}\"/>",
                series.color
            );
            s.push_str(&text(x + 14.0, 32.0, 10.5, "start", "", &label));
            x += 14.0 + text_w(&label, 10.5) + 12.0;
        }
        let unit = text(
            HIST_WIDTH - 6.0,
            32.0,
            10.0,
            "end",
            "fill=\"#555\"",
            "% of I/Os",
        );
        s.push_str(&unit);
        s
    }

    /// Bucket ticks, their bounds thinned so that they do not overlap, and
    /// the axis title.
    fn x_axis(&self, cat_w: f64) -> String {
        let mut s = String::new();
        let every = ((28.0 / cat_w).ceil() as usize).max(1);
        for (i, &u) in self.uppers.iter().enumerate() {
            let x = HIST_LEFT + (i as f64 + 0.5) * cat_w;
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{HIST_BOTTOM}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>",
                HIST_BOTTOM + 3.0
            );
            if i % every == 0 {
                let label = short_us(u);
                s.push_str(&text(
                    x,
                    HIST_BOTTOM + 13.0,
                    9.5,
                    "middle",
                    "fill=\"#444\"",
                    &label,
                ));
            }
        }
        let _ = writeln!(
            s,
            "<line x1=\"{HIST_LEFT}\" y1=\"{HIST_BOTTOM}\" x2=\"{HIST_RIGHT}\" y2=\"{HIST_BOTTOM}\" stroke=\"#222\"/>"
        );
        s.push_str(&text(
            (HIST_LEFT + HIST_RIGHT) / 2.0,
            HIST_HEIGHT - 6.0,
            10.0,
            "middle",
            "fill=\"#555\"",
            "latency, µs (log2 bucket upper bound)",
        ));
        s
    }

    fn empty(&self) -> String {
        let (w, h) = (HIST_WIDTH, HIST_HEIGHT);
        let mut s = open_svg(w, h, &self.title);
        let _ = write!(
            s,
            "<rect x=\"1\" y=\"1\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>",
            w - 2.0,
            h - 2.0
        );
        let title = fit(&self.title, w - 12.0, 12.0);
        s.push_str(&text(
            6.0,
            15.0,
            12.0,
            "start",
            "font-weight=\"bold\"",
            &title,
        ));
        let mut y = h / 2.0 - 6.0;
        for line in wrap(&self.empty_message, w - 20.0, 11.0).iter().take(4) {
            s.push_str(&text(w / 2.0, y, 11.0, "middle", "fill=\"#666\"", line));
            y += 14.0;
        }
        s.push_str("</svg>\n");
        s
    }
}

/// One line of a [`LineChart`]: a case's run, second by second.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its name and colour in the legend.
    pub series: Series,
    /// (x, y) in the chart's units, x ascending.
    pub points: Vec<(f64, f64)>,
    /// Shown on hover.
    pub tooltip: String,
}

/// Lines over a shared x axis from 0 (seconds), y from 0: whether a run
/// was steady or stalled.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Printed at the top.
    pub title: String,
    /// What the x axis measures.
    pub x_label: String,
    /// What the y axis measures ("IOPS", "MB/s").
    pub y_label: String,
    /// The lines, in the legend's order.
    pub lines: Vec<Line>,
    /// Said instead of drawing when no line has a point.
    pub empty_message: String,
}

/// The plot area of a line chart, px (its top depends on the legend).
const LINE_LEFT: f64 = 62.0;
const LINE_RIGHT: f64 = WIDTH - 16.0;
const LINE_PLOT_H: f64 = 170.0;
/// Lines with at most this many points also mark each point.
const LINE_MARKS_MAX: usize = 120;

impl LineChart {
    /// The chart as one `<svg>` element.
    pub fn render(&self) -> String {
        let points = || self.lines.iter().flat_map(|l| l.points.iter());
        if points().next().is_none() {
            return no_data(&self.title, &self.empty_message, WIDTH);
        }
        let x_max = points().map(|p| p.0).fold(0.0, f64::max).max(1.0);
        let y_max = points().map(|p| p.1).fold(0.0, f64::max);
        // Whole seconds on the x axis.
        let x_step = match nice_step(x_max) {
            s if s < 1.0 => 1.0,
            2.5 => 2.0,
            s => s,
        };
        let x_hi = (x_max / x_step).ceil() * x_step;
        let y_step = nice_step(if y_max > 0.0 { y_max } else { 1.0 });
        let y_hi = ((y_max / y_step).ceil() * y_step).max(y_step);

        let (legend, legend_y) = self.legend();
        let top = legend_y + 22.0;
        let bottom = top + LINE_PLOT_H;
        let height = bottom + 40.0;
        let x = |v: f64| LINE_LEFT + v / x_hi * (LINE_RIGHT - LINE_LEFT);
        let y = |v: f64| bottom - v / y_hi * (bottom - top);

        let mut s = open_svg(WIDTH, height, &self.title);
        s.push_str(&chart_title(&self.title));
        s.push_str(&legend);
        s.push_str(&text(
            LINE_LEFT - 4.0,
            top - 8.0,
            10.5,
            "end",
            "fill=\"#555\"",
            &self.y_label,
        ));
        let grid = YGrid {
            left: LINE_LEFT,
            right: LINE_RIGHT,
            label_gap: 5.0,
            font: 10.5,
            unit: "",
        };
        grid.draw(&mut s, y_hi, y_step, y);
        let labels: Vec<f64> = (0..=((x_hi / x_step).round() as i64).min(60))
            .map(|i| i as f64 * x_step)
            .collect();
        let widest = labels
            .iter()
            .map(|&v| text_w(&tick_label(v, x_step, ""), 10.5))
            .fold(0.0, f64::max);
        let every = ((widest + 10.0) / (x(x_step) - x(0.0)).max(1.0))
            .ceil()
            .max(1.0) as usize;
        for (i, &v) in labels.iter().enumerate() {
            let xx = x(v);
            let _ = writeln!(s, "<line x1=\"{xx:.1}\" y1=\"{bottom:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>", bottom + 3.0);
            if i % every == 0 {
                let label = tick_label(v, x_step, "");
                s.push_str(&text(
                    xx,
                    bottom + 15.0,
                    10.5,
                    "middle",
                    "fill=\"#444\"",
                    &label,
                ));
            }
        }
        self.draw_lines(&mut s, x, y);
        let _ = writeln!(
            s,
            "<line x1=\"{LINE_LEFT}\" y1=\"{top:.1}\" x2=\"{LINE_LEFT}\" y2=\"{bottom:.1}\" stroke=\"#222\"/>\
             <line x1=\"{LINE_LEFT}\" y1=\"{bottom:.1}\" x2=\"{LINE_RIGHT}\" y2=\"{bottom:.1}\" stroke=\"#222\"/>"
        );
        s.push_str(&axis_title(
            (LINE_LEFT + LINE_RIGHT) / 2.0,
            height - 8.0,
            &self.x_label,
        ));
        s.push_str("</svg>\n");
        s
    }

    /// Each line as a polyline with its tooltip (and a mark on each point
    /// when it has few), through the plot's scales `x` and `y`.
    fn draw_lines(&self, s: &mut String, x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) {
        for line in &self.lines {
            if line.points.is_empty() {
                continue;
            }
            let coords: Vec<String> = line
                .points
                .iter()
                .map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py)))
                .collect();
            let tooltip = esc(&line.tooltip);
            let _ = write!(
                s,
                "<g><title>{tooltip}</title><polyline points=\"{}\" fill=\"none\" stroke=\"{}\" \
             stroke-width=\"1.8\" stroke-linejoin=\"round\"/>",
                coords.join(" "),
                line.series.color
            );
            if line.points.len() <= LINE_MARKS_MAX {
                for c in &coords {
                    let (cx, cy) = c.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(
                        s,
                        "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"2.2\" fill=\"{}\"/>",
                        line.series.color
                    );
                }
            }
            s.push_str("</g>\n");
        }
    }

    /// The lines' names under the title, in rows; and the last row's y.
    fn legend(&self) -> (String, f64) {
        let items: Vec<(String, String)> = self
            .lines
            .iter()
            .map(|line| {
                let swatch = format!(
                    "<rect y=\"4\" width=\"12\" height=\"3\" fill=\"{}\"/>",
                    line.series.color
                );
                (swatch, line.series.name.clone())
            })
            .collect();
        legend(&items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_draws_each_line_inside_its_axes() {
        let chart = LineChart {
            title: "w: IOPS per second".into(),
            x_label: "seconds".into(),
            y_label: "IOPS".into(),
            lines: vec![
                Line {
                    series: Series {
                        name: "steady".into(),
                        color: "#4e79a7",
                    },
                    points: vec![(0.5, 1000.0), (1.5, 1000.0), (2.5, 1000.0)],
                    tooltip: "steady <run>".into(),
                },
                Line {
                    series: Series {
                        name: "stalled".into(),
                        color: "#f28e2b",
                    },
                    points: vec![(0.5, 1000.0), (1.5, 0.0), (2.5, 900.0)],
                    tooltip: "stalled".into(),
                },
            ],
            empty_message: "none".into(),
        };
        let svg = chart.render();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("steady &lt;run&gt;"));
        // y from 0 to 1000: the stall's point is on the x axis, the steady
        // line's on the top grid line; every point within the plot.
        let polylines: Vec<&str> = svg
            .split("points=\"")
            .skip(1)
            .map(|p| &p[..p.find('"').unwrap()])
            .collect();
        let ys = |p: &str| -> Vec<f64> {
            p.split(' ')
                .map(|xy| xy.split_once(',').unwrap().1.parse().unwrap())
                .collect()
        };
        let steady = ys(polylines[0]);
        let stalled = ys(polylines[1]);
        assert!(steady.iter().all(|&v| v == steady[0]));
        assert!(
            stalled[1] > steady[0] + LINE_PLOT_H * 0.99,
            "{stalled:?} {steady:?}"
        );
        for p in &polylines {
            for xy in p.split(' ') {
                let x: f64 = xy.split_once(',').unwrap().0.parse().unwrap();
                assert!((LINE_LEFT..=LINE_RIGHT).contains(&x), "{x}");
            }
        }
        let empty = LineChart {
            lines: vec![],
            ..chart
        };
        assert!(empty.render().contains(">none</text>"));
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(100.0), 25.0);
        assert_eq!(nice_step(40.0), 10.0);
        assert_eq!(nice_step(7.0), 2.0);
        assert_eq!(nice_step(0.4), 0.1);
        assert_eq!(nice_step(400.0), 100.0, "320 - (-80): not 200");
        assert_eq!(tick_label(2.5, 2.5, "%"), "2.5%");
        assert_eq!(tick_label(10.0, 5.0, ""), "10");
        assert_eq!(tick_label(0.25, 0.05, ""), "0.25");
        assert_eq!(tick_label(0.2, 0.1, "%"), "0.2%");
    }

    #[test]
    fn long_text_is_cut() {
        assert_eq!(fit("abc", 100.0, 10.0), "abc");
        assert_eq!(fit("abcdefghijkl", 36.0, 10.0), "abcde…");
        assert_eq!(wrap("aa bb cc", 40.0, 10.0), vec!["aa bb", "cc"]);
    }

    #[test]
    fn empty_charts_say_so() {
        let chart = BarChart {
            id: "t".into(),
            title: "T".into(),
            rows: vec![],
            panels: vec![],
            keys: vec![],
            empty_message: "nothing <here>".into(),
        };
        let svg = chart.render();
        assert!(svg.contains("nothing &lt;here&gt;"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
