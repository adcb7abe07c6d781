//! Follows containers' CRI log files and copies their lines to stderr, prefixed with the
//! container's name, for `podwright run`; exec hooks' output, which no log file holds, comes
//! the same way once each hook ends.

use podwright_runtime::cri_log;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone)]
pub struct LogTarget {
    pub container: String,
    pub path: PathBuf,
}

/// What the node hands the terminal: log files to follow, and what exec hooks printed.
#[derive(Debug, Clone)]
pub enum Output {
    Follow(LogTarget),
    /// An exec hook's stdout then stderr: the kubelet keeps it out of events and logs, but a
    /// person watching `run` needs it to see why a container is slow to start or stop.
    Hook {
        container: String,
        hook: &'static str,
        text: String,
    },
}

impl From<LogTarget> for Output {
    fn from(t: LogTarget) -> Self {
        Output::Follow(t)
    }
}

/// How often a follower looks for more output once it has read everything: output is for a
/// person watching, so a few tens of milliseconds is as good as instant.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(50);

/// Follows every announced log file until `stop` turns true, then reads what is left and
/// returns.
pub async fn follow_all(mut targets: mpsc::UnboundedReceiver<Output>, stop: watch::Receiver<bool>) {
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let mut stop_rx = stop.clone();
        tokio::select! {
            t = targets.recv() => match t {
                Some(Output::Follow(t)) => { tasks.spawn(follow(t, stop.clone())); }
                Some(Output::Hook { container, hook, text }) => {
                    let mut err = std::io::stderr().lock();
                    for line in text.lines() {
                        let _ = writeln!(err, "[{container} {hook}] {line}");
                    }
                }
                None => break,
            },
            _ = stop_rx.wait_for(|s| *s) => break,
        }
    }
    while tasks.join_next().await.is_some() {}
}

async fn follow(t: LogTarget, stop: watch::Receiver<bool>) {
    let mut file = None;
    loop {
        let stopping = *stop.borrow();
        if file.is_none() {
            file = tokio::fs::File::open(&t.path).await.ok().map(BufReader::new);
        }
        if let Some(f) = file.as_mut() {
            let mut line = String::new();
            loop {
                line.clear();
                match f.read_line(&mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) if !line.ends_with('\n') && !stopping => {
                        // A line still being written: wait for the rest.
                        break;
                    }
                    Ok(_) => {
                        let msg = cri_log::message(line.trim_end_matches('\n'));
                        let _ = writeln!(std::io::stderr(), "[{}] {}", t.container, msg);
                    }
                }
            }
        }
        if stopping {
            return;
        }
        tokio::time::sleep(FOLLOW_INTERVAL).await;
    }
}
