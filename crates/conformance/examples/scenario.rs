//! Prints the scenario of a seed as YAML, for `gpu-scheduler simulate`
//! or a new named case: `cargo run -p gpu-scheduler-conformance --example
//! scenario SEED [PREFIX] > crates/conformance/regressions/NAME.yaml`
//! (give a named case a prefix of its own, e.g. `r`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(seed) = args.next().and_then(|s| s.parse::<u64>().ok()) else {
        eprintln!("usage: scenario SEED [PREFIX]");
        return ExitCode::from(2);
    };
    let prefix = args.next().unwrap_or_else(|| "s".to_string());
    match gpu_scheduler_conformance::generate_named(seed, &prefix).to_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
