//! What a cell's figures, tables and written files show, as text for a
//! model that cannot see them (`--feedback parsed+state`). Read from the
//! chart data (`e2b/chart`, E2B's shape) and table schema
//! (`application/vnd.dataresource+json`) the kernel attaches to its
//! displays and results, and from the files it collected (`outputs.py`);
//! all of it came from the kernel, so every field is optional here.

use serde_json::Value;

use crate::kernel::{Bundle, Outcome};
use crate::util::fitted_lines::fitted_lines;

/// The MIME key of a figure's chart data (E2B's).
pub const CHART_KEY: &str = "e2b/chart";
/// The MIME key of a table's schema and first rows (pandas').
pub const TABLE_KEY: &str = "application/vnd.dataresource+json";

/// Characters of a label or title kept.
const LABEL_CHARS: usize = 60;
/// Bars, wedges, boxes, series or rows named per chart or table.
const NAMED: usize = 12;

/// One line per figure, table and collected file of the execution, in at
/// most `budget` characters; `None` when it has none of them.
pub fn output_note(outcome: &Outcome, budget: usize) -> Option<String> {
    let bundles = outcome.displays.iter().chain(&outcome.results);
    let mut lines: Vec<String> = bundles.filter_map(describe_bundle).collect();
    let files: Vec<String> = outcome
        .artifacts
        .iter()
        .filter_map(|a| {
            let name = a.name.as_deref()?;
            Some(format!("{} ({}, {} bytes)", quoted(name), a.mime, a.bytes))
        })
        .collect();
    if !files.is_empty() {
        lines.push(format!("Files your code wrote: {}", files.join(", ")));
    }
    let text = fitted_lines(&lines, budget);
    (!text.trim().is_empty()).then_some(text)
}

fn describe_bundle(bundle: &Bundle) -> Option<String> {
    if let Some(chart) = bundle.data.get(CHART_KEY) {
        return Some(format!("Figure: {}", describe_chart(chart)));
    }
    bundle
        .data
        .get(TABLE_KEY)
        .map(|t| format!("Table: {}", describe_table(t)))
}

/// `line chart 'Sales', x 'month' 1–12, y 'units' 3.1–9.8, 2 series: …`
pub fn describe_chart(chart: &Value) -> String {
    let kind = chart
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let title = text_of(chart, "title")
        .map(|t| format!(" {}", quoted(t)))
        .unwrap_or_default();
    let elements = array_at(chart, "/elements");
    match kind {
        "line" | "scatter" => format!("{kind} chart{title}{}", points(chart, elements)),
        "bar" => format!("bar chart{title}{}{}", axes(chart), bars(elements)),
        "pie" => format!("pie chart{title}: {}", wedges(elements)),
        "box_and_whisker" => format!(
            "box-and-whisker chart{title}{}{}",
            axes(chart),
            boxes(elements)
        ),
        "superchart" => {
            let parts: Vec<String> = elements
                .iter()
                .take(NAMED)
                .enumerate()
                .map(|(i, c)| format!("({}) {}", i + 1, describe_chart(c)))
                .collect();
            format!("{} charts{title}: {}", elements.len(), parts.join("; "))
        }
        _ => format!("a chart{title} of a kind retrace does not read"),
    }
}

/// `, x 'month', y 'units'` (the labels a chart has).
fn axes(chart: &Value) -> String {
    ["x", "y"]
        .iter()
        .filter_map(|a| {
            text_of(chart, &format!("{a}_label")).map(|l| format!(", {a} {}", quoted(l)))
        })
        .collect()
}

fn points(chart: &Value, series: &[Value]) -> String {
    let all: Vec<&Value> = series
        .iter()
        .filter_map(|s| s.get("points").and_then(Value::as_array))
        .flatten()
        .collect();
    let mut out = String::new();
    for (i, axis) in ["x", "y"].iter().enumerate() {
        out.push_str(&format!(", {axis}"));
        if let Some(label) = text_of(chart, &format!("{axis}_label")) {
            out.push_str(&format!(" {}", quoted(label)));
        }
        let values: Vec<&Value> = all.iter().filter_map(|p| p.get(i)).collect();
        if let Some(range) = range(&values) {
            out.push_str(&format!(" {range}"));
        }
    }
    let list = named(series, "series", |s| {
        let n = s
            .get("points_total")
            .and_then(Value::as_u64)
            .or_else(|| {
                s.get("points")
                    .and_then(Value::as_array)
                    .map(|p| p.len() as u64)
            })
            .unwrap_or(0);
        format!("{} ({n} points)", label_of(s))
    });
    out.push_str(&format!(", {} series: {list}", series.len()));
    out
}

/// `3.1–9.8` over numbers, else the first and last value as written.
fn range(values: &[&Value]) -> Option<String> {
    let numbers: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
    if !numbers.is_empty() && numbers.len() == values.len() {
        let lo = numbers.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return Some(format!("{}–{}", number(lo), number(hi)));
    }
    let first = values.first().map(|v| scalar(v))?;
    let last = values.last().map(|v| scalar(v))?;
    Some(format!("{first}–{last}"))
}

fn bars(elements: &[Value]) -> String {
    let mut groups: Vec<&str> = Vec::new();
    for g in elements.iter().filter_map(|b| text_of(b, "group")) {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let list = named(elements, "bars", |b| {
        let group = match (groups.len() > 1, text_of(b, "group")) {
            (true, Some(g)) => format!(" [{}]", clip(g)),
            _ => String::new(),
        };
        let value = b.get("value").map(scalar).unwrap_or_else(|| "?".into());
        format!("{}{group} {value}", label_of(b))
    });
    format!(": {list}")
}

fn wedges(elements: &[Value]) -> String {
    named(elements, "wedges", |w| {
        let share = w
            .get("angle")
            .and_then(Value::as_f64)
            .map(|a| format!("{}%", number(a / 360.0 * 100.0)))
            .unwrap_or_else(|| "?".into());
        format!("{} {share}", label_of(w))
    })
}

fn boxes(elements: &[Value]) -> String {
    let field = |b: &Value, k: &str| b.get(k).map(scalar).unwrap_or_else(|| "?".into());
    let list = named(elements, "boxes", |b| {
        let outliers = b
            .get("outliers")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        format!(
            "{} median {} (quartiles {}–{}, whiskers {}–{}, {outliers} outliers)",
            label_of(b),
            field(b, "median"),
            field(b, "first_quartile"),
            field(b, "third_quartile"),
            field(b, "min"),
            field(b, "max"),
        )
    });
    format!(": {list}")
}

/// An element's `label`, quoted.
fn label_of(v: &Value) -> String {
    quoted(text_of(v, "label").unwrap_or("?"))
}

/// `2 rows shown, columns 'a' (integer), 'b' (string); rows: {…}, {…}`
pub fn describe_table(table: &Value) -> String {
    let fields = array_at(table, "/schema/fields");
    let index: Vec<&str> = table
        .pointer("/schema/primaryKey")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let columns: Vec<(&str, &str)> = fields
        .iter()
        .filter_map(|f| Some((text_of(f, "name")?, text_of(f, "type").unwrap_or("any"))))
        .filter(|(name, _)| !index.contains(name))
        .collect();
    let rows = array_at(table, "/data");
    let named: Vec<String> = columns
        .iter()
        .take(NAMED)
        .map(|(name, kind)| format!("{} ({kind})", quoted(name)))
        .collect();
    let shown: Vec<String> = rows
        .iter()
        .take(3)
        .map(|row| {
            let cells: Vec<String> = columns
                .iter()
                .take(NAMED)
                .map(|(name, _)| {
                    format!(
                        "{}={}",
                        clip(name),
                        row.get(*name).map(scalar).unwrap_or_default()
                    )
                })
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect();
    format!(
        "{} rows shown, {} columns: {}{}; first rows: {}",
        rows.len(),
        columns.len(),
        named.join(", "),
        more(columns.len(), "columns"),
        shown.join(", ")
    )
}

/// The array at a JSON pointer, empty when there is none.
fn array_at<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn text_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(LABEL_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

fn quoted(s: &str) -> String {
    format!("'{}'", clip(s))
}

/// The first [`NAMED`] elements as `describe` puts them, then how many
/// there were when more.
fn named(elements: &[Value], what: &str, describe: impl Fn(&Value) -> String) -> String {
    let shown: Vec<String> = elements.iter().take(NAMED).map(describe).collect();
    format!("{}{}", shown.join(", "), more(elements.len(), what))
}

/// ` (of N name)` when more were there than named.
fn more(n: usize, name: &str) -> String {
    if n > NAMED {
        format!(" … ({n} {name})")
    } else {
        String::new()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Number(_) => v.as_f64().map(number).unwrap_or_default(),
        Value::String(s) => quoted(s),
        Value::Null => "null".into(),
        other => clip(&other.to_string()),
    }
}

/// A number in a few significant digits: `12`, `3.142`, `0.00012`.
fn number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-4..15).contains(&magnitude) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - magnitude).clamp(0, 10) as usize;
    let text = format!("{x:.decimals$}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_chart_in_one_line() {
        let chart = json!({"type": "line", "title": "Sales", "x_label": "month", "y_label": "units",
            "elements": [
                {"label": "a", "points": [[1.0, 3.1], [2.0, 9.8]]},
                {"label": "b", "points": [[1.0, 4.0], [12.0, 5.0]]}]});
        assert_eq!(
            describe_chart(&chart),
            "line chart 'Sales', x 'month' 1–12, y 'units' 3.1–9.8, 2 series: 'a' (2 points), 'b' (2 points)"
        );
    }

    #[test]
    fn bars_wedges_boxes_and_several_charts() {
        let bar = json!({"type": "bar", "title": "Books", "x_label": "Authors", "elements": [
            {"label": "A", "group": "g", "value": 100.0}, {"label": "B", "group": "g", "value": 250.5}]});
        assert_eq!(
            describe_chart(&bar),
            "bar chart 'Books', x 'Authors': 'A' 100, 'B' 250.5"
        );
        let pie = json!({"type": "pie", "elements": [{"label": "No", "angle": 324.0}, {"label": "Yes", "angle": 36.0}]});
        assert_eq!(describe_chart(&pie), "pie chart: 'No' 90%, 'Yes' 10%");
        let boxes = json!({"type": "box_and_whisker", "elements": [{"label": "A", "min": 78.0,
            "first_quartile": 85.0, "median": 88.0, "third_quartile": 90.0, "max": 92.0, "outliers": [60.0]}]});
        assert_eq!(
            describe_chart(&boxes),
            "box-and-whisker chart: 'A' median 88 (quartiles 85–90, whiskers 78–92, 1 outliers)"
        );
        let both =
            json!({"type": "superchart", "title": "Two", "elements": [pie, {"type": "unknown"}]});
        assert_eq!(
            describe_chart(&both),
            "2 charts 'Two': (1) pie chart: 'No' 90%, 'Yes' 10%; (2) a chart of a kind retrace does not read"
        );
        // Whatever the kernel sent, something is said.
        assert_eq!(
            describe_chart(&json!(7)),
            "a chart of a kind retrace does not read"
        );
    }

    #[test]
    fn a_table_names_its_columns_and_first_rows() {
        let table = json!({"schema": {"fields": [{"name": "index", "type": "integer"},
            {"name": "a", "type": "integer"}, {"name": "b", "type": "string"}], "primaryKey": ["index"]},
            "data": [{"index": 0, "a": 1, "b": "x"}, {"index": 1, "a": 2, "b": "y"}]});
        assert_eq!(
            describe_table(&table),
            "2 rows shown, 2 columns: 'a' (integer), 'b' (string); first rows: (a=1, b='x'), (a=2, b='y')"
        );
    }

    #[test]
    fn numbers_stay_short() {
        assert_eq!(number(12.0), "12");
        assert_eq!(number(std::f64::consts::PI), "3.142");
        assert_eq!(number(0.000123), "0.000123");
        assert_eq!(number(1.5e20), "1.500e20");
    }
}
