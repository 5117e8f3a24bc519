//! The site the accelerator's path and policy fuzz targets share: documents
//! on a.example, folding b.example and cdn.c.example, in both path forms.

use std::sync::OnceLock;

use mewa_accel::site::{Site, SiteConfig};

/// The site in seed 004's form (`[0]`) and with the `/_mewa` prefix (`[1]`).
pub fn sites() -> &'static [Site; 2] {
    static SITES: OnceLock<[Site; 2]> = OnceLock::new();
    SITES.get_or_init(|| {
        let site = |prefix: &str| {
            Site::new(&SiteConfig {
                hosts: vec!["a.example".into()],
                fold: vec!["b.example".into(), "cdn.c.example".into()],
                prefix: prefix.into(),
            })
            .expect("a valid site")
        };
        [site(""), site("/_mewa")]
    })
}
