//! The timeline: `run --timeline` draws a real pod's life, which a real browser (Debian's
//! chromium, headless) renders; `podwright timeline` fetches one from `podwright serve`.

// Real browser, real sockets: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A file in the temporary directory, removed on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> TempPath {
        TempPath(std::env::temp_dir().join(format!("podwright-e2e-{}-{name}", std::process::id())))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0).or_else(|_| std::fs::remove_dir_all(&self.0));
    }
}

/// The parts of the page that draw one lane each, by the lane's `data-name`, in page order.
fn lanes<'a>(html: &'a str, kind: &str) -> Vec<(String, &'a str)> {
    let start = format!("data-kind=\"{kind}\"");
    html.split("<g class=\"lane\" ")
        .skip(1)
        .filter(|part| part.starts_with(&start))
        .map(|part| {
            let name = part.split("data-name=\"").nth(1).and_then(|n| n.split('"').next()).unwrap_or_default();
            (name.to_string(), part)
        })
        .collect()
}

/// The x of the first bar of this class in a lane.
fn first_bar_x(lane: &str, class: &str) -> f64 {
    let at = lane.find(&format!("class=\"bar {class}")).unwrap_or_else(|| panic!("no {class} bar in {lane}"));
    let x = lane[at..].split("x=\"").nth(1).and_then(|v| v.split('"').next()).expect("x");
    x.parse().expect("x is a number")
}

/// Screenshots `page` with headless chromium into `png`.
fn screenshot(page: &Path, png: &Path) {
    let profile = TempPath::new("chromium-profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            // As root, chromium refuses to start without this.
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start chromium ({e}): scripts/setup installs it"));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium took over 90 s to screenshot {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The screenshot's size and its pixels as RGB.
fn decode(png_file: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(png_file).expect("the screenshot exists");
    let mut decoder = png::Decoder::new(BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a sane size")];
    let frame = reader.next_frame(&mut buf).expect("a frame");
    let channels = match frame.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    let pixels = buf[..frame.buffer_size()].chunks_exact(channels).map(|p| [p[0], p[1], p[2]]).collect();
    (frame.width, frame.height, pixels)
}

#[test]
fn run_timeline_draws_init_container_sidecar_and_app_in_order_and_a_browser_renders_it() {
    let pod = pod_name("timeline");
    let page = TempPath::new("timeline.html");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: init-setup
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'sleep 1']
  - name: log-shipper
    image: localhost/busybox:1.36
    restartPolicy: Always
    command: ['sh', '-c', 'trap "exit 0" TERM; touch /tmp/ready; while true; do sleep 0.2; done']
    readinessProbe:
      exec: {{command: ['test', '-f', '/tmp/ready']}}
      periodSeconds: 1
    lifecycle:
      preStop: {{exec: {{command: ['true']}}}}
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'sleep 3']
    lifecycle:
      postStart: {{exec: {{command: ['true']}}}}
"#
        ),
        &["--quiet", "--timeline", page.0.to_str().expect("UTF-8 path")],
    );
    o.assert_code(0);
    let html = std::fs::read_to_string(&page.0).expect("the timeline was written");
    assert!(html.contains(&format!("data-uid=\"{}\"", uid(&o.single_pod()))), "{html}");

    // Lanes in spec order: the init container, the sidecar, the app.
    let containers = lanes(&html, "container");
    let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["init-setup", "log-shipper", "app"], "{html}");
    let [(_, init), (_, sidecar), (_, app)] = &containers[..] else { unreachable!() };
    assert!(init.contains("data-role=\"init\"") && sidecar.contains("data-role=\"sidecar\""), "{html}");
    assert!(app.contains("data-role=\"app\""), "{html}");
    // Each did its part: the init container completed, the sidecar turned ready by its probe
    // and was stopped after its preStop hook, the app ran its postStart hook and completed.
    assert!(init.contains("class=\"bar terminated ok\""), "{init}");
    assert!(sidecar.contains("class=\"bar running ready\""), "{sidecar}");
    assert!(sidecar.contains("class=\"marker hook preStop ran\"") && sidecar.contains("class=\"marker killing\""));
    assert!(
        app.contains("class=\"marker hook postStart ran\"") && app.contains("class=\"bar terminated ok\""),
        "{app}"
    );
    // And in the picture's order: the sidecar starts once the init container has completed,
    // the app once the sidecar has started.
    assert!(first_bar_x(sidecar, "running") >= first_bar_x(init, "terminated ok"), "{html}");
    assert!(first_bar_x(app, "running") >= first_bar_x(sidecar, "running"), "{html}");
    let conditions: Vec<String> = lanes(&html, "condition").into_iter().map(|(n, _)| n).collect();
    assert!(
        is_subsequence(&conditions, &["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"]),
        "{conditions:?}"
    );
    assert!(lanes(&html, "phase")[0].1.contains("class=\"bar phase succeeded\""), "{html}");

    let shot = TempPath::new("timeline.png");
    screenshot(&page.0, &shot.0);
    let (width, height, pixels) = decode(&shot.0);
    assert_eq!((width, height), (1400, 900));
    let has = |rgb: [u8; 3]| pixels.iter().filter(|p| **p == rgb).count();
    // Whole areas in the page's colours: a blank or unstyled page has none of them.
    assert!(has([0x2f, 0x9e, 0x57]) > 1_000, "no 'running, ready' bars in the screenshot");
    assert!(has([0x8b, 0x5c, 0xf6]) > 100, "no sidecar strip in the screenshot");
    assert!(has([0x5b, 0x9b, 0xd5]) > 1_000, "no 'Running' phase in the screenshot");
    let mut colours: Vec<[u8; 3]> = pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 50, "only {} colours: is the text drawn?", colours.len());
}

#[test]
fn run_timeline_to_a_path_that_cannot_be_written_starts_no_pod() {
    let pod = pod_name("timeline-nowhere");
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}}}\nspec:\n  containers:\n  - {{name: c, image: localhost/busybox:1.36, command: ['true']}}\n"
    );
    let o = run_manifest(&manifest, &["--timeline", "/nonexistent-podwright-dir/timeline.html"]);
    o.assert_code(2);
    assert!(o.stderr.contains("cannot write the timeline to /nonexistent-podwright-dir/timeline.html"), "{}", o.stderr);
    assert!(o.progress(&pod).is_empty(), "a pod started: {}", o.stderr);
}

/// Serves one request with `response`; returns the request's head.
fn serve_once(response: String) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("podwright connects");
        let mut head = vec![];
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).expect("reading the request") == 1 {
            head.push(byte[0]);
        }
        conn.write_all(response.as_bytes()).expect("answering");
        String::from_utf8_lossy(&head).into_owned()
    });
    (url, handle)
}

#[test]
fn timeline_command_writes_the_page_that_podwright_serve_answers_with() {
    let page = "<!DOCTYPE html><html><body>the picture</body></html>";
    let (url, server) = serve_once(format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{page}\r\n0\r\n\r\n",
        page.len()
    ));
    let out = TempPath::new("fetched.html");
    let o = podwright(&["timeline", "web", "-n", "shop", "--server", &url, "-o", out.0.to_str().unwrap()]);
    o.assert_code(0);
    let request = server.join().expect("the server thread");
    assert!(request.starts_with("GET /podwright/v1/namespaces/shop/pods/web/timeline HTTP/1.1\r\n"), "{request}");
    assert_eq!(std::fs::read_to_string(&out.0).expect("the page was written"), page);

    // Without -o the page goes to stdout; the namespace defaults to `default`.
    let (url, server) = serve_once(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{page}", page.len()));
    let o = podwright(&["timeline", "web", "--server", &url]);
    o.assert_code(0);
    assert_eq!(o.stdout, page);
    assert!(server.join().unwrap().starts_with("GET /podwright/v1/namespaces/default/pods/web/timeline "));
}

#[test]
fn timeline_command_says_what_the_server_says_when_it_fails() {
    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"web\" not found","reason":"NotFound","code":404}"#;
    let (url, server) = serve_once(format!(
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{status}",
        status.len()
    ));
    let o = podwright(&["timeline", "web", "--server", &url]);
    o.assert_code(1);
    let _ = server.join();
    assert!(o.stderr.contains("404: pods \"web\" not found"), "{}", o.stderr);
    assert!(o.stdout.is_empty());

    // Nobody listening: the error says where it looked.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let o = podwright(&["timeline", "web", "--server", &format!("http://{closed}")]);
    o.assert_code(1);
    assert!(o.stderr.contains(&format!("cannot reach podwright serve at http://{closed}")), "{}", o.stderr);
}
