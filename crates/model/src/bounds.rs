//! Range checks for numbers read from outside: configuration, plugin args,
//! annotations, traces, other programs' answers. One helper per kind, so
//! that a value out of range is refused with a message stating the range
//! allowed, never a panic, a hang or a wrap further on. The messages carry
//! no field name: callers add their path (`ConfigError`, `ArgsError`).

use std::fmt;
use std::time::Duration;

use crate::go_duration;

pub use crate::go_duration::MAX_DURATION;

/// The longest duration in whole seconds (`...Seconds` fields), as Go
/// multiplies them by `time.Second`.
pub const MAX_SECONDS: u64 = MAX_DURATION.as_secs();

/// A score plugin's or extender's weight at most: kube-scheduler's int32
/// weights. Scores times weights stay exact far below this, even summed.
pub const MAX_WEIGHT: f64 = i32::MAX as f64;

/// A score weight: positive, at most [`MAX_WEIGHT`].
pub const WEIGHT: Interval = Interval::above(0.0, MAX_WEIGHT);

/// The shortest duration a field that must be positive accepts.
pub const MIN_DURATION: Duration = Duration::from_nanos(1);

/// An interval of real numbers, each end open or closed. NaN is in none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    lo: f64,
    hi: f64,
    lo_open: bool,
    hi_open: bool,
}

impl Interval {
    /// `[lo, hi]`.
    pub const fn closed(lo: f64, hi: f64) -> Interval {
        Interval { lo, hi, lo_open: false, hi_open: false }
    }

    /// `(lo, hi]`: e.g. a share that must be positive.
    pub const fn above(lo: f64, hi: f64) -> Interval {
        Interval { lo, hi, lo_open: true, hi_open: false }
    }

    pub fn contains(self, v: f64) -> bool {
        let lo = if self.lo_open { v > self.lo } else { v >= self.lo };
        let hi = if self.hi_open { v < self.hi } else { v <= self.hi };
        lo && hi
    }

    /// `v`, or a message stating the interval and what was given.
    pub fn check(self, v: f64) -> Result<f64, String> {
        if self.contains(v) { Ok(v) } else { Err(format!("must be in {self}, got {}", show(v))) }
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (open, close) = (if self.lo_open { '(' } else { '[' }, if self.hi_open { ')' } else { ']' });
        write!(f, "{open}{}, {}{close}", show(self.lo), show(self.hi))
    }
}

/// A number for a message: plain when short, else with an exponent
/// (`1e308`, not 309 digits).
pub fn show(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && a.is_finite() && !(1e-6..1e16).contains(&a) { format!("{v:e}") } else { format!("{v}") }
}

/// `v` if `lo <= v <= hi`, else a message stating the range.
pub fn int<T: PartialOrd + fmt::Display + Copy>(v: T, lo: T, hi: T) -> Result<T, String> {
    if lo <= v && v <= hi { Ok(v) } else { Err(format!("must be from {lo} to {hi}, got {v}")) }
}

/// `d` if `lo <= d <= hi`, else a message stating the range as Go durations.
pub fn duration(d: Duration, lo: Duration, hi: Duration) -> Result<Duration, String> {
    if lo <= d && d <= hi {
        Ok(d)
    } else {
        let f = go_duration::format;
        Err(format!("must be from {} to {}, got {}", f(&lo), f(&hi), f(&d)))
    }
}

/// serde's error for a number of the wrong type or past its type's range
/// (`invalid value: integer `4294967296`, expected u32`) with that range
/// stated, as every range error here states it; other messages as they are.
pub fn with_type_range(message: String) -> String {
    // serde_json's own words for an integer past 64 bits inside plugin args.
    if message.starts_with("JSON number out of range") {
        return format!("{message}: numbers here are integers from {} to {} or floats", i64::MIN, u64::MAX);
    }
    let Some((_, expected)) = message.rsplit_once(", expected ") else { return message };
    let expected = expected.split(" at line ").next().unwrap_or(expected);
    let range = match expected {
        "u8" => format!("0 to {}", u8::MAX),
        "u16" => format!("0 to {}", u16::MAX),
        "u32" => format!("0 to {}", u32::MAX),
        "u64" | "usize" => format!("0 to {}", u64::MAX),
        "i8" => format!("{} to {}", i8::MIN, i8::MAX),
        "i16" => format!("{} to {}", i16::MIN, i16::MAX),
        "i32" => format!("{} to {}", i32::MIN, i32::MAX),
        "i64" | "isize" => format!("{} to {}", i64::MIN, i64::MAX),
        "f32" | "f64" => "a number".to_string(),
        _ => return message,
    };
    let range = if range == "a number" { range } else { format!("from {range}") };
    // Before serde_yaml's "at line L column C", if any.
    match message.split_once(" at line ") {
        Some((head, at)) => format!("{head} ({range}) at line {at}"),
        None => format!("{message} ({range})"),
    }
}

/// A duration in the engine's milliseconds, saturating (durations are at
/// most [`MAX_DURATION`] once parsed, far inside `u64`).
pub fn millis(d: Duration) -> crate::time::Millis {
    crate::time::Millis::try_from(d.as_millis()).unwrap_or(crate::time::Millis::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_refuse_nan_infinities_and_their_open_ends() {
        let share = Interval::above(0.0, 1.0);
        for (v, ok) in [
            (0.0, false),
            (-0.0, false),
            (1e-320, true),
            (1.0, true),
            (1.0000001, false),
            (f64::NAN, false),
            (f64::INFINITY, false),
            (f64::NEG_INFINITY, false),
        ] {
            assert_eq!(share.check(v).is_ok(), ok, "{v}");
        }
        assert_eq!(share.check(2.0).unwrap_err(), "must be in (0, 1], got 2");
        assert_eq!(Interval::closed(0.0, 100.0).check(f64::NAN).unwrap_err(), "must be in [0, 100], got NaN");
        assert_eq!(share.check(1e308).unwrap_err(), "must be in (0, 1], got 1e308");
        assert_eq!(share.check(-1e-320).unwrap_err(), "must be in (0, 1], got -1e-320");
        assert_eq!(Interval::closed(0.001, 1e6).to_string(), "[0.001, 1000000]");
    }

    #[test]
    fn integers_and_durations_name_their_range() {
        assert_eq!(int(101u32, 0, 100).unwrap_err(), "must be from 0 to 100, got 101");
        assert_eq!(int(-1i64, 0, 10), Err("must be from 0 to 10, got -1".into()));
        assert_eq!(int(7i32, 0, 10), Ok(7));
        let d = duration(Duration::from_secs(7200), Duration::from_millis(1), Duration::from_secs(3600));
        assert_eq!(d.unwrap_err(), "must be from 1ms to 1h, got 2h");
        assert_eq!(millis(MAX_DURATION), 9_223_372_036_854);
    }

    #[test]
    fn type_errors_state_the_types_range() {
        let cases = [
            ("invalid value: integer `4294967296`, expected u32", " (from 0 to 4294967295)"),
            ("invalid type: integer `-9223372036854775809` as i128, expected i64 at line 3 column 2", " (from "),
            ("invalid type: floating point `0.5`, expected i32", " (from -2147483648 to 2147483647)"),
            ("invalid type: string \"NaN\", expected f64", " (a number)"),
            ("JSON number out of range", "integers from -9223372036854775808 to 18446744073709551615"),
        ];
        for (message, range) in cases {
            assert!(with_type_range(message.to_string()).contains(range), "{message}");
        }
        let other = "unknown field `x`, expected one of `a`, `b`";
        assert_eq!(with_type_range(other.to_string()), other);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
