//! What the fuzz targets share: the properties every parser of outside
//! input keeps (it never panics, which libFuzzer checks, and an error
//! names the field it is about) and a small simulation to run what was
//! parsed through the engine.

use engine::config::Configuration;
use sim::{ManifestError, Manifests, SimError, SimOptions};

/// A value from outside, in a structured (`arbitrary`) input: fuzzed
/// text, or one of the extremes every parser is tested with
/// (`engine::testing::extremes`). A fuzzer writes 2^64 or 1e308 in a
/// field only by luck (docs/RELIABILITY.md, "Hostile numbers"); this way
/// one byte picks it.
#[derive(Debug, arbitrary::Arbitrary)]
pub enum Text {
    Fuzzed(String),
    Extreme(u8),
}

impl Text {
    pub fn into_string(self) -> String {
        match self {
            Text::Fuzzed(s) => s,
            Text::Extreme(i) => {
                let all: Vec<&str> = engine::testing::extremes::all().collect();
                all[usize::from(i) % all.len()].to_string()
            }
        }
    }
}

/// Inputs longer than this are skipped: the targets look for wrong
/// answers and panics, not for the cost of reading megabytes.
pub const MAX_INPUT: usize = 16 << 10;

/// Fuzz bytes as text, or None (outside input reaches the parsers as
/// UTF-8 strings: YAML files, annotation values, HTTP bodies).
pub fn text(data: &[u8]) -> Option<&str> {
    if data.len() > MAX_INPUT {
        return None;
    }
    std::str::from_utf8(data).ok()
}

/// An error that names no field is a bug: the user cannot find the
/// value to fix.
pub fn assert_names_field(path: &str, message: &str, what: &str) {
    assert!(!path.trim().is_empty(), "{what} error without a field: {message:?}");
    assert!(!message.trim().is_empty(), "{what} error without a message at {path:?}");
}

/// A manifest error names the document, and a field error the field.
pub fn assert_manifest_error(e: &ManifestError) {
    match e {
        ManifestError::Read { message, .. } | ManifestError::Yaml { message, .. } => {
            assert!(!message.trim().is_empty(), "manifest error without a message: {e:?}")
        }
        ManifestError::Field { path, message, .. } => assert_names_field(path, message, "manifest"),
    }
}

/// Most objects a simulated input may hold, and most pods a workload may
/// expand to: enough for every code path, small enough that one run
/// takes milliseconds.
const MAX_OBJECTS: usize = 24;
const MAX_REPLICAS: i32 = 16;

/// Whether the manifests are small enough to simulate in a fuzz run.
pub fn small(m: &Manifests) -> bool {
    use sim::manifests::Object;
    let replicas = |r: Option<i32>| r.unwrap_or(1) <= MAX_REPLICAS;
    m.objects.len() <= MAX_OBJECTS
        && m.objects.iter().all(|(_, o)| match o {
            Object::Deployment(d) => replicas(d.spec.as_ref().and_then(|s| s.replicas)),
            Object::ReplicaSet(r) => replicas(r.spec.as_ref().and_then(|s| s.replicas)),
            Object::StatefulSet(s) => replicas(s.spec.as_ref().and_then(|s| s.replicas)),
            Object::Job(j) => {
                let spec = j.spec.as_ref();
                replicas(spec.and_then(|s| s.parallelism)) && replicas(spec.and_then(|s| s.completions))
            }
            _ => true,
        })
}

/// Simulates `m` with `cfg` and the built-in plugins at a fixed clock;
/// checks that an input error names its field.
pub fn simulate(m: &Manifests, cfg: &Configuration) -> Option<sim::Simulation> {
    let opts = SimOptions {
        seed: 1,
        now: jiff::Timestamp::from_second(1_780_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        explain: None,
        extenders: Vec::new(),
    };
    match sim::simulate(m, cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut |_, _| {}) {
        Ok(s) => Some(s),
        Err(SimError::Manifest(e)) => {
            assert_manifest_error(&e);
            None
        }
        Err(SimError::Config(e)) => {
            assert_names_field(&e.path, &e.message, "config");
            None
        }
        Err(SimError::Engine(e)) => panic!("engine error on valid input: {e}"),
    }
}
