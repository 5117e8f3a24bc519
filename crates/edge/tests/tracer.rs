//! The page tracer with a real browser: headless Chromium loads generated
//! corpus pages from a local origin (`--host-resolver-rules` sends every
//! corpus host there), and the traced page must list exactly the modelled
//! objects with their sizes and types; a script's computation must show as
//! computation latency. Skips (`mewa_testkit::chromium_or_skip`) when
//! Chromium is not installed (`apt-get install chromium`). The missing-binary error needs no browser.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use mewa_corpus::{generate, generate_with, Corpus, Options, Page, Preset};
use mewa_edge::app::{with_store, Edge};
use mewa_edge::config::EdgeConfig;
use mewa_edge::store::Store;
use mewa_edge::tracer::{trace_page, TraceError, TraceOptions};
use mewa_origin::OriginConfig;
use mewa_testkit::{chromium_or_skip, origin_config, skip, LoopbackOrigin, TempDir};

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

/// One Chromium at a time: two would share 2 cores, and the check for left
/// profiles must not see another test's live one.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The origin serving a corpus over cleartext HTTP/1.1 and h2c, with a
/// scratch folder for its CA and the tests' stores.
struct CorpusOrigin {
    origin: LoopbackOrigin,
    addr: SocketAddr,
    dir: TempDir,
}

impl CorpusOrigin {
    fn start(corpus: &Corpus, listen: &str) -> CorpusOrigin {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = TempDir::new(&format!(
            "tracer-test-{}",
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let origin = LoopbackOrigin::start(
            corpus,
            OriginConfig {
                plain: Some(listen.parse().unwrap()),
                ..origin_config(dir.join("ca"))
            },
        );
        CorpusOrigin {
            addr: origin.plain_addr(),
            origin,
            dir,
        }
    }

    async fn stop(self) {
        self.origin.stop().await;
    }
}

/// A corpus named `tracer` of `pages` (the provenance is accel7's).
fn corpus_of(pages: Vec<Page>) -> Corpus {
    Corpus {
        name: "tracer".into(),
        provenance: generate(Preset::Accel7, 1).provenance,
        pages,
    }
}

fn complat_page() -> Page {
    let share = Options {
        share: Some(0.2),
        ..Options::default()
    };
    generate_with(Preset::Complat, 1, &share)
        .unwrap()
        .pages
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_corpus_pages_with_real_chromium() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let complat = complat_page();
    // accel7: 42 images on seven hosts. meh15's 622k page: WebP images and
    // a font from another host. Chromium cut its WebP downloads short when
    // the bytes did not decode, and dropped the font without CORS headers;
    // with decodable bodies and `Access-Control-Allow-Origin` it loads the
    // page whole, which the browser runs of `mewa lab meh` depend on.
    let accel = generate(Preset::Accel7, 1);
    let meh = generate(Preset::Meh15, 1);
    let meh622 = meh
        .pages
        .iter()
        .find(|p| p.name.contains("622k"))
        .unwrap()
        .clone();
    assert!(meh622
        .objects
        .iter()
        .any(|o| o.content_type == "image/webp" && o.size > 10_000));
    let pages: Vec<Page> = vec![complat, accel.pages[0].clone(), meh622];
    let corpus = Corpus {
        name: "tracer".into(),
        provenance: accel.provenance.clone(),
        pages: pages.clone(),
    };
    let _one_browser = BROWSER.lock().await;
    let o = CorpusOrigin::start(&corpus, "127.0.0.1:0");
    let addr = o.addr;
    let opts = TraceOptions {
        extra_args: vec![format!("host-resolver-rules=MAP * {addr}")],
        ..TraceOptions::default()
    };
    let mut store = Store::open(&o.dir.join("edge.sqlite")).unwrap();

    for page in &pages {
        let traced = trace_page(&chromium, &page.main, &opts).await.unwrap();
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
        // The script busy-waits `compute` ms before the load event can fire.
        // How much of that shows as computation depends on what is still in
        // flight meanwhile (on a loaded machine, images the HTML started):
        // measured and printed above, not asserted.
        let t = traced.timing;
        assert!(t.onload_ms >= f64::from(compute), "{}: {t:?}", page.name);
        assert!(
            (t.onload_ms - t.network_busy_ms - f64::from(t.computation_ms)).abs() <= 0.5
                && t.network_busy_ms <= t.onload_ms,
            "{}: {t:?}",
            page.name
        );
        store.put_page(&traced.page, "tracer", 1).unwrap();
        let stored = store.page(&page.main).unwrap().unwrap();
        assert_eq!(stored.source, "tracer");
        // The store keeps what hints need, not the replay facts (status,
        // connection, timings) a trace also records.
        let mut want = traced.page.clone();
        for o in &mut want.objects {
            o.recorded = Default::default();
        }
        assert_eq!(stored.meta, want);
    }
    o.stop().await;
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

/// The edge's periodic pass, run once by hand: the popular page is traced
/// and stored with source `tracer` (Chromium finds the corpus host through
/// the zone, as clients do); a popular URL pointing at the edge itself is
/// refused and counted as an error; without Chromium the pass says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_traces_its_popular_pages() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let chromium = chromium.display().to_string();
    let page = complat_page();
    let corpus = corpus_of(vec![page.clone()]);
    let _one_browser = BROWSER.lock().await;
    // The zone carries no ports, so the origin listens on port 80 of a
    // loopback address of its own.
    let listen = "127.0.0.77:80";
    if let Err(e) = std::net::TcpListener::bind(listen) {
        skip(format!("cannot listen on {listen}: {e}"));
        return;
    }
    let o = CorpusOrigin::start(&corpus, listen);
    let host = page.hosts()[0].to_string();
    let config = |chromium: &str, store: &str| {
        EdgeConfig::parse(
            &format!(
                "[dns]\nlisten = \"127.0.0.1:0\"\nudp_sockets = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
                 [store]\npath = \"{}\"\n[zone]\n\"{host}\" = [\"127.0.0.77\"]\n\
                 [tracer]\nenabled = true\nchromium = \"{chromium}\"\n",
                o.dir.join(store).display()
            ),
            Path::new("edge.toml"),
        )
        .unwrap()
    };
    let (edge, mut bound) = Edge::bind(config(&chromium, "edge.sqlite")).await.unwrap();
    // The browser goes through the egress filter, which lets it reach the
    // zone's origin (a loopback address, allowed as the zone's).
    let filter = tokio::spawn(edge.egress_filter(&mut bound).expect("the tracer is on"));
    let main = page.main.clone();
    let popular = vec![
        (main.clone(), 5),
        ("http://127.0.0.1:8053/metrics".into(), 9),
    ];
    with_store(&edge.store, move |s| {
        s.add_queries(&popular, mewa_edge::app::now_unix_s())
    })
    .await
    .unwrap();
    assert_eq!(edge.trace_popular().await.unwrap(), (1, 1));
    assert_eq!(
        edge.tracer_runs.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        edge.tracer_errors
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let stored = with_store(&edge.store, move |s| s.page(&main))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.source, "tracer");
    assert_eq!(stored.meta.objects.len(), page.objects.len());
    assert!(stored.meta.computation_ms.is_some());
    let (_, policy) = edge.egress.get().expect("filter serving");
    assert!(policy.connected.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    // Through the filter the browser cannot reach a loopback address that
    // is not the zone's, even when asked for it directly.
    let inside = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let inside_url = format!("http://127.0.0.1:{}/", inside.local_addr().unwrap().port());
    let reached = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let r2 = reached.clone();
    tokio::spawn(async move {
        if inside.accept().await.is_ok() {
            r2.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let _ = trace_page(Path::new(&chromium), &inside_url, &edge.trace_options()).await;
    assert!(
        !reached.load(std::sync::atomic::Ordering::Relaxed),
        "the traced browser reached {inside_url}"
    );
    assert!(policy.refused.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    filter.abort();

    let (edge, _bound) = Edge::bind(config("/nonexistent/chromium", "other.sqlite"))
        .await
        .unwrap();
    let popular = vec![(page.main.clone(), 1)];
    with_store(&edge.store, move |s| {
        s.add_queries(&popular, mewa_edge::app::now_unix_s())
    })
    .await
    .unwrap();
    let e = edge.trace_popular().await.unwrap_err();
    assert!(e.to_string().contains("apt-get install chromium"), "{e}");
    o.stop().await;
}

/// A stand-in for Chromium in a folder any user can read: a shell script
/// with `body`, executable by all (as root the tracer runs it as nobody).
fn fake_chromium(dir: &TempDir, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("chromium");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    for p in [dir.path(), path.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

/// The process the tracer starts, seen by a script in Chromium's place:
/// as root it runs as nobody, with its HOME in a private profile it owns;
/// it is never told `--no-sandbox` unless `no_sandbox` is set. A Chromium
/// whose sandbox cannot start makes a trace fail with an error naming
/// `tracer.no_sandbox`. No browser needed.
#[tokio::test]
async fn chromium_starts_unprivileged_and_sandboxed() {
    let _one_browser = BROWSER.lock().await;
    let dir = TempDir::new("tracer-fake");
    // What it was started with, on stderr, which a launch failure reports.
    let fake = fake_chromium(
        &dir,
        "echo \"uid=$(id -u) home=$HOME args=$*\" >&2\n\
         stat -c 'profile=%u:%a' \"$HOME\" >&2\n\
         exit 3",
    );
    let e = trace_page(&fake, "http://www.a.example/", &TraceOptions::default())
        .await
        .unwrap_err();
    let TraceError::Launch { message, .. } = &e else {
        panic!("{e:?}");
    };
    assert!(!message.contains("--no-sandbox"), "{message}");
    assert!(message.contains("--headless"), "{message}");
    if nix::unistd::geteuid().is_root() {
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        let uid = nobody.uid.as_raw();
        assert!(message.contains(&format!("uid={uid} ")), "{message}");
        assert!(message.contains("home=/tmp/mewa-tracer-"), "{message}");
        assert!(message.contains(&format!("profile={uid}:700")), "{message}");
    } else {
        let uid = nix::unistd::geteuid().as_raw();
        assert!(message.contains(&format!("uid={uid} ")), "{message}");
    }
    let off = TraceOptions {
        no_sandbox: true,
        ..TraceOptions::default()
    };
    let e = trace_page(&fake, "http://www.a.example/", &off)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("--no-sandbox"), "{e}");

    let broken = fake_chromium(
        &dir,
        "echo '[1:1:ERROR:dbus/bus.cc(405)] Failed to connect to the bus' >&2\n\
         echo '[1:1:0101/000000.000:FATAL:zygote_host_impl_linux.cc(128)] No usable sandbox! Update your kernel' >&2\n\
         exit 1",
    );
    let e = trace_page(&broken, "http://www.a.example/", &TraceOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, TraceError::Sandbox { .. }), "{e:?}");
    assert!(
        e.to_string().contains("tracer.no_sandbox = true")
            && e.to_string().contains("No usable sandbox"),
        "{e}"
    );
}

/// Run as root, a real trace of a local corpus page: every Chromium
/// process of the trace runs as nobody, at least one of them (a sandboxed
/// renderer) in a user namespace of its own, its profile is nobody's
/// (mode 0700) and is gone afterwards. Skips when not root (Chromium then
/// runs as the tester, which the fake test above covers) or without
/// Chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_as_nobody_inside_chromiums_sandbox() {
    if !nix::unistd::geteuid().is_root() {
        skip("not root, so Chromium runs as the tester");
        return;
    }
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    let page = generate(Preset::Accel7, 1).pages.remove(0);
    let corpus = corpus_of(vec![page.clone()]);
    let _one_browser = BROWSER.lock().await;
    let o = CorpusOrigin::start(&corpus, "127.0.0.1:0");
    let opts = TraceOptions {
        extra_args: vec![format!("host-resolver-rules=MAP * {}", o.addr)],
        ..TraceOptions::default()
    };
    // Watch /proc while the trace runs for this test process's profiles.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || watch_tracer_processes(&stop))
    };
    let traced = trace_page(&chromium, &page.main, &opts).await;
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    o.stop().await;
    let traced = traced.unwrap();
    assert_eq!(traced.page.objects.len(), page.objects.len());
    assert!(!seen.processes.is_empty(), "no Chromium process seen");
    assert!(
        seen.processes.iter().all(|p| p.uid == nobody),
        "not all as nobody ({nobody}): {:?}",
        seen.processes
    );
    assert!(
        seen.processes.iter().any(|p| p.own_user_namespace),
        "no process in a user namespace of its own (no sandbox?): {:?}",
        seen.processes
    );
    assert!(
        !seen.profiles.is_empty() && seen.profiles.iter().all(|&p| p == (nobody, 0o700)),
        "profiles (owner, mode): {:?}",
        seen.profiles
    );
    eprintln!(
        "{}: {} Chromium processes seen, {} in their own user namespace",
        mewa_testkit::current_test(),
        seen.processes.len(),
        seen.processes
            .iter()
            .filter(|p| p.own_user_namespace)
            .count()
    );
    let prefix = format!("mewa-tracer-{}-", std::process::id());
    let left = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with(&prefix));
    assert!(!left, "a profile was left behind");
}

#[derive(Debug, Default)]
struct Seen {
    processes: Vec<SeenProcess>,
    /// The profiles' owners and modes.
    profiles: Vec<(u32, u32)>,
}

#[derive(Debug)]
struct SeenProcess {
    pid: u32,
    uid: u32,
    own_user_namespace: bool,
}

/// Polls /proc every 10 ms until `stop`: the processes whose command line
/// names a profile of this test process, with their real user ID and
/// whether their user namespace is another than ours; and those profiles'
/// owners and modes while Chromium runs in them.
fn watch_tracer_processes(stop: &std::sync::atomic::AtomicBool) -> Seen {
    use std::os::unix::fs::MetadataExt;
    let prefix = format!("mewa-tracer-{}-", std::process::id());
    let ours = std::fs::read_link("/proc/self/ns/user").unwrap();
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if seen.processes.iter().any(|p| p.pid == pid) {
                continue;
            }
            let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            if !String::from_utf8_lossy(&cmdline).contains(&prefix) {
                continue;
            }
            let profile = cmdline
                .split(|&b| b == 0)
                .filter_map(|a| a.strip_prefix(b"--user-data-dir=".as_slice()))
                .map(|p| std::path::PathBuf::from(String::from_utf8_lossy(p).into_owned()))
                .next();
            // The profile as a running Chromium has it (between making it
            // and handing it over, the tracer briefly owns it itself).
            if let Some(Ok(m)) = profile.map(std::fs::metadata) {
                let p = (m.uid(), m.mode() & 0o777);
                if !seen.profiles.contains(&p) {
                    seen.profiles.push(p);
                }
            }
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            let uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse().ok());
            let ns = std::fs::read_link(e.path().join("ns/user"));
            if let (Some(uid), Ok(ns)) = (uid, ns) {
                seen.processes.push(SeenProcess {
                    pid,
                    uid,
                    own_user_namespace: ns != ours,
                });
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    seen
}
