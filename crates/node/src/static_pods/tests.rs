use super::*;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("podwright-static-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const WEB: &str =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

#[test]
fn a_file_becomes_the_kubelets_static_pod() {
    let d = Dir::new("shape");
    d.write("web.yaml", WEB);
    let listing = ManifestDir::new(&d.0, "Node-1").list();
    assert_eq!(listing.problems, []);
    let [pod] = &listing.pods[..] else { panic!("one pod: {:?}", listing.pods) };
    let uid = pod.metadata.uid.clone().unwrap();
    assert_eq!(uid.len(), 32, "hex FNV-128a: {uid}");
    assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    let tolerations = spec.tolerations.as_deref().unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(
        (tolerations[0].operator.as_deref(), tolerations[0].effect.as_deref()),
        (Some("Exists"), Some("NoExecute"))
    );
    assert_eq!(annotation(pod, CONFIG_HASH), Some(uid.as_str()));
    assert_eq!(annotation(pod, CONFIG_SOURCE), Some("file"));
    // Admitted like an API pod: defaults applied.
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
}

#[test]
fn the_uid_follows_the_decoded_content_the_node_and_the_path() {
    let d = Dir::new("uid");
    let path = d.write("web.yaml", WEB);
    let dir = ManifestDir::new(&d.0, "node-1");
    let uid = |dir: &ManifestDir, p: &Path| dir.read_file(p).unwrap().0.metadata.uid.unwrap();
    let first = uid(&dir, &path);
    assert_eq!(uid(&dir, &path), first, "same content, same UID");

    // Comments, key order and flow style are not content.
    d.write(
        "web.yaml",
        "# the web pod\nkind: Pod\napiVersion: v1\nspec: {containers: [{image: busybox, name: app}]}\nmetadata: {name: web}\n",
    );
    assert_eq!(uid(&dir, &path), first);

    d.write("web.yaml", &WEB.replace("image: busybox", "image: busybox:1.36"));
    let changed = uid(&dir, &path);
    assert_ne!(changed, first, "changed content, new UID");
    d.write("web.yaml", WEB);
    assert_eq!(uid(&dir, &path), first, "the same content again, the same UID again");

    let other_path = d.write("web2.yaml", WEB);
    assert_ne!(uid(&dir, &other_path), first, "another file");
    assert_ne!(uid(&ManifestDir::new(&d.0, "node-2"), &path), first, "another node");

    d.write("web.yaml", &WEB.replace("name: web\n", "name: web\n  uid: fixed-1\n"));
    let (pod, _) = dir.read_file(&path).unwrap();
    assert_eq!(pod.metadata.uid.as_deref(), Some("fixed-1"), "a UID in the file is kept");
    assert_eq!(annotation(&pod, CONFIG_HASH), Some("fixed-1"));
}

#[test]
fn files_are_read_sorted_without_dot_files_or_subdirectories() {
    let d = Dir::new("files");
    d.write("b.json", r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}}"#);
    d.write("a.yaml", &WEB.replace("name: web", "name: a"));
    d.write(".hidden.yaml", &WEB.replace("name: web", "name: hidden"));
    d.write("c.swp~", &WEB.replace("name: web", "name: c"));
    std::fs::create_dir(d.0.join("sub")).unwrap();
    d.write("sub/d.yaml", &WEB.replace("name: web", "name: d"));
    let listing = ManifestDir::new(&d.0, "n").list();
    let names: Vec<_> = listing.pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["a-n", "b-n", "c-n"]);
    let [p] = &listing.problems[..] else { panic!("{:?}", listing.problems) };
    assert_eq!(p.message, format!("{}: not recursing into manifest path", d.0.join("sub").display()));
}

#[test]
fn a_bad_file_is_skipped_with_a_message_naming_it_and_its_line() {
    let d = Dir::new("bad");
    d.write("a.yaml", WEB);
    let bad =
        d.write("b.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  nmae: x\nspec:\n  containers: []\n");
    let invalid = d.write("c.yaml", &WEB.replace("name: app", "name: App"));
    let syntax = d.write("d.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
    let empty = d.write("e.yaml", "");
    let listing = ManifestDir::new(&d.0, "n").list();
    let names: Vec<_> = listing.pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["web-n"], "the good file still runs");
    let messages: Vec<&str> = listing.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert_eq!(messages[0], format!("{}:5:3: document 1: metadata.nmae: unknown field", bad.display()));
    assert!(
        messages[1].starts_with(&format!(
            "{}: invalid pod: Pod \"web-n\" is invalid: spec.containers[0].name: Invalid value: \"App\"",
            invalid.display()
        )),
        "{}",
        messages[1]
    );
    assert!(messages[2].starts_with(&format!("{}:4:", syntax.display())), "{}", messages[2]);
    assert_eq!(
        messages[3],
        format!("{}: couldn't parse as pod(no Pod in the file), please check config file", empty.display())
    );
    assert_eq!(listing.problems[0].path, bad);
}

#[test]
fn a_missing_path_is_an_empty_set_and_a_single_file_is_a_path() {
    let d = Dir::new("path");
    let listing = ManifestDir::new(d.0.join("nope"), "n").list();
    assert!(listing.pods.is_empty());
    assert_eq!(listing.problems[0].message, format!("{}: path does not exist, ignoring", d.0.join("nope").display()));

    let file = d.write("web.yaml", WEB);
    let listing = ManifestDir::new(&file, "n").list();
    assert_eq!(listing.pods.len(), 1);
}

#[test]
fn a_file_of_several_pods_runs_the_first_and_says_so() {
    let d = Dir::new("several");
    let path = d.write("two.yaml", &format!("{WEB}---\n{}", WEB.replace("name: web", "name: other")));
    let (pod, notes) = ManifestDir::new(&d.0, "n").read_file(&path).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web-n"));
    assert_eq!(notes, [format!("{}: 2 Pods in one file; only the first is run", path.display())]);
}

/// What a host was asked, in order.
#[derive(Default)]
struct Calls(std::sync::Mutex<Vec<String>>);

impl Calls {
    fn push(&self, call: String) {
        self.0.lock().unwrap().push(call);
    }
}

impl StaticPodHost for std::sync::Arc<Calls> {
    fn run(&self, pod: Pod) {
        self.push(format!("run {}", pod.metadata.uid.unwrap()));
    }
    fn stop(&self, pod: &Pod, _grace: i64) {
        self.push(format!("stop {}", pod.metadata.uid.as_deref().unwrap()));
    }
    fn ensure_mirror(&self, pod: &Pod, _status: Option<k8s_openapi::api::core::v1::PodStatus>) -> Result<(), String> {
        self.push(format!("mirror {}", pod.metadata.uid.as_deref().unwrap()));
        Ok(())
    }
    fn delete_orphaned_mirrors(&self, _known: &std::collections::BTreeSet<String>) {}
    fn last_status(&self, _pod: &Pod) -> Option<k8s_openapi::api::core::v1::PodStatus> {
        None
    }
}

/// Pods dropped together start together: each is handed to the node before any mirror is made
/// (a mirror in the local API waits for its commit), so that the last pod does not wait for
/// the commits of all those before it.
#[test]
fn every_new_pod_of_a_reading_runs_before_any_mirror_is_made() {
    let d = Dir::new("together");
    for name in ["a", "b", "c"] {
        d.write(&format!("{name}.yaml"), &WEB.replace("name: web", &format!("name: {name}")));
    }
    let pods = ManifestDir::new(&d.0, "n").list().pods;
    let uids: Vec<String> = pods.iter().map(|p| p.metadata.uid.clone().unwrap()).collect();
    let calls = std::sync::Arc::new(Calls::default());
    let statics = StaticPods::new(Box::new(calls.clone()), podwright_runtime::Clock::new());
    statics.set(pods, &crate::events::EventLog::default());
    let expected: Vec<String> =
        uids.iter().map(|u| format!("run {u}")).chain(uids.iter().map(|u| format!("mirror {u}"))).collect();
    assert_eq!(*calls.0.lock().unwrap(), expected);
}
