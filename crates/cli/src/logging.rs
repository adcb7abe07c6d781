//! Where podwright's log lines go and how many: stderr, as text for a person or as one JSON
//! object a line for log tools (`--log-format`), as much as the kubelet's verbosity `-v N` says
//! (or a tracing filter in `PODWRIGHT_LOG`, which wins).

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter of verbosity `v`, as the kubelet's levels go: 0 warnings and errors, 1-2 also
/// what the node does (info), 3-4 debugging, 5 and up everything. Raised for podwright's own
/// crates only (a directive's target matches by prefix: `podwright` is every `podwright_*`); the
/// libraries below stay at warnings, their debug output being about HTTP/2 frames, not pods.
fn filter(v: u8) -> String {
    let level = match v {
        0 => return "warn".to_string(),
        1 | 2 => "info",
        3 | 4 => "debug",
        _ => "trace",
    };
    format!("warn,podwright={level}")
}

pub fn init(format: LogFormat, verbosity: u8) {
    let filter = EnvFilter::try_from_env("PODWRIGHT_LOG").unwrap_or_else(|_| EnvFilter::new(filter(verbosity)));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        // Colour codes only for a person at a terminal, not in a CI log or a pipe.
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_raises_podwrights_own_levels_as_the_kubelets_does() {
        assert_eq!(filter(0), "warn");
        for (v, level) in [(1, "info"), (2, "info"), (3, "debug"), (4, "debug"), (5, "trace"), (10, "trace")] {
            let f = filter(v);
            assert_eq!(f, format!("warn,podwright={level}"), "{v}");
            EnvFilter::try_new(&f).unwrap();
        }
    }
}
