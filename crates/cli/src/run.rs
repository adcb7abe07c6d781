//! `podwright run`: the manifest file as the pod source and the terminal as the status sink;
//! stop on completion, timeout or a signal, tear everything down, print the final pods and events.

use crate::config::image_settings;
use crate::connect::connect;
use crate::signals::StopSignals;
use crate::timeline_file::TimelineFile;
use crate::{RuntimeArgs, exit, output};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_node::objects::FixedObjects;
use podwright_node::sources::FileSource;
use podwright_node::timeline::Recording;
use podwright_node::{EventLog, EventSink, Node, PodCgroups, StatusSink, logs};
use podwright_runtime::Clock;
use podwright_runtime::cri;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: String,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Stop the pods and exit with 124 after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Print the final pods and events as a v1 List.
    #[arg(short = 'o', long = "output", value_parser = ["json", "yaml"])]
    pub output: Option<String>,
    /// Do not stream the containers' output.
    #[arg(long)]
    pub quiet: bool,
    /// Seconds the pods get to stop when interrupted or timed out, instead of their
    /// terminationGracePeriodSeconds; 0 stops them at once.
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
    pub grace_period: Option<i64>,
    /// Write a picture of each pod's life (containers, probes, hooks, conditions over time) to
    /// this HTML file when the run ends.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// A KubeletConfiguration-style YAML file: serializeImagePulls, maxParallelImagePulls,
    /// imageGCHighThresholdPercent, imageGCLowThresholdPercent, imageMinimumGCAge,
    /// imageMaximumGCAge (the other fields `serve` takes are refused here).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn run(args: RunArgs) -> u8 {
    let settings = image_settings(args.config.as_deref())
        .and_then(|(pulls, gc)| Ok((pulls, gc, args.runtime.credential_plugins()?)));
    let (image_pulls, image_gc, credential_plugins) = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::INVALID;
        }
    };
    let loaded = match crate::load(&args.file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut pods: Vec<_> = loaded.pods.into_iter().map(|(pod, _warnings)| pod).collect();
    // The manifest's ConfigMaps, Secrets and RuntimeClasses are what its pods refer to.
    let objects =
        Arc::new(FixedObjects::new(loaded.config_maps, loaded.secrets).with_runtime_classes(loaded.runtime_classes));
    let runtime = match connect(&args.runtime, cri::InFlight::Cancelled).await {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("podwright: {msg}");
            return exit::NO_RUNTIME;
        }
    };
    let timeline_file = match args.timeline.as_deref().map(TimelineFile::create).transpose() {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("podwright: {msg}");
            return exit::INVALID;
        }
    };
    let clock = Clock::system();
    let started = clock.now();
    for p in &mut pods {
        p.metadata.creation_timestamp.get_or_insert(Time(started));
    }
    let events = Arc::new(EventLog::default());
    let progress: Arc<dyn StatusSink> = Arc::new(output::Progress::new(clock, started));
    let recording =
        timeline_file.is_some().then(|| Arc::new(Recording::new(clock, &pods, progress.clone(), events.clone())));
    let (status_sink, event_sink): (Arc<dyn StatusSink>, Arc<dyn EventSink>) = match &recording {
        Some(r) => (r.clone(), r.clone()),
        None => (progress, events.clone()),
    };
    let mut node = Node::new(Arc::new(runtime), &args.runtime.root_dir)
        .clock(clock)
        .events(event_sink)
        .status(status_sink)
        .objects(objects)
        .image_pulls(image_pulls)
        .image_gc(image_gc);
    if let Some(plugins) = credential_plugins {
        node = node.credential_plugins(plugins);
    }
    if let Some(cgroups) = PodCgroups::of_host(&args.runtime.root_dir) {
        node = node.cgroups(cgroups);
    }
    let (log_tx, log_rx) = mpsc::unbounded_channel();
    if !args.quiet {
        node = node.follow_logs(log_tx);
    }
    let (stop_logs, stop_logs_rx) = watch::channel(false);
    let followers = tokio::spawn(logs::follow_all(log_rx, stop_logs_rx));
    let workers = node.build();
    workers.follow(FileSource::new(pods)).await;

    let mut stop_signals = StopSignals::listen();
    // --timeout is a real-time limit at the binary's edge, not engine time.
    #[allow(clippy::disallowed_methods)]
    let deadline = args.timeout.map(|t| tokio::time::Instant::now() + Duration::from_secs_f64(t.max(0.0)));
    let mut timed_out = false;
    let stop = tokio::select! {
        _ = workers.wait_finished() => false,
        _ = stop_signals.received() => true,
        _ = sleep_until_opt(deadline) => {
            timed_out = true;
            true
        }
    };
    // A timeout is not a deletion: the pods are reported where they were when time ran out,
    // before the teardown changes their statuses (its events still follow in the list). After
    // a signal they are reported as the graceful termination left them.
    let at_timeout: Option<Vec<Pod>> = timed_out.then(|| workers.latest().iter().map(|u| u.pod()).collect());
    if stop {
        workers.delete_all(args.grace_period);
        workers.wait_finished().await;
    }

    let after_teardown: Vec<Pod> = workers.remove_finished().await.iter().map(|u| u.pod()).collect();
    let final_pods = at_timeout.unwrap_or(after_teardown);
    let _ = stop_logs.send(true);
    let _ = followers.await;

    if let Some(fmt) = args.output.as_deref() {
        let list = output::final_list(&final_pods, &events.snapshot());
        let text = if fmt == "yaml" {
            podwright_api::yaml::to_string(&list).unwrap_or_default()
        } else {
            serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
        };
        let _ = std::io::stdout().write_all(text.as_bytes());
    }
    if let (Some(file), Some(recording)) = (timeline_file, &recording)
        && let Err(msg) = file.write(&recording.render())
    {
        eprintln!("podwright: {msg}");
        return exit::FAILED;
    }
    if timed_out {
        eprintln!("podwright: timed out after {}s", args.timeout.unwrap_or_default());
        return exit::TIMEOUT;
    }
    let all_ok = final_pods.iter().all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"));
    if all_ok { exit::SUCCEEDED } else { exit::FAILED }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
