//! The two lifecycle hooks of a container.

/// Which of a container's `lifecycle` hooks: `postStart` or `preStop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    PostStart,
    PreStop,
}

impl Hook {
    /// Its field name in `lifecycle` (also how `run` labels a hook's output).
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::PostStart => "postStart",
            Hook::PreStop => "preStop",
        }
    }
}
