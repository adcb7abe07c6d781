//! Resource quantities by value (apimachinery's `resource.ParseQuantity`): `0.1` and `100m` are
//! the same CPU, `1Gi` and `1073741824` the same memory. Values are kept exactly, in units of
//! 10⁻⁹ (Kubernetes' smallest scale), rounded up below it as Kubernetes rounds.

/// Why a string is not a quantity, in apimachinery's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A parsed quantity: its value in nano-units (`1` is 10⁻⁹, `1_000_000_000` is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Quantity {
    nanos: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

impl Quantity {
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let (number, suffix) = split(s)?;
        let (negative, digits) = match number.as_bytes()[0] {
            b'-' => (true, &number[1..]),
            b'+' => (false, &number[1..]),
            _ => (false, number),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(QuantityError::Numeric);
        }
        // value = mantissa × 10^(exponent) × 2^(binary), mantissa an integer.
        let mantissa_digits = format!("{whole}{fraction}");
        let mantissa_digits = mantissa_digits.trim_start_matches('0');
        if mantissa_digits.len() > 36 {
            return Err(QuantityError::Numeric);
        }
        let mantissa: i128 =
            if mantissa_digits.is_empty() { 0 } else { mantissa_digits.parse().map_err(|_| QuantityError::Numeric)? };
        let (decimal, binary) = scale(suffix)?;
        let exponent = i64::from(decimal) - fraction.len() as i64 + 9;
        let nanos = scaled(mantissa, exponent, binary).ok_or(QuantityError::Numeric)?;
        Ok(Quantity { nanos: if negative { -nanos } else { nanos } })
    }

    /// The value in nano-units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// The value in thousandths, rounded up (`MilliValue`): CPU in millicores.
    pub fn milli_value(self) -> i128 {
        div_ceil(self.nanos, 1_000_000)
    }

    /// The value in units, rounded up (`Value`): memory in bytes.
    pub fn value(self) -> i128 {
        div_ceil(self.nanos, NANOS_PER_UNIT)
    }

    pub fn is_positive(self) -> bool {
        self.nanos > 0
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, other: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_add(other.nanos) }
    }
}

/// The quantity as apimachinery's `Quantity.String()` writes it back, in the format its suffix
/// chose: `1Mi`, `1536Mi` for `1.5Gi`, `1k` for `1000`, `500m` for `0.5`, `1e3` for `1000e0`.
/// A binary quantity below 1024 or not a whole number is written in decimal SI, as
/// apimachinery's `CanonicalizeBytes` does.
pub fn canonical(s: &str) -> Result<String, QuantityError> {
    Ok(Quantity::parse(s)?.written(Format::of(s)?))
}

/// How a quantity string writes its value (`resource.Format`); a sum keeps its first term's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

impl Format {
    /// The format a quantity string chose by its suffix.
    pub fn of(s: &str) -> Result<Format, QuantityError> {
        let (_, suffix) = split(s)?;
        Ok(if scale(suffix)?.1 > 0 {
            Format::BinarySi
        } else if suffix.starts_with(['e', 'E']) && suffix.len() > 1 {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        })
    }
}

impl Quantity {
    /// The value as `Quantity.String()` writes it in `format`.
    pub fn written(self, format: Format) -> String {
        let q = self;
        let (binary, exponential) = (format == Format::BinarySi, format == Format::DecimalExponent);
        if q.nanos == 0 {
            return "0".to_string();
        }
        let whole = q.nanos % NANOS_PER_UNIT == 0;
        if binary && whole && q.nanos.abs() >= 1024 * NANOS_PER_UNIT {
            let (mut n, mut power) = (q.nanos / NANOS_PER_UNIT, 0);
            while n % 1024 == 0 && power < BINARY_SUFFIXES.len() - 1 {
                n /= 1024;
                power += 1;
            }
            return format!("{n}{}", BINARY_SUFFIXES[power]);
        }
        // mantissa × 10^exponent with the exponent a multiple of 3, as few digits as that allows.
        let (mut mantissa, mut exponent) = (q.nanos, -9i32);
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        let si = usize::try_from((exponent + 9) / 3).ok().and_then(|i| DECIMAL_SUFFIXES.get(i));
        match si {
            _ if exponential && exponent == 0 => mantissa.to_string(),
            Some(si) if !exponential => format!("{mantissa}{si}"),
            _ => format!("{mantissa}e{exponent}"),
        }
    }
}

/// Decimal SI suffixes from 10⁻⁹ to 10¹⁸, one per power of 1000.
const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
/// Binary suffixes, one per power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The number and the suffix, as apimachinery's `parseQuantityString` splits them.
fn split(s: &str) -> Result<(&str, &str), QuantityError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    if i == digits_start {
        return Err(QuantityError::Format);
    }
    let (number, suffix) = s.split_at(i);
    let well_formed = suffix.bytes().all(|b| b"eEinumkKMGTP+-".contains(&b) || b.is_ascii_digit());
    if !well_formed {
        return Err(QuantityError::Format);
    }
    Ok((number, suffix))
}

/// A suffix as (power of ten, power of two).
fn scale(suffix: &str) -> Result<(i32, u32), QuantityError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E']).ok_or(QuantityError::Suffix)?;
            (exponent.parse::<i32>().map_err(|_| QuantityError::Suffix)?, 0)
        }
    })
}

/// `mantissa × 10^exponent × 2^binary`, rounded up; `None` when it does not fit.
fn scaled(mantissa: i128, exponent: i64, binary: u32) -> Option<i128> {
    let shifted = mantissa.checked_mul(1i128.checked_shl(binary)?)?;
    if exponent >= 0 {
        shifted.checked_mul(10i128.checked_pow(u32::try_from(exponent).ok()?)?)
    } else {
        // Beyond 10^38 every mantissa that fits rounds up to one nano-unit, or stays zero.
        let divisor = 10i128.checked_pow(u32::try_from(-exponent).ok()?).unwrap_or(i128::MAX);
        Some(div_ceil(shifted, divisor))
    }
}

fn div_ceil(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn equal_values_in_every_notation_are_equal() {
        for (a, b) in [
            ("0.1", "100m"),
            ("1", "1000m"),
            (".5", "500m"),
            ("1e3", "1k"),
            ("1E-3", "1m"),
            ("1Ki", "1024"),
            ("1Gi", "1073741824"),
            ("1.5Gi", "1536Mi"),
            ("123Mi", "128974848"),
            ("+2", "2"),
            ("0", "0m"),
            ("1000000n", "1m"),
            ("1u", "1000n"),
        ] {
            assert_eq!(q(a), q(b), "{a} = {b}");
        }
        assert_ne!(q("100m"), q("101m"));
    }

    #[test]
    fn values_below_a_nano_unit_round_up() {
        assert_eq!(q("0.1n").nanos(), 1);
        assert_eq!(q("1e-20").nanos(), 1);
        assert_eq!(q("0e-20").nanos(), 0);
    }

    #[test]
    fn scaled_values_round_up() {
        assert_eq!(q("250m").milli_value(), 250);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("0.0001").milli_value(), 1);
        assert_eq!(q("16Mi").value(), 16 << 20);
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("-1500m").value(), -1);
    }

    #[test]
    fn canonical_forms_are_apimachinerys() {
        for (written, expected) in [
            ("1Mi", "1Mi"),
            ("1024Ki", "1Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1536Ki", "1536Ki"),
            ("100Ki", "100Ki"),
            ("512", "512"),
            ("1024", "1024"),
            ("0.5Ki", "512"),
            ("1000", "1k"),
            ("1500000", "1500k"),
            ("1M", "1M"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("100m", "100m"),
            ("1e3", "1e3"),
            ("1e0", "1"),
            ("1500e-3", "1500e-3"),
            ("-1Mi", "-1Mi"),
            ("0Mi", "0"),
        ] {
            assert_eq!(canonical(written).as_deref(), Ok(expected), "{written}");
        }
    }

    #[test]
    fn malformed_quantities_are_refused_in_apimachinerys_words() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("Mi"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1 Mi"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::Numeric));
        assert_eq!(Quantity::parse("."), Err(QuantityError::Numeric));
        assert_eq!(Quantity::parse("1Ki1"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1K"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1e400"), Err(QuantityError::Numeric));
    }
}
