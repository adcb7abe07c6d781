//! The rendered document: lanes in spec order, one element per state and mark, and nothing
//! that needs a network or a script to display.

mod common;

use common::*;
use podwright_timeline::*;

/// The life of `shop/web`: the init container runs, the sidecar starts and turns ready after a
/// failed readiness probe, the app starts (its postStart hook runs), crashes once, runs again,
/// and the pod is stopped.
fn life() -> Recorder {
    let mut r = Recorder::new(&pod(), t(0));
    let cond = |init: &'static str, ready: &'static str, at: i64| {
        vec![
            ("PodReadyToStartContainers", "True", None, 50),
            ("Initialized", init, None, at),
            ("ContainersReady", ready, None, at),
            ("Ready", ready, None, at),
        ]
    };
    r.status(
        &status("Pending", &cond("False", "False", 0), &[waiting("init-setup", "PodInitializing", 0)], &[]),
        t(60),
    );
    r.status(&status("Pending", &cond("False", "False", 0), &[running("init-setup", 100, false, 0)], &[]), t(120));
    let done = || terminated("init-setup", 0, 1_000, 0);
    r.status(
        &status("Pending", &cond("False", "False", 0), &[done(), running("log-shipper", 1_100, false, 0)], &[]),
        t(1_150),
    );
    r.event(&event(
        Some("spec.initContainers{log-shipper}"),
        "Warning",
        "Unhealthy",
        "Readiness probe failed: <not yet>",
        1_500,
    ));
    r.status(
        &status("Pending", &cond("True", "False", 2_000), &[done(), running("log-shipper", 1_100, true, 0)], &[]),
        t(2_000),
    );
    r.event(&event(Some("spec.containers{app}"), "Normal", "Started", "Started container app", 2_100));
    let side = || running("log-shipper", 1_100, true, 0);
    r.status(
        &status("Running", &cond("True", "True", 2_200), &[done(), side()], &[running("app", 2_100, true, 0)]),
        t(2_200),
    );
    r.status(
        &status("Running", &cond("True", "False", 4_000), &[done(), side()], &[terminated("app", 1, 4_000, 0)]),
        t(4_050),
    );
    let again = with_last(running("app", 4_500, true, 1), 1, 4_000);
    r.status(&status("Running", &cond("True", "True", 4_600), &[done(), side()], &[again]), t(4_600));
    r.event(&event(
        Some("spec.initContainers{log-shipper}"),
        "Normal",
        "Killing",
        "Stopping container log-shipper",
        8_000,
    ));
    r.event(&event(None, "Warning", "FailedKillPod", "error killing pod: boom", 8_200));
    let stopped = [done(), terminated("log-shipper", 0, 8_300, 0)];
    let app_done = with_last(terminated("app", 0, 8_100, 1), 1, 4_000);
    r.status(&status("Succeeded", &cond("True", "False", 8_300), &stopped, &[app_done]), t(8_400));
    r
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

/// The `data-name`s of the lanes of one kind, in document order.
fn lane_names(html: &str, kind: &str) -> Vec<String> {
    let marker = format!("<g class=\"lane\" data-kind=\"{kind}\"");
    html.split(&marker)
        .skip(1)
        .map(|rest| {
            let name = rest.split("data-name=\"").nth(1).expect("data-name");
            name[..name.find('"').expect("closing quote")].to_string()
        })
        .collect()
}

#[test]
fn container_lanes_come_in_spec_order_init_containers_and_sidecars_first() {
    let html = render_html(life().timeline());
    assert_eq!(lane_names(&html, "container"), ["init-setup", "log-shipper", "app"]);
    let roles: Vec<&str> = html.split("data-role=\"").skip(1).map(|r| &r[..r.find('"').unwrap()]).collect();
    assert_eq!(roles, ["init", "sidecar", "app"]);
    assert!(html.contains(">sidecar (init container 2)<"), "the sidecar says what it is");
    assert_eq!(
        lane_names(&html, "condition"),
        ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"]
    );
    assert_eq!(lane_names(&html, "phase"), ["phase"]);
    assert_eq!(lane_names(&html, "pod-events"), ["pod events"]);
}

#[test]
fn each_state_and_mark_is_drawn_once_in_its_own_class() {
    let html = render_html(life().timeline());
    // States: init-setup PodInitializing, running (an init container is never ready),
    // Completed; log-shipper running, ready, Completed; app ready, Error, ready, Completed.
    let table = [
        ("class=\"bar waiting\"", 1),
        ("class=\"bar running init\"", 1),
        ("class=\"bar running not-ready\"", 1),
        ("class=\"bar running ready\"", 3),
        ("class=\"bar terminated ok\"", 3),
        ("class=\"bar terminated failed\"", 1),
        ("class=\"marker restart\"", 1),
        ("class=\"marker probe readiness\"", 1),
        ("class=\"marker hook postStart ran\"", 1),
        ("class=\"marker hook preStop ran\"", 1),
        ("class=\"marker killing\"", 1),
        ("class=\"marker event\"", 1),
        ("class=\"marker event warning\"", 1),
        ("class=\"bar phase pending\"", 1),
        ("class=\"bar phase running\"", 1),
        ("class=\"bar phase succeeded\"", 1),
    ];
    // The legend draws one of each with the same classes; count only the pod's section.
    let section = &html[html.find("<section").unwrap()..html.find("</section>").unwrap()];
    for (needle, n) in table {
        assert_eq!(count(section, needle), n, "{needle}");
    }
    assert!(html.contains("<div class=\"legend\">"));
    assert!(section.contains(">app container · 1 restart<"), "the lane counts its restarts");
}

#[test]
fn the_title_names_the_pod_and_text_is_escaped() {
    let html = render_html(life().timeline());
    assert!(html.contains("<title>podwright timeline of pod shop/web</title>"));
    assert!(html.contains("<span class=\"pod-name\">web</span>"));
    assert!(html.contains("uid u1"));
    // The probe's output is text, not markup.
    assert!(html.contains("Readiness probe failed: &lt;not yet&gt;"));
    assert!(!html.contains("<not yet>"));
}

#[test]
fn the_document_needs_no_network_and_no_script() {
    let html = render_html(life().timeline());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"));
    assert!(!html.contains("src="));
    assert!(!html.contains("href="));
    // The only URL is SVG's namespace name, which is never fetched.
    assert_eq!(html.matches("http").count(), html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count());
}

#[test]
fn several_pods_get_a_section_each_and_one_legend() {
    let first = life().timeline().clone();
    let mut second = first.clone();
    second.name = "other".into();
    let html = render_html_pods(&[first, second]);
    assert_eq!(count(&html, "<section class=\"pod\""), 2);
    assert!(html.find("data-name=\"web\"").unwrap() < html.find("data-name=\"other\"").unwrap());
    assert_eq!(count(&html, "<div class=\"legend\">"), 1);
    assert!(html.contains("<title>podwright timeline of 2 pods</title>"));
}

#[test]
fn a_pod_seen_only_once_still_draws() {
    let r = Recorder::new(&pod(), t(0));
    let html = render_html(r.timeline());
    assert_eq!(lane_names(&html, "container"), ["init-setup", "log-shipper", "app"]);
    assert_eq!(
        count(&html, "class=\"bar "),
        count(&html[html.find("<div class=\"legend\">").unwrap()..], "class=\"bar ")
    );
}
