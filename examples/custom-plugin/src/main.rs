//! `my-scheduler`: gpu-scheduler with one more plugin, the way a platform
//! team builds its own binary (kube-scheduler's `app.WithPlugin`). Every
//! command of gpu-scheduler works (`run`, `simulate`, `check-config`, ...);
//! configs may enable `NodeSanitizer` by name and give it args.

mod node_sanitizer;

fn main() -> std::process::ExitCode {
    gpu_scheduler::App::new()
        .with_plugin(node_sanitizer::NAME, node_sanitizer::new)
        // In the default profile too, so it runs even without a config.
        .with_default_plugin(node_sanitizer::NAME, 0.5)
        .run()
}
