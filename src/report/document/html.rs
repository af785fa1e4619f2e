//! The HTML backend: a [`Document`] as the body of a page. Every piece of
//! text is escaped ([`escape`]); only the SVG of a figure, which retrace
//! drew itself, goes in as it is.

use std::fmt::Write;

use super::{Block, Document, Figure, Format, Item, Span, Table, Text};
use crate::report::markup::html as escape;

/// The document as HTML elements.
pub fn render(doc: &Document) -> String {
    let mut out = String::new();
    blocks(&mut out, &doc.0);
    out
}

fn blocks(w: &mut String, blocks: &[Block]) {
    for b in blocks {
        block(w, b);
    }
}

fn block(w: &mut String, b: &Block) {
    match b {
        Block::Heading(l, t) => {
            let _ = writeln!(w, "<h{l}>{}</h{l}>", inline(t));
        }
        Block::Paragraph(class, t) => {
            let _ = writeln!(w, "<p{}>{}</p>", class_attr(*class), inline(t));
        }
        Block::Callout(class, t) => {
            let _ = writeln!(w, "<p class=\"{class}\">{}</p>", inline(t));
        }
        Block::List(class, items) => list(w, *class, items),
        Block::Table(t) => table(w, t),
        Block::Cards(cards) => {
            let _ = writeln!(w, "<div class=\"cards\">");
            for (name, value) in cards {
                let _ = writeln!(
                    w,
                    "<div class=\"card\"><div class=\"name\">{}</div><div class=\"value\">{}\
                     </div></div>",
                    escape(name),
                    escape(value)
                );
            }
            let _ = writeln!(w, "</div>");
        }
        Block::Figures(figures) => {
            let _ = writeln!(w, "<div class=\"plots\">");
            for f in figures {
                figure(w, f);
            }
            let _ = writeln!(w, "</div>");
        }
        Block::Section(s) => {
            let id = s.id.map(|id| format!(" id=\"{id}\"")).unwrap_or_default();
            let _ = writeln!(w, "<{}{id}>", s.tag);
            blocks(w, &s.blocks);
            let _ = writeln!(w, "</{}>", s.tag);
        }
        Block::Only(Format::Html, inner) => blocks(w, inner),
        Block::Only(Format::Markdown, _) | Block::Gap => {}
    }
}

fn class_attr(class: Option<&str>) -> String {
    class.map(|c| format!(" class=\"{c}\"")).unwrap_or_default()
}

fn list(w: &mut String, class: Option<&str>, items: &[Item]) {
    let _ = writeln!(w, "<ul{}>", class_attr(class));
    for item in items {
        let _ = write!(w, "<li>{}", inline(&item.text));
        if !item.sub.is_empty() {
            let _ = write!(w, "<ul>");
            for sub in &item.sub {
                let _ = write!(w, "<li>{}</li>", inline(sub));
            }
            let _ = write!(w, "</ul>");
        }
        let _ = writeln!(w, "</li>");
    }
    let _ = writeln!(w, "</ul>");
}

fn table(w: &mut String, t: &Table) {
    let _ = write!(w, "<table{}>\n<thead><tr>", class_attr(t.class));
    for (i, h) in t.head.iter().enumerate() {
        if t.head_break == Some(i) {
            w.push('\n');
        }
        let _ = write!(w, "<th>{}</th>", inline(h));
    }
    let _ = writeln!(w, "</tr></thead>\n<tbody>");
    for row in &t.rows {
        w.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let tag = if t.row_heads && i == 0 { "th" } else { "td" };
            let _ = write!(w, "<{tag}>{}</{tag}>", inline(c));
        }
        w.push_str("</tr>\n");
    }
    let _ = writeln!(w, "</tbody>\n</table>");
}

/// A chart, its SVG from the `<svg` element on (no XML prolog).
fn figure(w: &mut String, f: &Figure) {
    let svg = f.svg.find("<svg").map_or(f.svg.as_str(), |i| &f.svg[i..]);
    let id =
        f.id.as_ref()
            .map(|id| format!(" id=\"plot-{}\"", escape(id)))
            .unwrap_or_default();
    let _ = writeln!(
        w,
        "<figure class=\"plot\"{id}>{svg}<figcaption>{}</figcaption></figure>",
        escape(&f.title)
    );
}

/// Inline text, escaped.
pub fn inline(t: &Text) -> String {
    t.0.iter()
        .map(|span| match span {
            Span::Text(s) => escape(s),
            Span::Own(s) => s.to_string(),
            Span::Code(s) => format!("<code>{}</code>", escape(s)),
            Span::Strong(s) => format!("<strong>{}</strong>", escape(s)),
            Span::Break => "<br>\n".into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Block, Document, Figure, Format, Table, Text};
    use super::render;

    #[test]
    fn text_from_outside_is_escaped_everywhere() {
        let mut doc = Document::default();
        doc.heading(2, Text::default().text("<b>").code("</code><i>"));
        doc.push(Block::Paragraph(
            Some("meta"),
            Text::default().strong("a & b").text("'q\""),
        ));
        doc.list(["<script>alert(1)</script>"]);
        assert_eq!(
            render(&doc),
            "<h2>&lt;b&gt;<code>&lt;/code&gt;&lt;i&gt;</code></h2>\n\
             <p class=\"meta\"><strong>a &amp; b</strong>&#39;q&quot;</p>\n\
             <ul>\n<li>&lt;script&gt;alert(1)&lt;/script&gt;</li>\n</ul>\n"
        );
    }

    #[test]
    fn only_the_writers_own_text_goes_in_unescaped() {
        let mut doc = Document::default();
        doc.paragraph(Text::default().own("baseline's (").text("it's <b>"));
        assert_eq!(render(&doc), "<p>baseline's (it&#39;s &lt;b&gt;</p>\n");
    }

    #[test]
    fn tables_have_a_head_a_body_and_row_headers() {
        let mut t = Table::plain(&["", "a"], vec![vec!["x".into(), "<1>".into()]]).class("c");
        t.row_heads = true;
        t.head_break = Some(1);
        let mut doc = Document::default();
        doc.table(t);
        assert_eq!(
            render(&doc),
            "<table class=\"c\">\n<thead><tr><th></th>\n<th>a</th></tr></thead>\n<tbody>\n\
             <tr><th>x</th><td>&lt;1&gt;</td></tr>\n</tbody>\n</table>\n"
        );
    }

    #[test]
    fn sections_wrap_markdown_only_parts_vanish_figures_inline_svg() {
        let mut inner = Document::default();
        inner.push(Block::Figures(vec![Figure {
            id: Some("a\"b".into()),
            title: "T<".into(),
            src: "plots/a.svg".into(),
            svg: "<?xml version=\"1.0\"?><svg></svg>".into(),
        }]));
        let mut md = Document::default();
        md.paragraph("markdown only");
        inner.only(Format::Markdown, md);
        inner.push(Block::Gap);
        let mut doc = Document::default();
        doc.section("section", Some("plots"), inner);
        assert_eq!(
            render(&doc),
            "<section id=\"plots\">\n<div class=\"plots\">\n<figure class=\"plot\" \
             id=\"plot-a&quot;b\"><svg></svg><figcaption>T&lt;</figcaption></figure>\n\
             </div>\n</section>\n"
        );
    }
}
