//! Keeps the node layer's shape (docs/architecture.md): a module imports only from its own layer
//! or the layers below it, and no modules import each other in a circle. Fails with `file:line`
//! of every import that breaks either rule, and names a module missing from the table below.
//!
//! Read from the source text: every `crate::<module>` outside comments, `use crate::{a, b}`
//! included; `super::` is the importing module's own (or, in a top-level file, the crate root,
//! which imports nothing upward by itself). Tests inside a module count too: a unit test may use
//! only what its module may.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The node's layers, from the top. A module may import from its own layer (without a circle)
/// and from any layer below.
const LAYERS: &[&[&str]] = &[
    // Wiring: the one place that names every part.
    &["builder"],
    &["pod_workers"],
    &["worker"],
    // What a worker drives. Cluster mode adds the kubelet's port (`kubelet_server`: exec, logs,
    // port-forward, stats for the API server) and the mirror-pod client here.
    &["executor", "probes", "eviction", "checkpoint", "admission", "pleg", "usage", "log_rotation"],
    // What the executor uses to make and start things.
    &["images", "cri", "volumes", "pod_cgroup", "runtime_class", "termination_message"],
    // Seams and shared values. Cluster mode's pod source (an API watch) goes in `sources`, its
    // status sink (the API's status subresource) beside the others in `sinks`.
    &[
        "context",
        "pod_update",
        "sources",
        "static_pods",
        "sinks",
        "timeline",
        "events",
        "metrics",
        "layout",
        "objects",
        "downward",
        "logs",
        "go_duration",
    ],
];

/// Where cluster mode's modules will go; named here so that the table already has room for them.
const PLANNED: &[&str] = &["kubelet_server", "mirror_pods"];

struct Import {
    from: String,
    to: String,
    file: PathBuf,
    line: usize,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/a.rs` and `src/a/**` are `a`; `src/lib.rs` is
/// the crate root (None).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(src).ok()?.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib").then_some(name)
}

/// The text of a line that is code: without a `//` comment (doc comments included).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a source text names through `crate::`, with their line numbers.
fn crate_paths(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut group: Option<usize> = None; // inside `use crate::{ ... }`, by brace depth
    for (n, line) in text.lines().enumerate() {
        let line = code(line);
        let mut rest = line;
        if let Some(depth) = group.as_mut() {
            found.extend(group_members(rest, depth).into_iter().map(|m| (m, n + 1)));
            if *depth == 0 {
                group = None;
            }
            continue;
        }
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            if let Some(inner) = after.strip_prefix('{') {
                let mut depth = 1;
                found.extend(group_members(inner, &mut depth).into_iter().map(|m| (m, n + 1)));
                if depth > 0 {
                    group = Some(depth);
                }
                break;
            }
            let name = ident_at(after);
            if !name.is_empty() {
                found.push((name.to_string(), n + 1));
            }
            rest = after;
        }
    }
    found
}

/// The first path segment of each member of a `{ ... }` group, from where `text` starts at brace
/// depth `depth`; updates the depth.
fn group_members(text: &str, depth: &mut usize) -> Vec<String> {
    let mut members = Vec::new();
    let mut at_start = *depth == 1;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' => {
                *depth += 1;
                at_start = false;
            }
            '}' => {
                *depth -= 1;
                if *depth == 0 {
                    break;
                }
            }
            ',' if *depth == 1 => at_start = true,
            c if c.is_ascii_alphabetic() || c == '_' => {
                let name = ident_at(&text[i..]);
                if at_start && *depth == 1 {
                    members.push(name.to_string());
                }
                at_start = false;
                for _ in 1..name.len() {
                    chars.next();
                }
            }
            _ => {}
        }
    }
    members
}

fn imports() -> Vec<Import> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let Some(from) = module_of(&src, &file) else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        for (to, line) in crate_paths(&text) {
            if to != from && to != "self" {
                // As the workspace root names it, so that an editor jumps to it.
                let workspace = src.ancestors().nth(3).unwrap();
                let file = file.strip_prefix(workspace).unwrap().to_path_buf();
                all.push(Import { from: from.clone(), to, file, line });
            }
        }
    }
    all
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Every import that goes to a higher layer, or names a module the table lacks.
fn layer_violations(imports: &[Import]) -> Vec<String> {
    let mut out = Vec::new();
    for i in imports {
        let at = |m: &str| i.file.display().to_string() + &format!(":{}: `{}` imports `{m}`", i.line, i.from);
        match (layer_of(&i.from), layer_of(&i.to)) {
            (Some(from), Some(to)) if to < from => {
                out.push(format!("{} (layer {to}, above its layer {from})", at(&i.to)));
            }
            (None, _) => out.push(format!("{}: `{}` is in no layer: add it to LAYERS", at(&i.to), i.from)),
            (_, None) => out.push(format!("{}: `{}` is in no layer: add it to LAYERS", at(&i.to), i.to)),
            _ => {}
        }
    }
    out
}

/// Every circle among the modules, each as its imports in order with where they are.
fn circles(imports: &[Import]) -> Vec<String> {
    let mut edges: BTreeMap<&str, BTreeMap<&str, &Import>> = BTreeMap::new();
    for i in imports {
        edges.entry(&i.from).or_default().entry(&i.to).or_insert(i);
    }
    let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
    let mut out = Vec::new();
    for &start in edges.keys() {
        // Breadth first: the shortest way back to `start`.
        let mut came_from: BTreeMap<&str, &Import> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut found = None;
        while let Some(m) = queue.pop_front() {
            for (&next, &import) in edges.get(m).into_iter().flatten() {
                if next == start {
                    found = Some(import);
                    break;
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, import);
                    queue.push_back(next);
                }
            }
            if found.is_some() {
                break;
            }
        }
        let Some(last) = found else { continue };
        let mut path = vec![last];
        let mut m = last.from.as_str();
        while m != start {
            let import = came_from[m];
            path.push(import);
            m = &import.from;
        }
        path.reverse();
        let members: BTreeSet<&str> = path.iter().map(|i| i.from.as_str()).collect();
        if reported.insert(members) {
            let steps: Vec<String> =
                path.iter().map(|i| format!("{} -> {} ({}:{})", i.from, i.to, i.file.display(), i.line)).collect();
            out.push(format!("import circle: {}", steps.join(", ")));
        }
    }
    out
}

#[test]
fn every_module_is_in_one_layer() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let missing: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(missing.is_empty(), "modules in no layer (add them to LAYERS in {}): {missing:?}", file!());
    let listed: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let unknown: Vec<&&str> = listed.iter().filter(|m| !modules.contains(**m) && !PLANNED.contains(m)).collect();
    assert!(unknown.is_empty(), "LAYERS names modules that do not exist: {unknown:?}");
    let twice: Vec<&&str> = listed.iter().filter(|m| listed.iter().filter(|n| n == m).count() > 1).collect();
    assert!(twice.is_empty(), "modules in more than one layer: {twice:?}");
}

#[test]
fn no_module_imports_from_a_higher_layer() {
    let violations = layer_violations(&imports());
    assert!(violations.is_empty(), "upward imports:\n{}", violations.join("\n"));
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let found = circles(&imports());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_reader_finds_grouped_and_qualified_imports_but_not_comments() {
    let text = "use crate::a::X;\nuse crate::{b, c::{D, E}, self};\n// crate::commented\n\
                let x = crate::f::g(); /// crate::doc\nuse crate::{\n    h,\n    i::J,\n};";
    let found: Vec<(String, usize)> = crate_paths(text);
    let names: Vec<&str> = found.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "self", "f", "h", "i"]);
    assert_eq!(found.iter().find(|(m, _)| m == "i").map(|(_, l)| *l), Some(7));
}
