use thiserror::Error;

pub type RuntimeResult<T> = Result<T, RuntimeError>;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum RuntimeError {
    /// No runtime answers at this endpoint.
    #[error("cannot reach the container runtime at {endpoint}: {message}")]
    Unreachable { endpoint: String, message: String },
    #[error("not found: {0}")]
    NotFound(String),
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    #[error("not implemented by the runtime: {0}")]
    Unimplemented(String),
    /// Any other failure, with the runtime's own message.
    #[error("{0}")]
    Failed(String),
}
