//! The ports a launcher may bind: EG's `{port_range}` (`LOWER..UPPER`, or
//! `0..0` for any), tried at random within the range as EG's own launcher
//! does, so kernels started together rarely collide.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::TcpListener;

use super::LauncherError;

/// Tries at a random port before giving up.
const TRIES: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortRange {
    lower: u16,
    upper: u16,
}

impl PortRange {
    fn any(&self) -> bool {
        self.lower == 0 && self.upper == 0
    }

    /// A listener on every address of the host at a free port of the
    /// range (the gateway connects to the host's address it chose).
    pub async fn bind(&self) -> Result<TcpListener, LauncherError> {
        let bind = |port: u16| TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
        if self.any() {
            return bind(0).await.map_err(|source| LauncherError::Bind {
                range: *self,
                source,
            });
        }
        for _ in 0..TRIES {
            let span = u32::from(self.upper - self.lower) + 1;
            let mut random = [0u8; 4];
            aws_lc_rs::rand::fill(&mut random).map_err(|_| LauncherError::Crypto("random port"))?;
            let offset = u32::from_le_bytes(random) % span;
            let port = self.lower + offset as u16;
            match bind(port).await {
                Ok(listener) => return Ok(listener),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(source) => {
                    return Err(LauncherError::Bind {
                        range: *self,
                        source,
                    })
                }
            }
        }
        Err(LauncherError::NoPort {
            range: *self,
            tries: TRIES,
        })
    }
}

impl FromStr for PortRange {
    type Err = LauncherError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || LauncherError::PortRange(text.to_string());
        let text = text.trim();
        if text.is_empty() {
            return Ok(PortRange::default());
        }
        let (lower, upper) = text.split_once("..").ok_or_else(bad)?;
        let lower: u16 = lower.trim().parse().map_err(|_| bad())?;
        let upper: u16 = upper.trim().parse().map_err(|_| bad())?;
        let any = lower == 0 && upper == 0;
        if !any && (lower == 0 || upper < lower) {
            return Err(bad());
        }
        Ok(PortRange { lower, upper })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.any() {
            write!(f, "any port")
        } else {
            write!(f, "ports {}..{}", self.lower, self.upper)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_eg_writes_them() {
        assert_eq!("0..0".parse::<PortRange>().unwrap(), PortRange::default());
        assert_eq!("".parse::<PortRange>().unwrap(), PortRange::default());
        let r: PortRange = "40000..41000".parse().unwrap();
        assert_eq!((r.lower, r.upper), (40000, 41000));
        for bad in ["40000", "41000..40000", "0..10", "a..b", "1..70000"] {
            let e = bad.parse::<PortRange>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[tokio::test]
    async fn binds_inside_the_range_and_says_when_it_is_full() {
        let any = PortRange::default().bind().await.unwrap();
        let taken = any.local_addr().unwrap().port();
        let one: PortRange = format!("{taken}..{taken}").parse().unwrap();
        let e = one.bind().await.unwrap_err().to_string();
        assert!(e.contains("no free port"), "{e}");
        drop(any);
        let again = one.bind().await.unwrap();
        assert_eq!(again.local_addr().unwrap().port(), taken);
    }
}
