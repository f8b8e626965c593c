//! The `gpu-scheduler` binary: the built-in plugins, nothing more.

fn main() -> std::process::ExitCode {
    gpu_scheduler::App::new().run()
}
