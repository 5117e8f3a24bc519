//! The TCP settings the study compares: Linux's defaults (`base`) with
//! knobs changed, named by the knobs joined with `+`
//! (`frto-off+ts-off+rto-floor`).
//!
//! A setting keeps its knobs in the order they were named, because its
//! name is what the tables, the result folder's pcaps and the journal's
//! keys show: `ts-off+frto-off` stays `ts-off+frto-off`. Two settings are
//! the same knobs whatever their order only where the fix is paired with
//! the setting without it ([`Setting::is_without_fix_of`]).

use serde::{Deserialize, Serialize};

use crate::experiment::kinds::named_enum;
use crate::experiment::Congestion;

named_enum! {
    /// One knob changed from Linux's defaults, at both ends unless said.
    pub enum Knob ("knob", "ssai-off, no-metrics, reno, bbr, rto-floor, frto-off or ts-off") {
        /// `net.ipv4.tcp_slow_start_after_idle = 0`.
        SsaiOff = "ssai-off",
        /// `net.ipv4.tcp_no_metrics_save = 1` (seed 003 §6.2.4).
        NoMetrics = "no-metrics",
        /// Reno at the server (seed 003 §6.2.3).
        Reno = "reno",
        /// BBR at the server.
        Bbr = "bbr",
        /// The fix: a retransmission timeout that covers the radio's
        /// promotion (see `rto`).
        RtoFloor = "rto-floor",
        /// `net.ipv4.tcp_frto = 0`: a sender without F-RTO (RFC 5682).
        FrtoOff = "frto-off",
        /// `net.ipv4.tcp_timestamps = 0`: a peer without TCP timestamps
        /// (Windows' default), so no Eifel detection (RFC 3522).
        TsOff = "ts-off",
    }
}

/// One combination of the knobs: Linux's defaults (Cubic, slow start
/// after idle, the metrics cache, F-RTO, timestamps) with `knobs` changed.
/// Written and read as its name: `base`, or the knobs joined by `+`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Setting {
    knobs: Vec<Knob>,
}

/// Why a name is not a setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// A part of the name is no knob.
    #[error(
        "setting `{setting}`: `{part}` is no knob; give base, one of {}, or knobs joined by + \
         (frto-off+rto-floor)",
        Setting::CHOICES
    )]
    Unknown {
        /// The whole name.
        setting: String,
        /// The part that is no knob.
        part: String,
    },
    /// The name gives a knob twice.
    #[error("setting `{setting}` names {knob} twice")]
    Twice {
        /// The whole name.
        setting: String,
        /// The knob.
        knob: Knob,
    },
    /// The name gives two congestion controls.
    #[error("setting `{0}` names two congestion controls (reno, bbr): give one")]
    TwoControls(String),
}

impl Setting {
    /// The knobs a setting may combine, for messages.
    const CHOICES: &'static str = "ssai-off, no-metrics, reno, bbr, rto-floor, frto-off, ts-off";

    /// Linux's defaults, as on seed 003's phone and server.
    pub fn base() -> Setting {
        Setting::default()
    }

    /// The base with one knob changed.
    pub fn single(knob: Knob) -> Setting {
        Setting { knobs: vec![knob] }
    }

    /// The base and each knob alone: the study's default sweep.
    pub fn singles() -> Vec<Setting> {
        std::iter::once(Setting::base())
            .chain(Knob::ALL.iter().map(|&k| Setting::single(k)))
            .collect()
    }

    /// Whether it is the base.
    pub fn is_base(&self) -> bool {
        self.knobs.is_empty()
    }

    /// Whether `knob` is changed.
    pub fn has(&self, knob: Knob) -> bool {
        self.knobs.contains(&knob)
    }

    /// The server's congestion control.
    pub fn cc(&self) -> Congestion {
        if self.has(Knob::Reno) {
            Congestion::Reno
        } else if self.has(Knob::Bbr) {
            Congestion::Bbr
        } else {
            Congestion::Cubic
        }
    }

    /// `net.ipv4.tcp_slow_start_after_idle` at both ends.
    pub fn slow_start_after_idle(&self) -> bool {
        !self.has(Knob::SsaiOff)
    }

    /// Linux's TCP metrics cache (`net.ipv4.tcp_no_metrics_save = 0`).
    pub fn metrics_save(&self) -> bool {
        !self.has(Knob::NoMetrics)
    }

    /// The retransmission-timeout floor over the radio.
    pub fn rto_floor(&self) -> bool {
        self.has(Knob::RtoFloor)
    }

    /// F-RTO (`net.ipv4.tcp_frto`, on by default) at both ends.
    pub fn frto(&self) -> bool {
        !self.has(Knob::FrtoOff)
    }

    /// TCP timestamps (`net.ipv4.tcp_timestamps`, on by default) at both
    /// ends.
    pub fn timestamps(&self) -> bool {
        !self.has(Knob::TsOff)
    }

    /// Whether `self` is `with` without the fix: the same knobs but the RTO
    /// floor, whatever the order the names give them in (`base` for
    /// `rto-floor`, `ts-off+frto-off` for `frto-off+ts-off+rto-floor`).
    pub fn is_without_fix_of(&self, with: &Setting) -> bool {
        let others = |s: &Setting| {
            let mut k: Vec<Knob> = s
                .knobs
                .iter()
                .copied()
                .filter(|&k| k != Knob::RtoFloor)
                .collect();
            k.sort();
            k
        };
        !self.rto_floor() && with.rto_floor() && others(self) == others(with)
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.knobs.is_empty() {
            return f.write_str("base");
        }
        for (i, k) in self.knobs.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            f.write_str(k.name())?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Setting {
    type Err = SettingError;

    /// `base`, or knobs joined by `+`; refuses an unknown knob, one given
    /// twice, and two controls.
    fn from_str(name: &str) -> Result<Setting, SettingError> {
        if name == "base" {
            return Ok(Setting::base());
        }
        let mut knobs: Vec<Knob> = Vec::new();
        for part in name.split('+') {
            let knob: Knob = part.parse().map_err(|_| SettingError::Unknown {
                setting: name.to_string(),
                part: part.to_string(),
            })?;
            if knobs.contains(&knob) {
                return Err(SettingError::Twice {
                    setting: name.to_string(),
                    knob,
                });
            }
            let control = |k: &Knob| matches!(k, Knob::Reno | Knob::Bbr);
            if control(&knob) && knobs.iter().any(control) {
                return Err(SettingError::TwoControls(name.to_string()));
            }
            knobs.push(knob);
        }
        Ok(Setting { knobs })
    }
}

impl TryFrom<String> for Setting {
    type Error = SettingError;
    fn try_from(s: String) -> Result<Setting, SettingError> {
        s.parse()
    }
}

impl From<Setting> for String {
    fn from(s: Setting) -> String {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(name: &str) -> Setting {
        name.parse().expect(name)
    }

    #[test]
    fn every_setting_changes_one_knob_from_the_base() {
        let base = Setting::base();
        let names: Vec<String> = Setting::singles().iter().map(Setting::to_string).collect();
        assert_eq!(
            names,
            [
                "base",
                "ssai-off",
                "no-metrics",
                "reno",
                "bbr",
                "rto-floor",
                "frto-off",
                "ts-off"
            ]
        );
        for name in &names {
            let k = setting(name);
            let changed = [
                k.cc() != base.cc(),
                k.slow_start_after_idle() != base.slow_start_after_idle(),
                k.metrics_save() != base.metrics_save(),
                k.rto_floor() != base.rto_floor(),
                k.frto() != base.frto(),
                k.timestamps() != base.timestamps(),
            ]
            .iter()
            .filter(|c| **c)
            .count();
            assert_eq!(changed, usize::from(name != "base"), "{name}");
        }
        assert!("cubic-fast".parse::<Setting>().is_err());
    }

    #[test]
    fn knobs_combine_and_the_fix_is_compared_without_itself() {
        let with = setting("frto-off+ts-off+rto-floor");
        assert!(!with.frto() && !with.timestamps() && with.rto_floor());
        assert!(with.slow_start_after_idle());
        assert!(setting("frto-off+ts-off").is_without_fix_of(&with));
        assert!(
            setting("ts-off+frto-off").is_without_fix_of(&with),
            "in any order"
        );
        assert!(!setting("frto-off").is_without_fix_of(&with));
        assert!(!with.is_without_fix_of(&with));
        let reno = setting("ssai-off+rto-floor+reno");
        assert_eq!(
            (reno.cc(), reno.slow_start_after_idle()),
            (Congestion::Reno, false)
        );
        assert!(setting("reno+ssai-off").is_without_fix_of(&reno));
        assert!(!setting("ssai-off").is_without_fix_of(&reno));
        assert!(setting("base").is_without_fix_of(&setting("rto-floor")));
        assert!(!setting("rto-floor").is_without_fix_of(&setting("base")));
        for bad in [
            "reno+bbr",
            "frto-off+frto-off",
            "base+rto-floor",
            "frto-off+",
            "",
        ] {
            assert!(bad.parse::<Setting>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_setting_is_written_and_read_as_its_name_in_its_order() {
        for name in [
            "base",
            "rto-floor",
            "ts-off+frto-off",
            "frto-off+ts-off+rto-floor",
        ] {
            let s = setting(name);
            assert_eq!(s.to_string(), name);
            let json = serde_json::to_string(&s).expect("json");
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Setting>(&json).expect("back"), s);
        }
        assert_ne!(setting("ts-off+frto-off"), setting("frto-off+ts-off"));
        let e = "frto-off+fast".parse::<Setting>().unwrap_err();
        assert!(e.to_string().contains("`fast` is no knob"), "{e}");
        assert!(serde_json::from_str::<Setting>("\"reno+bbr\"").is_err());
    }
}
