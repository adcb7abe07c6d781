//! The layer check of a crate's modules, shared by `crates/node/tests/layers.rs` and
//! `crates/server/tests/layers.rs` (each includes this file with `#[path]`): a module imports
//! only from its own layer (without a circle) or from the layers below it. Each check fails
//! with `file:line` of every import that breaks a rule, and names every module missing from
//! the crate's table, so that a new module is placed on purpose.
//!
//! Read from the source text, with std only: every `crate::<module>` in code, in a `use` or
//! fully qualified, `use crate::{a, b::c}` groups over several lines included. A file under
//! `src/<module>/` is part of `<module>`. Not read:
//! - comments (doc comments too: an intra-doc link points the reader, it is no dependency);
//! - `#[cfg(test)]` test modules, inline or in their own file: a module's unit tests may drive
//!   it through the crate from above (the server's static pods' tests through the API's
//!   handlers), and test code is not in the agent.
//!
//! The reader relies on rustfmt's layout (`cargo fmt` is enforced) and the code's habits: an
//! inline test module ends at the first `}` at its own indentation, there are no `/* */`
//! comments, and no import follows a `//` inside a string on its line.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The three tests of a crate's layers: `layer_tests!(LAYERS, PLANNED)` in its `tests/layers.rs`.
#[macro_export]
macro_rules! layer_tests {
    ($layers:expr, $planned:expr) => {
        #[test]
        fn every_module_has_a_layer() {
            layering::every_module_has_a_layer(env!("CARGO_MANIFEST_DIR"), $layers, $planned);
        }

        #[test]
        fn no_module_imports_from_a_higher_layer() {
            layering::no_module_imports_from_a_higher_layer(env!("CARGO_MANIFEST_DIR"), $layers);
        }

        #[test]
        fn no_modules_import_each_other_in_a_circle() {
            layering::no_modules_import_each_other_in_a_circle(env!("CARGO_MANIFEST_DIR"));
        }
    };
}

/// A crate's layers, from the top, each named and with its modules.
pub type Layers = &'static [(&'static str, &'static [&'static str])];

/// Fails naming the crate's modules that are in no layer, the layers' modules that do not
/// exist (but for `planned` ones, named ahead of the code), and those in two layers.
pub fn every_module_has_a_layer(crate_dir: &str, layers: Layers, planned: &[&str]) {
    let modules = modules(Path::new(crate_dir));
    let listed: Vec<&str> = layers.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    let unplaced: Vec<&String> = modules.iter().filter(|m| !listed.contains(&m.as_str())).collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer: {unplaced:?}; place each in LAYERS of {crate_dir}/tests/layers.rs"
    );
    let gone: Vec<&&str> = listed.iter().filter(|m| !modules.contains(**m) && !planned.contains(m)).collect();
    assert!(gone.is_empty(), "LAYERS names modules that do not exist: {gone:?}");
    let twice: BTreeSet<&&str> = listed.iter().filter(|m| listed.iter().filter(|n| n == m).count() > 1).collect();
    assert!(twice.is_empty(), "modules in more than one layer: {twice:?}");
}

/// Fails naming every import of a module of a higher layer, or of an item of the crate root.
pub fn no_module_imports_from_a_higher_layer(crate_dir: &str, layers: Layers) {
    let crate_dir = Path::new(crate_dir);
    let found = upward_imports(layers, &imports(crate_dir), &modules(crate_dir));
    assert!(found.is_empty(), "imports from a higher layer:\n{}", found.join("\n"));
}

/// Fails naming every set of modules that import each other in a circle.
pub fn no_modules_import_each_other_in_a_circle(crate_dir: &str) {
    let found = circles(&imports(Path::new(crate_dir)));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One `crate::` path in code: `module` names the top-level module (or root item) it reaches.
struct Import {
    from: String,
    module: String,
    file: String,
    line: usize,
}

/// `src/**/*.rs`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The top-level module of a file under `src`: `a.rs`, `a/mod.rs` and `a/**` are `a`; `lib.rs`,
/// the crate root, is none.
fn module_of(crate_dir: &Path, file: &Path) -> Option<String> {
    let src = crate_dir.join("src");
    let first = file.strip_prefix(&src).ok()?.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

/// Every top-level module of the crate.
fn modules(crate_dir: &Path) -> BTreeSet<String> {
    rust_files(&crate_dir.join("src")).iter().filter_map(|f| module_of(crate_dir, f)).collect()
}

/// A file's lines, `None` where a line is not code the reader looks at: comments and test
/// modules. Also the files of test modules declared here (`#[cfg(test)] mod tests;`), by name.
fn code_lines(text: &str) -> (Vec<Option<&str>>, Vec<String>) {
    let mut lines = Vec::new();
    let mut test_files = Vec::new();
    let mut cfg_test = false;
    let mut skip_until: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &skip_until {
            if line == end {
                skip_until = None;
            }
            lines.push(None);
            continue;
        }
        let code = line.find("//").map_or(line, |i| &line[..i]);
        let item = code.trim();
        // `mod tests;` or `pub(crate) mod tests {`: what follows `mod`.
        let declared = item.split_once("mod ").filter(|(vis, _)| vis.is_empty() || vis.starts_with("pub"));
        if cfg_test && let Some((_, rest)) = declared {
            match rest.strip_suffix(';') {
                Some(name) => test_files.push(name.trim().to_string()),
                None => skip_until = Some(format!("{}}}", &line[..line.len() - line.trim_start().len()])),
            }
            lines.push(None);
            continue;
        }
        cfg_test = item == "#[cfg(test)]";
        lines.push(Some(code));
    }
    (lines, test_files)
}

fn ident(s: &str) -> &str {
    &s[..s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len())]
}

/// The first segment after every `crate::` in `lines`, with its 1-based line number: each
/// member's for a `crate::{...}` group, which may span lines.
fn crate_paths(lines: &[Option<&str>]) -> Vec<(String, usize)> {
    // The code as one text, with what is not code blanked, and where each line starts.
    let mut text = String::new();
    let mut starts = Vec::new();
    for line in lines {
        starts.push(text.len());
        text.push_str(line.unwrap_or(""));
        text.push('\n');
    }
    let line_at = |offset: usize| starts.partition_point(|&s| s <= offset);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("crate::").map(|i| i + from) {
        from = i + "crate::".len();
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `some_crate::`, not this crate
        }
        if !text[from..].starts_with('{') {
            let name = ident(&text[from..]);
            if !name.is_empty() {
                found.push((name.to_string(), line_at(i)));
            }
            continue;
        }
        // A group: the first segment of each member at depth 1.
        let mut depth = 0;
        let mut member_start = true;
        let mut chars = text[from..].char_indices();
        while let Some((j, c)) = chars.next() {
            match c {
                '{' => {
                    depth += 1;
                    member_start = depth == 1;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => member_start = true,
                c if c.is_ascii_alphabetic() || c == '_' => {
                    let name = ident(&text[from + j..]);
                    if member_start && depth == 1 {
                        found.push((name.to_string(), line_at(from + j)));
                    }
                    member_start = false;
                    for _ in 1..name.len() {
                        chars.next();
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// Every import of one module by another, outside test code.
fn imports(crate_dir: &Path) -> Vec<Import> {
    let texts: Vec<(PathBuf, String)> = rust_files(&crate_dir.join("src"))
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file, text)
        })
        .collect();
    let read: Vec<(&PathBuf, _)> = texts.iter().map(|(file, text)| (file, code_lines(text))).collect();
    let mut test_files = BTreeSet::new();
    for (file, (_, tests)) in &read {
        // A module's children live in the folder named after it (`a.rs` → `a/`, `a/mod.rs` → `a/`).
        let dir = match file.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for name in tests {
            test_files.insert(dir.join(format!("{name}.rs")));
            test_files.insert(dir.join(name).join("mod.rs"));
        }
    }
    let mut all = Vec::new();
    for (file, (lines, _)) in &read {
        let Some(from) = module_of(crate_dir, file) else { continue };
        if test_files.contains(*file) {
            continue;
        }
        let shown = file.strip_prefix(crate_dir.ancestors().nth(2).unwrap()).unwrap().display().to_string();
        for (module, line) in crate_paths(lines) {
            if module != from && module != "self" {
                all.push(Import { from: from.clone(), module, file: shown.clone(), line });
            }
        }
    }
    all
}

fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|(_, modules)| modules.contains(&module))
}

/// Every import of a higher layer, with where it is.
fn upward_imports(layers: Layers, imports: &[Import], modules: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for i in imports {
        let at = format!("{}:{}: `{}` imports `crate::{}`", i.file, i.line, i.from, i.module);
        if !modules.contains(&i.module) {
            out.push(format!(
                "{at}, which is no module but an item of the crate root, above every layer: \
                 import it from the module that defines it"
            ));
            continue;
        }
        let (Some(from), Some(to)) = (layer_of(layers, &i.from), layer_of(layers, &i.module)) else {
            continue; // `every_module_has_a_layer` names it
        };
        if to < from {
            out.push(format!("{at}, of the layer \"{}\" above its own, \"{}\"", layers[to].0, layers[from].0));
        }
    }
    out
}

/// Every set of modules that import each other in a circle: its members, and the shortest
/// circle among them with where each of its imports is (once it is broken, the next shows).
fn circles(imports: &[Import]) -> Vec<String> {
    // The first import of each module by another.
    let mut edges: BTreeMap<&str, BTreeMap<&str, &Import>> = BTreeMap::new();
    for i in imports {
        edges.entry(&i.from).or_default().entry(&i.module).or_insert(i);
    }
    // Breadth first from `start`: every module it reaches, each with the import it is first
    // reached by, so that walking those back gives a shortest path.
    let reach = |start: &str| {
        let mut via: BTreeMap<&str, &Import> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(m) = queue.pop_front() {
            for (&next, &import) in edges.get(m).into_iter().flatten() {
                if !via.contains_key(next) {
                    via.insert(next, import);
                    queue.push_back(next);
                }
            }
        }
        via
    };
    let reached: BTreeMap<&str, BTreeMap<&str, &Import>> = edges.keys().map(|&m| (m, reach(m))).collect();
    let circle_through = |m: &str| {
        let via = &reached[m];
        let mut circle = vec![via[m]];
        while circle.last().unwrap().from != m {
            circle.push(via[circle.last().unwrap().from.as_str()]);
        }
        circle.reverse();
        circle
    };
    let mut out = Vec::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for (&m, via) in &reached {
        if reported.contains(m) || !via.contains_key(m) {
            continue;
        }
        let members: Vec<&str> =
            via.keys().copied().filter(|n| reached.get(n).is_some_and(|r| r.contains_key(m))).collect();
        reported.extend(&members);
        let shortest = members.iter().map(|n| circle_through(n)).min_by_key(Vec::len).unwrap();
        let steps: Vec<String> =
            shortest.iter().map(|i| format!("  {}:{}: `{}` imports `{}`", i.file, i.line, i.from, i.module)).collect();
        out.push(format!("{} import each other in a circle, the shortest:\n{}", members.join(", "), steps.join("\n")));
    }
    out
}

#[test]
fn the_reader_finds_every_crate_path_in_code_and_none_in_comments_or_tests() {
    let text = "\
use crate::a::X;
use crate::{b, c::{D, E}, self};
// crate::commented
let x = crate::f::g(); /// crate::doc
let y = other_crate::z();
use crate::{
    h,
    i::J,
};
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod inline {
    use crate::k;
    fn f() {
        crate::l();
    }
}
use crate::m;";
    let (lines, test_files) = code_lines(text);
    assert_eq!(test_files, ["tests"]);
    let found = crate_paths(&lines);
    let found: Vec<(&str, usize)> = found.iter().map(|(m, l)| (m.as_str(), *l)).collect();
    assert_eq!(found, [("a", 1), ("b", 2), ("c", 2), ("self", 2), ("f", 4), ("h", 7), ("i", 8), ("m", 19)]);
}
