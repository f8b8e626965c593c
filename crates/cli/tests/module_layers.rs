//! No module circle inside any crate of the workspace: the compiler keeps
//! crates in layers, this keeps the top-level modules inside each crate in
//! layers too (docs/ARCHITECTURE.md, "Code map"). A module "uses" another
//! when its files name `crate::other` anywhere before their tests
//! (`#[cfg(test)]`), doc links included: a lower layer's doc that points up
//! is a dependency a reader follows. Tests may use any module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers that follow `crate::` in `text`.
fn crate_paths(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .filter(|(i, _)| {
            // Not the tail of another path (`gpu_scheduler_crate::`).
            text[..*i].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
        .map(|(i, m)| text[i + m.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .filter(|s: &String| !s.is_empty())
        .collect()
}

/// Each top-level module of the crate at `src` and the modules it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" || module == "bin" {
            continue;
        }
        modules.entry(module).or_default();
    }
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if !modules.contains_key(&module) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let text = text.split("\n#[cfg(test)]").next().unwrap_or_default();
        let used: Vec<String> =
            crate_paths(text).into_iter().filter(|m| *m != module && modules.contains_key(m)).collect();
        modules.get_mut(&module).unwrap().extend(used);
    }
    modules
}

/// The circles (strongly connected components of more than one module).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit<'a>(
        v: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<&'a str>,
        out: &mut Vec<&'a str>,
    ) {
        if !seen.insert(v) {
            return;
        }
        for w in &g[v] {
            visit(w, g, seen, out);
        }
        out.push(v);
    }
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for v in graph.keys() {
        visit(v, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = graph.keys().map(|k| (k.clone(), BTreeSet::new())).collect();
    for (v, ws) in graph {
        for w in ws {
            reversed.get_mut(w).unwrap().insert(v.clone());
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        let mut component = Vec::new();
        visit(v, &reversed, &mut seen, &mut component);
        if component.len() > 1 {
            let mut c: Vec<String> = component.into_iter().map(String::from).collect();
            c.sort();
            out.push(c);
        }
    }
    out
}

#[test]
fn the_checker_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
            .collect();
    assert_eq!(circles(&graph), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    assert_eq!(crate_paths("use crate::cache::Snapshot; // [`crate::framework`] my_crate::x"), {
        ["cache", "framework"].into_iter().map(String::from).collect::<BTreeSet<_>>()
    });
}

#[test]
fn no_crate_has_a_module_circle() {
    let root = workspace_root();
    let mut found = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path()).collect();
    crates.push(root.join("examples/custom-plugin"));
    crates.sort();
    for dir in crates {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        for circle in circles(&module_graph(&src)) {
            found.push(format!("{}: {}", dir.strip_prefix(&root).unwrap().display(), circle.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that name each other in a circle (lower layers must not name higher):\n{}",
        found.join("\n")
    );
}
