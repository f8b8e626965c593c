//! Go-style durations (`15s`, `1m30s`, `500ms`, `2h`), as Kubernetes
//! configuration writes them, parsed as Go's `time.ParseDuration` does:
//! exactly, in integer nanoseconds, and refused past Go's longest duration
//! ([`MAX_DURATION`]) instead of overflowing.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Go's longest `time.Duration` (2^63 - 1 ns, about 292 years): what
/// Kubernetes configuration can express, and so the bound of every
/// duration the configuration takes.
pub const MAX_DURATION: Duration = Duration::new(9_223_372_036, 854_775_807);

const NANOS_PER_SEC: u128 = 1_000_000_000;

pub fn parse(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (use e.g. \"15s\", \"1m30s\", \"500ms\")");
    let too_long = || format!("duration {s:?} is out of range: at most {} (Go's longest)", format(&MAX_DURATION));
    let max = MAX_DURATION.as_nanos();
    let (negative, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let int_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (int_digits, after) = rest.split_at(int_len);
        let (frac_digits, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len())),
            None => ("", after),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(bad());
        }
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3600 * NANOS_PER_SEC,
            _ => return Err(bad()),
        };
        // Past `max` the value is refused anyway: stop before u128 could overflow.
        let mut whole: u128 = 0;
        for d in int_digits.bytes() {
            whole = whole * 10 + u128::from(d - b'0');
            if whole > max {
                return Err(too_long());
            }
        }
        // Digits past the 20th are below a nanosecond even in hours: dropped, as Go drops them.
        let (mut frac, mut scale) = (0u128, 1u128);
        for d in frac_digits.bytes().take(20) {
            frac = frac * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        total = whole
            .checked_mul(unit_nanos)
            .and_then(|w| w.checked_add(frac * unit_nanos / scale))
            .and_then(|v| v.checked_add(total))
            .filter(|t| *t <= max)
            .ok_or_else(too_long)?;
        rest = after;
    }
    if negative && total > 0 {
        return Err(format!("duration {s:?} is out of range: must not be negative"));
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (total % NANOS_PER_SEC) as u32))
}

/// The shortest exact Go form (`1h30m`, `15s`, `1.5s`, `500ms`, `0s`),
/// which [`parse`] reads back to the same duration.
pub fn format(d: &Duration) -> String {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    if secs == 0 {
        return match nanos {
            0 => "0s".into(),
            n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => format!("{}us", n / 1_000),
            n => format!("{n}ns"),
        };
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    } else if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(d))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}
