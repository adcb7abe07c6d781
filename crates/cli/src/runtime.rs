//! `podwright runtime start|status|stop`: the embedded containerd on its own.

use crate::exit;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum RuntimeAction {
    /// Start the embedded containerd (or reuse the running one) and print its endpoint.
    Start,
    /// Is the embedded containerd running?
    Status,
    /// Stop the embedded containerd.
    Stop,
}

pub async fn runtime_cmd(action: RuntimeAction, root: PathBuf) -> u8 {
    let embedded = podwright_containerd::EmbeddedRuntime::new(&root);
    match action {
        RuntimeAction::Start => match embedded.ensure_running().await {
            Ok(_) => {
                println!("{}", embedded.endpoint());
                exit::SUCCEEDED
            }
            Err(e) => {
                eprintln!("podwright: {e}");
                exit::NO_RUNTIME
            }
        },
        RuntimeAction::Status => match embedded.status().await {
            Ok(s) => {
                println!("{s}");
                exit::SUCCEEDED
            }
            Err(e) => {
                eprintln!("podwright: {e}");
                exit::FAILED
            }
        },
        RuntimeAction::Stop => match embedded.stop().await {
            Ok(true) => {
                println!("stopped the embedded containerd under {}", root.display());
                exit::SUCCEEDED
            }
            Ok(false) => {
                println!("the embedded containerd under {} was not running", root.display());
                exit::SUCCEEDED
            }
            Err(e) => {
                eprintln!("podwright: {e}");
                exit::FAILED
            }
        },
    }
}
