//! Faults a test injects into the fake: calls that fail, lose their reply or take long, and
//! events that are lost or come late. Nothing is injected until a test sets a hook; the hooks
//! draw their own dice, so a seeded simulation stays reproducible.

use super::*;

/// What a test's hook does to one runtime call (see [`FakeRuntime::set_call_faults`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFault {
    /// The call fails with this error before it has any effect.
    Fail(RuntimeError),
    /// The call has its effect, but its caller gets this error (a reply lost on the way back,
    /// a client-side timeout).
    LoseReply(RuntimeError),
    /// The call waits this long (virtual time) before it acts.
    Slow(Duration),
}

/// What a test's hook does to one runtime event (see [`FakeRuntime::set_event_faults`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventFault {
    Deliver,
    /// Never sent: only a relist finds the change.
    Drop,
    /// Sent this long (virtual time) after the change.
    Delay(Duration),
}

type CallHook = Arc<dyn Fn(&Call) -> Option<CallFault> + Send + Sync>;
type EventHook = Arc<dyn Fn(&RuntimeEvent) -> EventFault + Send + Sync>;

#[derive(Default)]
pub(super) struct Hooks {
    calls: Option<CallHook>,
    events: Option<EventHook>,
}

impl FakeRuntime {
    fn hooks(&self) -> MutexGuard<'_, Hooks> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks `hook` about every call that acts (sandbox and container calls, `exec_sync`), with
    /// the call as the call log would record it; reads are never faulted. A call failed by
    /// [`CallFault::Fail`] is not in the call log.
    pub fn set_call_faults(&self, hook: impl Fn(&Call) -> Option<CallFault> + Send + Sync + 'static) {
        self.hooks().calls = Some(Arc::new(hook));
    }

    /// Asks `hook` about every event before it is sent. It is called while the fake's state is
    /// locked: it must not call the fake.
    pub fn set_event_faults(&self, hook: impl Fn(&RuntimeEvent) -> EventFault + Send + Sync + 'static) {
        self.hooks().events = Some(Arc::new(hook));
    }

    /// Removes both hooks: calls and events behave again.
    pub fn clear_faults(&self) {
        *self.hooks() = Hooks::default();
    }

    /// What the call hook says about the call `call` builds (built only when there is a hook):
    /// `Err` fails the call now; `Ok(Some(e))` lets it act, then fail with `e`.
    pub(super) async fn fault(&self, call: impl FnOnce(&State) -> Call) -> RuntimeResult<Option<RuntimeError>> {
        let Some(hook) = self.hooks().calls.clone() else { return Ok(None) };
        let call = call(&self.lock());
        match hook(&call) {
            None => Ok(None),
            Some(CallFault::Fail(e)) => Err(e),
            Some(CallFault::LoseReply(e)) => Ok(Some(e)),
            Some(CallFault::Slow(takes)) => {
                tokio::time::sleep(takes).await;
                Ok(None)
            }
        }
    }

    /// Sends an event, unless the event hook drops or delays it.
    pub(super) fn deliver(&self, event: RuntimeEvent) {
        let hook = self.hooks().events.clone();
        match hook.map_or(EventFault::Deliver, |h| h(&event)) {
            EventFault::Deliver => {
                let _ = self.events.send(event);
            }
            EventFault::Drop => {}
            // Late only where a runtime can keep it (not while one shuts down).
            EventFault::Delay(after) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let events = self.events.clone();
                    runtime.spawn(async move {
                        tokio::time::sleep(after).await;
                        let _ = events.send(event);
                    });
                }
                Err(_) => {
                    let _ = self.events.send(event);
                }
            },
        }
    }
}
