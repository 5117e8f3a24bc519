//! The latency monitor: edge→origin RTT per origin host, as seed 000's
//! "network measurement service" ("the end-to-end latency from the base
//! station to web server").
//!
//! A probe is one TCP connect: the kernel's SYN → SYN/ACK exchange takes one
//! round trip and needs nothing from the origin's application, so it is
//! what the client's own connection setup to that origin will see from the
//! edge onwards. Samples are smoothed with an EWMA (RFC 6298's SRTT with
//! weight 1/8 by default) and the time of the newest sample is kept, so the
//! hint says how fresh the figure is.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The smoothed RTT after a new sample: `(1 − w)·prev + w·sample`, or the
/// sample itself when there was none. Microseconds.
pub fn ewma(prev_us: Option<u32>, sample_us: u32, weight: f64) -> u32 {
    match prev_us {
        None => sample_us,
        Some(p) => {
            let v = (1.0 - weight) * f64::from(p) + weight * f64::from(sample_us);
            // Between the two inputs, so within u32.
            v.round().clamp(0.0, f64::from(u32::MAX)) as u32
        }
    }
}

/// Why a probe gave no sample.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The host name did not resolve.
    #[error("{host}: no address ({why})")]
    Resolve {
        /// The origin host.
        host: String,
        /// The resolver's message.
        why: String,
    },
    /// The connect failed (refused, unreachable).
    #[error("{addr}: connect failed: {error}")]
    Connect {
        /// The address tried.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// No answer within the timeout.
    #[error("{addr}: no SYN/ACK within {timeout:?}")]
    Timeout {
        /// The address tried.
        addr: SocketAddr,
        /// The limit.
        timeout: Duration,
    },
}

/// Times one TCP connect to `addr`.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<Duration, ProbeError> {
    let t0 = Instant::now();
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_s)) => Ok(t0.elapsed()),
        Ok(Err(error)) => Err(ProbeError::Connect { addr, error }),
        Err(_) => Err(ProbeError::Timeout { addr, timeout }),
    }
}

/// The address to probe for `host`: the first zone address if the edge
/// answers for the host (in the lab, the origin), else the system resolver's
/// first answer.
pub async fn resolve(
    host: &str,
    port: u16,
    zone: &crate::dns::Zone,
) -> Result<SocketAddr, ProbeError> {
    if let Some(ip) = zone.get(host).and_then(|a| a.first()) {
        return Ok(SocketAddr::new(*ip, port));
    }
    let mut addrs =
        tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| ProbeError::Resolve {
                host: host.to_string(),
                why: e.to_string(),
            })?;
    addrs.next().ok_or_else(|| ProbeError::Resolve {
        host: host.to_string(),
        why: "no addresses".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_moves_an_eighth_of_the_way() {
        assert_eq!(ewma(None, 40_000, 0.125), 40_000);
        assert_eq!(ewma(Some(40_000), 48_000, 0.125), 41_000);
        assert_eq!(ewma(Some(40_000), 48_000, 1.0), 48_000);
        assert_eq!(ewma(Some(u32::MAX), u32::MAX, 0.5), u32::MAX);
    }

    #[tokio::test]
    async fn probe_times_a_connect_and_reports_refusal() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let d = probe(addr, Duration::from_secs(2)).await.unwrap();
        assert!(d < Duration::from_secs(1));
        drop(l);
        assert!(matches!(
            probe(addr, Duration::from_secs(2)).await,
            Err(ProbeError::Connect { .. })
        ));
        let zone = crate::dns::Zone::new([("o.example".to_string(), vec![addr.ip()])], 30);
        assert_eq!(resolve("o.example", 443, &zone).await.unwrap().port(), 443);
    }
}
