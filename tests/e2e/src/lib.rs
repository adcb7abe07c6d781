//! End-to-end tests live in tests/; they drive target/release/podwright against real containerd.
