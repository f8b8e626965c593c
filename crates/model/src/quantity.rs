//! Kubernetes `resource.Quantity` (`100m`, `1.5Gi`, `12e6`), parsed exactly.
//!
//! No crate is used for this on purpose: the scheduler needs Go's exact
//! semantics, which the maintained Rust crates do not promise (they go
//! through `f64` or a 28-digit decimal and round to nearest). Here a
//! quantity is held as an integer count of nano-units: parsing rounds a
//! non-zero value *away from zero* to the next nano (Go rounds with
//! `inf.RoundUp` to `Nano` scale), sums stay exact, and [`Quantity::value`]
//! / [`Quantity::milli_value`] round away from zero like Go's `ScaledValue`
//! on its int64 path (`ceil` for the non-negative amounts the API allows).
//! Results saturate at the `i64` bounds instead of overflowing.
//!
//! One deliberate difference: Go accepts a number with no digits at all
//! (`"Mi"`, `"."`, `"-"`) as zero; here that is an error.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// An exact resource amount (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    /// The amount in units of 10^-9, saturated at the `i128` bounds.
    nanos: i128,
}

/// A string that is not a valid quantity.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    /// The string as given.
    pub input: String,
    pub reason: &'static str,
}

impl Quantity {
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// Parses `[+-]<digits>[.<digits>][suffix]`, where suffix is one of
    /// `Ki Mi Gi Ti Pi Ei`, `n u m k M G T P E`, an exponent `e<int>` /
    /// `E<int>`, or nothing. No whitespace is allowed.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        parse_nanos(s).map(|nanos| Quantity { nanos }).map_err(|reason| QuantityError { input: s.to_string(), reason })
    }

    /// A whole number of units (bytes, devices, cores).
    pub fn from_value(v: i64) -> Quantity {
        Quantity { nanos: i128::from(v) * NANOS_PER_UNIT }
    }

    /// An amount in thousandths (milli-cpu).
    pub fn from_milli(v: i64) -> Quantity {
        Quantity { nanos: i128::from(v) * NANOS_PER_MILLI }
    }

    /// The amount in whole units, rounded up (away from zero), as Go's `Value()`.
    pub fn value(&self) -> i64 {
        scaled(self.nanos, NANOS_PER_UNIT)
    }

    /// The amount in thousandths, rounded up (away from zero), as Go's `MilliValue()`.
    pub fn milli_value(&self) -> i64 {
        scaled(self.nanos, NANOS_PER_MILLI)
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Exact sum, saturating at the representable bounds.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_add(other.nanos) }
    }

    /// Exact difference, saturating at the representable bounds.
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_sub(other.nanos) }
    }

    /// Whether the amount is a whole number of units.
    pub fn is_whole(&self) -> bool {
        self.nanos % NANOS_PER_UNIT == 0
    }

    /// The amount in units as a float (approximate, as Go's `AsApproximateFloat64`).
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANOS_PER_UNIT as f64
    }

    /// -1, 0 or 1.
    pub fn signum(&self) -> i64 {
        self.nanos.signum() as i64
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

/// Shows the exact amount in plain decimal units (`1.5`, `0.000000001`),
/// for messages; it is not Kubernetes' canonical form.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// `nanos / unit`, rounded away from zero, clamped to `i64`.
fn scaled(nanos: i128, unit: i128) -> i64 {
    let mut q = nanos / unit;
    if nanos % unit != 0 {
        q += nanos.signum();
    }
    i64::try_from(q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX })
}

/// The decimal exponent and the binary multiplier a suffix stands for.
fn suffix_scale(suffix: &str) -> Result<(i64, u128), &'static str> {
    let scale = match suffix {
        "" => (0, 1),
        "n" => (-9, 1),
        "u" => (-6, 1),
        "m" => (-3, 1),
        "k" => (3, 1),
        "M" => (6, 1),
        "G" => (9, 1),
        "T" => (12, 1),
        "P" => (15, 1),
        "E" => (18, 1),
        "Ki" => (0, 1 << 10),
        "Mi" => (0, 1 << 20),
        "Gi" => (0, 1 << 30),
        "Ti" => (0, 1 << 40),
        "Pi" => (0, 1 << 50),
        "Ei" => (0, 1 << 60),
        _ => {
            // An exponent: `e` or `E`, an optional sign, digits; it must fit
            // an i32 as in Go.
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or("unable to parse quantity's suffix")?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err("unable to parse quantity's suffix");
            }
            let exp: i32 = rest.parse().map_err(|_| "unable to parse quantity's suffix")?;
            (i64::from(exp), 1)
        }
    };
    Ok(scale)
}

fn parse_nanos(s: &str) -> Result<i128, &'static str> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err("empty string");
    }
    let mut i = 0;
    let negative = match b[0] {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &b[int_start..i];
    let mut frac_digits: &[u8] = &[];
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &b[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err("unable to parse numeric part of quantity");
    }
    let (exp10, mult) = suffix_scale(&s[i..])?;

    // The digit string d0 d1 ... with the decimal point after `int_digits`;
    // in nanos the point moves right by exp10 + 9 places.
    let digits = || int_digits.iter().chain(frac_digits.iter()).map(|d| u128::from(d - b'0'));
    let total = (int_digits.len() + frac_digits.len()) as i64;
    let point = int_digits.len() as i64 + exp10 + 9;

    // Whole part: the digits left of the point, then zeros if the point is
    // past the last digit.
    let mut saturated = false;
    let mut whole: u128 = 0;
    for d in digits().take(point.clamp(0, total) as usize) {
        match whole.checked_mul(10).and_then(|w| w.checked_add(d)) {
            Some(w) => whole = w,
            None => {
                saturated = true;
                break;
            }
        }
    }
    let mut zeros = point - total;
    while zeros > 0 && whole != 0 && !saturated {
        match whole.checked_mul(10) {
            Some(w) => whole = w,
            None => saturated = true,
        }
        zeros -= 1;
    }

    // Fractional part F (digits right of the point, after -point leading
    // zeros when the point is left of the first digit): long multiplication
    // of F by `mult` from its last digit gives floor(F * mult) as the final
    // carry, and whether any fractional digit of the product is non-zero.
    let start = point.clamp(0, total) as usize;
    let (int_tail, frac_tail) = if start <= int_digits.len() {
        (&int_digits[start..], frac_digits)
    } else {
        (&int_digits[..0], &frac_digits[start - int_digits.len()..])
    };
    let mut carry: u128 = 0;
    let mut inexact = false;
    for d in frac_tail.iter().rev().chain(int_tail.iter().rev()) {
        let t = u128::from(d - b'0') * mult + carry;
        inexact |= !t.is_multiple_of(10);
        carry = t / 10;
    }
    let mut leading_zeros = -point;
    while leading_zeros > 0 && carry != 0 {
        inexact |= !carry.is_multiple_of(10);
        carry /= 10;
        leading_zeros -= 1;
    }

    let magnitude = if saturated {
        None
    } else {
        whole.checked_mul(mult).and_then(|m| m.checked_add(carry)).and_then(|m| m.checked_add(u128::from(inexact)))
    };
    let magnitude = magnitude.and_then(|m| i128::try_from(m).ok()).unwrap_or(i128::MAX);
    Ok(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valid_quantities() {
        // (input, value(), milli_value())
        let cases: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("0Mi", 0, 0),
            ("100m", 1, 100),
            ("0.5", 1, 500),
            ("1", 1, 1000),
            ("+1", 1, 1000),
            ("-1", -1, -1000),
            ("1.5Gi", 1_610_612_736, 1_610_612_736_000),
            ("500Mi", 524_288_000, 524_288_000_000),
            ("1Ki", 1024, 1_024_000),
            ("3Ei", 3 << 60, i64::MAX),
            ("0.5Mi", 524_288, 524_288_000),
            ("100.035Ki", 102_436, 102_435_840),
            ("1e3", 1000, 1_000_000),
            ("1E-3", 1, 1),
            ("1e+3", 1000, 1_000_000),
            ("12e6", 12_000_000, 12_000_000_000),
            ("1.5e3", 1500, 1_500_000),
            ("0.1m", 1, 1),
            ("1n", 1, 1),
            ("1500u", 1, 2),
            ("1k", 1000, 1_000_000),
            ("2M", 2_000_000, 2_000_000_000),
            ("1G", 1_000_000_000, 1_000_000_000_000),
            ("1T", 1_000_000_000_000, 1_000_000_000_000_000),
            ("1P", 1_000_000_000_000_000, 1_000_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000, i64::MAX),
            (".5", 1, 500),
            ("1.", 1, 1000),
            ("1.G", 1_000_000_000, 1_000_000_000_000),
            ("0.000000000001Ki", 1, 1),
            ("1e-30", 1, 1),
            ("-0.1m", -1, -1),
            ("-1.5", -2, -1500),
            ("9223372036854775807", i64::MAX, i64::MAX),
            ("9223372036854775808", i64::MAX, i64::MAX),
            ("-9223372036854775809", i64::MIN, i64::MIN),
            ("1e30", i64::MAX, i64::MAX),
            ("-1e30", i64::MIN, i64::MIN),
            ("10Ei", i64::MAX, i64::MAX),
            ("99999999999999999999999999999999999999999999", i64::MAX, i64::MAX),
            ("1e2147483647", i64::MAX, i64::MAX),
            ("1e-2147483648", 1, 1),
            ("0e2147483647", 0, 0),
            ("0.000000000000000000000000000000000000000000001", 1, 1),
            ("1.0000000000000000000000000000000000000000000001", 2, 1001),
        ];
        for (input, value, milli) in cases {
            let q = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.value(), *value, "value of {input}");
            assert_eq!(q.milli_value(), *milli, "milli of {input}");
            assert_eq!(input.parse::<Quantity>(), Ok(q), "FromStr of {input}");
        }
    }

    #[test]
    fn rounds_to_nanos_like_go() {
        // Go: "0.000000000001Ki" parses as 2n (1.024e-9 rounded up to the nano).
        let cases: &[(&str, &str)] = &[
            ("0.000000000001Ki", "0.000000002"),
            ("1.5Gi", "1610612736"),
            ("0.1m", "0.0001"),
            ("1e-10", "0.000000001"),
            ("-1e-10", "-0.000000001"),
            ("1.0000000001", "1.000000001"),
        ];
        for (input, want) in cases {
            assert_eq!(Quantity::parse(input).unwrap().to_string(), *want, "{input}");
        }
    }

    #[test]
    fn rejects_invalid_quantities() {
        let cases: &[&str] = &[
            "",
            "abc",
            "1.2.3",
            "1Qi",
            "Mi",
            " 1",
            "1 ",
            "1K",
            "0.1mi",
            "0.1am",
            "1i",
            ".5i",
            "-3.01i",
            "-3.01e-",
            "1e",
            "1e+",
            ".",
            "+",
            "-",
            "1+1.0M",
            "1.1.M",
            "1e99999999999",
            "1e3.5",
            "1Ki3",
            "1 Mi",
            "aoeu",
        ];
        for input in cases {
            let err = Quantity::parse(input).expect_err(input);
            assert_eq!(err.input, *input);
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn sums_exactly_before_rounding() {
        // Two half-bytes make one byte; rounding each first would give two.
        let half = Quantity::parse("0.5").unwrap();
        assert_eq!(half.saturating_add(half).value(), 1);
        let big = Quantity::parse("1e30").unwrap();
        assert_eq!(big.saturating_add(big).value(), i64::MAX);
        assert_eq!(Quantity::from_milli(1500).value(), 2);
        assert_eq!(Quantity::from_value(3).milli_value(), 3000);
        assert!(Quantity::ZERO.is_zero());
        assert!(Quantity::parse("1m").unwrap() < Quantity::parse("0.002").unwrap());
    }
}
