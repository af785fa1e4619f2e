//! Human units on the command line: `10s`, `500ms`, `512M`, `1G`.

use std::time::Duration;

/// Parses `250ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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
        .map_err(|_| format!("`{text}` is not a duration; use e.g. 500ms, 10s, 2m"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!(
            "`{text}` is not a duration; use e.g. 500ms, 10s, 2m"
        ));
    }
    Ok(Duration::from_secs_f64(value * mult))
}

/// Parses `512M`, `1G`, `64K`, `1MiB` or a bare number of bytes (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
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
        .map_err(|_| format!("`{text}` is not a size; use e.g. 64K, 512M, 1G"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("`{text}` is not a size; use e.g. 64K, 512M, 1G"));
    }
    Ok((value * mult as f64) as u64)
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
    fn sizes() {
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1G").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("lots").is_err());
        assert_eq!(format_bytes(512 << 20), "512M");
        assert_eq!(format_bytes(1000), "1000");
    }
}
