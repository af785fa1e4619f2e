//! The Markdown backend: a [`Document`] as CommonMark with GitHub tables.
//! Blocks are separated by one empty line; every piece of text goes
//! through [`md_text`] or [`md_code`], and every table cell through
//! [`md_cell`], so nothing from outside acts as markup.

use super::{Block, Document, Figure, Format, Item, Span, Table, Text};
use crate::report::markup::{md_cell, md_code, md_text};

/// The document as Markdown.
pub fn render(doc: &Document) -> String {
    let mut leaves = Vec::new();
    flatten(&doc.0, &mut leaves);
    let parts: Vec<String> = leaves.into_iter().map(block).collect();
    parts.join("\n")
}

/// The blocks the Markdown shows, sections opened.
fn flatten<'a>(blocks: &'a [Block], out: &mut Vec<&'a Block>) {
    for b in blocks {
        match b {
            Block::Section(s) => flatten(&s.blocks, out),
            Block::Only(Format::Markdown, inner) => flatten(inner, out),
            Block::Only(Format::Html, _) => {}
            b => out.push(b),
        }
    }
}

fn block(b: &Block) -> String {
    match b {
        Block::Heading(level, t) => {
            format!("{} {}\n", "#".repeat(usize::from(*level)), inline(t))
        }
        Block::Paragraph(_, t) => format!("{}\n", inline(t)),
        Block::Callout(_, t) => format!("> **{}**\n", inline(t)),
        Block::List(_, items) => list(items),
        Block::Table(t) => table(t),
        Block::Cards(cards) => cards
            .iter()
            .map(|(name, value)| format!("- {}: {}\n", md_text(name), md_text(value)))
            .collect(),
        Block::Figures(figures) => {
            let each: Vec<String> = figures.iter().map(figure).collect();
            each.join("\n")
        }
        Block::Gap => String::new(),
        Block::Section(_) | Block::Only(..) => unreachable!("flattened"),
    }
}

fn list(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        out.push_str(&format!("- {}\n", inline(&item.text)));
        for sub in &item.sub {
            out.push_str(&format!("  - {}\n", inline(sub)));
        }
    }
    out
}

/// A GitHub table; an empty head cell is one space wide.
fn table(t: &Table) -> String {
    let mut out = String::from("|");
    for h in &t.head {
        match cell(h) {
            c if c.is_empty() => out.push_str(" |"),
            c => out.push_str(&format!(" {c} |")),
        }
    }
    out.push_str(&format!("\n|{}\n", "---|".repeat(t.head.len())));
    for row in &t.rows {
        let cells: Vec<String> = row.iter().map(cell).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

fn figure(f: &Figure) -> String {
    format!("![{}]({})\n", md_text(&f.title), f.src)
}

fn cell(t: &Text) -> String {
    md_cell(&inline(t))
}

/// Inline text, each span escaped on its own.
pub fn inline(t: &Text) -> String {
    t.0.iter()
        .map(|span| match span {
            Span::Text(s) => md_text(s),
            Span::Own(s) => md_text(s),
            Span::Code(s) => md_code(s),
            Span::Strong(s) => format!("**{}**", md_text(s)),
            Span::Break => "\n".into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Block, Document, Format, Item, Table, Text};
    use super::render;

    #[test]
    fn blocks_are_separated_by_one_empty_line() {
        let mut doc = Document::default();
        doc.heading(1, Text::default().text("run ").code("a`b"));
        doc.paragraph("one");
        doc.list(["x", "y"]);
        assert_eq!(render(&doc), "# run ``a`b``\n\none\n\n- x\n- y\n");
    }

    #[test]
    fn table_cells_escape_pipes_and_markup() {
        let mut t = Table::plain(&["", "a|b"], vec![vec!["*x*".into(), "".into()]]);
        t.rows.push(vec![Text::default().code("p|q"), "<b>".into()]);
        let mut doc = Document::default();
        doc.table(t);
        assert_eq!(
            render(&doc),
            "| | a\\|b |\n|---|---|\n| \\*x\\* |  |\n| `p\\|q` | &lt;b&gt; |\n"
        );
    }

    #[test]
    fn only_html_parts_and_sections_vanish_gaps_stay() {
        let mut doc = Document::default();
        let mut page = Document::default();
        page.paragraph("page only");
        doc.only(Format::Html, page);
        let mut inner = Document::default();
        inner.paragraph("in a section");
        doc.section("section", Some("s"), inner);
        doc.push(Block::Gap);
        doc.push(Block::List(
            None,
            vec![Item {
                text: "kills".into(),
                sub: vec!["timeout: 1".into()],
            }],
        ));
        assert_eq!(render(&doc), "in a section\n\n\n- kills\n  - timeout: 1\n");
    }

    #[test]
    fn text_from_outside_cannot_start_a_block_or_a_link() {
        let mut doc = Document::default();
        doc.paragraph("# not a heading [x](y)");
        doc.push(Block::Callout("fail", "- careful".into()));
        assert_eq!(
            render(&doc),
            "\\# not a heading [x\\](y)\n\n> **\\- careful**\n"
        );
    }
}
