//! Go's duration text, as Kubernetes configuration files write durations.

/// Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`; `0` alone. Err: Go's message.
pub fn parse_go_duration(s: &str) -> Result<jiff::SignedDuration, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(jiff::SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut nanos: i128 = 0;
    while !rest.is_empty() {
        let digits = |t: &str| t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (whole, after) = rest.split_at(digits(rest));
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(digits(after)),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            _ => return Err(format!("time: unknown unit {unit:?} in duration {s:?}")),
        };
        let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| invalid())? };
        let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            part += i128::from(digit - b'0') * place;
        }
        nanos += part;
        if nanos > i128::from(i64::MAX) {
            return Err(invalid());
        }
        rest = after;
    }
    let nanos = if negative { -nanos } else { nanos };
    Ok(jiff::SignedDuration::from_nanos(i64::try_from(nanos).map_err(|_| invalid())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok = [
            ("0", 0),
            ("0s", 0),
            ("12h", 12 * 3600 * 1_000_000_000),
            ("1h30m", 5400 * 1_000_000_000),
            ("1.5s", 1_500_000_000),
            (".5m", 30_000_000_000),
            ("300ms", 300_000_000),
            ("2us", 2_000),
            ("-1m", -60_000_000_000),
            ("+5ns", 5),
        ];
        for (text, nanos) in ok {
            assert_eq!(parse_go_duration(text), Ok(jiff::SignedDuration::from_nanos(nanos)), "{text}");
        }
        assert_eq!(parse_go_duration(""), Err(r#"time: invalid duration """#.into()));
        assert_eq!(parse_go_duration("5"), Err(r#"time: missing unit in duration "5""#.into()));
        assert_eq!(parse_go_duration("5d"), Err(r#"time: unknown unit "d" in duration "5d""#.into()));
        assert_eq!(parse_go_duration("1.2.3s"), Err(r#"time: missing unit in duration "1.2.3s""#.into()));
        assert_eq!(parse_go_duration(".s"), Err(r#"time: invalid duration ".s""#.into()));
        assert_eq!(parse_go_duration("-"), Err(r#"time: invalid duration "-""#.into()));
    }
}
