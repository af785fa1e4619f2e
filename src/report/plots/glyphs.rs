//! A drawing backend that lays out text itself, from the embedded font,
//! around another (the bitmap): each glyph at its pen position with its
//! side bearing. plotters' own ab_glyph text drops the bearing, which
//! spaces letters unevenly; everything but text is the inner backend's.

use ab_glyph::{point, Font, FontRef, Glyph, PxScale, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

type Drawn<E> = Result<(), DrawingErrorKind<E>>;

pub(super) struct Glyphs<DB> {
    inner: DB,
    font: FontRef<'static>,
}

impl<DB> Glyphs<DB> {
    pub(super) fn new(inner: DB, font: FontRef<'static>) -> Self {
        Glyphs { inner, font }
    }

    /// The em of a plotters text size in pixels: what the SVG backend
    /// writes as `font-size`, so both files show text alike.
    fn em(size: f64) -> f32 {
        (size / 1.24) as f32
    }

    /// The glyphs of `text` on a baseline at y = `baseline` from x = `x0`,
    /// and the advance of the whole line.
    fn layout(&self, text: &str, size: f64, x0: f32, baseline: f32) -> (Vec<Glyph>, f32) {
        let units = self.font.units_per_em().unwrap_or(2048.0);
        let scale = PxScale::from(Self::em(size) * self.font.height_unscaled() / units);
        let font = self.font.as_scaled(scale);
        let (mut x, mut prev, mut glyphs) = (0.0, None, Vec::new());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                x += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(scale, point(x0 + x, baseline)));
            x += font.h_advance(id);
            prev = Some(id);
        }
        (glyphs, x)
    }
}

impl<DB: DrawingBackend> DrawingBackend for Glyphs<DB> {
    type ErrorType = DB::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Drawn<DB::ErrorType> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Drawn<DB::ErrorType> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Drawn<DB::ErrorType> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Drawn<DB::ErrorType> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drawn<DB::ErrorType> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drawn<DB::ErrorType> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drawn<DB::ErrorType> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Drawn<DB::ErrorType> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Drawn<DB::ErrorType> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<DB::ErrorType>> {
        let (_, width) = self.layout(text, style.size(), 0.0, 0.0);
        Ok((width.ceil() as u32, Self::em(style.size()).ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Drawn<DB::ErrorType> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (_, width) = self.layout(text, style.size(), 0.0, 0.0);
        let height = Self::em(style.size());
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let top = match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        // The box is one em high; capitals fill it above the baseline.
        let (glyphs, _) = self.layout(text, style.size(), dx, top + 0.8 * height);
        let mut coverage = Vec::new();
        for glyph in glyphs {
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let min = outline.px_bounds().min;
                outline.draw(|x, y, c| {
                    coverage.push((min.x as i32 + x as i32, min.y as i32 + y as i32, c))
                });
            }
        }
        let transform = style.transform();
        let (w, h) = self.get_size();
        for (x, y, c) in coverage {
            let (x, y) = transform.transform(x, y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if c > 0.0 && x >= 0 && y >= 0 && x < w as i32 && y < h as i32 {
                let ink = BackendColor {
                    alpha: color.alpha * f64::from(c.min(1.0)),
                    rgb: color.rgb,
                };
                self.inner.draw_pixel((x, y), ink)?;
            }
        }
        Ok(())
    }
}
