//! The typed names of experiment configurations: each choice a
//! configuration offers (a protocol, a browser, a radio, a knob, a
//! congestion control) is an enum, written in `config.json` and given on
//! the command line by the same name, so a misspelt name is refused with
//! the accepted ones before any testbed starts.

use serde::{Deserialize, Serialize};

pub use mewa_loader::record::UnknownName;

/// A fieldless enum whose variants are named on the command line and in
/// `config.json` by the same string: `Display`, `FromStr` (refusing
/// anything else with the accepted names), serde, and `ALL`.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal, $choices:literal) {
            $( $(#[$vmeta:meta])* $var:ident = $s:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
                 serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $s)] $var ),+
        }

        impl $name {
            /// Every choice, in order.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The name it is given by.
            pub fn name(self) -> &'static str {
                match self { $($name::$var => $s),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::experiment::kinds::UnknownName;
            fn from_str(s: &str) -> Result<$name, Self::Err> {
                match s {
                    $($s => Ok($name::$var),)+
                    _ => Err($crate::experiment::kinds::UnknownName {
                        what: $what,
                        got: s.to_string(),
                        choices: $choices,
                    }),
                }
            }
        }
    };
}
pub(crate) use named_enum;

named_enum! {
    /// The browser that loads the pages.
    pub enum Browser ("browser", "loader or chromium") {
        /// The built-in loader (`mewa_loader`): fast, for sweeps.
        Loader = "loader",
        /// Headless Chromium: the headline figures.
        Chromium = "chromium",
    }
}

/// A TCP congestion control, by the kernel's name: the ones mewa knows,
/// or any other the kernel offers (checked against it before a run).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Congestion {
    /// `reno`.
    Reno,
    /// `cubic`: Linux's default before bbr, and what the seeds' servers ran.
    Cubic,
    /// `bbr`.
    Bbr,
    /// `mewa_fld`: seed 002's FLD_TCP as a BPF congestion control.
    Fld,
    /// `mewa_fld_paced`: FLD_TCP paced by the kernel.
    FldPaced,
    /// `mewa_iw`: cubic from a granted initial window (seed 001).
    Iw,
    /// Another control the kernel offers (`vegas`, `htcp`, …).
    Other(String),
}

impl Congestion {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        match self {
            Congestion::Reno => "reno",
            Congestion::Cubic => "cubic",
            Congestion::Bbr => "bbr",
            Congestion::Fld => "mewa_fld",
            Congestion::FldPaced => "mewa_fld_paced",
            Congestion::Iw => "mewa_iw",
            Congestion::Other(s) => s,
        }
    }

    /// Whether it is one of mewa's BPF controls (`mewa cc load` registers
    /// them).
    pub fn is_mewas(&self) -> bool {
        self.name().starts_with("mewa_")
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Congestion {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Congestion, UnknownName> {
        Ok(match s {
            "reno" => Congestion::Reno,
            "cubic" => Congestion::Cubic,
            "bbr" => Congestion::Bbr,
            "mewa_fld" => Congestion::Fld,
            "mewa_fld_paced" => Congestion::FldPaced,
            "mewa_iw" => Congestion::Iw,
            // The kernel's names are short lowercase identifiers.
            other
                if !other.is_empty()
                    && other.len() <= 16
                    && other
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
            {
                Congestion::Other(other.to_string())
            }
            other => {
                return Err(UnknownName {
                    what: "congestion control",
                    got: other.to_string(),
                    choices: "reno, cubic, bbr, mewa_fld, mewa_fld_paced, mewa_iw or another \
                              name from /proc/sys/net/ipv4/tcp_available_congestion_control",
                })
            }
        })
    }
}

impl TryFrom<String> for Congestion {
    type Error = UnknownName;
    fn try_from(s: String) -> Result<Congestion, UnknownName> {
        s.parse()
    }
}

impl From<Congestion> for String {
    fn from(c: Congestion) -> String {
        c.name().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_refused_with_the_choices() {
        for b in Browser::ALL {
            assert_eq!(b.name().parse::<Browser>(), Ok(*b));
            let json = serde_json::to_string(b).expect("json");
            assert_eq!(json, format!("\"{b}\""));
        }
        let e = "firefox".parse::<Browser>().unwrap_err();
        assert!(e.to_string().contains("loader or chromium"), "{e}");
        for name in [
            "reno",
            "cubic",
            "bbr",
            "mewa_fld",
            "mewa_fld_paced",
            "vegas",
        ] {
            let c: Congestion = name.parse().expect(name);
            assert_eq!(c.name(), name);
            let back: Congestion =
                serde_json::from_str(&serde_json::to_string(&c).expect("json")).expect("back");
            assert_eq!(back, c);
        }
        assert_eq!("mewa_fld".parse::<Congestion>(), Ok(Congestion::Fld));
        assert!(Congestion::FldPaced.is_mewas() && !Congestion::Cubic.is_mewas());
        for bad in ["", "Cubic", "cubic; rm -rf", "a-b"] {
            assert!(bad.parse::<Congestion>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Congestion>("\"no such\"").is_err());
    }
}
