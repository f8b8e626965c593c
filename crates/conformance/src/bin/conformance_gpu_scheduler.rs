//! `gpu-scheduler` exactly as shipped (the built-in plugins, nothing
//! more), built as this package's binary so the suite runs it.

fn main() -> std::process::ExitCode {
    gpu_scheduler::App::new().run()
}
