//! Tests of visual progress and Speed Index: synthetic RGB frames with
//! hand-worked figures, and one real JPEG (`tests/fixtures`).

use super::*;

const NAV_MS: f64 = 1_700_000_000_000.0;
const RED: [u8; 3] = [255, 0, 0];
const BLUE: [u8; 3] = [0, 0, 255];
const WHITE: [u8; 3] = [255, 255, 255];
const FIXTURE: &[u8] = include_bytes!("../../tests/fixtures/half-red-32x16.jpg");

/// RGB bytes of `n` pixels of each colour given, in turn.
fn pixels(parts: &[(usize, [u8; 3])]) -> Vec<u8> {
    parts.iter().flat_map(|&(n, px)| px.repeat(n)).collect()
}

/// A frame `ms` after navigation start showing these pixels.
fn at(ms: f64, parts: &[(usize, [u8; 3])]) -> FrameHistogram {
    FrameHistogram {
        timestamp_s: (NAV_MS + ms) / 1000.0,
        histogram: histogram(&pixels(parts)),
    }
}

fn assert_ms(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-3, "got {got} ms, want {want} ms");
}

#[test]
fn histogram_counts_each_channel_and_leaves_out_near_white() {
    let rgb = pixels(&[
        (2, [10, 20, 30]),
        (1, [249, 249, 249]),
        (1, WHITE),
        (1, [248, 255, 255]),
    ]);
    let h = histogram(&[rgb.as_slice(), &[7, 7]].concat());
    assert_eq!(h.pixels(), 3);
    assert_eq!((h.count(0, 10), h.count(1, 20), h.count(2, 30)), (2, 2, 2));
    assert_eq!(
        (h.count(0, 248), h.count(1, 255), h.count(2, 255)),
        (1, 1, 1)
    );
    assert_eq!(h.count(0, 249), 0);
    assert_eq!(h.count(3, 10), 0);
    assert_eq!(histogram(&pixels(&[(9, WHITE)])), Histogram::default());
}

#[test]
fn progress_is_matched_over_total_distance() {
    let blank = Histogram::default();
    let target = histogram(&pixels(&[(4, RED)]));
    let half = histogram(&pixels(&[(2, RED)]));
    assert_eq!(progress(&half, &blank, &target), 0.5);
    // Beyond the target counts as the target, no more.
    let over = histogram(&pixels(&[(8, RED)]));
    assert_eq!(progress(&over, &blank, &target), 1.0);
    // Blue moves red's 0 bin (not the target's way) and blue's 255 bin
    // (which the target leaves alone): (2 + 0 + 4 + 2 + 0) / 12.
    let wrong = histogram(&pixels(&[(2, RED), (2, BLUE)]));
    assert_eq!(progress(&wrong, &blank, &target), 8.0 / 12.0);
    assert_eq!(progress(&blank, &blank, &target), 0.0);
}

#[test]
fn progress_is_one_when_first_and_last_are_alike() {
    let h = histogram(&pixels(&[(3, BLUE)]));
    let other = histogram(&pixels(&[(3, RED)]));
    assert_eq!(progress(&other, &h, &h), 1.0);
    assert_eq!(progress(&h, &h, &h), 1.0);
}

#[test]
fn progress_from_a_frame_with_content() {
    // 4 blue pixels turn red one by one: each bin moves by 4.
    let initial = histogram(&pixels(&[(4, BLUE)]));
    let target = histogram(&pixels(&[(4, RED)]));
    let one = histogram(&pixels(&[(1, RED), (3, BLUE)]));
    assert_eq!(progress(&one, &initial, &target), 0.25);
}

#[test]
fn speed_index_of_half_then_complete() {
    // Blank until 1000 ms, half until 2000 ms: 1000·1 + 1000·0.5.
    let frames = vec![
        at(0.0, &[(4, WHITE)]),
        at(1000.0, &[(2, RED), (2, WHITE)]),
        at(2000.0, &[(4, RED)]),
    ];
    let m = visual_metrics(frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 1500.0);
    assert_ms(m.first_visual_change_ms, 1000.0);
    assert_ms(m.visually_complete_ms, 2000.0);
    assert_eq!((m.frames, m.skipped), (3, 0));
}

#[test]
fn progress_is_floored_to_whole_percent() {
    // A third is 33 %: 1000 + 1000 · 0.67.
    let frames = vec![at(1000.0, &[(1, RED)]), at(2000.0, &[(3, RED)])];
    let m = visual_metrics(frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 1670.0);
}

#[test]
fn frames_are_sorted_and_early_ones_clamped() {
    let frames = vec![
        at(2000.0, &[(4, RED)]),
        at(1000.0, &[(2, RED)]),
        at(-300.0, &[(1, WHITE)]),
    ];
    let m = visual_metrics(frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 1500.0);
    // Content before navigation start shows from 0 on.
    let m = visual_metrics(vec![at(-5.0, &[(2, RED)]), at(800.0, &[(4, RED)])], NAV_MS)
        .expect("metrics");
    assert_ms(m.first_visual_change_ms, 0.0);
    assert_ms(m.speed_index_ms, 400.0);
}

#[test]
fn visually_complete_is_the_last_change() {
    // Complete at 1000, back to half at 1500, complete again at 2000.
    let frames = vec![
        at(1000.0, &[(4, RED)]),
        at(1500.0, &[(2, RED)]),
        at(2000.0, &[(4, RED)]),
    ];
    let m = visual_metrics(frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 1000.0 + 500.0 * 0.5);
    assert_ms(m.first_visual_change_ms, 1000.0);
    assert_ms(m.visually_complete_ms, 2000.0);
}

#[test]
fn one_frame_or_alike_frames_complete_at_the_first() {
    let m = visual_metrics(vec![at(700.0, &[(2, BLUE)])], NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 700.0);
    assert_ms(m.visually_complete_ms, 700.0);
    let alike = vec![at(300.0, &[(2, BLUE)]), at(900.0, &[(2, BLUE)])];
    let m = visual_metrics(alike, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 300.0);
    assert_ms(m.first_visual_change_ms, 300.0);
    assert_ms(m.visually_complete_ms, 300.0);
    let blank = vec![at(300.0, &[(2, WHITE)]), at(900.0, &[(2, WHITE)])];
    let m = visual_metrics(blank, NAV_MS).expect("metrics");
    assert_eq!(
        (
            m.speed_index_ms,
            m.first_visual_change_ms,
            m.visually_complete_ms
        ),
        (0.0, 0.0, 0.0)
    );
    assert!(!m.painted, "a blank screen painted nothing");
    let m = visual_metrics(vec![at(700.0, &[(2, BLUE)])], NAV_MS).expect("metrics");
    assert!(m.painted);
}

#[test]
fn timestamps_that_are_not_numbers_are_skipped() {
    let mut nan = at(0.0, &[(4, BLUE)]);
    nan.timestamp_s = f64::NAN;
    let frames = vec![nan.clone(), at(1000.0, &[(4, RED)])];
    let m = visual_metrics(frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 1000.0);
    assert_eq!((m.frames, m.skipped), (1, 1));
    assert_eq!(visual_metrics(vec![nan], NAV_MS), None);
    assert_eq!(visual_metrics(vec![at(0.0, &[(1, RED)])], f64::NAN), None);
    assert_eq!(visual_metrics(Vec::new(), NAV_MS), None);
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn decodes_a_real_jpeg() {
    let image = decode_frame(0, &b64(FIXTURE)).expect("fixture decodes");
    assert_eq!(
        (image.width, image.height, image.pixels.len()),
        (32, 16, 32 * 16 * 3)
    );
    let red = &image.pixels[..3];
    assert!(red[0] > 240 && red[1] < 15 && red[2] < 15, "{red:?}");
    // The white half is left out; 4:2:0 chroma smears one column.
    let h = histogram(&image.pixels);
    assert!((16 * 16..=18 * 16).contains(&h.pixels()), "{}", h.pixels());
    let strong_red: u32 = (240..=255).map(|v| h.count(0, v)).sum();
    assert!(strong_red >= 15 * 16, "{strong_red}");
}

#[test]
fn malformed_frames_are_errors() {
    let err = decode_frame(3, "not base64!").expect_err("bad base64");
    assert!(matches!(err, FrameError::Base64 { index: 3, .. }), "{err}");
    assert!(err.to_string().contains("frame 3"), "{err}");
    let err = decode_frame(1, &b64(b"GIF89a, not a JPEG")).expect_err("not a JPEG");
    assert!(matches!(err, FrameError::Jpeg { index: 1, .. }), "{err}");
    let truncated = decode_frame(0, &b64(&FIXTURE[..FIXTURE.len() / 2]));
    assert!(
        matches!(truncated, Err(FrameError::Jpeg { .. })),
        "{truncated:?}"
    );
    assert!(matches!(decode_frame(0, ""), Err(FrameError::Jpeg { .. })));
    // A header claiming 60000 × 60000 pixels is refused before decoding.
    let mut huge = FIXTURE.to_vec();
    let sof = huge
        .windows(2)
        .position(|w| w[0] == 0xFF && (w[1] & 0xF0) == 0xC0 && w[1] != 0xC4);
    let sof = sof.expect("frame header");
    huge[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    let err = decode_frame(2, &b64(&huge)).expect_err("too large");
    assert!(
        matches!(
            err,
            FrameError::TooLarge {
                index: 2,
                width: 60000,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn speed_index_skips_and_counts_bad_frames() {
    let frame = |data: String, ms: f64| ScreencastFrame {
        data,
        timestamp_s: (NAV_MS + ms) / 1000.0,
    };
    let frames = vec![
        frame("%%%".into(), 100.0),
        frame(b64(FIXTURE), 400.0),
        frame(b64(FIXTURE), f64::INFINITY),
    ];
    let m = speed_index(&frames, NAV_MS).expect("metrics");
    assert_ms(m.speed_index_ms, 400.0);
    assert_eq!((m.frames, m.skipped), (1, 2));
    assert_eq!(speed_index(&frames[..1], NAV_MS), None);
    let json = serde_json::to_string(&m).expect("serialize");
    let back: VisualMetrics = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, m);
}
