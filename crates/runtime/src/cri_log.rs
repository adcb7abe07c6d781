//! The line format of the CRI log files the runtime writes a container's output to:
//! `<RFC 3339 time> <stream> <tag> <message>`, the tag `P` for a line the container had not
//! finished and `F` for the rest of one (the kubelet's `parseCRILog`,
//! `pkg/kubelet/kuberuntime/logs/logs.go`).

/// One line of a CRI log file, without its newline, split into its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub time: &'a [u8],
    /// `stdout` or `stderr`.
    pub stream: &'a [u8],
    pub tag: &'a [u8],
    /// What the container wrote; `None` when the line ends at its tag.
    pub message: Option<&'a [u8]>,
}

impl<'a> Line<'a> {
    /// The line's fields; `None` when it has fewer than three.
    pub fn parse(line: &'a [u8]) -> Option<Line<'a>> {
        let mut fields = line.splitn(4, |b| *b == b' ');
        Some(Line { time: fields.next()?, stream: fields.next()?, tag: fields.next()?, message: fields.next() })
    }

    /// Whether the container's line goes on in the next one.
    pub fn is_partial(&self) -> bool {
        self.tag == b"P"
    }
}

/// The message part of a CRI log line; the whole line when it has no message field.
pub fn message(line: &str) -> &str {
    match Line::parse(line.as_bytes()) {
        // The message is the line's tail after an ASCII space, so it starts at a char boundary.
        Some(Line { message: Some(message), .. }) => &line[line.len() - message.len()..],
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn strips_the_cri_prefix() {
        assert_eq!(super::message("2024-01-01T00:00:00.1Z stdout F hello world"), "hello world");
        assert_eq!(super::message("garbage"), "garbage");
    }
}
