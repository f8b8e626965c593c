//! Answers of Prometheus's HTTP API to a `nodeFacts.prometheus` query:
//! whatever comes back, reading it gives values or an error saying what
//! came instead, never a panic, and every value is a finite number.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    for label in ["node", "Hostname"] {
        match engine::facts::provided::parse_prometheus_answer(text, label) {
            Ok(values) => assert!(values.values().all(|v| v.is_finite()), "{values:?}"),
            Err(e) => assert!(!e.is_empty()),
        }
    }
});
