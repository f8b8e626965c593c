//! Manifests as `simulate` reads them: multi-document YAML → API objects
//! (strict) → the engine's model → a simulation with the default profile.
//! Errors name file, document and field; valid input never makes the
//! engine fail.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    let mut m = sim::Manifests::default();
    if let Err(e) = m.add_str("fuzz.yaml", text) {
        return gpu_scheduler_fuzz::assert_manifest_error(&e);
    }
    if !gpu_scheduler_fuzz::small(&m) {
        return;
    }
    let cfg = engine::config::Configuration::default();
    if let Some(sim) = gpu_scheduler_fuzz::simulate(&m, &cfg) {
        // Every placement names a node the input has.
        for p in &sim.placements {
            if let Some(node) = &p.node {
                assert!(sim.nodes.iter().any(|n| &n.name == node), "{} placed on unknown node {node}", p.pod);
            }
        }
    }
});
