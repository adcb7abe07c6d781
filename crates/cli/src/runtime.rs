//! `podwright runtime start|status|stop|clean`: the embedded containerd on its own.

use crate::exit;
use clap::Subcommand;
use podwright_node::{PodCgroups, managed_pods, remove_managed};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum RuntimeAction {
    /// Start the embedded containerd (or reuse the running one) and print its endpoint.
    Start,
    /// Is the embedded containerd running?
    Status,
    /// Stop the embedded containerd.
    Stop,
    /// Stop and remove every pod podwright left in the embedded containerd (a stopped `serve`
    /// leaves its pods running), with their files under the root directory.
    Clean,
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
        RuntimeAction::Clean => clean(&embedded, &root).await,
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

async fn clean(embedded: &podwright_containerd::EmbeddedRuntime, root: &Path) -> u8 {
    match embedded.status().await {
        Ok(s) if s.running => {}
        Ok(s) => {
            eprintln!("podwright: {s}; start it first (podwright runtime start)");
            return exit::NO_RUNTIME;
        }
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::FAILED;
        }
    }
    let runtime = match podwright_runtime::cri::connect(&embedded.endpoint()).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::NO_RUNTIME;
        }
    };
    let uids = match remove_managed(&runtime, root, PodCgroups::of_host(root).as_ref(), None, &BTreeSet::new()).await {
        Ok(u) => u,
        Err(e) => {
            eprintln!("podwright: cannot list the pods in {}: {e}", embedded.endpoint());
            return exit::FAILED;
        }
    };
    let left = managed_pods(&runtime, None).await.map(|u| u.len()).unwrap_or(usize::MAX);
    if left > 0 {
        eprintln!("podwright: {left} pods could not be removed from {}", embedded.endpoint());
        return exit::FAILED;
    }
    println!("removed {} pods from the embedded containerd under {}", uids.len(), root.display());
    exit::SUCCEEDED
}
