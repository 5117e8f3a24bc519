//! Visual progress and Speed Index of a page load, from the screenshots
//! Chromium sends during it (`Page.screencastFrame`), computed as
//! Lighthouse's speedline computes them. Nothing here talks to Chromium or
//! reads a clock: the caller hands in the frames and the navigation start.
//!
//! The method (speedline, `core/lib/frame.js` and `speed-index.js`):
//! - each frame becomes three 256-bin histograms (red, green, blue) of its
//!   pixels, near-white pixels left out ([`WHITE_THRESHOLD`]);
//! - a frame's visual progress is how far its histograms have moved from
//!   the start's towards the last frame's ([`progress`]), the start being a
//!   blank (all-white) screen at navigation start, as speedline
//!   synthesises one; progress is floored to a whole percent, as speedline
//!   does, so figures compare with Lighthouse's;
//! - Speed Index is the area above the progress curve: "SI = firstPaint +
//!   sum(fP to VC){1-VC%}" (speedline's comment), i.e.
//!   `∫ (1 − progress(t)) dt` from navigation start to visually complete,
//!   with progress a step function that changes at each frame's time.
//!
//! Where this differs from speedline: frames taken before navigation start
//! are clamped to it (they are what the screen showed then) where
//! speedline drops them; visually complete is the last change of progress
//! (speedline: the first frame at 100 %, which a later dip can follow; the
//! Speed Index is the same either way); all frames are compared exactly,
//! never interpolated as Lighthouse's "fast mode" does.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A pixel whose three channels are all at least this is near-white and
/// left out of histograms. 249 is speedline's threshold: JPEG compression
/// turns a white background into values a few steps below 255, and a page's
/// background is not progress. Keeping speedline's number keeps our
/// figures comparable with Lighthouse's.
pub const WHITE_THRESHOLD: u8 = 249;

/// Largest decoded frame accepted, in bytes of RGB (64 MiB: a 4K frame is
/// 25 MiB). A JPEG header may claim up to 65535 × 65535 pixels; a frame
/// beyond this is refused before its pixels are allocated.
pub const MAX_DECODED_BYTES: usize = 64 << 20;

/// One `Page.screencastFrame` event, as Chromium sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreencastFrame {
    /// The event's `data`: the screenshot, base64 of a JPEG.
    pub data: String,
    /// The event's `metadata.timestamp`: seconds since the epoch (the wall
    /// clock of `performance.timeOrigin`).
    pub timestamp_s: f64,
}

/// A decoded frame: `width × height` pixels, three bytes (R, G, B) each,
/// row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    /// Pixels per row.
    pub width: u16,
    /// Rows.
    pub height: u16,
    /// `width * height * 3` bytes.
    pub pixels: Vec<u8>,
}

/// Why a frame could not be used; `index` is the frame's place in the
/// caller's list.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The frame's `data` is not standard base64 (padded, no whitespace).
    #[error("screencast frame {index}: data is not base64: {source}")]
    Base64 {
        /// The frame.
        index: usize,
        /// What the base64 decoder said.
        #[source]
        source: base64::DecodeError,
    },
    /// The bytes are not a JPEG the decoder can read (truncated, another
    /// format, a JPEG feature it lacks).
    #[error("screencast frame {index}: not a readable JPEG: {source}")]
    Jpeg {
        /// The frame.
        index: usize,
        /// What the JPEG decoder said.
        #[source]
        source: jpeg_decoder::Error,
    },
    /// The JPEG is larger than [`MAX_DECODED_BYTES`] decoded.
    #[error("screencast frame {index}: {width}×{height} pixels is too large for a screenshot")]
    TooLarge {
        /// The frame.
        index: usize,
        /// Width its header claims.
        width: u16,
        /// Height its header claims.
        height: u16,
    },
    /// The JPEG is CMYK, which no browser screenshot is.
    #[error("screencast frame {index}: a CMYK JPEG is not a screenshot")]
    Cmyk {
        /// The frame.
        index: usize,
    },
}

/// Decodes a frame's `data` (base64 of a JPEG) to RGB. Greyscale JPEGs
/// become grey RGB; `index` only names the frame in an error.
pub fn decode_frame(index: usize, base64_jpeg: &str) -> Result<RgbImage, FrameError> {
    let jpeg = base64::engine::general_purpose::STANDARD
        .decode(base64_jpeg)
        .map_err(|source| FrameError::Base64 { index, source })?;
    let mut decoder = jpeg_decoder::Decoder::new(jpeg.as_slice());
    decoder.set_max_decoding_buffer_size(MAX_DECODED_BYTES);
    let jpeg_error = |source| FrameError::Jpeg { index, source };
    decoder.read_info().map_err(jpeg_error)?;
    let info = decoder.info().ok_or(FrameError::Jpeg {
        index,
        source: jpeg_decoder::Error::Format("no frame header".into()),
    })?;
    let (width, height) = (info.width, info.height);
    if usize::from(width) * usize::from(height) * 3 > MAX_DECODED_BYTES {
        return Err(FrameError::TooLarge {
            index,
            width,
            height,
        });
    }
    let raw = decoder.decode().map_err(jpeg_error)?;
    let pixels = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => raw,
        jpeg_decoder::PixelFormat::L8 => raw.iter().flat_map(|&l| [l, l, l]).collect(),
        // Big-endian 16-bit samples: the high byte is the 8-bit value.
        jpeg_decoder::PixelFormat::L16 => raw.chunks_exact(2).flat_map(|l| [l[0]; 3]).collect(),
        jpeg_decoder::PixelFormat::CMYK32 => return Err(FrameError::Cmyk { index }),
    };
    Ok(RgbImage {
        width,
        height,
        pixels,
    })
}

/// A frame's colour histograms: for each channel (0 red, 1 green, 2 blue)
/// and value, how many of its non-near-white pixels have it. The default
/// is a blank (all-white) screen's: all zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [[u32; 256]; 3],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [[0; 256]; 3],
        }
    }
}

impl Histogram {
    /// Pixels with `value` in `channel` (0 red, 1 green, 2 blue; another
    /// channel has none).
    pub fn count(&self, channel: usize, value: u8) -> u32 {
        self.counts
            .get(channel)
            .map_or(0, |c| c[usize::from(value)])
    }

    /// Pixels counted (those not near-white).
    pub fn pixels(&self) -> u64 {
        self.counts[0].iter().map(|&n| u64::from(n)).sum()
    }
}

/// The histogram of RGB pixels (three bytes each; a trailing partial pixel
/// is ignored), leaving out those whose channels are all at least
/// [`WHITE_THRESHOLD`].
pub fn histogram(rgb: &[u8]) -> Histogram {
    let mut h = Histogram::default();
    for px in rgb.chunks_exact(3) {
        if px.iter().all(|&v| v >= WHITE_THRESHOLD) {
            continue;
        }
        for (channel, &v) in px.iter().enumerate() {
            h.counts[channel][usize::from(v)] += 1;
        }
    }
    h
}

/// How far `current` has come from `initial` towards `target`, in 0..=1:
///
/// ```text
///            Σ_c Σ_v min(|cur_c[v] − init_c[v]|, |tgt_c[v] − init_c[v]|)
/// progress = ─────────────────────────────────────────────────────────────
///                        Σ_c Σ_v |tgt_c[v] − init_c[v]|
/// ```
///
/// over the channels `c` and values `v`, and 1 when the denominator is 0
/// (first and last alike). Each bin's change counts as far as it goes in
/// the target's direction, and no further than the target. Summing over
/// channels before dividing is speedline's pooling; from a blank start
/// every channel's total is the target's pixel count, so it is also the
/// plain average of the three channels' ratios.
pub fn progress(current: &Histogram, initial: &Histogram, target: &Histogram) -> f64 {
    let (mut matched, mut total) = (0u64, 0u64);
    for c in 0..3 {
        for v in 0..256 {
            let init = initial.counts[c][v];
            let to_current = u64::from(current.counts[c][v].abs_diff(init));
            let to_target = u64::from(target.counts[c][v].abs_diff(init));
            matched += to_current.min(to_target);
            total += to_target;
        }
    }
    if total == 0 {
        1.0
    } else {
        matched as f64 / total as f64
    }
}

/// A frame reduced to what the metrics need.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameHistogram {
    /// Seconds since the epoch, as [`ScreencastFrame::timestamp_s`].
    pub timestamp_s: f64,
    /// The frame's histogram.
    pub histogram: Histogram,
}

/// A page load's visual metrics, in milliseconds from navigation start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VisualMetrics {
    /// `∫ (1 − progress) dt` from navigation start to visually complete.
    pub speed_index_ms: f64,
    /// First frame with any progress (at least 1 %).
    pub first_visual_change_ms: f64,
    /// Last change of progress: from here on the screen is complete.
    pub visually_complete_ms: f64,
    /// Frames used.
    pub frames: usize,
    /// Frames left out: undecodable, or with a timestamp that is not a
    /// finite number.
    pub skipped: usize,
    /// Whether the last frame shows anything but near-white: a page whose
    /// screen stayed blank has all three times 0, which is no Speed Index
    /// to compare (a replayed page whose bodies draw nothing visible).
    #[serde(default)]
    pub painted: bool,
}

/// The visual metrics of a load's screencast frames, `nav_start_ms` being
/// `performance.timeOrigin` (ms since the epoch). Frames that cannot be
/// decoded, or whose timestamp is not finite, are skipped and counted
/// (each logged at debug level with its error). `None` when
/// `nav_start_ms` is not finite or no frame is usable.
///
/// See [`visual_metrics`] for the rules on time.
pub fn speed_index(frames: &[ScreencastFrame], nav_start_ms: f64) -> Option<VisualMetrics> {
    let mut skipped = 0;
    let mut histograms = Vec::with_capacity(frames.len());
    for (index, frame) in frames.iter().enumerate() {
        if !frame.timestamp_s.is_finite() {
            tracing::debug!(
                index,
                "screencast frame without a finite timestamp, skipped"
            );
            skipped += 1;
            continue;
        }
        match decode_frame(index, &frame.data) {
            Ok(image) => histograms.push(FrameHistogram {
                timestamp_s: frame.timestamp_s,
                histogram: histogram(&image.pixels),
            }),
            Err(e) => {
                tracing::debug!("{e}; skipped");
                skipped += 1;
            }
        }
    }
    let mut metrics = visual_metrics(histograms, nav_start_ms)?;
    metrics.skipped += skipped;
    Some(metrics)
}

/// The visual metrics of frames already reduced to histograms, as
/// [`speed_index`] after decoding.
///
/// Time: a frame is at `timestamp_s × 1000 − nav_start_ms`, clamped to 0
/// (a frame before navigation start is what the screen showed then);
/// frames are sorted by time, ties kept in the given order; a frame whose
/// time is not finite is skipped and counted. The screen is blank at 0,
/// then shows each frame from its time on; the last frame is the target.
///
/// Consequences: one frame, or frames all alike, give Speed Index = first
/// visual change = visually complete = the first frame's time, the content
/// having come at once; frames all blank give 0 for all three (nothing was
/// to be painted, so nothing was waited for — as in speedline) and
/// [`VisualMetrics::painted`] false, which tells a page that never painted
/// from one that painted at once.
pub fn visual_metrics(frames: Vec<FrameHistogram>, nav_start_ms: f64) -> Option<VisualMetrics> {
    if !nav_start_ms.is_finite() {
        return None;
    }
    let total = frames.len();
    let mut timed: Vec<(f64, Histogram)> = frames
        .into_iter()
        .filter_map(|f| {
            let t = f.timestamp_s * 1000.0 - nav_start_ms;
            t.is_finite().then(|| (t.max(0.0), f.histogram))
        })
        .collect();
    let skipped = total - timed.len();
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let target = &timed.last()?.1;
    let painted = target.pixels() > 0;
    let blank = Histogram::default();
    // Whole percent, floored: speedline's `Math.floor(match / total * 100)`.
    let percent = |h: &Histogram| (progress(h, &blank, target) * 100.0).floor();

    let (mut prev_t, mut prev_p) = (0.0, percent(&blank));
    let mut speed_index_ms = 0.0;
    let mut first_visual_change_ms = (prev_p > 0.0).then_some(0.0);
    let mut visually_complete_ms = 0.0;
    for (t, h) in &timed {
        let p = percent(h);
        speed_index_ms += (t - prev_t) * (1.0 - prev_p / 100.0);
        if first_visual_change_ms.is_none() && p > 0.0 {
            first_visual_change_ms = Some(*t);
        }
        if p != prev_p {
            visually_complete_ms = *t;
        }
        (prev_t, prev_p) = (*t, p);
    }
    Some(VisualMetrics {
        speed_index_ms,
        first_visual_change_ms: first_visual_change_ms.unwrap_or(visually_complete_ms),
        visually_complete_ms,
        frames: timed.len(),
        skipped,
        painted,
    })
}

#[cfg(test)]
mod tests;
