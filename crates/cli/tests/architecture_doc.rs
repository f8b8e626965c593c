//! docs/ARCHITECTURE.md stays a ten-minute read whose paths are real:
//! every repository path it names in backticks exists, and it has at most
//! 4,000 words.

use std::path::{Path, PathBuf};

const MAX_WORDS: usize = 4000;

/// Folders a repository-relative path may start with.
const ROOTS: &[&str] = &["crates/", "bench/", "tools/", "deploy/", "docs/", "examples/", "fuzz/", ".ci/"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of every `code span` in `doc` (single backticks), outside
/// fenced blocks.
fn code_spans(doc: &str) -> Vec<&str> {
    let mut in_fence = false;
    doc.lines()
        .filter(|l| {
            let fence = l.trim_start().starts_with("```");
            in_fence ^= fence;
            !fence && !in_fence
        })
        .flat_map(|l| l.split('`').skip(1).step_by(2))
        .collect()
}

/// The repository path a code span names, if it names one: its first word,
/// starting with one of [`ROOTS`], or a top-level file (`README.md`,
/// `Cargo.toml`, `Dockerfile`).
fn repo_path(span: &str) -> Option<&str> {
    let word = span.split_whitespace().next()?.trim_end_matches([',', '.', ':', ';', ')']);
    let top_level = !word.contains('/')
        && (word == "Dockerfile"
            || [".md", ".toml", ".lock"].iter().any(|ext| word.ends_with(ext) && word.len() > ext.len()));
    (ROOTS.iter().any(|r| word.starts_with(r)) || top_level).then_some(word)
}

fn doc_paths(doc: &str) -> Vec<&str> {
    code_spans(doc).into_iter().filter_map(repo_path).collect()
}

#[test]
fn every_path_named_exists() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("read docs/ARCHITECTURE.md");
    let paths = doc_paths(&doc);
    assert!(paths.len() > 20, "only {} paths found: is the extraction broken?", paths.len());
    let missing: Vec<&str> = paths.iter().copied().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names {} path(s) that do not exist:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn at_most_max_words() {
    let doc =
        std::fs::read_to_string(workspace_root().join("docs/ARCHITECTURE.md")).expect("read docs/ARCHITECTURE.md");
    let words = doc.split_whitespace().count();
    assert!(words <= MAX_WORDS, "docs/ARCHITECTURE.md has {words} words; at most {MAX_WORDS}");
}

#[test]
fn extraction() {
    let doc = "See `crates/engine/src/cache.rs`, `bench/e2e --nodes N`, `pods/binding`,\n\
               `README.md`, `NS/POD` and `Cache`.\n```\n`crates/in/fence.rs`\n```\n";
    assert_eq!(doc_paths(doc), ["crates/engine/src/cache.rs", "bench/e2e", "README.md"]);
}
