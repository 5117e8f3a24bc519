//! A fresh Chromium profile directory (a user data dir), removed when
//! dropped: every load or session starts with an empty cache, no cookies
//! and nothing learned.

use std::path::{Path, PathBuf};

use crate::command::Account;

/// A profile directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("creating a Chromium profile in {}: {error}", path.display())]
pub struct ProfileError {
    /// The directory.
    pub path: PathBuf,
    /// The OS error.
    pub error: std::io::Error,
}

/// A fresh profile directory, removed (with its contents) on drop.
#[derive(Debug)]
pub struct Profile(PathBuf);

impl Profile {
    /// A private profile in the system's temporary folder, for a browser
    /// that loads pages from outside: made anew (never an existing path:
    /// `/tmp` is shared, and a directory planted there must not become the
    /// profile), mode 0700, owned by `owner` when Chromium runs as another
    /// account.
    pub fn private(owner: Option<Account>) -> Result<Profile, ProfileError> {
        use std::os::unix::fs::DirBuilderExt;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "mewa-tracer-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let err = |error| ProfileError {
            path: path.clone(),
            error,
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(err)?;
        let profile = Profile(path.clone());
        if let Some(a) = owner {
            std::os::unix::fs::chown(&path, Some(a.uid), Some(a.gid)).map_err(err)?;
        }
        Ok(profile)
    }

    /// `work/profile-<tag>`, made anew (an old one is removed first): a lab
    /// browser's profile in the run's own working folder.
    pub fn in_dir(work: &Path, tag: &str) -> Result<Profile, ProfileError> {
        let path = work.join(format!("profile-{tag}"));
        let _ = std::fs::remove_dir_all(&path);
        match std::fs::create_dir_all(&path) {
            Ok(()) => Ok(Profile(path)),
            Err(error) => Err(ProfileError { path, error }),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_fresh_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let p = Profile::private(None).expect("private");
        let path = p.path().to_path_buf();
        let mode = std::fs::metadata(&path).expect("made").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(p);
        assert!(!path.exists());
        let work = std::env::temp_dir().join(format!("mewa-profile-{}", std::process::id()));
        std::fs::create_dir_all(work.join("profile-a/old")).expect("old");
        let p = Profile::in_dir(&work, "a").expect("in dir");
        assert!(p.path().is_dir() && !p.path().join("old").exists());
        drop(p);
        assert!(!work.join("profile-a").exists());
        let _ = std::fs::remove_dir_all(&work);
    }
}
