//! The look every chart shares: a light card with dark text (readable on
//! a light and on a dark page), one palette, the embedded font, a legend
//! column, and category labels placed by hand.

use std::ops::Range;
use std::sync::OnceLock;

use plotters::chart::MeshStyle;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Pixels of every chart (SVG user units and PNG pixels alike).
pub(super) const SIZE: (u32, u32) = (800, 450);
/// The family every text uses: the embedded font in PNGs, the page's
/// sans-serif in SVGs.
pub(super) const FONT: &str = "sans-serif";
const LEGEND_WIDTH: u32 = 170;

pub(super) const BACKGROUND: RGBColor = RGBColor(255, 255, 255);
const BORDER: RGBColor = RGBColor(208, 215, 222);
pub(super) const TEXT: RGBColor = RGBColor(36, 41, 47);
pub(super) const MUTED: RGBColor = RGBColor(87, 96, 106);
pub(super) const GRID: RGBColor = RGBColor(228, 232, 236);

/// Okabe–Ito, without its yellow (too pale on white): distinguishable
/// with the common colour-vision deficiencies.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(60, 60, 60),
];

pub(super) type Area<DB> = DrawingArea<DB, Shift>;
pub(super) type DrawError<DB> = DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>;
pub(super) type Drawn<DB> = Result<(), DrawError<DB>>;
pub(super) type Frame<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

static FONT_DATA: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// The embedded font could not be read (a corrupt asset: a build problem).
#[derive(Debug, thiserror::Error)]
#[error("the embedded font assets/fonts/DejaVuSans.ttf is not a readable font")]
pub struct FontError;

/// Registers the embedded font once per process: bitmap text needs one,
/// and a machine's own fonts are never looked up.
pub(super) fn register_font() -> Result<(), FontError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, FONT_DATA).is_ok());
    ok.then_some(()).ok_or(FontError)
}

/// The embedded font, for text laid out outside plotters ([`super::glyphs`]).
pub(super) fn font() -> Result<ab_glyph::FontRef<'static>, FontError> {
    ab_glyph::FontRef::try_from_slice(FONT_DATA).map_err(|_| FontError)
}

pub(super) fn text(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&TEXT)
}

pub(super) fn muted(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&MUTED)
}

pub(super) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The card: a light background with a thin border, under everything.
pub(super) fn card<DB: DrawingBackend>(root: &Area<DB>) -> Drawn<DB> {
    root.fill(&BACKGROUND)?;
    let (w, h) = root.dim_in_pixel();
    root.draw(&Rectangle::new(
        [(0, 0), (w as i32 - 1, h as i32 - 1)],
        BORDER.stroke_width(1),
    ))
}

/// Draws the title and returns the area below it.
pub(super) fn titled<DB: DrawingBackend>(
    root: &Area<DB>,
    title: &str,
) -> Result<Area<DB>, DrawError<DB>> {
    let inner = root.margin(10, 6, 6, 10);
    inner.titled(title, text(18))
}

/// Splits off the legend column on the right: (plot, legend).
pub(super) fn with_legend<DB: DrawingBackend>(area: &Area<DB>) -> (Area<DB>, Area<DB>) {
    let w = area.dim_in_pixel().0;
    area.split_horizontally(w.saturating_sub(LEGEND_WIDTH))
}

/// How a legend entry shows its series.
pub(super) enum Swatch {
    Line,
    Box,
}

/// A legend in the column `area`: an optional heading, then one line per
/// entry.
pub(super) fn legend<DB: DrawingBackend>(
    area: &Area<DB>,
    heading: Option<&str>,
    entries: &[(String, RGBColor, Swatch)],
) -> Drawn<DB> {
    let mut y = 16;
    if let Some(h) = heading {
        area.draw_text(h, &muted(13), (8, y))?;
        y += 22;
    }
    for (label, c, swatch) in entries {
        let mid = y + 7;
        match swatch {
            Swatch::Line => {
                area.draw(&PathElement::new(
                    vec![(8, mid), (30, mid)],
                    c.stroke_width(3),
                ))?;
                area.draw(&Circle::new((19, mid), 4, c.filled()))?;
            }
            Swatch::Box => {
                area.draw(&Rectangle::new([(10, mid - 6), (28, mid + 6)], c.filled()))?;
            }
        }
        area.draw_text(&short(label, 20), &text(13), (36, y))?;
        y += 22;
    }
    Ok(())
}

/// `s`, cut to `max` characters with an ellipsis.
pub(super) fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A chart with f64 axes in `area`, room for labels below and left.
pub(super) fn frame<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    x: Range<f64>,
    y: Range<f64>,
    below: u32,
    left: u32,
) -> Result<Frame<'a, DB>, DrawError<DB>> {
    ChartBuilder::on(area)
        .margin_top(8)
        .margin_right(16)
        .x_label_area_size(below)
        .y_label_area_size(left)
        .build_cartesian_2d(x, y)
}

/// The mesh every chart draws: label and axis-description sizes, grid
/// and axis colours. The caller adds its ticks and descriptions.
pub(super) fn mesh<'a, 'b, DB: DrawingBackend>(
    chart: &'b mut Frame<'a, DB>,
    desc_size: u32,
) -> MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    let mut mesh = chart.configure_mesh();
    mesh.label_style(text(13))
        .axis_desc_style(text(desc_size))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(MUTED);
    mesh
}

/// A percentage axis tick; none above 100% (the headroom over a full bar).
pub(super) fn percent_tick(y: &f64) -> String {
    if *y <= 100.0 {
        format!("{y:.0}%")
    } else {
        String::new()
    }
}

/// `text` centred under the plotting area at `x`, `dy` pixels below the
/// axis (categories, which plotters' numeric ticks cannot place).
pub(super) fn label_below<DB: DrawingBackend>(
    area: &Area<DB>,
    chart: &Frame<DB>,
    x: f64,
    dy: i32,
    label: &str,
    style: &TextStyle,
) -> Drawn<DB> {
    let y0 = chart.y_range().start;
    let (px, py) = chart.backend_coord(&(x, y0));
    let (bx, by) = area.get_base_pixel();
    let style = style.pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(label.to_owned(), (px - bx, py - by + dy), style))
}

/// `text` right-aligned left of the plotting area at `y`, `dy` pixels
/// lower.
pub(super) fn label_left<DB: DrawingBackend>(
    area: &Area<DB>,
    chart: &Frame<DB>,
    y: f64,
    dy: i32,
    label: &str,
    style: &TextStyle,
) -> Drawn<DB> {
    let x0 = chart.x_range().start;
    let (px, py) = chart.backend_coord(&(x0, y));
    let (bx, by) = area.get_base_pixel();
    let style = style.pos(Pos::new(HPos::Right, VPos::Center));
    area.draw(&Text::new(
        label.to_owned(),
        (px - bx - 8, py - by + dy),
        style,
    ))
}

/// A round upper bound for an axis showing values up to `max`.
pub(super) fn nice_ceiling(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let step = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * step >= max {
            return m * step;
        }
    }
    10.0 * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(nice_ceiling(230.0), 250.0);
    }

    #[test]
    fn labels_are_cut_with_an_ellipsis() {
        assert_eq!(short("fat", 5), "fat");
        assert_eq!(short("openai:gpt-4o", 6), "opena…");
    }
}
