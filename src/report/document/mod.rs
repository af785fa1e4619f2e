//! The document model every report is built as: a run's `report.md` and
//! `report.html` from one [`Document`] built per summary, `compare.md` and
//! `compare.html` from one built per comparison. Builders say what a
//! report shows (headings, paragraphs, lists, tables, figures) in plain
//! text; the backends ([`markdown`], [`html`]) lay it out and escape every
//! piece of text for their markup, so no builder writes markup itself.
//!
//! Where the two pages of a run have always shown a part differently (the
//! page's headline cards, the Markdown's own prose), the part is marked
//! [`Block::Only`] one format.

pub mod html;
pub mod markdown;

/// A piece of inline text.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    /// Plain text, escaped by each backend.
    Text(String),
    /// Text the writer wrote itself (never from outside, hence `'static`),
    /// which the page carries unescaped.
    Own(&'static str),
    /// Inline code (`fat`, a run id).
    Code(String),
    /// Emphasised text (a verdict).
    Strong(String),
    /// A line break inside a paragraph.
    Break,
}

/// A run of inline text: a heading, a paragraph, a list item, a cell.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Text(pub Vec<Span>);

impl Text {
    /// Appends plain text.
    pub fn text(mut self, s: impl Into<String>) -> Text {
        self.0.push(Span::Text(s.into()));
        self
    }

    /// Appends the writer's own text.
    pub fn own(mut self, s: &'static str) -> Text {
        self.0.push(Span::Own(s));
        self
    }

    /// Appends inline code.
    pub fn code(mut self, s: impl ToString) -> Text {
        self.0.push(Span::Code(s.to_string()));
        self
    }

    /// Appends emphasised text.
    pub fn strong(mut self, s: impl Into<String>) -> Text {
        self.0.push(Span::Strong(s.into()));
        self
    }

    /// Appends a line break.
    pub fn line_break(mut self) -> Text {
        self.0.push(Span::Break);
        self
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::default().text(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::default().text(s)
    }
}

/// Which backend a [`Block::Only`] part is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Html,
}

/// A table: a head row, body rows of text cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// The HTML class (`strategies`, `self-repair`, ...).
    pub class: Option<&'static str>,
    pub head: Vec<Text>,
    pub rows: Vec<Vec<Text>>,
    /// The first cell of each body row names the row (a header cell).
    pub row_heads: bool,
    /// Where the page's head row breaks its line, before the cell of this
    /// index (the page's layout, kept as it was).
    pub head_break: Option<usize>,
}

impl Table {
    /// A table of plain text cells.
    pub fn plain(head: &[&str], rows: Vec<Vec<String>>) -> Table {
        Table {
            head: head.iter().map(|h| Text::from(*h)).collect(),
            rows: rows
                .into_iter()
                .map(|r| r.into_iter().map(Text::from).collect())
                .collect(),
            ..Table::default()
        }
    }

    pub fn class(mut self, class: &'static str) -> Table {
        self.class = Some(class);
        self
    }
}

/// A chart: drawn SVG for the page, a file beside the Markdown.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The page's element id (`plot-<id>`), when it has one.
    pub id: Option<String>,
    pub title: String,
    /// Where the Markdown finds the image, relative to it.
    pub src: String,
    /// The SVG the page inlines (retrace's own drawing, not user text).
    pub svg: String,
}

/// A list item, with its own items under it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Item {
    pub text: Text,
    pub sub: Vec<Text>,
}

impl<T: Into<Text>> From<T> for Item {
    fn from(text: T) -> Item {
        Item {
            text: text.into(),
            sub: Vec::new(),
        }
    }
}

/// One block of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading(u8, Text),
    /// A paragraph, with the page's class.
    Paragraph(Option<&'static str>, Text),
    /// A warning that heads a document (a synthetic model, an undeclared
    /// protocol difference), with the page's class.
    Callout(&'static str, Text),
    /// A bulleted list, with the page's class.
    List(Option<&'static str>, Vec<Item>),
    Table(Table),
    /// Named numbers shown large on the page.
    Cards(Vec<(String, String)>),
    /// Charts side by side.
    Figures(Vec<Figure>),
    /// A part grouped on the page (`<header>`, `<section id=…>`); the
    /// Markdown shows its blocks in line.
    Section(Section),
    /// Blocks only one format shows.
    Only(Format, Vec<Block>),
    /// An empty line in the Markdown (its layout, kept as it was).
    Gap,
}

/// A group of blocks: the page's element and id.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub tag: &'static str,
    pub id: Option<&'static str>,
    pub blocks: Vec<Block>,
}

/// A whole report, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document(pub Vec<Block>);

impl Document {
    pub fn push(&mut self, block: Block) {
        self.0.push(block);
    }

    pub fn heading(&mut self, level: u8, text: impl Into<Text>) {
        self.push(Block::Heading(level, text.into()));
    }

    pub fn paragraph(&mut self, text: impl Into<Text>) {
        self.push(Block::Paragraph(None, text.into()));
    }

    pub fn list<I: Into<Item>>(&mut self, items: impl IntoIterator<Item = I>) {
        self.push(Block::List(
            None,
            items.into_iter().map(Into::into).collect(),
        ));
    }

    pub fn table(&mut self, table: Table) {
        self.push(Block::Table(table));
    }

    /// Blocks only `format` shows.
    pub fn only(&mut self, format: Format, doc: Document) {
        if !doc.0.is_empty() {
            self.push(Block::Only(format, doc.0));
        }
    }

    /// One block only `format` shows.
    pub fn only_one(&mut self, format: Format, block: Block) {
        self.push(Block::Only(format, vec![block]));
    }

    /// Blocks the page groups in `<tag id=…>`.
    pub fn section(&mut self, tag: &'static str, id: Option<&'static str>, doc: Document) {
        self.push(Block::Section(Section {
            tag,
            id,
            blocks: doc.0,
        }));
    }
}
