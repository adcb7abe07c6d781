//! Keeps the server crate's shape (docs/src/architecture.md): see `tests/layering.rs` for the rules
//! and how imports are read.

#[path = "../../../tests/layering.rs"]
mod layering;

use layering::Layers;

/// The server's layers, from the top: a module may import from its own layer, as long as that
/// makes no circle, and from any layer below.
const LAYERS: Layers = &[
    ("the routers: the API's, and the kubelet port's of a cluster node", &["routes", "kubelet"]),
    (
        "the handlers, the limits in front of them, and the daemon's servers and connections",
        &[
            "api",
            "discovery",
            "openapi",
            "usage",
            "pods",
            "watch",
            "logs",
            "streaming",
            "limits",
            "dns",
            "metrics",
            "secure",
            "transport",
        ],
    ),
    ("the state every handler takes, and what the node's own endpoints take", &["server", "host"]),
    ("the API as the node sees it", &["sinks", "static_pods", "node_link", "objects"]),
    ("rules and views of stored objects", &["kinds", "service_accounts", "mirror", "table", "selectors"]),
    ("the store", &["store", "persist"]),
    ("the API's vocabulary", &["request", "protobuf", "patching", "errors", "resources"]),
    ("how the process allocates", &["allocator"]),
];

layer_tests!(LAYERS, &[]);
