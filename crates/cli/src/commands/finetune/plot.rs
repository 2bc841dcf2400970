//! The loss curve as `OUT.loss.png`: the training loss of every step as a line and the eval
//! loss where it was measured as points on a line, drawn from `OUT.log.jsonl` so that a
//! resumed run's curve holds the steps of the runs before it.
//!
//! Text is drawn with a font compiled into the binary (egui's Hack Regular, through
//! plotters' `ab_glyph` feature), not one looked up on the system: a server or CI machine
//! may have no fonts at all, and a chart without its labels would be worse than none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

/// The image's size in pixels.
pub const WIDTH: u32 = 800;
pub const HEIGHT: u32 = 500;

/// Why the curve could not be written. Never fatal to a run: the caller warns and trains on.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the compiled-in font could not be read")]
    Font,
    #[error("drawing the chart: {0}")]
    Draw(String),
    #[error("{}: encoding the PNG: {source}", path.display())]
    Encode {
        path: PathBuf,
        source: png::EncodingError,
    },
}

/// The losses to draw, each as (step, loss) in step order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Curve {
    pub train: Vec<(u64, f64)>,
    pub eval: Vec<(u64, f64)>,
}

/// `OUT.loss.png`.
pub fn png_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".loss.png");
    PathBuf::from(name)
}

impl Curve {
    /// The losses recorded in a log (`OUT.log.jsonl`). A step logged twice (a run resumed
    /// from a checkpoint older than its log's last line redoes steps) keeps its last value,
    /// the one the adapter now carries. A skipped step's line (`"skipped": true`: its
    /// gradient was not finite, and the next step took its number) is left out, so the
    /// curve holds the steps the adapter took. A line that is not a JSON object (one cut
    /// short by a killed process) is skipped: the rest of the log still makes a curve.
    pub fn from_log(path: &Path) -> Result<Curve, PlotError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlotError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut train = BTreeMap::new();
        let mut eval = BTreeMap::new();
        for line in text.lines() {
            let Ok(serde_json::Value::Object(v)) = serde_json::from_str(line) else {
                continue;
            };
            let Some(step) = v.get("step").and_then(|s| s.as_u64()) else {
                continue;
            };
            if v.get("skipped").and_then(|s| s.as_bool()) == Some(true) {
                continue;
            }
            if let Some(loss) = v.get("loss").and_then(|l| l.as_f64()) {
                train.insert(step, loss);
            }
            if let Some(loss) = v.get("eval_loss").and_then(|l| l.as_f64()) {
                eval.insert(step, loss);
            }
        }
        Ok(Curve {
            train: train.into_iter().collect(),
            eval: eval.into_iter().collect(),
        })
    }

    /// The axes' ranges: every step, and every finite loss with a margin (a diverged step's
    /// NaN or infinity would make the range meaningless, so it is left out of the chart).
    fn ranges(&self) -> (std::ops::Range<u64>, std::ops::Range<f64>) {
        let points = || self.train.iter().chain(&self.eval);
        let first = points().map(|p| p.0).min().unwrap_or(0);
        let last = points().map(|p| p.0).max().unwrap_or(1).max(first + 1);
        let losses = || points().map(|p| p.1).filter(|l| l.is_finite());
        let lo = losses().fold(f64::INFINITY, f64::min);
        let hi = losses().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let margin = ((hi - lo) * 0.05).max(1e-3 * hi.abs().max(1.0));
        (first..last, (lo - margin)..(hi + margin))
    }
}

/// The family plotters asks for, mapped to the compiled-in font once a process.
fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(
            FontFamily::SansSerif.as_str(),
            FontStyle::Normal,
            epaint_default_fonts::HACK_REGULAR,
        )
        .is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

/// The chart as RGB pixels, `WIDTH` x `HEIGHT`.
fn render(curve: &Curve) -> Result<Vec<u8>, PlotError> {
    register_font()?;
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw(e.to_string());
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(&e))?;
        let (x, y) = curve.ranges();
        let mut chart = ChartBuilder::on(&root)
            .caption("rullama finetune: loss", ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x, y)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("loss")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| draw_err(&e))?;
        let finite = |points: &[(u64, f64)]| -> Vec<(u64, f64)> {
            points.iter().copied().filter(|p| p.1.is_finite()).collect()
        };
        let train = finite(&curve.train);
        let eval = finite(&curve.eval);
        chart
            .draw_series(LineSeries::new(train, BLUE.stroke_width(2)))
            .map_err(|e| draw_err(&e))?
            .label("training loss")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        if !eval.is_empty() {
            chart
                .draw_series(LineSeries::new(eval.clone(), RED.stroke_width(2)))
                .map_err(|e| draw_err(&e))?
                .label("eval loss")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
            chart
                .draw_series(eval.iter().map(|&p| Circle::new(p, 4, RED.filled())))
                .map_err(|e| draw_err(&e))?;
        }
        chart
            .configure_series_labels()
            // A falling loss leaves the upper right empty.
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(|e| draw_err(&e))?;
        root.present().map_err(|e| draw_err(&e))?;
    }
    Ok(pixels)
}

/// Writes the curve as a PNG at `path`, whole or not at all (`rullama_gguf::write_whole`: a
/// temporary file beside it, renamed once complete), so a viewer never reads half an image.
pub fn write(curve: &Curve, path: &Path) -> Result<(), PlotError> {
    let pixels = render(curve)?;
    let mut encoded = Vec::new();
    {
        let encode = |source| PlotError::Encode {
            path: path.to_owned(),
            source,
        };
        let mut encoder = png::Encoder::new(&mut encoded, WIDTH, HEIGHT);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(encode)?;
        writer.write_image_data(&pixels).map_err(encode)?;
        writer.finish().map_err(encode)?;
    }
    rullama_gguf::write_whole(path, |w| w.write_all(&encoded)).map_err(|source| PlotError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The curve of the log beside `out`, written as `OUT.loss.png`.
pub fn write_for(out: &Path, log: &Path) -> Result<PathBuf, PlotError> {
    let curve = Curve::from_log(log)?;
    let path = png_path(out);
    write(&curve, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG's width and height from its signature and IHDR chunk (the first, always).
    fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
        const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
        if bytes.len() < 24 || bytes[..8] != SIGNATURE || &bytes[12..16] != b"IHDR" {
            return None;
        }
        let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
        Some((be(16), be(20)))
    }

    #[test]
    fn writes_a_png_of_the_chart_size_with_both_curves() {
        let dir = tempfile::tempdir().unwrap();
        let curve = Curve {
            train: (1..=30).map(|s| (s, 3.0 / (s as f64).sqrt())).collect(),
            eval: vec![(0, 3.2), (10, 1.1), (20, 0.8), (30, 0.7)],
        };
        let path = dir.path().join("a.gguf.loss.png");
        write(&curve, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(png_size(&bytes), Some((WIDTH, HEIGHT)));

        // Decoded, the image holds the training line's blue and the eval points' red: the
        // series were drawn, not only the frame.
        let mut reader = png::Decoder::new(std::io::Cursor::new(&bytes))
            .read_info()
            .unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut rgb).unwrap();
        let has = |c: [u8; 3]| rgb.chunks_exact(3).filter(|p| *p == c).count();
        assert!(has([0, 0, 255]) > 100, "no training line");
        assert!(has([255, 0, 0]) > 100, "no eval points");
        // Nothing else is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn reads_a_log_keeping_a_redone_steps_last_value_and_leaving_skipped_steps_out() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a.gguf.log.jsonl");
        std::fs::write(
            &log,
            concat!(
                "{\"step\":0,\"eval_loss\":3.0}\n",
                "{\"step\":1,\"epoch\":0,\"loss\":2.5}\n",
                "{\"step\":2,\"epoch\":0,\"loss\":2.0,\"eval_loss\":2.2}\n",
                "{\"step\":2,\"epoch\":0,\"loss\":1.9,\"eval_loss\":2.1}\n",
                "{\"step\":3,\"epoch\":0,\"loss\":9.5,\"skipped\":true}\n",
                "{\"step\":3,\"epo",
            ),
        )
        .unwrap();
        let curve = Curve::from_log(&log).unwrap();
        assert_eq!(curve.train, vec![(1, 2.5), (2, 1.9)]);
        assert_eq!(curve.eval, vec![(0, 3.0), (2, 2.1)]);

        let out = dir.path().join("a.gguf");
        let png = write_for(&out, &log).unwrap();
        assert_eq!(png, dir.path().join("a.gguf.loss.png"));
        assert_eq!(
            png_size(&std::fs::read(&png).unwrap()),
            Some((WIDTH, HEIGHT))
        );
    }

    #[test]
    fn a_curve_with_no_finite_loss_still_draws() {
        let dir = tempfile::tempdir().unwrap();
        let curve = Curve {
            train: vec![(1, f64::NAN)],
            eval: Vec::new(),
        };
        let path = dir.path().join("x.png");
        write(&curve, &path).unwrap();
        assert_eq!(
            png_size(&std::fs::read(&path).unwrap()),
            Some((WIDTH, HEIGHT))
        );
    }
}
