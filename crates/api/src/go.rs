//! Go's text, where Kubernetes' messages and configuration files carry it: Go's
//! `strconv.Quote` (`%q`), `time.ParseDuration` and `time.Duration.String()`, apimachinery's
//! `metav1.Time` in JSON, and its `pkg/util/errors` aggregate message.

use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// A time as apimachinery's `metav1.Time` writes it: RFC 3339 in whole seconds, in UTC.
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Quote a string the way Go's `strconv.Quote` (and so `%q`) does.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Approximation of Go's `strconv.IsPrint` for non-ASCII characters: control
/// characters, the non-ASCII spaces and format characters are not printable.
fn is_printable(c: char) -> bool {
    if c.is_ascii() {
        return !c.is_ascii_control();
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Unicode format characters (Cf) that Go treats as non-printable.
    !matches!(
        c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{feff}'
    )
}

/// Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`; `0` alone. Err: Go's message.
pub fn parse_duration(s: &str) -> Result<SignedDuration, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(SignedDuration::ZERO);
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
    Ok(SignedDuration::from_nanos(i64::try_from(nanos).map_err(|_| invalid())?))
}

/// Go's `time.Duration` text, cut to milliseconds, as the kubelet prints durations in messages:
/// `177ms`, `10s`, `1.5s`, `1m20s`, `5m0s`, `1h0m0s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let secs = if frac == 0 { s.to_string() } else { format!("{s}.{frac:03}").trim_end_matches('0').to_string() };
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{m}m{secs}s"),
        _ => format!("{h}h{m}m{secs}s"),
    }
}

/// [`format_duration`] with Go's sign for a negative duration: `-1m0s`.
pub fn format_signed_duration(d: SignedDuration) -> String {
    let text = format_duration(d.unsigned_abs());
    if d.is_negative() { format!("-{text}") } else { text }
}

/// Go's `utilerrors.NewAggregate(...).Error()`: one message as it is, several distinct ones
/// bracketed and joined by ", ".
pub fn aggregate(mut messages: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    messages.retain(|m| seen.insert(m.clone()));
    match messages.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_written_in_whole_seconds_in_utc() {
        let t: Timestamp = "2026-11-28T10:05:14.987654+01:00".parse().unwrap();
        assert_eq!(format_time(t), "2026-11-28T09:05:14Z");
    }

    #[test]
    fn quote_matches_strconv_quote() {
        let cases = [
            ("plain", "\"plain\""),
            ("a\"b", "\"a\\\"b\""),
            ("back\\slash", "\"back\\\\slash\""),
            ("tab\there", "\"tab\\there\""),
            ("nl\n", "\"nl\\n\""),
            ("\u{1}", "\"\\x01\""),
            ("\u{7f}", "\"\\x7f\""),
            ("héllo", "\"héllo\""),
            ("\u{a0}", "\"\\u00a0\""),
            ("", "\"\""),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), want, "input {input:?}");
        }
    }

    #[test]
    fn durations_parse_as_go_parses_them() {
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
            assert_eq!(parse_duration(text), Ok(SignedDuration::from_nanos(nanos)), "{text}");
        }
        assert_eq!(parse_duration(""), Err(r#"time: invalid duration """#.into()));
        assert_eq!(parse_duration("5"), Err(r#"time: missing unit in duration "5""#.into()));
        assert_eq!(parse_duration("5d"), Err(r#"time: unknown unit "d" in duration "5d""#.into()));
        assert_eq!(parse_duration("1.2.3s"), Err(r#"time: missing unit in duration "1.2.3s""#.into()));
        assert_eq!(parse_duration(".s"), Err(r#"time: invalid duration ".s""#.into()));
        assert_eq!(parse_duration("-"), Err(r#"time: invalid duration "-""#.into()));
    }

    #[test]
    fn durations_format_as_go_formats_them() {
        let ms = Duration::from_millis;
        for (d, want) in [
            (ms(0), "0s"),
            (Duration::from_micros(999), "0s"),
            (ms(177), "177ms"),
            (ms(1_000), "1s"),
            (ms(1_500), "1.5s"),
            (ms(10_000), "10s"),
            (ms(60_000), "1m0s"),
            (ms(80_000), "1m20s"),
            (ms(123_004), "2m3.004s"),
            (ms(160_000), "2m40s"),
            (ms(300_000), "5m0s"),
            (ms(3_600_000), "1h0m0s"),
        ] {
            assert_eq!(format_duration(d), want);
        }
    }

    #[test]
    fn a_negative_duration_formats_with_its_sign() {
        assert_eq!(format_signed_duration(SignedDuration::from_secs(-60)), "-1m0s");
        assert_eq!(format_signed_duration(SignedDuration::from_millis(1_500)), "1.5s");
    }

    #[test]
    fn an_aggregate_is_one_message_or_the_distinct_ones_bracketed() {
        assert_eq!(aggregate(vec!["a".into()]), "a");
        assert_eq!(aggregate(vec!["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(vec!["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
