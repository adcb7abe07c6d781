//! Scriptable fake runtime (filled in by the runtime work).
