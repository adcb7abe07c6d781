//! CRI v1 client over a unix socket (filled in by the runtime work).
