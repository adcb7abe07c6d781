//! Keeps the node layer's shape (docs/src/architecture.md): see `tests/layering.rs` for the rules
//! and how imports are read.

#[path = "../../../tests/layering.rs"]
mod layering;

use layering::Layers;

/// The node's layers, from the top: a module may import from its own layer, as long as that
/// makes no circle, and from any layer below.
const LAYERS: Layers = &[
    ("the wiring, the one place that names every part", &["builder"]),
    ("one worker per pod", &["pod_workers"]),
    ("the pod worker", &["worker"]),
    // Cluster mode adds here the kubelet's port (`kubelet_server`: exec, attach, logs,
    // port-forward and stats for the API server). Mirror pods are `static_pods`' (the API side
    // is each mode's `StaticPodHost`).
    (
        "what a worker drives, and the node-wide loops",
        &[
            "executor",
            "probes",
            "eviction",
            "checkpoint",
            "admission",
            "pleg",
            "usage",
            "log_rotation",
            "kubelet_server",
        ],
    ),
    (
        "what the executor makes and starts things with",
        &["images", "cri", "volumes", "pod_cgroup", "runtime_class", "termination_message"],
    ),
    // Cluster mode's pod source (a watch of the API server's pods bound to this node) goes in
    // `sources`, its status sink (the status subresource) in `sinks`.
    (
        "the seams and the values every layer shares",
        &[
            "context",
            "pod_update",
            "sources",
            "static_pods",
            "sinks",
            "timeline",
            "events",
            "metrics",
            "layout",
            "whole_file",
            "objects",
            "downward",
            "node_info",
            "logs",
        ],
    ),
];

/// Cluster mode's modules, named in [`LAYERS`] before they exist.
const PLANNED: &[&str] = &["kubelet_server"];

layer_tests!(LAYERS, PLANNED);
