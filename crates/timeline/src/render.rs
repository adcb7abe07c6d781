//! Draws timelines as one self-contained HTML document: inline CSS and SVG, no script and
//! nothing fetched, so the file opens anywhere as it is. Tooltips are SVG `<title>`s.
//!
//! The elements carry what they show in their classes and data attributes (`class="lane"` with
//! `data-kind`, `data-role` and `data-name`; `class="bar running ready"`; `class="marker probe
//! liveness"`), which the legend, the styles and the tests rely on.

use crate::axis::{Scale, span_text};
use crate::model::{Change, ConditionLane, Lane, Marker, MarkerKind, Role, State, Timeline};
use jiff::Timestamp;
use std::fmt::Write;

/// The width of the picture, in CSS pixels.
const WIDTH: f64 = 1340.0;
/// The left column, with each lane's name.
const GUTTER: f64 = 250.0;
const RIGHT_MARGIN: f64 = 28.0;
const AXIS_HEIGHT: f64 = 30.0;
const LANE_HEIGHT: f64 = 58.0;
/// Within a container lane: a row of event ticks, a row of hook marks, the state bar, and a
/// row of probe failures and kills.
const TICK_TOP: f64 = 1.5;
const TOP_ROW: f64 = 13.0;
const BAR_TOP: f64 = 20.0;
const BAR_HEIGHT: f64 = 22.0;
/// A terminated container's bar is thinner: the container is over, the lane is not.
const ENDED_BAR_HEIGHT: f64 = 12.0;
const BOTTOM_ROW: f64 = 50.0;
/// The pod's lanes (conditions, phase, pod events).
const BAND_HEIGHT: f64 = 25.0;
const BAND_BAR_TOP: f64 = 5.0;
const BAND_BAR_HEIGHT: f64 = 15.0;
const GROUP_GAP: f64 = 26.0;
/// About how wide a character of the bars' 11px labels is, to leave out labels that do not fit.
const CHAR_WIDTH: f64 = 6.4;
/// Lane names longer than this are cut (the tooltip has them whole).
const MAX_NAME_CHARS: usize = 30;

/// One pod's timeline as an HTML document.
pub fn render_html(timeline: &Timeline) -> String {
    render_html_pods(std::slice::from_ref(timeline))
}

/// Several pods' timelines in one HTML document, a section each, in the order given.
pub fn render_html_pods(timelines: &[Timeline]) -> String {
    let title = match timelines {
        [t] => format!("podwright timeline of pod {}/{}", t.namespace, t.name),
        _ => format!("podwright timeline of {} pods", timelines.len()),
    };
    let mut out = String::with_capacity(16_384);
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        esc(&title)
    );
    for t in timelines {
        section(&mut out, t);
    }
    legend(&mut out);
    out.push_str("</body>\n</html>\n");
    out
}

fn section(out: &mut String, t: &Timeline) {
    let scale = Scale::new(t.start, t.end, GUTTER, WIDTH - GUTTER - RIGHT_MARGIN);
    let _ = writeln!(
        out,
        "<section class=\"pod\" data-namespace=\"{ns}\" data-name=\"{name}\" data-uid=\"{uid}\">\n\
         <h2>pod <span class=\"pod-name\">{name}</span> <span class=\"ns\">in namespace {ns}</span></h2>\n\
         <p class=\"meta\">uid {uid} · from {from} to {to} ({span})</p>",
        ns = esc(&t.namespace),
        name = esc(&t.name),
        uid = esc(&t.uid),
        from = wall(t.start),
        to = wall(t.end),
        span = span_text(crate::axis::millis_between(t.start, t.end)),
    );
    let mut body = String::with_capacity(8_192);
    let _ = writeln!(body, "<text class=\"group\" x=\"12\" y=\"{:.1}\">containers</text>", AXIS_HEIGHT - 11.0);
    let mut y = AXIS_HEIGHT;
    for (i, lane) in t.lanes.iter().enumerate() {
        container_lane(&mut body, lane, y, i % 2 == 1, &scale);
        y += LANE_HEIGHT;
    }
    let _ = writeln!(body, "<text class=\"group\" x=\"12\" y=\"{:.1}\">pod</text>", y + GROUP_GAP - 8.0);
    y += GROUP_GAP;
    for (i, c) in t.conditions.iter().enumerate() {
        condition_lane(&mut body, c, y, i % 2 == 1, &scale);
        y += BAND_HEIGHT;
    }
    phase_lane(&mut body, &t.phases, y, &scale);
    y += BAND_HEIGHT;
    if !t.pod_events.is_empty() {
        band_start(&mut body, "pod-events", "pod events", y, true);
        for m in &t.pod_events {
            let warning = matches!(m.kind, MarkerKind::Event { warning: true, .. });
            let _ = writeln!(
                body,
                "<rect class=\"marker event{}\" x=\"{:.1}\" y=\"{BAND_BAR_TOP}\" width=\"3\" height=\"{BAND_BAR_HEIGHT}\"><title>pod at {}: {}</title></rect>",
                if warning { " warning" } else { "" },
                scale.x(m.at) - 1.5,
                scale.offset(m.at),
                esc(&m.text)
            );
        }
        body.push_str("</g>\n");
        y += BAND_HEIGHT;
    }
    let height = y + 8.0;
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\">"
    );
    for (x, label) in scale.ticks() {
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\">{label}</text>",
            AXIS_HEIGHT - 6.0,
            height - 6.0,
            AXIS_HEIGHT - 11.0
        );
    }
    out.push_str(&body);
    let _ = writeln!(
        out,
        "<line class=\"divider\" x1=\"{GUTTER}\" x2=\"{GUTTER}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\n</svg>\n</section>",
        AXIS_HEIGHT - 6.0,
        height - 6.0
    );
}

fn container_lane(out: &mut String, lane: &Lane, y: f64, alt: bool, scale: &Scale) {
    let role = lane.role.as_str();
    let _ = writeln!(
        out,
        "<g class=\"lane\" data-kind=\"container\" data-role=\"{role}\" data-name=\"{}\" transform=\"translate(0 {y:.1})\">\n\
         <rect class=\"lane-bg{}\" x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{LANE_HEIGHT}\"/>\
         <rect class=\"role-strip {role}\" x=\"0\" y=\"0\" width=\"5\" height=\"{LANE_HEIGHT}\"/>\n\
         <text class=\"name\" x=\"14\" y=\"24\">{}<title>{}</title></text>\
         <text class=\"role {role}\" x=\"14\" y=\"41\">{}</text>",
        esc(&lane.name),
        if alt { " alt" } else { "" },
        esc(&cut(&lane.name, MAX_NAME_CHARS)),
        esc(&lane.name),
        esc(&role_line(lane)),
    );
    for (i, change) in lane.states.iter().enumerate() {
        let until = lane.states.get(i + 1).map_or(scale.end(), |next| next.at);
        let look = state_look(&change.value, lane.role);
        let mut tip = format!("{}: {}", lane.name, look.label);
        if let State::Waiting { message: Some(m), .. } = &change.value {
            tip = format!("{tip}\n{m}");
        }
        let (top, height) = match change.value {
            State::Terminated { .. } => (BAR_TOP + (BAR_HEIGHT - ENDED_BAR_HEIGHT) / 2.0, ENDED_BAR_HEIGHT),
            _ => (BAR_TOP, BAR_HEIGHT),
        };
        let b = Bar { from: change.at, until, top, height, class: look.class };
        b.draw(out, &[&look.label, &look.short], &tip, scale);
    }
    for m in &lane.markers {
        marker(out, m, scale, &lane.name);
    }
    out.push_str("</g>\n");
}

/// The line under a lane's name: its role, its restart count if it restarted, and how much of
/// its history was dropped.
fn role_line(lane: &Lane) -> String {
    let mut line = lane.role.describe();
    let restarts = lane.markers.iter().rev().find_map(|m| match m.kind {
        MarkerKind::Restart(n) => Some(n),
        _ => None,
    });
    if let Some(restarts) = restarts {
        let _ = write!(line, " · {restarts} restart{}", if restarts == 1 { "" } else { "s" });
    }
    if lane.dropped > 0 {
        let _ = write!(line, " · {} oldest not kept", lane.dropped);
    }
    line
}

/// How a state is drawn: its class, the words on its bar, and fewer words for a short bar.
struct Look {
    class: &'static str,
    label: String,
    short: String,
}

fn state_look(state: &State, role: Role) -> Look {
    let look = |class, label: &str, short: &str| Look { class, label: label.to_string(), short: short.to_string() };
    match state {
        // An init container is never ready: it runs to completion.
        State::Running { .. } if matches!(role, Role::Init(_)) => look("running init", "Running", "running"),
        State::Waiting { reason, .. } => {
            let reason = reason.as_deref().unwrap_or("Waiting");
            let trouble = reason.contains("BackOff") || reason.starts_with("Err") || reason.ends_with("Error");
            look(if trouble { "waiting trouble" } else { "waiting" }, reason, "waiting")
        }
        State::Running { started: false, .. } => look("running not-started", "Running, not started", "not started"),
        State::Running { ready: false, .. } => look("running not-ready", "Running, not ready", "not ready"),
        State::Running { .. } => look("running ready", "Running, ready", "ready"),
        State::Terminated { exit_code, reason } => Look {
            class: if *exit_code == 0 { "terminated ok" } else { "terminated failed" },
            label: format!("{} (exit {exit_code})", reason.as_deref().unwrap_or("Terminated")),
            short: format!("exit {exit_code}"),
        },
    }
}

/// A span of one value, drawn as a bar.
struct Bar {
    from: Timestamp,
    until: Timestamp,
    top: f64,
    height: f64,
    class: &'static str,
}

impl Bar {
    /// Draws the bar with the first of `labels` that fits inside it, if any.
    fn draw(&self, out: &mut String, labels: &[&str], tip: &str, scale: &Scale) {
        let (top, height) = (self.top, self.height);
        let x = scale.x(self.from);
        let width = (scale.x(self.until) - x).max(1.5);
        let span = span_text(crate::axis::millis_between(self.from, self.until));
        let _ = writeln!(
            out,
            "<rect class=\"bar {}\" x=\"{x:.1}\" y=\"{top}\" width=\"{width:.1}\" height=\"{height}\" rx=\"3\"><title>{} · {} → {} ({span})</title></rect>",
            self.class,
            esc(tip),
            scale.offset(self.from),
            scale.offset(self.until),
        );
        if let Some(label) = labels.iter().find(|l| (l.chars().count() as f64) * CHAR_WIDTH + 10.0 <= width) {
            let _ = writeln!(
                out,
                "<text class=\"bar-label\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 5.0,
                top + height / 2.0 + 4.0,
                esc(label)
            );
        }
    }
}

/// A mark on a container's lane, in its row: events above, hooks above the bar, restarts
/// across it, probe failures and kills below.
fn marker(out: &mut String, m: &Marker, scale: &Scale, lane: &str) {
    let x = scale.x(m.at);
    let tip = format!("{lane} at {}: {}", scale.offset(m.at), m.text);
    let tip = esc(&tip);
    let _ = match &m.kind {
        MarkerKind::Restart(n) => writeln!(
            out,
            "<g class=\"marker restart\"><line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">↻{n}</text><title>{tip}</title></g>",
            TOP_ROW - 5.0,
            BAR_TOP + BAR_HEIGHT + 3.0,
            x + 3.0,
            TOP_ROW + 3.5,
        ),
        MarkerKind::ProbeFailed(p) => writeln!(
            out,
            "<path class=\"marker probe {}\" d=\"M{:.1} {:.1}h10l-5 8z\"><title>{tip}</title></path>",
            p.as_str(),
            x - 5.0,
            BOTTOM_ROW - 4.0
        ),
        MarkerKind::Hook { hook, failed } => writeln!(
            out,
            "<path class=\"marker hook {} {}\" d=\"M{x:.1} {:.1}l5.5 5.5l-5.5 5.5l-5.5 -5.5z\"><title>{tip}</title></path>",
            hook.as_str(),
            if *failed { "failed" } else { "ran" },
            TOP_ROW - 5.5
        ),
        MarkerKind::Killing => writeln!(
            out,
            "<path class=\"marker killing\" d=\"M{:.1} {:.1}l7 7m0 -7l-7 7\"><title>{tip}</title></path>",
            x - 3.5,
            BOTTOM_ROW - 3.5
        ),
        MarkerKind::Event { warning, .. } => writeln!(
            out,
            "<rect class=\"marker event{}\" x=\"{:.1}\" y=\"{TICK_TOP}\" width=\"3\" height=\"5\"><title>{tip}</title></rect>",
            if *warning { " warning" } else { "" },
            x - 1.5
        ),
    };
}

fn condition_lane(out: &mut String, lane: &ConditionLane, y: f64, alt: bool, scale: &Scale) {
    band_start(out, "condition", &lane.type_, y, alt);
    for (i, c) in lane.changes.iter().enumerate() {
        let until = lane.changes.get(i + 1).map_or(scale.end(), |next| next.at);
        let class = match c.value.status.as_str() {
            "True" => "cond true",
            "False" => "cond false",
            _ => "cond unknown",
        };
        let label = match &c.value.reason {
            Some(r) => format!("{} · {r}", c.value.status),
            None => c.value.status.clone(),
        };
        let tip = format!("{}: {label}", lane.type_);
        let b = Bar { from: c.at, until, top: BAND_BAR_TOP, height: BAND_BAR_HEIGHT, class };
        b.draw(out, &[&label, &c.value.status], &tip, scale);
    }
    out.push_str("</g>\n");
}

fn phase_lane(out: &mut String, phases: &[Change<String>], y: f64, scale: &Scale) {
    band_start(out, "phase", "phase", y, false);
    for (i, p) in phases.iter().enumerate() {
        let until = phases.get(i + 1).map_or(scale.end(), |next| next.at);
        let class = match p.value.as_str() {
            "Pending" => "phase pending",
            "Running" => "phase running",
            "Succeeded" => "phase succeeded",
            "Failed" => "phase failed",
            _ => "phase unknown",
        };
        let b = Bar { from: p.at, until, top: BAND_BAR_TOP, height: BAND_BAR_HEIGHT, class };
        b.draw(out, &[&p.value], &format!("phase: {}", p.value), scale);
    }
    out.push_str("</g>\n");
}

/// Opens a pod lane's group, with its background and name.
fn band_start(out: &mut String, kind: &str, name: &str, y: f64, alt: bool) {
    let _ = writeln!(
        out,
        "<g class=\"lane\" data-kind=\"{kind}\" data-name=\"{name}\" transform=\"translate(0 {y:.1})\">\n\
         <rect class=\"lane-bg{}\" x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{BAND_HEIGHT}\"/>\
         <text class=\"band-name\" x=\"14\" y=\"{:.1}\">{name}</text>",
        if alt { " alt" } else { "" },
        BAND_BAR_TOP + BAND_BAR_HEIGHT / 2.0 + 4.0,
        name = esc(name),
    );
}

/// What each colour and mark means, drawn with the same classes as the picture.
fn legend(out: &mut String) {
    let swatch = |class: &str| {
        format!(
            "<svg width=\"26\" height=\"14\"><rect class=\"bar {class}\" x=\"0\" y=\"1\" width=\"26\" height=\"12\" rx=\"3\"/></svg>"
        )
    };
    let mark = |shape: &str| format!("<svg width=\"14\" height=\"14\">{shape}</svg>");
    let items = [
        (swatch("waiting"), "waiting (reason)".to_string()),
        (swatch("waiting trouble"), "waiting: back-off or error".into()),
        (swatch("running not-started"), "running, startup probe not passed".into()),
        (swatch("running not-ready"), "running, not ready".into()),
        (swatch("running ready"), "running, ready (init container: running)".into()),
        (swatch("terminated ok"), "terminated, exit 0".into()),
        (swatch("terminated failed"), "terminated, exit code ≠ 0".into()),
        (mark("<g class=\"marker restart\"><line x1=\"4\" x2=\"4\" y1=\"0\" y2=\"14\"/></g>"), "restart".into()),
        (mark("<path class=\"marker probe liveness\" d=\"M2 3h10l-5 8z\"/>"), "liveness probe failed".into()),
        (mark("<path class=\"marker probe readiness\" d=\"M2 3h10l-5 8z\"/>"), "readiness probe failed".into()),
        (mark("<path class=\"marker probe startup\" d=\"M2 3h10l-5 8z\"/>"), "startup probe failed".into()),
        (mark("<path class=\"marker hook ran\" d=\"M7 1.5l5.5 5.5l-5.5 5.5l-5.5 -5.5z\"/>"), "hook ran".into()),
        (mark("<path class=\"marker hook failed\" d=\"M7 1.5l5.5 5.5l-5.5 5.5l-5.5 -5.5z\"/>"), "hook failed".into()),
        (mark("<path class=\"marker killing\" d=\"M3 3l8 8m0 -8l-8 8\"/>"), "killing".into()),
        (mark("<rect class=\"marker event\" x=\"5.5\" y=\"3\" width=\"3\" height=\"8\"/>"), "event".into()),
        (
            mark("<rect class=\"marker event warning\" x=\"5.5\" y=\"3\" width=\"3\" height=\"8\"/>"),
            "warning event".into(),
        ),
        (swatch("cond true"), "condition True".into()),
        (swatch("cond false"), "condition False".into()),
        (swatch("phase pending"), "Pending".into()),
        (swatch("phase running"), "Running".into()),
        (swatch("phase succeeded"), "Succeeded".into()),
        (swatch("phase failed"), "Failed".into()),
    ];
    out.push_str("<div class=\"legend\">");
    for (picture, words) in items {
        let _ = write!(out, "<span class=\"item\">{picture}{}</span>", esc(&words));
    }
    out.push_str("</div>\n");
}

/// A moment on the wall clock, to the millisecond.
fn wall(t: Timestamp) -> String {
    format!("{t:.3}")
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).chain(['…']).collect() }
}

/// Text for HTML and SVG, in elements and in quoted attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:16px 20px;color:#1f2933;background:#fff}
section.pod{margin:0 0 26px}
h2{font-size:17px;font-weight:normal;margin:0 0 2px}
h2 .pod-name{font-weight:bold;font-family:"DejaVu Sans Mono",monospace}
h2 .ns{color:#52606d;font-size:14px}
.meta{font-size:12px;color:#52606d;margin:0 0 6px}
svg text{font-size:11px;fill:#1f2933}
text.name{font:bold 13px "DejaVu Sans Mono",monospace}
text.role{fill:#52606d}
text.role.sidecar{fill:#6d28d9}
text.band-name{fill:#3e4c59}
text.group{font-size:12px;font-weight:bold;fill:#52606d;letter-spacing:.05em}
text.tick{fill:#52606d;text-anchor:middle}
text.bar-label{pointer-events:none}
/* translucent, so that the grid drawn before the lanes shows through */
.lane-bg{fill:none}
.lane-bg.alt{fill:#0f2a5a;fill-opacity:.04}
.role-strip.init{fill:#9aa5b1}
.role-strip.sidecar{fill:#8b5cf6}
.role-strip.app{fill:#0ea5e9}
.grid{stroke:#e4e7eb}
.divider{stroke:#9aa5b1}
.bar{stroke:#fff;stroke-width:.5}
.bar.waiting{fill:#f8dc8c}
.bar.waiting.trouble{fill:#f5a25d}
.bar.running.not-started{fill:#d8f0de}
.bar.running.not-ready{fill:#9bd8aa}
.bar.running.ready,.bar.running.init{fill:#2f9e57}
.bar.terminated.ok{fill:#c5ced8}
.bar.terminated.failed{fill:#e05d5a}
.bar.cond.true{fill:#62bd85}
.bar.cond.false{fill:#e4e7eb}
.bar.cond.unknown{fill:#f8dc8c}
.bar.phase.pending{fill:#f8dc8c}
.bar.phase.running{fill:#5b9bd5}
.bar.phase.succeeded{fill:#62bd85}
.bar.phase.failed{fill:#e05d5a}
.bar.phase.unknown{fill:#c5ced8}
.marker.restart line{stroke:#7c3aed;stroke-width:2.5}
.marker.restart text{fill:#7c3aed;font-weight:bold}
.marker.probe.liveness{fill:#c62828}
.marker.probe.readiness{fill:#ef8a17}
.marker.probe.startup{fill:#8e44ad}
.marker.hook.ran{fill:#2563eb;stroke:#fff;stroke-width:1}
.marker.hook.failed{fill:#c62828;stroke:#1f2933;stroke-width:1}
.marker.killing{stroke:#1f2933;stroke-width:2;fill:none}
.marker.event{fill:#7b8794}
.marker.event.warning{fill:#d9480f}
.bar.running.ready+.bar-label,.bar.running.init+.bar-label,.bar.terminated.failed+.bar-label,.bar.phase.running+.bar-label,.bar.phase.failed+.bar-label{fill:#fff}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:12px;color:#323f4b;max-width:1300px;padding:8px 0;border-top:1px solid #e4e7eb}
.legend .item{display:inline-flex;align-items:center;gap:5px}
"#;
