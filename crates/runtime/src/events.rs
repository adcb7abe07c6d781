/// What happened to a container, as the runtime reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeEventKind {
    Started,
    /// Its process exited 0 at `finished_at`, as containerd published it (`TaskExit`), tens of
    /// ms before its CRI record shows the exit; `Exited` follows once that does. Only for
    /// the first of several (a runtime whose records are never late sends just `Exited`).
    Completed {
        finished_at: jiff::Timestamp,
    },
    Exited,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEvent {
    /// The CRI container ID.
    pub container_id: String,
    pub kind: RuntimeEventKind,
}
