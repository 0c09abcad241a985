//! Stacked horizontal bars: one bar per row (a case), its segments the
//! parts of one whole (seed 003's latency by component), on one value axis
//! from 0, with the same fonts, legend and grid as the other charts.

use super::escape::html as esc;
use super::numbers::num;
use super::svg::{
    axis_title, box_swatch, chart_title, fit, grid, legend, nice_step, no_data, open_svg, text,
    text_w, Scale, Series, WIDTH,
};
use std::fmt::Write;

/// A bar's height, px.
const STACK_H: f64 = 18.0;
/// Space above and below a bar within its row, px.
const STACK_PAD: f64 = 6.0;
/// The widest the row labels' column gets, px.
const LABEL_MAX_W: f64 = 200.0;

/// One part of a bar.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Which of the chart's series it is.
    pub series: usize,
    /// Its length, in the chart's unit.
    pub value: f64,
    /// Shown on hover.
    pub tooltip: String,
}

/// One bar: a row of the chart.
#[derive(Debug, Clone)]
pub struct Stack {
    /// The row's label (a case).
    pub label: String,
    /// The parts, left to right; those of length 0 are not drawn.
    pub segments: Vec<Segment>,
    /// Printed after the bar's end (its total).
    pub end_label: String,
}

/// Horizontal stacked bars, one per row, on a value axis from 0.
#[derive(Debug, Clone)]
pub struct StackedBars {
    /// Printed at the top.
    pub title: String,
    /// The axis's unit, after the tick labels' row ("µs").
    pub unit: String,
    /// The segments' names and colours, in the legend's order.
    pub series: Vec<Series>,
    /// The bars, top to bottom; a row without segments says "n/a".
    pub stacks: Vec<Stack>,
    /// Said instead of drawing when no bar has a segment.
    pub empty_message: String,
}

impl StackedBars {
    /// The chart as one `<svg>` element.
    pub fn render(&self) -> String {
        let longest = self.stacks.iter().map(Stack::total).fold(0.0, f64::max);
        if longest <= 0.0 {
            return no_data(&self.title, &self.empty_message, WIDTH);
        }
        let (legend, legend_y) = self.legend();
        let top = legend_y + 16.0;
        let row_h = STACK_H + 2.0 * STACK_PAD;
        let bottom = top + row_h * self.stacks.len() as f64;
        let scale = self.scale(longest);
        let mut s = open_svg(WIDTH, bottom + 40.0, &self.title);
        s.push_str(&chart_title(&self.title));
        s.push_str(&legend);
        s.push_str(&grid(&scale, "", scale.x0, WIDTH - 14.0, top, bottom));
        for (i, stack) in self.stacks.iter().enumerate() {
            let y = top + row_h * i as f64;
            s.push_str(&self.row(stack, y, &scale));
        }
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top:.1}\" x2=\"{0:.1}\" y2=\"{bottom:.1}\" stroke=\"#222\"/>",
            scale.x0
        );
        let mid = (scale.x0 + WIDTH - 14.0) / 2.0;
        s.push_str(&axis_title(mid, bottom + 32.0, &self.unit));
        s.push_str("</svg>\n");
        s
    }

    /// The series' swatches and names under the title; and the last line's y.
    fn legend(&self) -> (String, f64) {
        let items: Vec<(String, String)> = self
            .series
            .iter()
            .map(|s| (box_swatch(s.color), s.name.clone()))
            .collect();
        legend(&items)
    }

    /// The axis from 0 to a round value past the longest bar, room left
    /// on the right for the end labels.
    fn scale(&self, longest: f64) -> Scale {
        let step = nice_step(longest);
        let hi = (longest / step).ceil() * step;
        let end_w = self
            .stacks
            .iter()
            .map(|s| text_w(&s.end_label, 10.5) + 8.0)
            .fold(30.0, f64::max)
            .min(WIDTH * 0.3);
        Scale {
            lo: 0.0,
            hi,
            x0: self.label_w() + 18.0,
            x1: WIDTH - 14.0 - end_w,
            step,
        }
    }

    /// The row labels' column, px.
    fn label_w(&self) -> f64 {
        self.stacks
            .iter()
            .map(|s| text_w(&s.label, 12.0))
            .fold(60.0, f64::max)
            .min(LABEL_MAX_W)
    }

    /// One row at `y`: its label, its bar (one group, each segment a
    /// rectangle with its value inside where it fits), its end label.
    fn row(&self, stack: &Stack, y: f64, scale: &Scale) -> String {
        let mid = y + STACK_PAD + STACK_H / 2.0 + 4.0;
        let label = fit(&stack.label, self.label_w(), 12.0);
        let mut s = text(
            scale.x0 - 8.0,
            mid,
            12.0,
            "end",
            "font-weight=\"bold\"",
            &label,
        );
        if stack.total() <= 0.0 {
            let attrs = "fill=\"#888\" font-style=\"italic\"";
            s.push_str(&text(scale.x0 + 4.0, mid, 10.5, "start", attrs, "n/a"));
            return s;
        }
        let _ = write!(
            s,
            "<g class=\"stack\"><title>{}</title>",
            esc(&format!("{}: {}", stack.label, stack.end_label))
        );
        let mut at = 0.0;
        for seg in stack.segments.iter().filter(|g| g.value > 0.0) {
            s.push_str(&self.segment(seg, at, y + STACK_PAD, scale));
            at += seg.value;
        }
        s.push_str("</g>\n");
        s.push_str(&text(
            scale.x(at) + 4.0,
            mid,
            10.5,
            "start",
            "font-weight=\"bold\" fill=\"#111\"",
            &stack.end_label,
        ));
        s
    }

    /// One segment from `at` to `at + value`, its value written inside
    /// when it fits.
    fn segment(&self, seg: &Segment, at: f64, y: f64, scale: &Scale) -> String {
        let (x0, x1) = (scale.x(at), scale.x(at + seg.value));
        let color = self.series.get(seg.series).map_or("#777777", |s| s.color);
        let mut s = format!(
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{STACK_H}\" fill=\"{color}\" \
             stroke=\"#fff\" stroke-width=\"0.8\"><title>{}</title></rect>",
            (x1 - x0).max(0.5),
            esc(&seg.tooltip)
        );
        let value = num(Some(seg.value));
        if text_w(&value, 10.0) + 6.0 < x1 - x0 {
            let attrs = "fill=\"#fff\" font-weight=\"bold\"";
            let cy = y + STACK_H / 2.0 + 3.5;
            s.push_str(&text((x0 + x1) / 2.0, cy, 10.0, "middle", attrs, &value));
        }
        s
    }
}

impl Stack {
    /// The bar's length: its segments' sum (those above 0).
    fn total(&self) -> f64 {
        self.segments
            .iter()
            .map(|g| g.value)
            .filter(|v| v.is_finite() && *v > 0.0)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(stacks: Vec<Stack>) -> StackedBars {
        StackedBars {
            title: "w: reads by component".into(),
            unit: "µs".into(),
            series: vec![
                Series {
                    name: "a".into(),
                    color: "#4e79a7",
                },
                Series {
                    name: "b".into(),
                    color: "#f28e2b",
                },
            ],
            stacks,
            empty_message: "nothing <measured>".into(),
        }
    }

    fn stack(label: &str, values: &[f64]) -> Stack {
        Stack {
            label: label.into(),
            segments: values
                .iter()
                .enumerate()
                .map(|(series, &value)| Segment {
                    series,
                    value,
                    tooltip: format!("{label} part {series}"),
                })
                .collect(),
            end_label: format!("{} µs", values.iter().sum::<f64>()),
        }
    }

    #[test]
    fn segments_follow_each_other_on_one_scale() {
        let svg = chart(vec![
            stack("one", &[300.0, 100.0]),
            stack("two", &[0.0, 200.0]),
        ])
        .render();
        assert_eq!(svg.matches("<g class=\"stack\">").count(), 2);
        // A part of length 0 is not drawn: 3 segments, each with its tooltip.
        assert_eq!(svg.matches("<rect x=").count(), 3, "{svg}");
        let xs = |title: &str| -> (f64, f64) {
            let at = svg.find(&format!("<title>{title}</title>")).unwrap();
            let rect = &svg[svg[..at].rfind("<rect").unwrap()..at];
            let attr = |name: &str| -> f64 {
                let key = format!(" {name}=\"");
                let from = rect.find(&key).unwrap() + key.len();
                rect[from..from + rect[from..].find('"').unwrap()]
                    .parse()
                    .unwrap()
            };
            (attr("x"), attr("width"))
        };
        let (a, b, c) = (xs("one part 0"), xs("one part 1"), xs("two part 1"));
        assert!((a.0 + a.1 - b.0).abs() < 0.2, "{a:?} {b:?}");
        assert!((a.1 - 3.0 * b.1).abs() < 0.3, "{a:?} {b:?}");
        assert!((c.1 - 2.0 * b.1).abs() < 0.3, "{b:?} {c:?}");
        assert_eq!(c.0, a.0, "every bar starts at 0");
    }

    #[test]
    fn a_chart_without_bars_says_so() {
        let svg = chart(vec![stack("one", &[0.0, 0.0])]).render();
        assert!(svg.contains("nothing &lt;measured&gt;"), "{svg}");
        let svg = chart(vec![stack("one", &[5.0]), stack("none", &[])]).render();
        assert!(svg.contains(">n/a</text>"), "{svg}");
        assert_eq!(svg.matches("<g class=\"stack\">").count(), 1);
    }
}
