//! The page tracer with a real browser: headless Chromium loads generated
//! corpus pages from a local origin (`--host-resolver-rules` sends every
//! corpus host there), and the traced page must list exactly the modelled
//! objects with their sizes and types; a script's computation must show as
//! computation latency. Skips with a message when Chromium is not installed
//! (`apt-get install chromium`). The missing-binary error needs no browser.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mewa_corpus::{generate, generate_with, Corpus, Options, Page, Preset};
use mewa_edge::store::Store;
use mewa_edge::tracer::{trace_page, TraceError, TraceOptions};
use mewa_origin::{HttpOptions, Origin, OriginConfig, TcpOptions};

const CHROMIUM: &str = "/usr/bin/chromium";

#[tokio::test]
async fn a_missing_chromium_says_how_to_get_one() {
    let path = Path::new("/nonexistent/bin/chromium");
    let e = trace_page(path, "http://www.a.example/", &TraceOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, TraceError::NoChromium { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("/nonexistent/bin/chromium")
            && msg.contains("apt-get install chromium")
            && msg.contains("tracer.chromium"),
        "{msg}"
    );
    let e = trace_page(path, "ftp://x/", &TraceOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, TraceError::BadUrl { .. }), "{e:?}");
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_corpus_pages_with_real_chromium() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!(
            "skipping traces_corpus_pages_with_real_chromium: no {CHROMIUM} \
             (apt-get install chromium)"
        );
        return;
    }
    let share = Options {
        share: Some(0.2),
        ..Options::default()
    };
    let complat = generate_with(Preset::Complat, 1, &share)
        .unwrap()
        .pages
        .remove(0);
    // accel7: 42 images on seven hosts. (meh15 pages are not used: their
    // cross-host fonts lack CORS headers and their WebP bodies do not
    // decode, so Chromium fails or cuts those loads short — the tracer
    // records that faithfully, but the sizes are then not the model's.)
    let accel = generate(Preset::Accel7, 1);
    let pages: Vec<Page> = vec![complat, accel.pages[0].clone()];
    let corpus = Corpus {
        name: "tracer".into(),
        provenance: accel.provenance.clone(),
        pages: pages.clone(),
    };
    let dir = Dir(std::env::temp_dir().join(format!("mewa-tracer-test-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let origin = Origin::bind(
        &corpus,
        OriginConfig {
            plain: Some("127.0.0.1:0".parse().unwrap()),
            tls: None,
            h3: None,
            ca_dir: dir.0.join("ca"),
            http: HttpOptions::default(),
            tcp: TcpOptions::default(),
            quic_congestion: None,
        },
    )
    .unwrap();
    let addr = origin.plain_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(origin.serve(async {
        let _ = rx.await;
    }));
    let opts = TraceOptions {
        extra_args: vec![format!("host-resolver-rules=MAP * {addr}")],
        ..TraceOptions::default()
    };
    let mut store = Store::open(&dir.0.join("edge.sqlite")).unwrap();

    for page in &pages {
        let traced = trace_page(Path::new(CHROMIUM), &page.main, &opts)
            .await
            .unwrap();
        eprintln!(
            "{}: {} objects, {} bytes, onload {:.0} ms, network busy {:.0} ms, \
             computation {} ms (scripts compute {} ms), traced in {:.2} s; notes: {:?}",
            page.name,
            traced.page.objects.len(),
            traced.page.total_bytes(),
            traced.timing.onload_ms,
            traced.timing.network_busy_ms,
            traced.timing.computation_ms,
            page.objects.iter().map(|o| o.compute_ms).sum::<u32>(),
            traced.elapsed.as_secs_f64(),
            traced.notes,
        );
        let got: BTreeMap<&str, (Option<u64>, Option<&str>)> = traced
            .page
            .objects
            .iter()
            .map(|o| (o.url.as_str(), (o.size, o.content_type.as_deref())))
            .collect();
        let urls: Vec<String> = page.objects.iter().map(|o| o.url("http")).collect();
        let want: BTreeMap<&str, (Option<u64>, Option<&str>)> = page
            .objects
            .iter()
            .zip(&urls)
            .map(|(o, u)| (u.as_str(), (Some(o.size), Some(o.content_type.as_str()))))
            .collect();
        assert_eq!(got, want, "page {}", page.name);
        assert_eq!(
            traced.page.objects.len(),
            page.objects.len(),
            "no duplicates"
        );
        assert_eq!(traced.page.url, page.main);
        let compute: u32 = page.objects.iter().map(|o| o.compute_ms).sum();
        assert_eq!(
            traced.page.computation_ms,
            Some(traced.timing.computation_ms)
        );
        // The script busy-waits `compute` ms with nothing left to fetch but
        // what it will request: that much of the load has the network idle.
        assert!(
            traced.timing.computation_ms >= compute * 9 / 10,
            "{}: computation {} ms < scripts' {compute} ms",
            page.name,
            traced.timing.computation_ms
        );
        store.put_page(&traced.page, "tracer", 1).unwrap();
        let stored = store.page(&page.main).unwrap().unwrap();
        assert_eq!(stored.source, "tracer");
        assert_eq!(stored.meta, traced.page);
    }
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    // The profile directories are gone.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("mewa-tracer-{}-", std::process::id()))
        })
        .collect();
    assert!(left.is_empty(), "profiles left behind: {left:?}");
}
