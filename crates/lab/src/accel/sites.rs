//! The accelerator's view of the pages: one site per group of pages
//! sharing a served host (what it folds), each page as the browser sees it
//! through the accelerator (derived from what its rewriters write), and the
//! origins' address groups. Pure.

use std::sync::Arc;

use mewa_accel::mapping::FoldContext;
use mewa_accel::rewrite::css::CssRewriter;
use mewa_accel::rewrite::html::{rewrite_html, HtmlOptions};
use mewa_accel::site::{normalize_host, Site, SiteConfig};
use mewa_corpus::{Corpus, Page};

/// The page's site: its root's host and, when the root redirects
/// elsewhere, its document's host (the accelerator serves both, so the
/// redirect leads back to it), and every other host of the page that is a
/// DNS name the allowlist accepts as what may be folded.
pub(super) fn site_of(page: &Page) -> Option<SiteConfig> {
    let root = normalize_host(&page.root()?.host).ok()?;
    let mut hosts = vec![root];
    if let Some(doc) = page.document().and_then(|d| normalize_host(&d.host).ok()) {
        if !hosts.contains(&doc) {
            hosts.push(doc);
        }
    }
    let mut fold: Vec<String> = page
        .objects
        .iter()
        .filter_map(|o| normalize_host(&o.host).ok())
        .filter(|h| !hosts.contains(h))
        .collect();
    fold.sort();
    fold.dedup();
    Some(SiteConfig {
        hosts,
        fold,
        prefix: String::new(),
    })
}

/// One site per group of pages sharing a served host (pages of one site
/// recorded several times), with the union of what they fold: a host may
/// be served by only one site.
pub(super) fn merge_sites(configs: Vec<SiteConfig>) -> Vec<SiteConfig> {
    let mut out: Vec<SiteConfig> = Vec::new();
    for c in configs {
        match out
            .iter_mut()
            .find(|o| o.hosts.iter().any(|h| c.hosts.contains(h)))
        {
            Some(o) => {
                for h in c.hosts {
                    if !o.hosts.contains(&h) {
                        o.hosts.push(h);
                    }
                }
                o.fold.extend(c.fold);
            }
            None => out.push(c),
        }
    }
    for o in &mut out {
        let hosts = o.hosts.clone();
        o.fold.retain(|h| !hosts.contains(h));
        o.fold.sort();
        o.fold.dedup();
    }
    out
}

/// `page` as the browser sees it through the accelerator, derived from
/// what the accelerator's rewriters write. Each HTML document and
/// stylesheet the accelerator serves (on a site host, 200) is rewritten
/// here as the server would rewrite the origin's body; an object it
/// references moves to the referencing document's host under its folded
/// path ([`mewa_accel::mapping::fold`]) when that path is in the rewritten
/// bytes, and keeps its URL otherwise (frames, `preload as=fetch`, a value
/// the rewriter leaves alone, objects fetched by scripts). Each document
/// and stylesheet gets the size of its rewritten body (the loader checks
/// sizes).
pub fn folded_page(page: &Page, site: &Arc<Site>, scheme: &str) -> Page {
    use mewa_corpus::{Discovery, Kind};
    let mut p = page.clone();
    let body_scheme = if scheme == "http" {
        mewa_corpus::Scheme::Http
    } else {
        mewa_corpus::Scheme::Https
    };
    // What the accelerator sends for each object it rewrites: the URL it
    // is served at and the rewritten bytes.
    let mut rewritten: std::collections::HashMap<u32, (url::Url, Vec<u8>)> =
        std::collections::HashMap::new();
    // Parents before children: ids in a corpus page grow from parent to
    // child, but a few passes make it independent of that.
    for _ in 0..4 {
        let mut changed = false;
        for i in 0..p.objects.len() {
            if rewritten.contains_key(&p.objects[i].id) {
                continue;
            }
            let orig = &page.objects[i];
            if let Some((parent_url, out)) = orig.parent.and_then(|id| rewritten.get(&id)) {
                let by_markup = orig.discovery == Discovery::Html;
                let by_css = orig.discovery == Discovery::Css;
                if (by_markup || by_css) && site.folds(&orig.host) {
                    if let Some(path) =
                        mewa_accel::mapping::fold(site, parent_url, &orig.url(scheme))
                    {
                        // As a whole quoted value (the bodies quote every
                        // URL), with `&` as `&amp;` in HTML attributes.
                        let written = |s: &str| {
                            let q = format!("\"{s}\"");
                            out.windows(q.len()).any(|w| w == q.as_bytes())
                        };
                        if path.starts_with('/')
                            && (written(&path) || written(&path.replace('&', "&amp;")))
                        {
                            let o = &mut p.objects[i];
                            o.host = parent_url.host_str().unwrap_or_default().to_owned();
                            o.path = path;
                        }
                    }
                }
            }
            let o = &p.objects[i];
            let kind = o.kind();
            if !(site.serves(&o.host)
                && o.status() == 200
                && matches!(kind, Kind::Html | Kind::Css))
            {
                continue;
            }
            let (Ok(served), Ok(original), Ok(body)) = (
                url::Url::parse(&o.url(scheme)),
                url::Url::parse(&orig.url(scheme)),
                mewa_corpus::body(page, orig.id, body_scheme),
            ) else {
                continue;
            };
            let out = match kind {
                // A document on a folded path is not rewritten (the
                // server rewrites the site's own documents only).
                Kind::Html if o.host == orig.host => {
                    FoldContext::document(site.clone(), served.clone()).and_then(|ctx| {
                        rewrite_html(ctx, &HtmlOptions::default(), &body)
                            .ok()
                            .map(|(b, _)| b)
                    })
                }
                Kind::Css => {
                    let ctx = if o.host == orig.host {
                        FoldContext::document(site.clone(), served.clone())
                    } else {
                        FoldContext::stylesheet(site.clone(), served.clone(), original)
                    };
                    ctx.map(|ctx| {
                        let mut out = Vec::new();
                        let mut r = CssRewriter::new(ctx);
                        r.write(&body, &mut out);
                        r.end(&mut out);
                        out
                    })
                }
                _ => None,
            };
            if let Some(out) = out {
                let id = o.id;
                p.objects[i].size = out.len() as u64;
                rewritten.insert(id, (served, out));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    p
}

/// The address groups: each host its own server (generated pages), or as
/// the recording coalesced them.
pub(super) fn groups_of(corpus: &Corpus) -> Vec<Vec<String>> {
    match corpus.provenance {
        mewa_corpus::Provenance::Imported { .. } => corpus.connection_groups(),
        mewa_corpus::Provenance::Generated { .. } => {
            let mut hosts: Vec<String> = corpus
                .pages
                .iter()
                .flat_map(|p| p.objects.iter().map(|o| o.host.clone()))
                .collect();
            hosts.sort();
            hosts.dedup();
            hosts.into_iter().map(|h| vec![h]).collect()
        }
    }
}
