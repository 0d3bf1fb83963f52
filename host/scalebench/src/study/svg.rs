//! Hand-written SVG bar charts (no plotting crate): horizontal grouped bars
//! with a title, a subtitle, a legend, a value axis (linear or log 10) with
//! ticks, grid lines and an axis label, category labels and a value printed
//! at the end of every bar. All text is escaped.

use std::fmt::Write as _;

/// `&`, `<`, `>`, `"` and `'` as XML entities; control characters other than
/// tab and newline are dropped (they are not allowed in XML 1.0).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => {}
            c => out.push(c),
        }
    }
    out
}

/// Compact number for labels: 950, 12.3k, 1.25M, 0.456, 0.0123.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "n/a".into();
    }
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9, 2))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6, 2))
    } else if a >= 1e3 && v.fract() == 0.0 && v % 1000.0 == 0.0 {
        format!("{}k", trim(v / 1e3, 0))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3, 1))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(v, 2)
    } else if a == 0.0 {
        "0".into()
    } else {
        // Three significant digits below 1.
        let digits = (-a.log10().floor()) as usize + 2;
        trim(v, digits.min(9))
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
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

/// One series of a grouped bar chart: one value (or none) per category.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A horizontal grouped bar chart.
#[derive(Debug, Clone)]
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
}

const COLORS: &[&str] = &["#3b6ea5", "#e07b39", "#4f9a5b", "#b04a5a", "#7d62a8", "#8c7a4a"];
const FONT: &str = "font-family=\"DejaVu Sans, Verdana, sans-serif\"";

fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let bar_h = 14.0;
        let gap = 10.0;
        let n_series = self.series.len().max(1) as f64;
        let band = n_series * bar_h + gap;
        let label_w = self.categories.iter().map(|c| text_width(c, 12.0)).fold(60.0, f64::max).min(320.0) + 16.0;
        let plot_w = 520.0;
        let value_room = 70.0;
        let left = label_w;
        let legend_rows = self.series.len().div_ceil(2) as f64;
        let top = 58.0 + legend_rows * 18.0;
        let plot_h = band * self.categories.len().max(1) as f64;
        let width = (left + plot_w + value_room).max(text_width(&self.title, 16.0) + 40.0);
        let height = top + plot_h + 62.0 + if self.note.is_empty() { 0.0 } else { 16.0 };

        let values: Vec<f64> = self.series.iter().flat_map(|s| s.values.iter().flatten().copied()).filter(|v| v.is_finite()).collect();
        let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
        let vmax = values.iter().copied().fold(0.0, f64::max);
        let (ticks, scale): (Vec<f64>, Box<dyn Fn(f64) -> f64>) = if self.log_scale {
            let vmin = positive.iter().copied().fold(f64::INFINITY, f64::min);
            let ticks = log_ticks(if vmin.is_finite() { vmin } else { 1.0 }, if vmax > 0.0 { vmax } else { 10.0 });
            let lo = ticks[0].log10();
            let hi = ticks[ticks.len() - 1].log10();
            (ticks, Box::new(move |v: f64| if v <= 0.0 { 0.0 } else { ((v.log10() - lo) / (hi - lo)).clamp(0.0, 1.0) * plot_w }))
        } else {
            let ticks = linear_ticks(vmax);
            let hi = ticks[ticks.len() - 1];
            (ticks, Box::new(move |v: f64| (v / hi).clamp(0.0, 1.0) * plot_w))
        };

        let mut s = String::new();
        let _ = writeln!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"{}\">",
            escape(&self.title)
        );
        let _ = writeln!(s, "<title>{}</title>", escape(&self.title));
        let _ = writeln!(s, "<rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\" fill=\"#ffffff\"/>");
        let _ = writeln!(s, "<text x=\"16\" y=\"24\" font-size=\"16\" font-weight=\"bold\" {FONT}>{}</text>", escape(&self.title));
        if !self.subtitle.is_empty() {
            let _ = writeln!(s, "<text x=\"16\" y=\"42\" font-size=\"11\" fill=\"#444444\" {FONT}>{}</text>", escape(&self.subtitle));
        }
        // Legend, two entries a row.
        for (i, se) in self.series.iter().enumerate() {
            let x = 16.0 + (i % 2) as f64 * 360.0;
            let y = 52.0 + (i / 2) as f64 * 18.0;
            let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>", COLORS[i % COLORS.len()]);
            let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" {FONT}>{}</text>", x + 17.0, y + 10.0, escape(&se.name));
        }
        // Grid and ticks.
        let axis_y = top + plot_h;
        for t in &ticks {
            let x = left + scale(*t);
            let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{axis_y:.1}\" stroke=\"#dddddd\" stroke-width=\"1\"/>");
            let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{axis_y:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333333\" stroke-width=\"1\"/>", axis_y + 4.0);
            let _ = writeln!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" {FONT}>{}</text>",
                axis_y + 16.0,
                escape(&format_value(*t))
            );
        }
        let _ = writeln!(s, "<line x1=\"{left:.1}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\" stroke=\"#333333\" stroke-width=\"1\"/>", left + plot_w);
        let _ = writeln!(s, "<line x1=\"{left:.1}\" y1=\"{top:.1}\" x2=\"{left:.1}\" y2=\"{axis_y:.1}\" stroke=\"#333333\" stroke-width=\"1\"/>");
        let axis_label = if self.log_scale { format!("{} (log scale)", self.value_label) } else { self.value_label.clone() };
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" {FONT}>{}</text>",
            left + plot_w / 2.0,
            axis_y + 34.0,
            escape(&axis_label)
        );
        if !self.note.is_empty() {
            let _ = writeln!(s, "<text x=\"16\" y=\"{:.1}\" font-size=\"10\" fill=\"#555555\" {FONT}>{}</text>", axis_y + 52.0, escape(&self.note));
        }
        // Bars.
        for (ci, cat) in self.categories.iter().enumerate() {
            let y0 = top + ci as f64 * band + gap / 2.0;
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\" {FONT}>{}</text>",
                left - 8.0,
                y0 + n_series * bar_h / 2.0 + 4.0,
                escape(cat)
            );
            // A category with no value at all says so; a series with no
            // value where others have one (not applicable) draws nothing.
            let any = self.series.iter().any(|se| se.values.get(ci).copied().flatten().is_some_and(f64::is_finite));
            for (si, se) in self.series.iter().enumerate() {
                let y = y0 + si as f64 * bar_h;
                match se.values.get(ci).copied().flatten() {
                    Some(v) if v.is_finite() => {
                        let w = scale(v).max(if v > 0.0 { 1.0 } else { 0.0 });
                        let _ = writeln!(
                            s,
                            "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                            bar_h - 2.0,
                            COLORS[si % COLORS.len()],
                            escape(&format!("{cat} / {}: {}", se.name, format_value(v)))
                        );
                        let _ = writeln!(
                            s,
                            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" {FONT}>{}</text>",
                            left + w + 4.0,
                            y + bar_h - 4.0,
                            escape(&format_value(v))
                        );
                    }
                    _ if any => {}
                    _ => {
                        let _ = writeln!(
                            s,
                            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#888888\" {FONT}>not run</text>",
                            left + 4.0,
                            y + bar_h - 4.0
                        );
                    }
                }
            }
        }
        s.push_str("</svg>\n");
        s
    }
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
        assert_eq!(log_ticks(1_000.0, 1_000_000.0), vec![1e3, 1e4, 1e5, 1e6]);
        // Degenerate input still gives an axis.
        assert_eq!(log_ticks(0.0, -1.0), vec![1.0, 10.0]);
    }

    #[test]
    fn linear_ticks_are_nice_and_cover_max() {
        let t = linear_ticks(830_000.0);
        assert_eq!(t[0], 0.0);
        assert!(*t.last().unwrap() >= 830_000.0);
        assert!((4..=9).contains(&t.len()), "{t:?}");
        let step = t[1] - t[0];
        assert!([100_000.0, 200_000.0, 500_000.0].contains(&step), "{t:?}");
        let t = linear_ticks(0.0);
        assert_eq!(t.len(), 6, "{t:?}");
        assert!((t[5] - 1.0).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn formats_values_compactly() {
        assert_eq!(format_value(662_227.0), "662.2k");
        assert_eq!(format_value(1_760_599.0), "1.76M");
        assert_eq!(format_value(14_330.0), "14.3k");
        assert_eq!(format_value(950.0), "950");
        assert_eq!(format_value(1_000.0), "1k");
        assert_eq!(format_value(2_648.0), "2648");
        assert_eq!(format_value(1.14), "1.14");
        assert_eq!(format_value(0.456), "0.456");
        assert_eq!(format_value(0.0), "0");
    }

    #[test]
    fn renders_escaped_text_log_axis_and_missing_values() {
        let c = BarChart {
            title: "Core <vs> JetStream & \"friends\"".into(),
            subtitle: "loopback".into(),
            value_label: "msgs/s".into(),
            categories: vec!["core-1p1s".into(), "js-file-r3-1p".into()],
            series: vec![
                Series { name: "core sent/s".into(), values: vec![Some(500_000.0), None] },
                Series { name: "JetStream acked writes/s".into(), values: vec![None, Some(7_000.0)] },
            ],
            log_scale: true,
            note: "fan-out not counted".into(),
        };
        let svg = c.render();
        assert!(svg.contains("Core &lt;vs&gt; JetStream &amp; &quot;friends&quot;"));
        assert!(!svg.contains("<vs>"));
        assert!(svg.contains("(log scale)"));
        assert!(svg.contains(">1M<") && svg.contains(">1k<"), "decade labels: {svg}");
        // Not applicable (another series has the value): nothing drawn.
        assert!(!svg.contains("not run"));
        let c2 = BarChart { categories: vec!["skipped".into()], series: vec![Series { name: "s".into(), values: vec![None] }], ..c };
        assert!(c2.render().contains("not run"));
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    }
}
