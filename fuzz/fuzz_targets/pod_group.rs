//! PodGroup objects (scheduling.x-k8s.io/v1alpha1) as the watch or a
//! manifest gives them: decoded strictly, converted to a gang; errors
//! name the field.

#![no_main]

use engine::convert::{PodGroupObject, pod_group_from_object};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(text) = gpu_scheduler_fuzz::text(data) else { return };
    let Ok(obj) = serde_yaml_ng::from_str::<PodGroupObject>(text) else { return };
    match pod_group_from_object(&obj) {
        Ok(g) => {
            assert!(g.min_member >= 1, "{g:?}");
            assert!(!g.name.is_empty(), "{g:?}");
        }
        Err(e) => gpu_scheduler_fuzz::assert_names_field(&e.path, &e.message, "PodGroup"),
    }
});
