//! Quantities (`100m`, `1.5Gi`, `12e6`): never a panic, and a parsed
//! amount printed in plain decimal parses back to the same amount.

#![no_main]

use engine::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(s) = gpu_scheduler_fuzz::text(data) else { return };
    match Quantity::parse(s) {
        Ok(q) => {
            let _ = (q.value(), q.milli_value(), q.is_zero());
            let shown = q.to_string();
            assert_eq!(Quantity::parse(&shown), Ok(q), "{s:?} shown as {shown:?}");
        }
        Err(e) => assert_eq!(e.input, s, "the error quotes another input"),
    }
});
