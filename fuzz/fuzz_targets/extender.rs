//! An HTTP extender's answers (ExtenderFilterResult, HostPriorityList,
//! ExtenderBindingResult as Go encodes them): whatever the extender
//! sends, decoding gives a result or an error with a message, never a
//! panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    for node_cache_capable in [false, true] {
        if let Err(e) = extender::decode_filter(text, node_cache_capable) {
            assert!(!e.is_empty());
        }
    }
    if let Err(e) = extender::decode_prioritize(text) {
        assert!(!e.is_empty());
    }
    if let Err(e) = extender::decode_bind(text) {
        assert!(!e.is_empty());
    }
});
