//! `podwright timeline POD`: asks a running `podwright serve` for the pod's timeline
//! (`GET /podwright/v1/namespaces/{ns}/pods/{name}/timeline`) and writes the HTML page it gets.

use crate::exit;
use crate::http::{self, Server};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TimelineArgs {
    /// The pod's name.
    pub pod: String,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The API of `podwright serve`.
    #[arg(long, default_value = "http://127.0.0.1:6443")]
    pub server: String,
    /// Write the page to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub async fn timeline(args: TimelineArgs) -> u8 {
    let server = match Server::parse(&args.server) {
        Ok(s) => s,
        Err(msg) => {
            eprintln!("podwright: --server {msg}");
            return exit::INVALID;
        }
    };
    let path = format!(
        "/podwright/v1/namespaces/{}/pods/{}/timeline",
        http::segment(&args.namespace),
        http::segment(&args.pod)
    );
    let response = match http::get(&server, &path, "text/html").await {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "podwright: cannot reach podwright serve at {}: {e}\nIs `podwright serve` running there? --server picks another address.",
                args.server
            );
            return exit::FAILED;
        }
    };
    if !(200..300).contains(&response.status) {
        eprintln!("podwright: {} answered {}: {}", args.server, response.status, failure_message(&response.body));
        return exit::FAILED;
    }
    let written = match &args.output {
        Some(file) => std::fs::write(file, &response.body).map_err(|e| format!("cannot write {}: {e}", file.display())),
        None => std::io::stdout().write_all(&response.body).map_err(|e| format!("cannot write the page: {e}")),
    };
    match written {
        Ok(()) => exit::SUCCEEDED,
        Err(msg) => {
            eprintln!("podwright: {msg}");
            exit::FAILED
        }
    }
}

/// What a failed answer says: a Kubernetes `Status`'s message, else the body's text.
fn failure_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message")?.as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_the_status_message_or_the_text() {
        let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"web\" not found","reason":"NotFound","code":404}"#;
        assert_eq!(failure_message(status), "pods \"web\" not found");
        assert_eq!(failure_message(b"  no such route\n"), "no such route");
    }
}
