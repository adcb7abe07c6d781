//! How long a watch waits before it asks again after the API server failed or refused it:
//! client-go's reflector back-off (`reflector.go`, `NewReflectorWithOptions`), 0.8 s doubling
//! to 30 s, jittered, and back to 0.8 s only after two minutes without a failure.

use kube::runtime::utils::Backoff;
use kube::runtime::watcher::DefaultBackoff;

/// kube's default back-off has the reflector's numbers, but `StreamBackoff` starts it over at
/// every item that is not an error, and a relist's first item (`Event::Init`) comes before the
/// list that fails: a watch refused every time would be asked again every 0.8 s forever. Here
/// only the two minutes without a failure start it over.
#[derive(Default)]
pub struct ReflectorBackoff(DefaultBackoff);

impl Iterator for ReflectorBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl Backoff for ReflectorBackoff {
    fn reset(&mut self) {}
}
