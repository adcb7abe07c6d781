//! A picture of each pod's life: one lane per container (init containers, sidecars, app
//! containers, in spec order) with its waiting, running and terminated spans, restarts, probe
//! failures and hook runs, and lanes for the pod's conditions and phase, on one time axis.
//!
//! [`Recorder`] is fed every status and event of one pod as they come and keeps only the
//! changes; [`render_html`] draws the result as a self-contained HTML document. Neither reads a
//! clock or does I/O: `podwright run --timeline` and the daemon feed them and write the file.

mod axis;
mod model;
mod recorder;
mod render;

pub use model::{Change, ConditionLane, ConditionValue, Hook, Lane, Marker, MarkerKind, Probe, Role, State, Timeline};
pub use recorder::{MAX_PER_LANE, Recorder};
pub use render::{render_html, render_html_pods};
