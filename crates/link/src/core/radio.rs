//! RRC radio state machines (seed 003 appendix A): a phone's radio sleeps when
//! idle, and the first packet after a quiet period waits for it to wake.
//!
//! LTE: "If the device is in RRC IDLE and sends or receives a packet
//! (regardless of size), a state promotion from RRC IDLE to RRC CONNECTED
//! occurs in about 400 msec … If there is a period of inactivity (e.g., for 100
//! msec), the device enters the short Discontinuous Reception (Short DRX) state
//! … If not, the device enters the long Discontinuous Reception (Long DRX)
//! state … If data does arrive within ∼11.5 seconds, the radio returns to the
//! Continuous Reception state; otherwise it switches to … RRC IDLE."
//! In DRX the receiver wakes once per cycle, so a packet waits for the next
//! wake-up: up to one short cycle (20 ms) or one long cycle (40 ms) (cycle
//! lengths from Huang et al., MobiSys 2012; configurable).
//!
//! 3G: "The delay for this promotion [IDLE → CELL_DCH] is typically ∼2
//! seconds … In the CELL FACH, the device … can transmit at a low rate … if a
//! device is inactive for ∼5 seconds, it is demoted from CELL DCH to CELL FACH.
//! It is further demoted to IDLE if there is no data exchange for another ∼12
//! secs." In FACH a backlog above a threshold promotes to DCH (Qian et al.,
//! MobiSys 2011: RLC buffer threshold ≈ 500 bytes, promotion ≈ 1.5 s).
//!
//! The state is evaluated lazily from the time of the last activity (any
//! packet arriving or leaving in either direction), so the machine needs no
//! timers of its own.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// LTE RRC timers and delays.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LteParams {
    /// RRC_IDLE → RRC_CONNECTED promotion delay.
    pub promotion: Duration,
    /// Inactivity before Continuous Reception drops to Short DRX.
    pub continuous_timeout: Duration,
    /// Time spent in Short DRX before Long DRX.
    pub short_drx_duration: Duration,
    /// Short DRX cycle: the longest wake-up wait in Short DRX.
    pub short_drx_cycle: Duration,
    /// Long DRX cycle: the longest wake-up wait in Long DRX.
    pub long_drx_cycle: Duration,
    /// Inactivity after which the radio is back in RRC_IDLE (tail timer).
    pub idle_timeout: Duration,
}

impl Default for LteParams {
    fn default() -> Self {
        LteParams {
            promotion: Duration::from_millis(400),
            continuous_timeout: Duration::from_millis(100),
            short_drx_duration: Duration::from_millis(400),
            short_drx_cycle: Duration::from_millis(20),
            long_drx_cycle: Duration::from_millis(40),
            idle_timeout: Duration::from_millis(11_500),
        }
    }
}

/// 3G (UMTS) RRC timers, delays and the FACH channel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UmtsParams {
    /// IDLE → CELL_DCH promotion delay.
    pub promotion: Duration,
    /// Inactivity before CELL_DCH demotes to CELL_FACH.
    pub dch_timeout: Duration,
    /// Further inactivity before CELL_FACH demotes to IDLE.
    pub fach_timeout: Duration,
    /// Rate of the shared FACH channel, bit/s.
    pub fach_bps: u64,
    /// Queued bytes in one direction that trigger FACH → DCH promotion.
    pub fach_threshold_bytes: usize,
    /// CELL_FACH → CELL_DCH promotion delay.
    pub fach_promotion: Duration,
}

impl Default for UmtsParams {
    fn default() -> Self {
        UmtsParams {
            promotion: Duration::from_secs(2),
            dch_timeout: Duration::from_secs(5),
            fach_timeout: Duration::from_secs(12),
            fach_bps: 32_000,
            fach_threshold_bytes: 500,
            fach_promotion: Duration::from_millis(1500),
        }
    }
}

/// Which radio model a link uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RadioConfig {
    /// Always connected (a wired link, or radio effects not wanted).
    #[default]
    Off,
    /// LTE RRC.
    Lte(LteParams),
    /// 3G UMTS RRC.
    Umts(UmtsParams),
}

impl RadioConfig {
    /// Preset by name: `off`, `lte`, `3g`.
    pub fn preset(name: &str) -> Option<RadioConfig> {
        match name {
            "off" | "none" => Some(RadioConfig::Off),
            "lte" => Some(RadioConfig::Lte(LteParams::default())),
            "3g" | "umts" => Some(RadioConfig::Umts(UmtsParams::default())),
            _ => None,
        }
    }
}

/// The radio's state at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RadioState {
    /// No radio model: always able to send.
    Always,
    /// Waking up; packets wait until the promotion ends.
    Promoting,
    /// LTE RRC_IDLE.
    LteIdle,
    /// LTE Continuous Reception.
    LteContinuous,
    /// LTE Short DRX.
    LteShortDrx,
    /// LTE Long DRX.
    LteLongDrx,
    /// 3G IDLE.
    UmtsIdle,
    /// 3G CELL_FACH (low-rate shared channel).
    UmtsFach,
    /// 3G CELL_DCH (dedicated channel, full rate).
    UmtsDch,
}

/// The radio of one link, shared by both directions.
#[derive(Debug, Clone)]
pub struct Radio {
    cfg: RadioConfig,
    /// Last packet activity (either direction); `None`: never active (idle).
    last_activity: Option<Duration>,
    /// The radio cannot carry data before this time (promotion, DRX wake-up).
    ready_at: Duration,
    /// 3G: the dedicated channel was held at the last activity (else FACH).
    on_dch: bool,
    /// 3G: a FACH → DCH promotion completes at this time.
    dch_at: Option<Duration>,
    /// Promotions so far.
    promotions: u64,
}

impl Radio {
    /// A radio that starts idle (a phone that has not sent anything yet).
    pub fn new(cfg: RadioConfig) -> Self {
        Radio {
            cfg,
            last_activity: None,
            ready_at: Duration::ZERO,
            on_dch: false,
            dch_at: None,
            promotions: 0,
        }
    }

    /// Puts the radio back to sleep at once, as if the phone had been quiet
    /// longer than every tail timer (a user between two pages): the next
    /// packet pays the full promotion. Counters are kept.
    pub fn go_idle(&mut self) {
        self.last_activity = None;
        self.ready_at = Duration::ZERO;
        self.on_dch = false;
        self.dch_at = None;
    }

    /// Promotions from idle (LTE, 3G) or FACH (3G) so far.
    pub fn promotions(&self) -> u64 {
        self.promotions
    }

    /// Earliest time the radio can carry data.
    pub fn ready_at(&self) -> Duration {
        self.ready_at
    }

    /// Applies a FACH → DCH promotion that has completed by `now`.
    fn settle(&mut self, now: Duration) {
        if let Some(t) = self.dch_at {
            if now >= t {
                self.dch_at = None;
                self.on_dch = true;
                self.last_activity = Some(self.last_activity.map_or(t, |l| l.max(t)));
            }
        }
    }

    /// The state at `now` (after any pending transitions).
    pub fn state(&mut self, now: Duration) -> RadioState {
        self.settle(now);
        if matches!(self.cfg, RadioConfig::Off) {
            return RadioState::Always;
        }
        if now < self.ready_at {
            return RadioState::Promoting;
        }
        match (self.cfg, self.last_activity) {
            (RadioConfig::Lte(_), None) => RadioState::LteIdle,
            (RadioConfig::Umts(_), None) => RadioState::UmtsIdle,
            (RadioConfig::Lte(p), Some(last)) => {
                let gap = now.saturating_sub(last);
                if gap < p.continuous_timeout {
                    RadioState::LteContinuous
                } else if gap < p.continuous_timeout + p.short_drx_duration {
                    RadioState::LteShortDrx
                } else if gap < p.idle_timeout {
                    RadioState::LteLongDrx
                } else {
                    RadioState::LteIdle
                }
            }
            (RadioConfig::Umts(p), Some(last)) => {
                let gap = now.saturating_sub(last);
                if self.on_dch && gap < p.dch_timeout {
                    RadioState::UmtsDch
                } else if gap
                    < if self.on_dch {
                        p.dch_timeout
                    } else {
                        Duration::ZERO
                    } + p.fach_timeout
                {
                    RadioState::UmtsFach
                } else {
                    RadioState::UmtsIdle
                }
            }
            (RadioConfig::Off, _) => RadioState::Always,
        }
    }

    /// A packet arrives at `now` in either direction, with `backlog` bytes
    /// queued in its direction (counting itself). Wakes the radio as needed and
    /// returns the time from which the packet can be carried.
    pub fn on_arrival(&mut self, now: Duration, backlog: usize) -> Duration {
        let state = self.state(now);
        let wait = match (self.cfg, state) {
            (RadioConfig::Lte(p), RadioState::LteIdle) => {
                self.promotions += 1;
                p.promotion
            }
            (RadioConfig::Lte(p), RadioState::LteShortDrx) => {
                let drx_start = self.last_activity.unwrap_or(now) + p.continuous_timeout;
                until_next_cycle(now, drx_start, p.short_drx_cycle)
            }
            (RadioConfig::Lte(p), RadioState::LteLongDrx) => {
                let drx_start =
                    self.last_activity.unwrap_or(now) + p.continuous_timeout + p.short_drx_duration;
                until_next_cycle(now, drx_start, p.long_drx_cycle)
            }
            (RadioConfig::Umts(p), RadioState::UmtsIdle) => {
                self.promotions += 1;
                self.on_dch = true;
                self.dch_at = None;
                p.promotion
            }
            (RadioConfig::Umts(p), RadioState::UmtsFach) => {
                self.on_dch = false;
                if backlog > p.fach_threshold_bytes && self.dch_at.is_none() {
                    self.promotions += 1;
                    self.dch_at = Some(now + p.fach_promotion);
                }
                Duration::ZERO
            }
            _ => Duration::ZERO,
        };
        let ready = now + wait;
        self.ready_at = self.ready_at.max(ready);
        self.touch(self.ready_at.max(now));
        self.ready_at.max(now)
    }

    /// Data moved at `t` (a departure): the radio stays awake.
    pub fn touch(&mut self, t: Duration) {
        self.last_activity = Some(self.last_activity.map_or(t, |l| l.max(t)));
    }

    /// The rate the radio imposes at `now` instead of the link's own, if any
    /// (the 3G FACH channel).
    pub fn rate_cap(&mut self, now: Duration) -> Option<u64> {
        match (self.cfg, self.state(now)) {
            (RadioConfig::Umts(p), RadioState::UmtsFach) => Some(p.fach_bps),
            _ => None,
        }
    }
}

/// Time from `now` to the next DRX wake-up of a cycle that started at `start`.
fn until_next_cycle(now: Duration, start: Duration, cycle: Duration) -> Duration {
    let cycle_ns = cycle.as_nanos().max(1);
    let phase = now.saturating_sub(start).as_nanos() % cycle_ns;
    if phase == 0 {
        Duration::ZERO
    } else {
        // phase < cycle_ns, which fits u64 for any sane cycle.
        Duration::from_nanos((cycle_ns - phase) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn off_is_always_ready() {
        let mut r = Radio::new(RadioConfig::Off);
        assert_eq!(r.on_arrival(ms(5), 100), ms(5));
        assert_eq!(r.state(ms(100_000)), RadioState::Always);
        assert_eq!(r.promotions(), 0);
    }

    #[test]
    fn lte_promotion_then_no_wait() {
        let mut r = Radio::new(RadioConfig::preset("lte").unwrap());
        assert_eq!(r.state(ms(0)), RadioState::LteIdle);
        // First packet pays the 400 ms promotion.
        assert_eq!(r.on_arrival(ms(1000), 100), ms(1400));
        assert_eq!(r.state(ms(1200)), RadioState::Promoting);
        // A second packet during the promotion waits for the same end.
        assert_eq!(r.on_arrival(ms(1300), 100), ms(1400));
        assert_eq!(r.state(ms(1450)), RadioState::LteContinuous);
        assert_eq!(r.on_arrival(ms(1450), 100), ms(1450));
        assert_eq!(r.promotions(), 1);
    }

    #[test]
    fn go_idle_makes_the_next_packet_pay_the_promotion() {
        for (name, promotion) in [("lte", 400), ("3g", 2000)] {
            let mut r = Radio::new(RadioConfig::preset(name).unwrap());
            r.on_arrival(ms(0), 100);
            let awake = ms(promotion + 10);
            assert_eq!(r.on_arrival(awake, 100), awake, "{name}: awake, no wait");
            // A moment later, as if the phone had been quiet for minutes.
            r.go_idle();
            let next = awake + ms(20);
            assert_eq!(r.on_arrival(next, 100), next + ms(promotion), "{name}");
            assert_eq!(r.promotions(), 2, "{name}");
        }
    }

    #[test]
    fn lte_state_walk() {
        let mut r = Radio::new(RadioConfig::preset("lte").unwrap());
        r.on_arrival(ms(0), 1); // ready at 400
        assert_eq!(r.state(ms(450)), RadioState::LteContinuous);
        assert_eq!(r.state(ms(500)), RadioState::LteShortDrx); // 100 ms quiet
        assert_eq!(r.state(ms(899)), RadioState::LteShortDrx);
        assert_eq!(r.state(ms(900)), RadioState::LteLongDrx); // + 400 ms short DRX
        assert_eq!(r.state(ms(11_899)), RadioState::LteLongDrx);
        assert_eq!(r.state(ms(11_900)), RadioState::LteIdle); // 11.5 s after 400
    }

    #[test]
    fn lte_drx_wakeups() {
        let mut r = Radio::new(RadioConfig::preset("lte").unwrap());
        r.on_arrival(ms(0), 1); // active until 400; short DRX from 500, long from 900
                                // Short DRX: cycles at 500, 520, 540 …; at 507 wait 13 ms.
        assert_eq!(r.on_arrival(ms(507), 1), ms(520));
        // Back in continuous reception (activity at 520); quiet again: short
        // DRX from 620, long DRX from 1020 with 40 ms cycles: 1020, 1060, …
        assert_eq!(r.on_arrival(ms(1030), 1), ms(1060));
        // 15 s later: idle, a full promotion again.
        assert_eq!(r.on_arrival(ms(16_060), 1), ms(16_460));
        assert_eq!(r.promotions(), 2);
    }

    #[test]
    fn umts_states_and_fach() {
        let p = UmtsParams::default();
        let mut r = Radio::new(RadioConfig::Umts(p));
        assert_eq!(r.on_arrival(ms(0), 100), ms(2000)); // IDLE → DCH 2 s
        assert_eq!(r.state(ms(2500)), RadioState::UmtsDch);
        assert_eq!(r.rate_cap(ms(2500)), None);
        assert_eq!(r.state(ms(7000)), RadioState::UmtsFach); // 5 s quiet
        assert_eq!(r.rate_cap(ms(7000)), Some(32_000));
        assert_eq!(r.state(ms(18_999)), RadioState::UmtsFach);
        assert_eq!(r.state(ms(19_000)), RadioState::UmtsIdle); // + 12 s
                                                               // Small packet in FACH: no promotion, carried at once on FACH.
        let mut r = Radio::new(RadioConfig::Umts(p));
        r.on_arrival(ms(0), 100);
        assert_eq!(r.on_arrival(ms(8000), 100), ms(8000));
        assert_eq!(r.state(ms(8001)), RadioState::UmtsFach);
        // A backlog over the threshold promotes to DCH after 1.5 s.
        assert_eq!(r.on_arrival(ms(9000), 2000), ms(9000));
        assert_eq!(r.state(ms(10_400)), RadioState::UmtsFach);
        assert_eq!(r.state(ms(10_500)), RadioState::UmtsDch);
        assert_eq!(r.promotions(), 2);
    }
}
