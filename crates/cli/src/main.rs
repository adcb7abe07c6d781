//! `podwright`: run Kubernetes pods on a CRI runtime with the kubelet's semantics.

mod check;
mod cluster;
mod completion;
mod config;
mod connect;
#[cfg(test)]
mod docs_tests;
mod http;
mod logging;
mod man;
mod output;
mod run;
mod runtime;
mod serve;
mod signals;
mod timeline;
mod timeline_file;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes `podwright run` and `check` promise.
pub mod exit {
    pub const SUCCEEDED: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const INVALID: u8 = 2;
    pub const NO_RUNTIME: u8 = 3;
    pub const TIMEOUT: u8 = 124;
}

#[derive(Parser)]
#[command(
    name = "podwright",
    version,
    // Every command's man page and `--version` say which podwright they are of.
    propagate_version = true,
    about = "Run Kubernetes pods on a container runtime with the kubelet's semantics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written on stderr: text for a person, json (one object a line) for
    /// log tools.
    #[arg(long, value_enum, default_value_t = logging::LogFormat::Text, global = true)]
    log_format: logging::LogFormat,
    /// How much is logged, as the kubelet's verbosity: 0 warnings and errors, 1-2 also what the
    /// node does, 3-4 debugging, 5 and up everything. A tracing filter in PODWRIGHT_LOG wins.
    #[arg(short = 'v', long = "v", value_name = "N", default_value_t = 0, global = true)]
    verbosity: u8,
}

#[derive(clap::Args, Clone)]
pub struct RuntimeArgs {
    /// CRI endpoint (unix:///path). Without it podwright starts (or reuses) its own containerd.
    #[arg(long)]
    pub runtime_endpoint: Option<String>,
    /// Where podwright keeps its state, pod volumes and the embedded containerd.
    #[arg(long, default_value = "/var/lib/podwright")]
    pub root_dir: PathBuf,
    /// A kubelet CredentialProviderConfig file: the exec plugins asked for registry
    /// credentials of the images they match.
    #[arg(long, value_name = "FILE", requires = "image_credential_provider_bin_dir")]
    pub image_credential_provider_config: Option<PathBuf>,
    /// The directory of the credential provider plugins' binaries.
    #[arg(long, value_name = "DIR", requires = "image_credential_provider_config")]
    pub image_credential_provider_bin_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the pods of a manifest until they finish, then remove them.
    Run(run::RunArgs),
    /// Validate a manifest and print what `run` would run.
    Check(check::CheckArgs),
    /// Run a node daemon with a local Kubernetes-compatible API that kubectl drives.
    Serve(serve::ServeArgs),
    /// Print the kubeconfig of `podwright serve` (written under its root directory).
    Kubeconfig {
        /// The daemon's root directory.
        #[arg(long, default_value = "/var/lib/podwright")]
        root_dir: PathBuf,
    },
    /// Write a pod's timeline as an HTML page, asked of a running `podwright serve`.
    Timeline(timeline::TimelineArgs),
    /// The embedded containerd.
    Runtime {
        #[command(subcommand)]
        action: runtime::RuntimeAction,
        /// Where the embedded containerd lives (as given to `run --root-dir`).
        #[arg(long, default_value = "/var/lib/podwright", global = true)]
        root_dir: PathBuf,
    },
    /// Print the completion script of a shell (bash, zsh, fish, elvish or powershell).
    Completion(completion::CompletionArgs),
    /// Print podwright's man page, or write it and a page per command into a directory.
    Man(man::ManArgs),
}

fn main() -> ExitCode {
    podwright_server::allocator::one_arena();
    let cli = Cli::parse();
    logging::init(cli.log_format, cli.verbosity);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("podwright: cannot start: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let code = rt.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Check(args) => check::check(&args.file),
            Command::Serve(args) => serve::serve(args).await,
            Command::Kubeconfig { root_dir } => {
                let path = serve::kubeconfig_path(&root_dir);
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        print!("{text}");
                        exit::SUCCEEDED
                    }
                    Err(e) => {
                        eprintln!(
                            "podwright: {}: {e} (is `podwright serve --root-dir {}` running?)",
                            path.display(),
                            root_dir.display()
                        );
                        exit::FAILED
                    }
                }
            }
            Command::Timeline(args) => timeline::timeline(args).await,
            Command::Runtime { action, root_dir } => runtime::runtime_cmd(action, root_dir).await,
            Command::Completion(args) => completion::completion(&args, Cli::command()),
            Command::Man(args) => man::man(&args, Cli::command()),
        }
    });
    // Workers and followers are done; do not wait for idle blocking threads.
    rt.shutdown_background();
    ExitCode::from(code)
}

/// Loads, converts, defaults and validates every object of a manifest (pods, and the
/// ConfigMaps, Secrets and RuntimeClasses beside them), printing problems and the pods' warnings.
pub fn load(file: &str) -> Result<podwright_api::Loaded, u8> {
    match podwright_api::load(file) {
        Ok(loaded) => {
            for w in loaded.pods.iter().flat_map(|(_, warnings)| warnings) {
                eprintln!("Warning: {w}");
            }
            Ok(loaded)
        }
        Err(e) => {
            eprintln!("{e}");
            Err(exit::INVALID)
        }
    }
}
