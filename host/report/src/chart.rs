//! Charts as standalone SVG, drawn with plotters' SVG backend: line charts
//! over time (rates, lag, CPU, memory, behind-schedule) with dashed rule
//! lines for limits, and horizontal grouped bar charts (probes against
//! budgets, the NATS study, compare). Every chart has a title, a subtitle
//! with the run's context, a legend, labelled axes and an optional
//! footnote; text is SVG text (no font files), so a report stays
//! self-contained.
//!
//! What was measured is grouped in `<g class="data">`, after the frame
//! (title, legend, axes, grid, rule lines): a reader — or a test in a
//! browser — can tell an empty chart from a drawn one. A value that was not
//! measured is a gap in its line, never a point at zero.
//!
//! Not here: which charts a report has (see `report::figures`).
//!
//! (Over 700 lines: two chart kinds sharing one frame and the `data` group
//! convention; ~150 of the lines are its tests.)

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::format::compact;

/// Series colours, in order.
pub const COLORS: [RGBColor; 6] = [
    RGBColor(0x3b, 0x6e, 0xa5),
    RGBColor(0xe0, 0x7b, 0x39),
    RGBColor(0x4f, 0x9a, 0x5b),
    RGBColor(0xb0, 0x4a, 0x5a),
    RGBColor(0x7d, 0x62, 0xa8),
    RGBColor(0x8c, 0x7a, 0x4a),
];
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";
const LIMIT: RGBColor = RGBColor(0xb2, 0x22, 0x22);
const REFERENCE: RGBColor = RGBColor(0x77, 0x77, 0x77);
const GRID: RGBColor = RGBColor(0xdd, 0xdd, 0xdd);
const INK: RGBColor = RGBColor(0x33, 0x33, 0x33);
/// Drawn (invisibly, zero size) between the frame and the data; replaced by
/// the opening of the data group after rendering. plotters writes elements
/// in drawing order.
const DATA_MARK: RGBColor = RGBColor(1, 2, 3);

/// A rendered chart: the SVG document and how many data marks it holds
/// (lines, points, bars); 0 means nothing measured was drawn.
#[derive(Debug, Clone)]
pub struct Svg {
    pub text: String,
    pub marks: usize,
}

/// Text safe for SVG: control characters other than tab and newline dropped
/// (XML 1.0 does not allow them); plotters escapes markup itself.
pub fn clean(s: &str) -> String {
    s.chars().filter(|c| (*c as u32) >= 0x20 || *c == '\t' || *c == '\n').collect()
}

/// `&`, `<`, `>`, `"` and `'` as XML entities, control characters dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in clean(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from((FONT, size * 1.24).into_font()).color(&INK)
}

/// How a legend entry is drawn.
#[derive(Clone, Copy)]
enum Key {
    Box(RGBColor),
    Line(RGBColor),
    Dashed(RGBColor),
    Cross(RGBColor),
}

/// Title, subtitle and legend on top of `root`; returns the height used.
fn header(
    root: &DrawingArea<SVGBackend, Shift>,
    width: f64,
    title: &str,
    subtitle: &str,
    legend: &[(String, Key)],
) -> f64 {
    let _ = root.draw(&Text::new(
        clean(title),
        (16, 10),
        TextStyle::from((FONT, 16.0 * 1.24, FontStyle::Bold).into_font()).color(&INK),
    ));
    let mut y = 32.0;
    if !subtitle.is_empty() {
        let _ = root.draw(&Text::new(clean(subtitle), (16, y as i32), font(11.0).color(&RGBColor(0x44, 0x44, 0x44))));
        y += 18.0;
    }
    let mut x = 16.0;
    for (name, key) in legend {
        let w = 24.0 + text_width(name, 11.0) + 18.0;
        if x + w > width - 8.0 && x > 16.0 {
            x = 16.0;
            y += 18.0;
        }
        let (xi, yi) = (x as i32, y as i32);
        match key {
            Key::Box(c) => {
                let _ = root.draw(&Rectangle::new([(xi, yi), (xi + 12, yi + 12)], c.filled()));
            }
            Key::Line(c) => {
                let _ = root.draw(&PathElement::new(vec![(xi, yi + 6), (xi + 16, yi + 6)], c.stroke_width(2)));
            }
            Key::Dashed(c) => {
                let _ = root.draw(&PathElement::new(vec![(xi, yi + 6), (xi + 6, yi + 6)], c.stroke_width(1)));
                let _ = root.draw(&PathElement::new(vec![(xi + 10, yi + 6), (xi + 16, yi + 6)], c.stroke_width(1)));
            }
            Key::Cross(c) => {
                let _ = root.draw(&Cross::new((xi + 8, yi + 6), 5, c.stroke_width(2)));
            }
        }
        let _ = root.draw(&Text::new(clean(name), (xi + 21, yi), font(11.0)));
        x += w;
    }
    if !legend.is_empty() {
        y += 18.0;
    }
    y + 4.0
}

fn footnote(root: &DrawingArea<SVGBackend, Shift>, height: f64, note: &str) {
    if !note.is_empty() {
        let _ = root.draw(&Text::new(
            clean(note),
            (16, (height - 18.0) as i32),
            font(10.0).color(&RGBColor(0x55, 0x55, 0x55)),
        ));
    }
}

/// The frame ends here: what is drawn after is data.
fn data_starts(root: &DrawingArea<SVGBackend, Shift>) {
    let _ = root.draw(&Rectangle::new([(0, 0), (0, 0)], DATA_MARK.filled()));
}

/// Wrap the data in its group, add a title and an accessible name.
fn finish(mut svg: String, title: &str, marks: usize) -> Svg {
    let mark = "fill=\"#010203\"";
    if let Some(at) = svg.find(mark) {
        let start = svg[..at].rfind('<').unwrap_or(at);
        let end = svg[at..].find('\n').map(|e| at + e + 1).unwrap_or(svg.len());
        svg.replace_range(start..end, &format!("<g class=\"data\" data-marks=\"{marks}\">\n"));
        let close = svg.rfind("</svg>").unwrap_or(svg.len());
        svg.insert_str(close, "</g>\n");
    }
    let t = escape(title);
    if let Some(end) = svg.find(">\n") {
        svg.insert_str(end + 2, &format!("<title>{t}</title>\n"));
    }
    let svg = svg.replacen("<svg ", &format!("<svg role=\"img\" aria-label=\"{t}\" "), 1);
    Svg { text: svg, marks }
}

// ---- line charts -------------------------------------------------------------

/// One line: (x, y) where y is None when it was not measured (a gap).
#[derive(Debug, Clone, Default)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, Option<f64>)>,
}

/// A horizontal reference line: a limit (red) or a summary (grey), dashed.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub value: f64,
    pub limit: bool,
}

/// Moments marked along the x axis that have no value to plot (e.g. canaries
/// never stored): crosses along the top of the plot, drawn as data.
#[derive(Debug, Clone)]
pub struct Events {
    pub name: String,
    pub xs: Vec<f64>,
    /// Red (a failure: data lost) rather than amber (not known).
    pub severe: bool,
}

const UNKNOWN: RGBColor = RGBColor(0xb8, 0x86, 0x0b);

impl Events {
    fn color(&self) -> RGBColor {
        if self.severe {
            LIMIT
        } else {
            UNKNOWN
        }
    }
}

/// Lines over a shared x axis.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    pub rules: Vec<Rule>,
    /// Vertical markers (e.g. where the soak starts).
    pub x_marks: Vec<(f64, String)>,
    /// Moments without a value (drawn as crosses); empty groups are not drawn.
    pub events: Vec<Events>,
    pub note: String,
    /// How y tick labels read.
    pub y_format: fn(f64) -> String,
    /// Named x positions (e.g. the steps of a ladder): points' x are
    /// indexes into these, and each name labels its own tick.
    pub x_names: Vec<String>,
}

impl Default for LineChart {
    fn default() -> Self {
        LineChart {
            title: String::new(),
            subtitle: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            lines: Vec::new(),
            rules: Vec::new(),
            x_marks: Vec::new(),
            events: Vec::new(),
            note: String::new(),
            y_format: compact,
            x_names: Vec::new(),
        }
    }
}

type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl LineChart {
    /// Whether any line has a measured point, or any event was marked.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| l.points.iter().any(|(x, y)| x.is_finite() && y.is_some_and(f64::is_finite)))
            || self.events.iter().any(|e| e.xs.iter().any(|x| x.is_finite()))
    }

    /// What the chart plots, as data: every line's (x, y) with null where
    /// not measured, the rules, the x markers and the events. The same
    /// values `render` draws, for a reader (or a test) that reads no pixels.
    pub fn data(&self) -> serde_json::Value {
        serde_json::json!({
            "title": self.title,
            "x_label": self.x_label,
            "y_label": self.y_label,
            "x_names": self.x_names,
            "lines": self.lines.iter().map(|l| serde_json::json!({
                "name": l.name,
                "points": l.points.iter().map(|(x, y)| serde_json::json!([x, y])).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "rules": self.rules.iter().map(|r| serde_json::json!({"name": r.name, "value": r.value, "limit": r.limit}))
                .collect::<Vec<_>>(),
            "x_marks": self.x_marks.iter().map(|(x, n)| serde_json::json!({"x": x, "name": n})).collect::<Vec<_>>(),
            "events": self.events.iter().map(|e| serde_json::json!({"name": e.name, "x": e.xs, "severe": e.severe}))
                .collect::<Vec<_>>(),
        })
    }

    fn legend(&self) -> Vec<(String, Key)> {
        let mut legend: Vec<(String, Key)> =
            self.lines.iter().enumerate().map(|(i, l)| (l.name.clone(), Key::Line(COLORS[i % COLORS.len()]))).collect();
        legend.extend(self.events.iter().filter(|e| !e.xs.is_empty()).map(|e| (e.name.clone(), Key::Cross(e.color()))));
        legend
            .extend(self.rules.iter().map(|r| (r.name.clone(), Key::Dashed(if r.limit { LIMIT } else { REFERENCE }))));
        legend
    }

    /// The x and y ranges: every point, mark and event; y from 0.
    fn ranges(&self) -> ((f64, f64), f64) {
        let finite = |v: &f64| v.is_finite();
        let xs: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .chain(self.x_marks.iter().map(|m| m.0))
            .chain(self.events.iter().flat_map(|e| e.xs.iter().copied()))
            .filter(finite)
            .collect();
        let (mut x0, mut x1) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if !self.x_names.is_empty() {
            (x0, x1) = (-0.5, self.x_names.len() as f64 - 0.5);
        }
        if x1 - x0 < 1e-9 {
            (x0, x1) = (x0 - 1.0, x1 + 1.0);
        }
        let ymax = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().filter_map(|p| p.1))
            .chain(self.rules.iter().map(|r| r.value))
            .filter(finite)
            .fold(0.0, f64::max);
        ((x0, x1), if ymax > 0.0 { ymax * 1.1 } else { 1.0 })
    }

    pub fn render(&self) -> Svg {
        let (w, h) = (760.0, 330.0 + 18.0 * (self.legend().len()).saturating_sub(4).div_ceil(4) as f64);
        let mut buf = String::new();
        let mut marks = 0;
        {
            let root = SVGBackend::with_string(&mut buf, (w as u32, h as u32)).into_drawing_area();
            let _ = root.fill(&WHITE);
            let top = header(&root, w, &self.title, &self.subtitle, &self.legend());
            let foot = if self.note.is_empty() { 6.0 } else { 26.0 };
            footnote(&root, h, &self.note);
            let plot = root.clone().shrink((0, top as u32), (w as u32, (h - top - foot) as u32));
            let ((x0, x1), y1) = self.ranges();
            // Building a chart on an in-memory SVG cannot fail in practice;
            // if it ever does, the chart is left empty (and counts 0 marks).
            let built = ChartBuilder::on(&plot)
                .margin_left(8)
                .margin_right(28)
                .margin_top(8)
                .margin_bottom(4)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(x0..x1, 0f64..y1);
            if let Ok(mut chart) = built {
                self.draw_frame(&root, &mut chart, (x0, x1), y1);
                data_starts(&root);
                marks = self.draw_data(&mut chart, y1);
            }
            let _ = root.present();
        }
        finish(buf, &self.title, marks)
    }

    /// Axes, named x ticks, x markers and rule lines: everything but the data.
    fn draw_frame(&self, root: &DrawingArea<SVGBackend, Shift>, chart: &mut Plot, (x0, x1): (f64, f64), y1: f64) {
        let yfmt = self.y_format;
        let named = !self.x_names.is_empty();
        let xfmt = move |v: &f64| compact(*v);
        let _ = chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK)
            .x_labels(if named { 0 } else { 8 })
            .y_labels(6)
            .label_style(font(10.0))
            .axis_desc_style(font(11.0))
            .x_desc(clean(&self.x_label))
            .y_desc(clean(&self.y_label))
            .x_label_formatter(&xfmt)
            .y_label_formatter(&|v: &f64| yfmt(*v))
            .draw();
        for (i, name) in self.x_names.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64, 0.0));
            let _ = root.draw(&PathElement::new(vec![(px, py), (px, py + 5)], INK.stroke_width(1)));
            let _ = root.draw(&Text::new(clean(name), (px, py + 8), font(10.0).pos(Pos::new(HPos::Center, VPos::Top))));
        }
        for (x, label) in &self.x_marks {
            let _ =
                chart.draw_series(DashedLineSeries::new(vec![(*x, 0.0), (*x, y1)], 4, 4, REFERENCE.stroke_width(1)));
            // A label near the right edge reads leftwards, so it is not cut off.
            let side = if *x > x0 + 0.8 * (x1 - x0) { HPos::Right } else { HPos::Left };
            let _ = chart.draw_series(std::iter::once(Text::new(
                clean(label),
                (*x, y1),
                font(10.0).color(&REFERENCE).pos(Pos::new(side, VPos::Top)),
            )));
        }
        for r in &self.rules {
            let c = if r.limit { LIMIT } else { REFERENCE };
            let _ =
                chart.draw_series(DashedLineSeries::new(vec![(x0, r.value), (x1, r.value)], 6, 4, c.stroke_width(1)));
        }
    }

    /// Lines (points too when few) and event crosses; returns the marks drawn.
    fn draw_data(&self, chart: &mut Plot, y1: f64) -> usize {
        let mut marks = 0;
        for (i, l) in self.lines.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            for seg in segments(&l.points) {
                if seg.len() >= 2 {
                    let _ = chart.draw_series(LineSeries::new(seg.iter().copied(), c.stroke_width(2)));
                    marks += 1;
                }
                if seg.len() <= 40 {
                    let _ = chart.draw_series(seg.iter().map(|p| Circle::new(*p, 3, c.filled())));
                    marks += seg.len();
                }
            }
        }
        for e in &self.events {
            let style = e.color().stroke_width(2);
            let xs = e.xs.iter().filter(|x| x.is_finite());
            let _ = chart.draw_series(xs.clone().map(|x| Cross::new((*x, y1 * 0.95), 5, style)));
            marks += xs.count();
        }
        marks
    }
}

/// Runs of consecutive measured points.
fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for (x, y) in points {
        match y {
            Some(y) if y.is_finite() && x.is_finite() => cur.push((*x, *y)),
            _ => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

// ---- bar charts --------------------------------------------------------------

/// One series of a grouped bar chart: one value (or none) per category.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A limit per category (a probe's budget), drawn as a red tick across its band.
#[derive(Debug, Clone)]
pub struct Markers {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A horizontal grouped bar chart.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    /// A line under the title (what is counted, where it ran).
    pub subtitle: String,
    /// Label of the value axis, with its unit.
    pub value_label: String,
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub log_scale: bool,
    /// A footnote under the axis (e.g. "fan-out counted").
    pub note: String,
    pub markers: Option<Markers>,
}

/// "Nice" linear ticks from 0 to at least `max`: steps of 1, 2 or 5 × 10^k,
/// 4 to 8 intervals.
pub fn linear_ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| max / s <= 8.0).unwrap_or(10.0 * mag);
    let n = (max / step).ceil().max(1.0) as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// Log-10 ticks: every power of ten from the one at or below `min` to the
/// one at or above `max` (both positive; others are clamped).
pub fn log_ticks(min: f64, max: f64) -> Vec<f64> {
    let min = if min.is_finite() && min > 0.0 { min } else { 1.0 };
    let max = if max.is_finite() && max > min { max } else { min * 10.0 };
    let lo = min.log10().floor() as i32;
    let mut hi = max.log10().ceil() as i32;
    if hi <= lo {
        hi = lo + 1;
    }
    (lo..=hi).map(|e| 10f64.powi(e)).collect()
}

const BAR_H: f64 = 14.0;
const GAP: f64 = 10.0;

impl BarChart {
    /// Whether any bar has a value.
    pub fn has_data(&self) -> bool {
        self.series.iter().any(|s| s.values.iter().any(|v| v.is_some_and(f64::is_finite)))
    }

    /// What the chart plots, as data: categories, every series' values
    /// (null where none) and the markers.
    pub fn data(&self) -> serde_json::Value {
        serde_json::json!({
            "title": self.title,
            "value_label": self.value_label,
            "categories": self.categories,
            "series": self.series.iter().map(|s| serde_json::json!({"name": s.name, "values": s.values}))
                .collect::<Vec<_>>(),
            "markers": self.markers.as_ref().map(|m| serde_json::json!({"name": m.name, "values": m.values})),
        })
    }

    /// The chart as a standalone SVG document.
    pub fn render(&self) -> Svg {
        let n_series = self.series.len().max(1) as f64;
        let band = n_series * BAR_H + GAP;
        let n_cat = self.categories.len().max(1);
        let label_w = self.categories.iter().map(|c| text_width(c, 12.0)).fold(60.0, f64::max).min(320.0) + 16.0;
        let plot_w = 520.0;
        let value_room = 70.0;
        let mut legend: Vec<(String, Key)> =
            self.series.iter().enumerate().map(|(i, s)| (s.name.clone(), Key::Box(COLORS[i % COLORS.len()]))).collect();
        if let Some(m) = &self.markers {
            legend.push((m.name.clone(), Key::Line(LIMIT)));
        }
        let width = (label_w + plot_w + value_room)
            .max(text_width(&self.title, 16.0) + 40.0)
            .max(text_width(&self.subtitle, 11.0) + 40.0);
        let legend_rows = estimate_legend_rows(&legend, width);
        let top_est = 36.0 + if self.subtitle.is_empty() { 0.0 } else { 18.0 } + legend_rows * 18.0 + 4.0;
        let plot_h = band * n_cat as f64;
        let height = top_est + plot_h + 56.0 + if self.note.is_empty() { 0.0 } else { 20.0 };

        let values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .chain(self.markers.iter().flat_map(|m| m.values.iter().flatten().copied()))
            .filter(|v| v.is_finite())
            .collect();
        let vmax = values.iter().copied().fold(0.0, f64::max);

        let mut buf = String::new();
        let mut marks = 0;
        {
            let root = SVGBackend::with_string(&mut buf, (width as u32, height as u32)).into_drawing_area();
            let _ = root.fill(&WHITE);
            let top = header(&root, width, &self.title, &self.subtitle, &legend);
            footnote(&root, height, &self.note);
            let plot = root.clone().shrink(
                ((label_w - 70.0).max(0.0) as u32, top as u32),
                ((plot_w + 70.0 + value_room) as u32, (plot_h + 44.0) as u32),
            );
            let axis_label =
                if self.log_scale { format!("{} (log scale)", self.value_label) } else { self.value_label.clone() };
            if self.log_scale {
                let positive = values.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
                let ticks =
                    log_ticks(if positive.is_finite() { positive } else { 1.0 }, if vmax > 0.0 { vmax } else { 10.0 });
                let (lo, hi) = (ticks[0], ticks[ticks.len() - 1]);
                if let Ok(mut chart) = ChartBuilder::on(&plot)
                    .margin_right(value_room as u32)
                    .x_label_area_size(44)
                    .y_label_area_size(70)
                    .build_cartesian_2d((lo..hi).log_scale(), 0f64..n_cat as f64)
                {
                    let _ = chart
                        .configure_mesh()
                        .disable_y_mesh()
                        .y_labels(0)
                        .bold_line_style(GRID)
                        .light_line_style(TRANSPARENT)
                        .axis_style(INK)
                        .label_style(font(10.0))
                        .axis_desc_style(font(11.0))
                        .x_desc(clean(&axis_label))
                        .x_label_formatter(&|v: &f64| compact(*v))
                        .draw();
                    marks = self.draw_bars(&root, &mut chart, lo, band);
                }
            } else {
                let ticks = linear_ticks(vmax);
                let hi = ticks[ticks.len() - 1];
                if let Ok(mut chart) = ChartBuilder::on(&plot)
                    .margin_right(value_room as u32)
                    .x_label_area_size(44)
                    .y_label_area_size(70)
                    .build_cartesian_2d(0f64..hi, 0f64..n_cat as f64)
                {
                    let _ = chart
                        .configure_mesh()
                        .disable_y_mesh()
                        .y_labels(0)
                        .x_labels(ticks.len())
                        .bold_line_style(GRID)
                        .light_line_style(TRANSPARENT)
                        .axis_style(INK)
                        .label_style(font(10.0))
                        .axis_desc_style(font(11.0))
                        .x_desc(clean(&axis_label))
                        .x_label_formatter(&|v: &f64| compact(*v))
                        .draw();
                    marks = self.draw_bars(&root, &mut chart, 0.0, band);
                }
            }
            let _ = root.present();
        }
        finish(buf, &self.title, marks)
    }

    /// Category labels, budget ticks (frame), then bars and their values (data).
    fn draw_bars<X>(
        &self,
        root: &DrawingArea<SVGBackend, Shift>,
        chart: &mut ChartContext<SVGBackend, Cartesian2d<X, RangedCoordf64>>,
        base: f64,
        band: f64,
    ) -> usize
    where
        X: Ranged<ValueType = f64>,
    {
        let n_cat = self.categories.len().max(1) as f64;
        let n_series = self.series.len().max(1) as f64;
        // Category i occupies [n-i-1, n-i] on the y axis (top to bottom).
        let unit = 1.0 / band;
        let bar_top = |ci: usize, si: usize| n_cat - ci as f64 - unit * (GAP / 2.0 + si as f64 * BAR_H);
        let bar_bottom = |ci: usize, si: usize| bar_top(ci, si) - unit * (BAR_H - 2.0);
        for (ci, cat) in self.categories.iter().enumerate() {
            let mid = n_cat - ci as f64 - unit * (GAP / 2.0 + n_series * BAR_H / 2.0);
            let (px, py) = chart.backend_coord(&(base, mid));
            let _ =
                root.draw(&Text::new(clean(cat), (px - 8, py), font(12.0).pos(Pos::new(HPos::Right, VPos::Center))));
            if let Some(v) =
                self.markers.as_ref().and_then(|m| m.values.get(ci).copied().flatten()).filter(|v| v.is_finite())
            {
                let (top, bottom) =
                    (bar_top(ci, 0) + unit * 3.0, bar_bottom(ci, self.series.len().max(1) - 1) - unit * 3.0);
                let _ = chart
                    .draw_series(std::iter::once(PathElement::new(vec![(v, top), (v, bottom)], LIMIT.stroke_width(2))));
            }
        }
        data_starts(root);
        let mut marks = 0;
        for ci in 0..self.categories.len() {
            // A category with no value at all says so; a series with no
            // value where others have one (not applicable) draws nothing.
            let any = self.series.iter().any(|s| s.values.get(ci).copied().flatten().is_some_and(f64::is_finite));
            for (si, s) in self.series.iter().enumerate() {
                let (t, b) = (bar_top(ci, si), bar_bottom(ci, si));
                match s.values.get(ci).copied().flatten() {
                    Some(v) if v.is_finite() => {
                        let c = COLORS[si % COLORS.len()];
                        let end = v.max(base);
                        let (x0, _) = chart.backend_coord(&(base, t));
                        let (x1, _) = chart.backend_coord(&(end, t));
                        // At least a pixel for a positive value.
                        let end = if v > base && x1 <= x0 { None } else { Some(end) };
                        match end {
                            Some(e) => {
                                let _ =
                                    chart.draw_series(std::iter::once(Rectangle::new([(base, t), (e, b)], c.filled())));
                            }
                            None => {
                                let (_, yt) = chart.backend_coord(&(base, t));
                                let (_, yb) = chart.backend_coord(&(base, b));
                                let _ = root.draw(&Rectangle::new([(x0, yt), (x0 + 1, yb)], c.filled()));
                            }
                        }
                        marks += 1;
                        let (px, py) = chart.backend_coord(&(v.max(base), (t + b) / 2.0));
                        let _ = root.draw(&Text::new(
                            compact(v),
                            (px.max(x0 + 1) + 4, py),
                            font(10.0).pos(Pos::new(HPos::Left, VPos::Center)),
                        ));
                    }
                    _ if any => {}
                    _ => {
                        let (px, py) = chart.backend_coord(&(base, (t + b) / 2.0));
                        let _ = root.draw(&Text::new(
                            "not run",
                            (px + 4, py),
                            font(10.0).color(&RGBColor(0x88, 0x88, 0x88)).pos(Pos::new(HPos::Left, VPos::Center)),
                        ));
                    }
                }
            }
        }
        marks
    }
}

fn estimate_legend_rows(legend: &[(String, Key)], width: f64) -> f64 {
    if legend.is_empty() {
        return 0.0;
    }
    let mut rows = 1.0;
    let mut x = 16.0;
    for (name, _) in legend {
        let w = 24.0 + text_width(name, 11.0) + 18.0;
        if x + w > width - 8.0 && x > 16.0 {
            x = 16.0;
            rows += 1.0;
        }
        x += w;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_drops_control_characters() {
        assert_eq!(escape(r#"a<b>&"c"'d'"#), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape("x\u{1}y\tz"), "xy\tz");
        assert_eq!(escape("plain 1 KiB r=3"), "plain 1 KiB r=3");
    }

    #[test]
    fn log_ticks_cover_the_range_in_decades() {
        assert_eq!(log_ticks(3.0, 25_000.0), vec![1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0]);
        assert_eq!(log_ticks(0.2, 0.9), vec![0.1, 1.0]);
        assert_eq!(log_ticks(100.0, 100.0), vec![100.0, 1_000.0]);
        assert_eq!(log_ticks(0.0, -1.0), vec![1.0, 10.0]);
    }

    #[test]
    fn linear_ticks_are_nice_and_cover_max() {
        let t = linear_ticks(830_000.0);
        assert_eq!(t[0], 0.0);
        assert!(*t.last().unwrap() >= 830_000.0);
        assert!((4..=9).contains(&t.len()), "{t:?}");
        let t = linear_ticks(0.0);
        assert!((t[t.len() - 1] - 1.0).abs() < 1e-12, "{t:?}");
    }

    fn well_formed(svg: &str) -> roxmltree_free::Doc {
        roxmltree_free::Doc::check(svg)
    }

    /// No XML parser in the library's dependencies: a small balance check
    /// of tags is enough to catch a broken data group.
    mod roxmltree_free {
        pub struct Doc;
        impl Doc {
            pub fn check(svg: &str) -> Doc {
                let mut stack: Vec<String> = Vec::new();
                let mut rest = svg;
                while let Some(i) = rest.find('<') {
                    let j = rest[i..].find('>').expect("unclosed tag") + i;
                    let tag = &rest[i + 1..j];
                    if let Some(name) = tag.strip_prefix('/') {
                        assert_eq!(stack.pop().as_deref(), Some(name.trim()), "mismatched </{name}>");
                    } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
                        stack.push(tag.split_whitespace().next().unwrap().to_string());
                    }
                    rest = &rest[j + 1..];
                }
                assert!(stack.is_empty(), "unclosed: {stack:?}");
                Doc
            }
        }
    }

    #[test]
    fn a_line_chart_groups_its_data_and_leaves_gaps_for_unmeasured_points() {
        let c = LineChart {
            title: "Rates <&>".into(),
            subtitle: "1,000 points".into(),
            x_label: "s".into(),
            y_label: "readings/s".into(),
            lines: vec![
                Line { name: "acked/s".into(), points: vec![(0.0, Some(10.0)), (1.0, Some(12.0)), (2.0, Some(11.0))] },
                Line { name: "stored/s".into(), points: vec![(0.0, Some(10.0)), (1.0, None), (2.0, Some(11.0))] },
            ],
            rules: vec![Rule { name: "limit".into(), value: 20.0, limit: true }],
            ..Default::default()
        };
        let svg = c.render();
        well_formed(&svg.text);
        assert!(svg.text.contains("<g class=\"data\""), "{}", svg.text);
        assert!(svg.text.contains("Rates &lt;&amp;&gt;"));
        assert!(!svg.text.contains("#010203"));
        // acked: one line + 3 points; stored: two single points (no line across the gap).
        assert_eq!(svg.marks, 1 + 3 + 2);
        let data = &svg.text[svg.text.find("class=\"data\"").unwrap()..];
        assert_eq!(data.matches("<polyline").count(), 1, "{data}");
        assert_eq!(data.matches("<circle").count(), 5, "{data}");

        let empty = LineChart { lines: vec![Line { name: "stored/s".into(), points: vec![(0.0, None)] }], ..c };
        assert!(!empty.has_data());
        assert_eq!(empty.render().marks, 0);
    }

    #[test]
    fn events_are_data_and_every_chart_gives_its_values() {
        let c = LineChart {
            title: "Lag per canary".into(),
            lines: vec![Line { name: "lag".into(), points: vec![(0.0, Some(0.1)), (2.0, None), (4.0, Some(21.0))] }],
            events: vec![
                Events { name: "lost canary".into(), xs: vec![2.0], severe: true },
                Events { name: "unknown canary".into(), xs: vec![], severe: false },
            ],
            ..Default::default()
        };
        let svg = c.render();
        well_formed(&svg.text);
        // Two single points (the gap splits the line) and one cross.
        assert_eq!(svg.marks, 2 + 1);
        assert!(svg.text.contains("lost canary") && !svg.text.contains("unknown canary"), "empty groups have no key");
        let d = c.data();
        assert_eq!(d["lines"][0]["points"], serde_json::json!([[0.0, 0.1], [2.0, null], [4.0, 21.0]]));
        assert_eq!(d["events"][0]["x"], serde_json::json!([2.0]));
        // Only events: still a chart with data.
        let only = LineChart { lines: vec![Line { name: "lag".into(), points: vec![(2.0, None)] }], ..c };
        assert!(only.has_data());
        assert_eq!(only.render().marks, 1);

        let b = BarChart {
            categories: vec!["a".into()],
            series: vec![Series { name: "s".into(), values: vec![None] }],
            ..Default::default()
        };
        assert_eq!(b.data()["series"][0]["values"], serde_json::json!([null]));
    }

    #[test]
    fn a_bar_chart_keeps_the_study_look() {
        let c = BarChart {
            title: "Core <vs> JetStream".into(),
            subtitle: "loopback".into(),
            value_label: "msgs/s".into(),
            categories: vec!["core-1p1s".into(), "js-file-r3-1p".into()],
            series: vec![
                Series { name: "core sent/s".into(), values: vec![Some(500_000.0), None] },
                Series { name: "JetStream acked writes/s".into(), values: vec![None, Some(7_000.0)] },
            ],
            log_scale: true,
            note: "fan-out not counted".into(),
            markers: None,
        };
        let svg = c.render();
        well_formed(&svg.text);
        assert!(svg.text.contains("Core &lt;vs&gt; JetStream"));
        assert!(svg.text.contains("(log scale)"));
        assert!(svg.text.contains("fan-out not counted") && svg.text.contains("loopback"));
        assert!(svg.text.contains(">\n500k\n<") || svg.text.contains("500k"), "value labels");
        assert_eq!(svg.marks, 2);
        assert!(!svg.text.contains("not run"));
        let c2 = BarChart {
            categories: vec!["skipped".into()],
            series: vec![Series { name: "s".into(), values: vec![None] }],
            ..c
        };
        let r = c2.render();
        assert!(r.text.contains("not run"));
        assert_eq!(r.marks, 0);
    }
}
