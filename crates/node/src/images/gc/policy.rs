//! The image garbage collection policy from a `KubeletConfiguration`, with the kubelet's
//! defaults and its configuration validation's messages.

use jiff::SignedDuration;
use podwright_api::go;
use std::time::Duration;

/// When images are removed: the kubelet's `ImageGCPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// At or above this usage of the image filesystem (percent), unused images are removed…
    pub high_threshold_percent: u8,
    /// …until usage is down to this (percent).
    pub low_threshold_percent: u8,
    /// An image detected more recently than this is never removed for space: it may have just
    /// been pulled for a container about to start.
    pub min_age: Duration,
    /// An image unused for longer than this is removed whatever the usage; zero: never.
    pub max_age: Duration,
}

impl Default for ImageGcPolicy {
    /// The kubelet's defaults: 85 %, 80 %, 2 minutes, no maximum age.
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            max_age: Duration::ZERO,
        }
    }
}

impl ImageGcPolicy {
    /// From a `KubeletConfiguration`'s `imageGCHighThresholdPercent`,
    /// `imageGCLowThresholdPercent`, `imageMinimumGCAge` and `imageMaximumGCAge` (the kubelet's
    /// defaults for those not given), refused as the kubelet's configuration validation refuses
    /// them: every problem, bracketed and joined by ", " as Go's aggregate error writes several.
    pub fn from_config(
        high: Option<i64>,
        low: Option<i64>,
        min_age: Option<&str>,
        max_age: Option<&str>,
    ) -> Result<ImageGcPolicy, String> {
        let defaults = ImageGcPolicy::default();
        let high = high.unwrap_or(defaults.high_threshold_percent.into());
        let low = low.unwrap_or(defaults.low_threshold_percent.into());
        let min_age = min_age.map(|d| duration("imageMinimumGCAge", d)).transpose()?;
        let max_age = max_age.map(|d| duration("imageMaximumGCAge", d)).transpose()?;
        let min_age = min_age.unwrap_or(SignedDuration::from_nanos_i128(defaults.min_age.as_nanos() as i128));
        let max_age = max_age.unwrap_or(SignedDuration::ZERO);
        let mut errors = Vec::new();
        if !(0..=100).contains(&high) {
            errors.push(format!(
                "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive"
            ));
        }
        if !(0..=100).contains(&low) {
            errors.push(format!(
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive"
            ));
        }
        if low >= high {
            errors.push(format!(
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
            ));
        }
        if max_age.is_negative() {
            errors.push(format!(
                "invalid configuration: imageMaximumGCAge {} must not be negative",
                go::format_signed_duration(max_age)
            ));
        }
        if max_age.is_positive() && max_age <= min_age {
            errors.push(format!(
                "invalid configuration: imageMaximumGCAge {} must be greater than imageMinimumGCAge {}",
                go::format_signed_duration(max_age),
                go::format_signed_duration(min_age)
            ));
        }
        if !errors.is_empty() {
            return Err(go::aggregate(errors));
        }
        Ok(ImageGcPolicy {
            // Both in 0..=100, and `max_age` not negative, here.
            high_threshold_percent: high as u8,
            low_threshold_percent: low as u8,
            min_age: min_age.max(SignedDuration::ZERO).unsigned_abs(),
            max_age: max_age.unsigned_abs(),
        })
    }

    /// Whether garbage collection runs at all: not when nothing could ever trigger it (a high
    /// threshold of 100 % and no maximum age), as the kubelet then stubs its image GC out.
    pub fn enabled(&self) -> bool {
        self.high_threshold_percent < 100 || !self.max_age.is_zero()
    }
}

/// A Go duration (`2m`, `1h30m`, `-5s`); the error names the field.
fn duration(field: &str, text: &str) -> Result<SignedDuration, String> {
    go::parse_duration(text).map_err(|e| format!("{field}: Invalid value: {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_kubelets() {
        let p = ImageGcPolicy::from_config(None, None, None, None).unwrap();
        assert_eq!(p, ImageGcPolicy::default());
        assert_eq!((p.high_threshold_percent, p.low_threshold_percent), (85, 80));
        assert_eq!((p.min_age, p.max_age), (Duration::from_secs(120), Duration::ZERO));
        assert!(p.enabled());
    }

    #[test]
    fn given_fields_are_read() {
        let p = ImageGcPolicy::from_config(Some(1), Some(0), Some("0s"), Some("1h30m")).unwrap();
        assert_eq!((p.high_threshold_percent, p.low_threshold_percent), (1, 0));
        assert_eq!((p.min_age, p.max_age), (Duration::ZERO, Duration::from_secs(5400)));
        assert!(!ImageGcPolicy::from_config(Some(100), None, None, None).unwrap().enabled());
        assert!(ImageGcPolicy::from_config(Some(100), None, None, Some("1h")).unwrap().enabled());
    }

    #[test]
    fn invalid_combinations_are_refused_with_the_kubelets_messages() {
        type Row = (Option<i64>, Option<i64>, Option<&'static str>, Option<&'static str>, &'static str);
        let table: [Row; 7] = [
            (
                Some(101),
                None,
                None,
                None,
                "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
            ),
            (
                None,
                Some(-1),
                None,
                None,
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive",
            ),
            (
                Some(0),
                Some(0),
                None,
                None,
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 0 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 0",
            ),
            (
                Some(70),
                None,
                None,
                None,
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 70",
            ),
            (None, None, None, Some("-1m"), "invalid configuration: imageMaximumGCAge -1m0s must not be negative"),
            (
                None,
                None,
                None,
                Some("1m"),
                "invalid configuration: imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s",
            ),
            (
                None,
                None,
                Some("soon"),
                None,
                "imageMinimumGCAge: Invalid value: \"soon\": time: invalid duration \"soon\"",
            ),
        ];
        for (high, low, min_age, max_age, expected) in table {
            assert_eq!(
                ImageGcPolicy::from_config(high, low, min_age, max_age),
                Err(expected.to_string()),
                "{high:?} {low:?} {min_age:?} {max_age:?}"
            );
        }
        // Several problems: Go's aggregate of them all.
        assert_eq!(
            ImageGcPolicy::from_config(Some(101), Some(101), None, None),
            Err("[invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive, \
                 invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 101 must be between 0 and 100, inclusive, \
                 invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 101 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 101]"
                .to_string())
        );
    }
}
