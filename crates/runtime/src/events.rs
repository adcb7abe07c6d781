/// What happened to a container, as the runtime reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeEventKind {
    Started,
    Exited,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEvent {
    /// The CRI container ID.
    pub container_id: String,
    pub kind: RuntimeEventKind,
}
