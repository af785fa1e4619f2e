//! `report.html`: the run in one self-contained page. The headline numbers
//! and the plots are rendered here; every task with its rounds travels as
//! one JSON blob that the page's script turns into rows, and a task's
//! rounds only when it is opened, so a run of thousands of rounds stays
//! responsive. No server, no network: styles, script, charts and the
//! images the code produced are all inside the file.

mod tasks;

use super::document::html as document;
use super::error::RenderError;
use super::export::Exporter;
pub(super) use super::markup::html as escape;
use super::run_document;
use super::view::RunView;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

pub struct HtmlExporter;

impl<'a> Exporter<RunView<'a>> for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, run: &RunView<'a>) -> Result<String, RenderError> {
        let data = tasks::collect(run);
        let blob = script_safe(&serde_json::to_string(&data)?);
        let s = run.summary;
        let mut page = String::with_capacity(blob.len() + 64 * 1024);
        page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        page.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
        page.push_str(&format!(
            "<title>retrace run {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
            escape(&s.header.run_id)
        ));
        page.push_str(&document::render(&run_document::build(run)));
        page.push_str(TASKS_SECTION);
        page.push_str("<script>\nconst DATA = ");
        page.push_str(&blob);
        page.push_str(";\n");
        page.push_str(SCRIPT);
        page.push_str("</script>\n</body>\n</html>\n");
        Ok(page)
    }
}

/// The controls and the (script-filled) list of tasks.
const TASKS_SECTION: &str = r#"<section id="tasks-section">
<h2>Tasks</h2>
<div class="controls" role="toolbar" aria-label="filters">
<span class="filters" id="filters"></span>
<label>tag <select id="tag"><option value="">any</option></select></label>
<label id="arm-label" hidden>strategy <select id="arm"><option value="">any</option></select></label>
<label>task <input id="search" type="search" placeholder="id contains"></label>
<span id="shown" aria-live="polite"></span>
</div>
<div id="tasks"><noscript>The task list needs JavaScript; the same data is in results.jsonl.</noscript></div>
</section>
"#;

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` only
/// occur inside JSON strings, where their `\u` escapes mean the same, so
/// no `</script>` or `<!--` in a model's reply can end the element.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests;
