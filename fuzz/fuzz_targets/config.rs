//! The configuration file: YAML → validated `GpuSchedulerConfiguration`
//! → profiles built against the built-in plugins (every plugin's args
//! decoded and checked) → extenders set up from inline TLS data. Errors
//! name their field.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(yaml) = gpu_scheduler_fuzz::text(data) else { return };
    let cfg = match engine::config::parse(yaml) {
        Ok(cfg) => cfg,
        Err(e) => return gpu_scheduler_fuzz::assert_names_field(&e.path, &e.message, "config"),
    };
    if let Err(e) = engine::profile::build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()) {
        return gpu_scheduler_fuzz::assert_names_field(&e.path, &e.message, "profile");
    }
    // Files named by the input are not read: a fuzzer must not open paths.
    let reads_files = cfg.extenders.iter().any(|x| {
        x.tls_config
            .as_ref()
            .is_some_and(|t| !(t.ca_file.is_empty() && t.cert_file.is_empty() && t.key_file.is_empty()))
    });
    if !reads_files && let Err(e) = extender::from_config(&cfg.extenders) {
        gpu_scheduler_fuzz::assert_names_field(&e.field, &e.message, "extender");
    }
});
