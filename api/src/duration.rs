//! Go durations (`time.ParseDuration`): the kubelet's flags, the simulated runtime's annotations and
//! chainsaw's timeouts all take them.

use std::time::Duration;

/// A Go duration (`500ms`, `2s`, `1m30s`, `1h`; `0` alone is zero).
pub fn parse_go(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (examples: 500ms, 2s, 1m30s)");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_and_bad_ones_name_the_text() {
        let ok = [
            ("500ms", 0.5),
            ("2s", 2.0),
            ("1m30s", 90.0),
            ("1h", 3600.0),
            ("1.5s", 1.5),
            ("0", 0.0),
            ("10us", 1e-5),
        ];
        for (s, secs) in ok {
            assert!((parse_go(s).unwrap().as_secs_f64() - secs).abs() < 1e-9, "{s}");
        }
        for s in ["", "5", "s", "5x", "1m30", "-1s"] {
            let e = parse_go(s).unwrap_err();
            assert!(e.starts_with(&format!("invalid duration {s:?}")), "{e}");
        }
    }
}
