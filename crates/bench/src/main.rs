//! `podwright-bench`: what podwright costs on top of the container runtime.
//!
//! - `fake`: many pods at once against the zero-latency fake runtime: lifecycles per second,
//!   CPU per runtime action, peak RSS per pod.
//! - `real`: one pod against containerd, by bare CRI calls (the floor) and by a pod worker,
//!   interleaved: the ratio of their medians, and where podwright's extra time goes.
//! - `probes`: many pods with exec and httpGet probes, run by the `podwright` binary on
//!   containerd for a steady window: its CPU and RSS, and how late the probes run.
//! - `serve`: the `podwright serve` daemon driven through its API: idle RSS, `kubectl apply` to
//!   Running beside the floor of its CRI calls, and RSS and CPU with many running pods.
//! - `density`: `podwright serve` with many pods created at once: their startup latencies, and
//!   its CPU per pod start with 10 to 200 pods already running.
//! - `pulls`: pods with an image each from a local registry, started at once under each image
//!   pull policy (serial, parallel, at most 2): time until all run, and podwright's time per
//!   pull beside the runtime's `PullImage`.
//! - `kubelet`: the same static pods under `podwright serve` and under the Go kubelet, one at a
//!   time on the same containerd: the spec's pod to its end, many pods at once to their start,
//!   and each agent's CPU and RSS with many probed pods running.
//! - `dns`: serve's cluster DNS in a process of its own, asked by many UDP clients at once:
//!   answered queries per second, and the server's peak RSS.
//! - `api`: serve's local API in a process of its own, under 1, 10 and 100 clients at once:
//!   creates and lists per second, and the memory an open watch costs.
//! - `soak`: `podwright serve` takes many pods through its API in waves, created and deleted:
//!   what they left behind on the node, and what the daemon's memory, open files and store kept.
//! - `events`: the soak's load on serve's local API without containerd (the fake runtime, in
//!   this process): the RSS an hour of events costs, in minutes.
//! - `chaos`: `podwright serve` with many pods running through faults (containerd killed, the
//!   root's filesystem full, the pod network failing, the clock stepped): each case passes or
//!   fails with its reason.
//!
//! Prints a table for people, then `name: value` lines for scripts. Asserts nothing.

mod alloc;
mod api;
mod chaos;
mod child;
mod counted;
mod density;
mod dns;
mod events;
mod fake;
mod http;
mod kubelet;
mod measure;
mod pod;
mod probes;
mod pulls;
mod real;
mod runtime;
mod serve;
mod soak;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "podwright-bench", about = "Measure podwright's overhead over the container runtime")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Many pods at once through pod workers against the fake runtime.
    Fake(fake::FakeArgs),
    /// One pod at a time against containerd: bare CRI calls versus a pod worker.
    Real(real::RealArgs),
    /// Many probed pods run by the `podwright` binary on containerd: CPU, RSS, probe lateness.
    Probes(probes::ProbesArgs),
    /// The `podwright serve` daemon on containerd, driven through its API and by kubectl.
    Serve(serve::ServeArgs),
    /// The `podwright serve` daemon with many pods at once: startup latencies, CPU per start.
    Density(density::DensityArgs),
    /// Pods pulling an image each from a local registry, under each image pull policy.
    Pulls(pulls::PullsArgs),
    /// Serve's cluster DNS asked by many clients at once: queries per second, RSS.
    Dns(dns::DnsArgs),
    /// The same static pods under `podwright serve` and under the Go kubelet, alternated.
    Kubelet(kubelet::KubeletArgs),
    /// Serve's local API under many clients at once: creates and lists per second, RSS per watch.
    Api(api::ApiArgs),
    /// `podwright serve` takes many pods in waves: leaks, RSS and open files, the store's size.
    Soak(soak::SoakArgs),
    /// The soak's load on serve's local API over the fake runtime, in this process: RSS growth.
    Events(events::EventsArgs),
    /// `podwright serve` with many pods running through faults: each case passes or fails.
    Chaos(chaos::ChaosArgs),
    /// The server process of `api` (started by it).
    #[command(hide = true)]
    ApiServer,
    /// The server process of `dns` (started by it).
    #[command(hide = true)]
    DnsServer(dns::DnsServerArgs),
}

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    // What runs podwright's code in this process allocates as the podwright binary does.
    podwright_server::allocator::one_arena();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PODWRIGHT_LOG").unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("podwright-bench: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match &cli.command {
            Command::Fake(args) => fake::run(args).await.map(|r| r.print()),
            Command::Real(args) => real::run(args).await.map(|r| r.print()),
            Command::Probes(args) => probes::run(args).await.map(|r| r.print()),
            Command::Serve(args) => serve::run(args).await.map(|r| r.print()),
            Command::Density(args) => density::run(args).await.map(|r| r.print()),
            Command::Pulls(args) => pulls::run(args).await.map(|r| r.print()),
            Command::Dns(args) => dns::run(args).await.map(|r| r.print()),
            Command::Kubelet(args) => kubelet::run(args).await.map(|r| r.print()),
            Command::DnsServer(args) => dns::serve(args).await,
            Command::Api(args) => api::run(args).await.map(|r| r.print()),
            Command::ApiServer => api::serve().await,
            Command::Soak(args) => soak::run(args).await.map(|r| r.print()),
            Command::Events(args) => events::run(args).await.map(|r| r.print()),
            Command::Chaos(args) => chaos::run(args).await.map(|r| r.print()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("podwright-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
