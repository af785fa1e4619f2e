//! Human units on the command line: `10s`, `500ms`, `512M`, `1G`.

use std::time::Duration;

/// The longest duration retrace accepts anywhere (a year): longer values are
/// refused, so no deadline computed from one can overflow an `Instant`.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// A duration or size that retrace does not accept; the message quotes it
/// and says what would be.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnitError {
    #[error("`{0}` seconds is not a duration")]
    NotSeconds(f64),
    #[error(
        "`{0}` seconds is longer than the longest accepted duration ({days} days)",
        days = MAX_DURATION.as_secs() / 86_400
    )]
    TooLong(f64),
    #[error("`{0}` is not a duration; use e.g. 500ms, 10s, 2m")]
    NotDuration(String),
    #[error("`{text}`: {reason}")]
    Duration {
        text: String,
        reason: Box<UnitError>,
    },
    #[error("`{0}` is not a size; use e.g. 64K, 512M, 1G")]
    NotSize(String),
    #[error("`{0}` is larger than any size retrace accepts")]
    TooLarge(String),
}

/// A number of seconds as a duration, refused when it is negative, not a
/// number, or longer than [`MAX_DURATION`].
pub fn duration_from_secs(secs: f64) -> Result<Duration, UnitError> {
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(UnitError::NotSeconds(secs));
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(UnitError::TooLong(secs));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A number of seconds from an untrusted source (an HTTP header) as a
/// duration: negative or NaN is zero, anything huge is [`MAX_DURATION`].
pub fn saturating_secs(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    if secs >= MAX_DURATION.as_secs_f64() {
        return MAX_DURATION;
    }
    Duration::from_secs_f64(secs)
}

/// Parses `250ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| UnitError::NotDuration(text.to_string()))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(UnitError::NotDuration(text.to_string()));
    }
    duration_from_secs(value * mult).map_err(|e| UnitError::Duration {
        text: text.to_string(),
        reason: Box::new(e),
    })
}

/// Parses `512M`, `1G`, `64K`, `1MiB` or a bare number of bytes (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let stripped = upper
        .trim_end_matches("IB")
        .trim_end_matches('B')
        .to_string();
    let (num, mult) = match stripped.chars().last() {
        Some('K') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('M') => (&stripped[..stripped.len() - 1], 1 << 20),
        Some('G') => (&stripped[..stripped.len() - 1], 1 << 30),
        Some('T') => (&stripped[..stripped.len() - 1], 1 << 40),
        _ => (stripped.as_str(), 1),
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| UnitError::NotSize(text.to_string()))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(UnitError::NotSize(text.to_string()));
    }
    let bytes = value * mult as f64;
    // u64::MAX as f64 rounds up to 2^64, which does not fit.
    if bytes >= u64::MAX as f64 {
        return Err(UnitError::TooLarge(text.to_string()));
    }
    Ok(bytes as u64)
}

/// Formats bytes the way the limits are written on the command line.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (suffix, size) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{suffix}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn huge_durations_are_refused_not_a_panic() {
        for text in ["1e300s", "1e300", "1e20h", "inf", "NaN"] {
            let err = parse_duration(text).unwrap_err().to_string();
            assert!(err.contains(text), "{err}");
        }
        assert_eq!(
            parse_duration(&format!("{}s", MAX_DURATION.as_secs())).unwrap(),
            MAX_DURATION
        );
        assert!(duration_from_secs(1e300).is_err());
        assert!(duration_from_secs(f64::NAN).is_err());
        assert_eq!(
            duration_from_secs(1.5).unwrap(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn untrusted_seconds_saturate() {
        assert_eq!(saturating_secs(1e300), MAX_DURATION);
        assert_eq!(saturating_secs(f64::INFINITY), MAX_DURATION);
        assert_eq!(saturating_secs(f64::NAN), Duration::ZERO);
        assert_eq!(saturating_secs(-5.0), Duration::ZERO);
        assert_eq!(saturating_secs(2.0), Duration::from_secs(2));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1G").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("1e300G").is_err());
        assert!(parse_bytes("16777216T").is_err());
        assert_eq!(format_bytes(512 << 20), "512M");
        assert_eq!(format_bytes(1000), "1000");
    }
}
